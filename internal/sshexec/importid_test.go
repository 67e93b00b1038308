package sshexec

import "testing"

func TestParseImportID(t *testing.T) {
	type want struct {
		host string
		port int
		name string
		ok   bool
	}
	for id, w := range map[string]want{
		"10.0.0.5/support":         {"10.0.0.5", 0, "support", true},
		"127.0.0.1:2222/support":   {"127.0.0.1", 2222, "support", true},
		"edge.example.com/support": {"edge.example.com", 0, "support", true},
		"ssh://edge/support":       {"edge", 0, "support", true},
		"ssh://edge:22/support":    {"edge", 22, "support", true},
		"[::1]:2222/support":       {"::1", 2222, "support", true},
		"[fe80::1]/support":        {"fe80::1", 0, "support", true},
		"occ-acme/support":         {ok: false}, // a Kubernetes namespace
		"10.0.0.5/":                {ok: false},
		"/support":                 {ok: false},
		"127.0.0.1:99999/support":  {ok: false},
		"user@10.0.0.5/support":    {ok: false},
		"support":                  {ok: false},
	} {
		host, port, name, ok := parseImportID(id)
		if ok != w.ok || ok && (host != w.host || port != w.port || name != w.name) {
			t.Errorf("parseImportID(%q) = %q %d %q %v, want %+v", id, host, port, name, ok, w)
		}
	}
}
