package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is one redis-server process owned by a test.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{} // closed when proc has exited
}

// Start starts a redis-server for tb and returns its URL
// ("redis://127.0.0.1:PORT/0"). The server is killed at cleanup.
func Start(tb testing.TB) string {
	tb.Helper()
	return StartServer(tb).URL()
}

// StartServer starts a redis-server for tb and returns it, answering PING.
// The server is killed at cleanup. It calls tb.Fatal when redis-server is
// not installed or does not start.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatal("redistest: redis-server not found on PATH: run make test (installs redis-server), or apt-get install -y redis-server")
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(s.Stop)
	var lastErr error
	for range 5 { // a free port can be taken between probe and bind: retry
		s.port, err = freePort()
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	tb.Fatalf("redistest: %v", lastErr)
	return nil
}

// URL returns the server's URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Stop kills the server (SIGKILL, as in a crash) and waits for it to exit.
// Stopping a stopped server does nothing. Safe from any goroutine.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.Process.Kill()
	<-s.exited
	s.proc, s.exited = nil, nil
}

// Pause freezes the server with SIGSTOP: the kernel still accepts
// connections but nothing answers, as with a hung Redis. Resume undoes it;
// Stop works on a paused server.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.tb.Errorf("redistest: signal %v: server not running", sig)
		return
	}
	if err := s.proc.Process.Signal(sig); err != nil {
		s.tb.Errorf("redistest: signal %v: %v", sig, err)
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
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("already running")
	}
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	)
	var out syncBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		if ping(s.Addr()) == nil {
			s.proc, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited (%v): %s", waitErr, strings.TrimSpace(out.String()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server did not answer PING within %v: %s", startTimeout, strings.TrimSpace(out.String()))
		}
	}
}

// ping sends one PING in the inline protocol and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("unexpected PING reply %q", line)
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer safe for the process's writes and our reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
