package credtest

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the server when the test
// process dies without running its cleanups (a panic, a -timeout), so that
// no server outlives its test binary. Cleanups still stop every
// server by its pid; this is the safety net.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
