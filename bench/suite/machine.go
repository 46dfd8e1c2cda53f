package suite

import (
	"debug/buildinfo"
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
	// Broker says which broker binary ran: built from ./cmd/broker, or a
	// prebuilt one (-broker) with the revision its build info records.
	Broker string
}

// brokerProvenance describes the broker binary bin; built says whether
// the suite built it from the module's ./cmd/broker.
func brokerProvenance(bin string, built bool, commit string) string {
	if built {
		return "built from ./cmd/broker at the commit above"
	}
	out := "prebuilt (-broker " + bin + ")"
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return out + ", build info unreadable"
	}
	rev, modified := "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return out + ", no VCS revision in its build info"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	out += ", built at " + rev
	if modified == "true" {
		out += " with uncommitted changes"
	}
	if commit != "" && !strings.HasPrefix(rev, commit) && !strings.HasPrefix(commit, rev) {
		out += ", not the commit above"
	}
	return out
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
