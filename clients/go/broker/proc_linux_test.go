package broker_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill a broker the test started when the test
// process dies without running its cleanups (a panic, a -timeout, a kill),
// so that no broker outlives its test binary. Cleanups still stop every
// broker by its pid; this is the safety net.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
