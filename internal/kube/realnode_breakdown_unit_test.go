package kube

import (
	"testing"
	"time"
)

// The startup breakdown of make bench-realnode reads the gateway's log as
// containerd stamps it: the wrapper's records and OpenClaw's JSON lines.
func TestStartupLogMilestones(t *testing.T) {
	log := `2026-12-07T20:49:49.887480026Z {"event":"runtime.startup_phase","time":"2026-12-07T20:49:49.886887698Z","container":"gateway","phase":"login","outcome":"skipped","elapsedMs":7}
2026-12-07T20:49:49.894740724Z {"event":"openclaw.model_probe","time":"2026-12-07T20:49:49.894466376Z","container":"gateway","durationMs":7,"elapsedMs":7,"attempt":1,"code":"READY","final":true}
2026-12-07T20:49:49.904589616Z {"event":"runtime.startup_phase","time":"2026-12-07T20:49:49.904376284Z","container":"gateway","phase":"process_spawn","outcome":"ok","elapsedMs":24}
not a stamped line
2026-12-07T20:49:53.426043304Z {"time":"2026-12-07T20:49:53.416+00:00","level":"warn","message":"[openclaw] tightened permissions on temp dir: /tmp/openclaw"}
2026-12-07T20:50:02.226437564Z {"time":"2026-12-07T20:50:02.220+00:00","level":"info","subsystem":"gateway","message":"loading configuration…"}
2026-12-07T20:50:03.000000000Z plain text the runtime printed
2026-12-07T20:50:11.815350094Z {"time":"2026-12-07T20:50:11.814+00:00","level":"info","subsystem":"gateway","message":"http server listening (13 plugins: browser; 8.1s)"}
2026-12-07T20:50:14.749076517Z {"time":"2026-12-07T20:50:14.748+00:00","level":"info","subsystem":"gateway","message":"gateway ready"}
2026-12-07T20:50:20.000000000Z {"time":"2026-12-07T20:50:20.000+00:00","level":"info","subsystem":"gateway","message":"gateway ready"}
`
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := milestones{
		msWrapperStarted:  at("2026-12-07T20:49:49.879887698Z"), // the first record's time less its 7 ms
		msRuntimeSpawned:  at("2026-12-07T20:49:49.904589616Z"),
		msRuntimeFirstOut: at("2026-12-07T20:49:53.426043304Z"),
		msRuntimeConfig:   at("2026-12-07T20:50:02.226437564Z"),
		msRuntimeListen:   at("2026-12-07T20:50:11.815350094Z"),
		msRuntimeReady:    at("2026-12-07T20:50:14.749076517Z"), // the first time only
	}
	got := startupLogMilestones(log)
	for name, w := range want {
		if !got[name].Equal(w) {
			t.Errorf("%s: got %v, want %v", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d milestones %v, want %d", len(got), got, len(want))
	}
	if m := startupLogMilestones(""); len(m) != 0 {
		t.Errorf("an empty log: %v", m)
	}
}

// The container's log is the runtime's to write: whatever it holds, reading
// it never panics and sees a milestone only where a stamped line says so.
func FuzzStartupLogMilestones(f *testing.F) {
	f.Add("2026-12-07T20:50:14.749076517Z {\"message\":\"gateway ready\"}\n")
	f.Add("2026-12-07T20:49:49.887480026Z {\"event\":\"runtime.startup_phase\",\"time\":\"2026-12-07T20:49:49.886887698Z\",\"elapsedMs\":-7}\n")
	f.Add("\x00 {}\n2026-13-07T20:50:14Z x")
	f.Fuzz(func(t *testing.T, log string) {
		for name, at := range startupLogMilestones(log) {
			if at.IsZero() {
				t.Errorf("%s at the zero time", name)
			}
		}
	})
}
