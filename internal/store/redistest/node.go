package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retrybroker/retrybroker/internal/proctest"
)

// Bounds on process handling: every wait a test makes on a redis-server is
// bounded, so that a broken server fails the test instead of hanging it.
const (
	// startTimeout bounds how long a server may take to answer PING.
	startTimeout = 10 * time.Second
	// stopTimeout bounds the wait for a killed process to be reaped.
	stopTimeout = 10 * time.Second
	// formTimeout bounds forming a topology (cluster, sentinel) after its
	// processes started.
	formTimeout = 30 * time.Second
)

// node is one redis-server process: a plain server, a cluster node or a
// sentinel. It is started, stopped and signalled by its own pid only.
type node struct {
	bin  string
	dir  string
	port int
	// args returns the command line after the binary name.
	args func() []string
	// ready reports whether the process answers (PING, or what it needs).
	ready func(ctx context.Context) error

	mu   sync.Mutex
	run  *run // nil when not running
	last *run // the latest run, for its logs
}

// run is one run of a node's process.
type run struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	err    error         // cmd.Wait's error, valid once exited is closed
	out    proctest.Buffer
}

// lookPath finds redis-server, with a message that says how to get it.
func lookPath() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redistest: redis-server not found on PATH: run make test (installs redis-server), or apt-get install -y redis-server")
	}
	return bin, nil
}

// addr returns the node's loopback host:port.
func (n *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// start starts the process and waits until ready answers, at most
// startTimeout. On failure the process is killed and reaped.
func (n *node) start() error {
	n.mu.Lock()
	if n.run != nil {
		n.mu.Unlock()
		return errors.New("already running")
	}
	r := &run{cmd: exec.Command(n.bin, n.args()...), exited: make(chan struct{})}
	r.cmd.Dir = n.dir
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	proctest.DieWithTest(r.cmd)
	if err := r.cmd.Start(); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("start redis-server: %w", err)
	}
	n.run, n.last = r, r
	n.mu.Unlock()
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()

	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := n.ready(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-r.exited:
			n.forget(r)
			return fmt.Errorf("redis-server on port %d exited (%v): %s", n.port, r.err, strings.TrimSpace(r.out.String()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = n.stop()
			return fmt.Errorf("redis-server on port %d did not answer within %v (%v): %s", n.port, startTimeout, err, strings.TrimSpace(r.out.String()))
		}
	}
}

// forget clears the running process if it is still r.
func (n *node) forget(r *run) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run == r {
		n.run = nil
	}
}

// stop kills the process (SIGKILL, as in a crash) and waits, at most
// stopTimeout, until it has exited. Stopping a stopped node does nothing.
func (n *node) stop() error {
	n.mu.Lock()
	r := n.run
	n.run = nil
	n.mu.Unlock()
	if r == nil {
		return nil
	}
	_ = r.cmd.Process.Kill()
	select {
	case <-r.exited:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("redistest: redis-server pid %d not reaped %v after SIGKILL", r.cmd.Process.Pid, stopTimeout)
	}
}

// signal sends sig to the running process.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run == nil {
		return fmt.Errorf("redistest: signal %v: server not running", sig)
	}
	if err := n.run.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: signal %v: %w", sig, err)
	}
	return nil
}

// pid returns the process id, 0 when not running.
func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.run == nil {
		return 0
	}
	return n.run.cmd.Process.Pid
}

// logs returns what the process wrote in its latest run.
func (n *node) logs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		return ""
	}
	return n.last.out.String()
}

// startOnFreePorts picks free loopback ports with pick and starts the node,
// trying again with other ports when a port was taken between the probe
// and the bind.
func startOnFreePorts(n *node, pick func() error) error {
	var err error
	for range 5 {
		if err = pick(); err != nil {
			return err
		}
		if err = n.start(); err == nil || !strings.Contains(n.logs(), "in use") {
			return err
		}
	}
	return err
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

// baseArgs are the options every test server gets: loopback only, nothing
// on disk, in the foreground, quiet.
func baseArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--loglevel", "warning",
		"--repl-diskless-sync-delay", "0", // replicas sync at once, not after 5 s
	}
}

// writeBrokerACL writes an ACL file to dir/users.acl with the default user
// (no password, every permission, for the test's own commands and for
// replication) and UserBroker with BrokerACL and password, and returns the
// file's path.
func writeBrokerACL(dir, password string) (string, error) {
	path := filepath.Join(dir, "users.acl")
	acl := "user default on nopass ~* &* +@all\n" +
		"user " + UserBroker + " on >" + password + " ~rb:v1:* " + BrokerChannels + " -@all " + BrokerACL + "\n"
	return path, os.WriteFile(path, []byte(acl), 0o600)
}

// newPassword returns a random password.
func newPassword() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
