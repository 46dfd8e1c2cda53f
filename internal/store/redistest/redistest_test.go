package redistest_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

func TestMain(m *testing.M) {
	// A go-redis pool whose dials kept failing (a killed master) redials
	// in the background once a second, until it sees it was closed.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// ping sends an inline PING and returns the reply line.
func ping(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	return strings.TrimSpace(string(buf[:n])), err
}

func TestStopRestartSamePort(t *testing.T) {
	srv := redistest.StartServer(t)
	addr := srv.Addr()
	if !strings.HasPrefix(srv.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL = %q", srv.URL())
	}
	if r, err := ping(addr); err != nil || r != "+PONG" {
		t.Fatalf("PING = %q, %v", r, err)
	}
	srv.Stop()
	if _, err := ping(addr); err == nil {
		t.Fatal("server still answers after Stop")
	}
	srv.Stop() // idempotent
	srv.Restart()
	if srv.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", srv.Addr(), addr)
	}
	if r, err := ping(addr); err != nil || r != "+PONG" {
		t.Fatalf("PING after Restart = %q, %v", r, err)
	}
}

func TestPauseResume(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Pause()
	if r, err := ping(srv.Addr()); err == nil {
		t.Fatalf("paused server answered %q", r)
	}
	srv.Resume()
	if r, err := ping(srv.Addr()); err != nil || r != "+PONG" {
		t.Fatalf("PING after Resume = %q, %v", r, err)
	}
}

// fatalTB records the first Fatal and stops the calling goroutine's work
// by panicking, like testing.T's Fatal stops the test.
type fatalTB struct {
	testing.TB
	msg string
}

type fatalled struct{}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) { f.msg = fmt.Sprint(args...); panic(fatalled{}) }

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatalled{})
}

func TestMissingRedisServerFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	tb := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(fatalled); !ok {
					panic(r)
				}
			}
		}()
		redistest.Start(tb)
	}()
	if !strings.Contains(tb.msg, "make test") {
		t.Fatalf("missing redis-server: message %q, want a hint to run make test", tb.msg)
	}
}
