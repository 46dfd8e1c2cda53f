package proctest_test

import (
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/retrybroker/retrybroker/internal/proctest"
)

func TestBufferTakesConcurrentWrites(t *testing.T) {
	var b proctest.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Fatalf("%d bytes, want 800", n)
	}
}

func TestDieWithTest(t *testing.T) {
	cmd := exec.Command("true")
	proctest.DieWithTest(cmd)
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Credential != nil {
		t.Fatalf("SysProcAttr %+v", cmd.SysProcAttr)
	}
	cred := &syscall.Credential{Uid: 1, Gid: 1}
	if a := proctest.SysProcAttr(cred); a.Credential != cred {
		t.Fatal("credential not kept")
	}
}
