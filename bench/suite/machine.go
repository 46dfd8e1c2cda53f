package suite

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine describes where the suite ran.
type Machine struct {
	CPU       string
	Cores     int
	GoVersion string
	OS        string
	Kernel    string
	Date      time.Time
	Commit    string
	Redis     string
}

func machineInfo(root string) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, Date: time.Now().UTC()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	cmd := exec.Command("git", "rev-parse", "--short=12", "HEAD")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		f := strings.Fields(string(out))
		for _, x := range f {
			if v, ok := strings.CutPrefix(x, "v="); ok {
				m.Redis = v
			}
		}
	}
	return m
}
