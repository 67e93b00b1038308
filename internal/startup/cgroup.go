package startup

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// CPULimitMillis is the container's CPU limit in millicores: the cgroup v2
// cpu.max quota over its period, else the cgroup v1 CFS quota, else the
// number of CPUs this process may run on.
func CPULimitMillis(cgroupDir string) int64 {
	if b, err := os.ReadFile(filepath.Join(cgroupDir, "cpu.max")); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 && f[0] != "max" {
			q, err1 := strconv.ParseInt(f[0], 10, 64)
			p, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 == nil && err2 == nil && q > 0 && p > 0 {
				return q * 1000 / p
			}
		}
	} else {
		q, err1 := readInt(filepath.Join(cgroupDir, "cpu", "cpu.cfs_quota_us"))
		p, err2 := readInt(filepath.Join(cgroupDir, "cpu", "cpu.cfs_period_us"))
		if err1 == nil && err2 == nil && q > 0 && p > 0 {
			return q * 1000 / p
		}
	}
	return int64(runtime.NumCPU()) * 1000
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// Throttled is the total time the cgroup was throttled by its CPU limit
// (cgroup v2 cpu.stat throttled_usec, or v1 throttled_time); ok is false
// when the cgroup does not say.
func Throttled(cgroupDir string) (time.Duration, bool) {
	for _, c := range []struct {
		file, key string
		unit      time.Duration
	}{
		{filepath.Join(cgroupDir, "cpu.stat"), "throttled_usec", time.Microsecond},
		{filepath.Join(cgroupDir, "cpu", "cpu.stat"), "throttled_time", time.Nanosecond},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == c.key {
				if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return time.Duration(n) * c.unit, true
				}
			}
		}
	}
	return 0, false
}

// starved reports whether a probe that ran for elapsed was starved of CPU:
// its cgroup was throttled for at least a tenth of that time and at least
// 100 ms.
func starved(throttled, elapsed time.Duration) bool {
	return throttled >= 100*time.Millisecond && throttled*10 >= elapsed
}
