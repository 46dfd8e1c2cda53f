package proctest_test

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/retrybroker/retrybroker/internal/proctest"
)

func TestDieWithTestSetsTheParentDeathSignal(t *testing.T) {
	cmd := exec.Command("true")
	proctest.DieWithTest(cmd)
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Fatalf("parent-death signal %v, want SIGKILL", cmd.SysProcAttr.Pdeathsig)
	}
}
