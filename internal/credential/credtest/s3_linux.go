package credtest

import (
	"os/exec"
	"syscall"
)

// s3SetParentDeathSignal makes the kernel kill the server when the test
// process dies without running its cleanups (a panic, a -timeout). Cleanups
// still stop it by its pid; this is the safety net.
func s3SetParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
