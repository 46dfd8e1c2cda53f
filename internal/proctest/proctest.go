// Package proctest holds what the tests that start real processes
// (redis-server, postgres, brokers, credential servers) share: a log
// buffer the process writes while the test reads, and the parent-death
// signal that keeps no process alive after its test binary.
package proctest

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
)

// Buffer is a bytes.Buffer safe for a process's writes and a test's
// reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// DieWithTest sets cmd to run as the test (SysProcAttr(nil)).
func DieWithTest(cmd *exec.Cmd) { cmd.SysProcAttr = SysProcAttr(nil) }

// SysProcAttr runs a process as cred (nil: as the test) and, on Linux,
// makes the kernel kill it when the test process dies without running its
// cleanups (a panic, a -timeout). Cleanups still stop every process by its
// pid; this is the safety net. Elsewhere there is no parent-death signal.
func SysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Credential: cred}
	setPdeathsig(a)
	return a
}
