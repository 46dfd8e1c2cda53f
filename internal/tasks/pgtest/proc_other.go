//go:build !linux

package pgtest

import "syscall"

// sysProcAttr runs a process as cred (nil: as the test); outside Linux
// there is no parent-death signal: cleanups stop every server by its pid.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
