package credtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/retrybroker/retrybroker/internal/proctest"
)

// proc is one server process a test started (hydra, versitygw): its
// output, its exit, and Stop by its own pid with a bounded wait.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited
	out    proctest.Buffer
	once   sync.Once
}

// start starts cmd as the process called name, its output kept for Logs
// and the kernel told to kill it should the test binary die first.
func (p *proc) start(name string, cmd *exec.Cmd) error {
	p.name = name
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	proctest.DieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return nil
}

// Pid is the server's process id.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// Logs is what the server wrote so far.
func (p *proc) Logs() string { return p.out.String() }

// Stop kills the server (SIGKILL) by its pid and waits, at most
// stopTimeout, until it has exited. Stopping it again, or a server that
// never started, does nothing.
func (p *proc) Stop() error {
	var err error
	p.once.Do(func() {
		if p.cmd == nil {
			return
		}
		_ = p.cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			err = fmt.Errorf("credtest: %s pid %d not reaped %v after SIGKILL", p.name, p.cmd.Process.Pid, stopTimeout)
		}
	})
	return err
}

// moduleRoot is the nearest parent of the working directory with a go.mod
// of this module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/retrybroker/retrybroker\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/retrybroker/retrybroker above the working directory")
		}
		dir = parent
	}
}

// LoopbackDial dials addr only when it is a loopback IP address (no name
// is resolved): a test's HTTP clients use it so that no test traffic can
// leave the machine, even when the code under test is broken.
func LoopbackDial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("credtest: refusing to dial %s: not a loopback address", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// findBinary finds the binary of a server built by make deps from
// tools/name: $env when env is not empty and set, else bin/name at the
// module's root, else name on PATH. The error says how to get it.
func findBinary(name, env string) (string, error) {
	how := "run make deps (builds it from tools/" + name + " into bin/" + name + ")"
	if env != "" {
		if p := os.Getenv(env); p != "" {
			if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
				return "", fmt.Errorf("credtest: %s=%s is not a file: %s", env, p, how)
			}
			return p, nil
		}
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, "bin", name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("credtest: %s not found (bin/%s or PATH): %s", name, name, how)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("credtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
