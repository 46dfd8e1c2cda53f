package pgtest

import "syscall"

// sysProcAttr runs a process as cred (nil: as the test) and makes the
// kernel kill it when the test process dies without running its cleanups
// (a panic, a -timeout), so that no postgres outlives its test binary.
// Cleanups still stop every server by its pid; this is the safety net.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}
