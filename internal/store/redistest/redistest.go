package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process owned by a test.
type Server struct {
	tb testing.TB
	n  *node
}

// Start starts a redis-server for tb and returns its URL
// ("redis://127.0.0.1:PORT/0"). The server is killed at cleanup.
func Start(tb testing.TB) string {
	tb.Helper()
	return StartServer(tb).URL()
}

// StartServer starts a redis-server for tb and returns it, answering PING.
// extra are more command-line options ("--maxmemory", "10mb", ...). The
// server is killed at cleanup. It calls tb.Fatal when redis-server is not
// installed or does not start.
func StartServer(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	bin, err := lookPath()
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{tb: tb}
	s.n = &node{bin: bin, dir: tb.TempDir()}
	s.n.args = func() []string { return append(baseArgs(s.n.port, s.n.dir), extra...) }
	s.n.ready = func(ctx context.Context) error { return ping(ctx, s.n.addr()) }
	tb.Cleanup(s.Stop)
	if err := startOnFreePorts(s.n, func() (err error) { s.n.port, err = freePort(); return err }); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return s
}

// URL returns the server's URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.n.addr() }

// Pid returns the server's process id, 0 while it is stopped.
func (s *Server) Pid() int { return s.n.pid() }

// Stop kills the server (SIGKILL, as in a crash) and waits for it to exit.
// Stopping a stopped server does nothing. Safe from any goroutine.
func (s *Server) Stop() {
	if err := s.n.stop(); err != nil {
		s.tb.Error(err)
	}
}

// Pause freezes the server with SIGSTOP: the kernel still accepts
// connections but nothing answers, as with a hung Redis. Resume undoes it;
// Stop works on a paused server.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	if err := s.n.signal(sig); err != nil {
		s.tb.Error(err)
	}
}

// Restart starts the server again on the same port, with empty data, and
// waits until it answers PING. It calls Fatal on the test when it cannot,
// so it must run on the test's goroutine.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	var err error
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) { // the port may linger briefly
		if err = s.n.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

// ping sends one PING in the inline protocol and expects +PONG (or
// -NOAUTH from a server that requires a password: it answers).
func ping(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if l := strings.TrimSpace(line); l != "+PONG" && !strings.HasPrefix(l, "-NOAUTH") {
		return fmt.Errorf("unexpected PING reply %q", line)
	}
	return nil
}
