package suite

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the child (SIGKILL) when the
// suite's process dies without stopping it (killed, a panic, a test
// -timeout), so that no redis-server or broker outlives the suite. The
// suite still stops every child by its pid; this is the safety net. The
// signal follows the OS thread that started the child, which the Go
// runtime keeps for the life of the process (it ends threads only for
// goroutines that exit locked to one, which the suite never does).
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
