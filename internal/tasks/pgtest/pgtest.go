// Package pgtest starts a real PostgreSQL server (Debian's postgres
// package) for tests, on a loopback port only, and hands each test a
// fresh database on it.
//
// [Start] runs initdb in a temporary directory and starts postgres with
// listen_addresses=127.0.0.1 on a free port and its Unix socket in the same
// directory. When the test runs as root, both run as the user postgres (or
// nobody): postgres refuses to run as root. The server trusts local
// connections (no password) and runs with fsync off: a test kills brokers,
// not the database. [Server.NewDatabase] creates an empty database and
// returns its URL. [Shared] lets the tests of one package share one server,
// started on first use and stopped from TestMain.
//
// Every server is stopped by its own pid (SIGINT, PostgreSQL's fast
// shutdown, then SIGKILL after a bounded wait) and is also killed by the
// kernel if the test binary dies first (Linux). When initdb or postgres is
// missing the test fails (it does not skip): run "make test", which
// installs Debian's postgresql package.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/retrybroker/retrybroker/internal/proctest"
)

// Bounds on process handling: every wait on initdb or postgres is
// bounded, so that a broken server fails the test instead of hanging it.
const (
	// initTimeout bounds initdb.
	initTimeout = 2 * time.Minute
	// startTimeout bounds how long postgres may take to accept a query.
	startTimeout = 30 * time.Second
	// stopTimeout bounds the fast shutdown after SIGINT, and then the
	// reaping after SIGKILL.
	stopTimeout = 10 * time.Second
)

// Server is one postgres process.
type Server struct {
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's error, valid once exited is closed
	out    proctest.Buffer
	dbs    atomic.Int64
	once   sync.Once
}

// Start starts a postgres for tb; it is stopped at cleanup. It calls
// tb.Fatal when postgres is not installed or does not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := NewServer(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// NewServer starts a postgres with its files under dir (which must exist)
// and returns it accepting queries; Close stops it.
func NewServer(dir string) (*Server, error) {
	initdb, postgres, err := binaries()
	if err != nil {
		return nil, err
	}
	// dir itself may be private to root (t.TempDir's parent is): the
	// server's own directory is under a fresh one that others may enter.
	base, err := os.MkdirTemp(dir, "pg")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if cred != nil {
		if err := openPath(base); err != nil {
			return nil, err
		}
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgtest: chown data directory: %w", err)
		}
		if err := os.Chown(base, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgtest: chown directory: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	ini := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	ini.Dir = base
	ini.SysProcAttr = proctest.SysProcAttr(cred)
	if out, err := ini.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, bytes.TrimSpace(out))
	}
	for range 5 { // a port may be taken between the probe and the bind
		s := &Server{dir: base}
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = s.start(postgres, data, cred); err == nil {
			return s, nil
		}
		if !strings.Contains(s.out.String(), "in use") {
			return nil, err
		}
	}
	return nil, err
}

func (s *Server) start(bin, data string, cred *syscall.Credential) error {
	s.exited = make(chan struct{})
	s.cmd = exec.Command(bin, "-D", data, "-k", s.dir, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=300",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "log_min_messages=warning")
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.SysProcAttr = proctest.SysProcAttr(cred)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgtest: postgres on port %d exited (%v): %s", s.port, s.err, strings.TrimSpace(s.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.Close()
			return fmt.Errorf("pgtest: postgres on port %d did not answer within %v (%v): %s", s.port, startTimeout, err, strings.TrimSpace(s.out.String()))
		}
	}
}

func (s *Server) ping(ctx context.Context) error {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.Ping(ctx)
}

// url returns the URL of database db as user postgres, over TCP on
// loopback.
func (s *Server) url(db string) string {
	u := url.URL{
		Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path: "/" + db, RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the server's loopback TCP port.
func (s *Server) Port() int { return s.port }

// Pid returns the postmaster's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// NewDatabase creates an empty database and returns its URL
// ("postgres://postgres@127.0.0.1:PORT/test_N?sslmode=disable"). It calls
// tb.Fatal when it cannot.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	u, err := s.CreateDatabase(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// CreateDatabase creates an empty database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	name := "test_" + strconv.FormatInt(s.dbs.Add(1), 10)
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: connect: %w", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return s.url(name), nil
}

// Close stops the server by its pid: SIGINT (fast shutdown: it ends every
// connection), then SIGKILL when it has not exited within stopTimeout. It
// waits, bounded, until it has exited. Closing twice does nothing.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
			return
		case <-time.After(stopTimeout):
		}
		_ = s.cmd.Process.Kill()
		select {
		case <-s.exited:
		case <-time.After(stopTimeout):
			err = fmt.Errorf("pgtest: postgres pid %d not reaped %v after SIGKILL", s.cmd.Process.Pid, stopTimeout)
		}
	})
	return err
}

// Shared is a server that the tests of one package share: started by the
// first test that asks for it, stopped by Close, which the package's
// TestMain calls after m.Run. A package run that never asks starts nothing.
type Shared struct {
	mu      sync.Mutex
	started bool
	s       *Server
	err     error
	dir     string
}

// Get returns the shared server, starting it on first use; it calls
// tb.Fatal when it could not be started (and every later Get fails the
// same way).
func (sh *Shared) Get(tb testing.TB) *Server {
	tb.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.started {
		sh.started = true
		sh.dir, sh.err = os.MkdirTemp("", "pgtest")
		if sh.err == nil {
			sh.s, sh.err = NewServer(sh.dir)
		}
	}
	if sh.err != nil {
		tb.Fatal(sh.err)
	}
	return sh.s
}

// Close stops the server if it was started, and removes its files.
func (sh *Shared) Close() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var err error
	if sh.s != nil {
		err = sh.s.Close()
		sh.s = nil
	}
	if sh.dir != "" {
		_ = os.RemoveAll(sh.dir)
		sh.dir = ""
	}
	sh.started = false
	return err
}

// binaries finds initdb and postgres: in the newest
// /usr/lib/postgresql/VERSION/bin (where Debian puts them, off PATH), else
// on PATH.
func binaries() (initdb, postgres string, err error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "postgres")
		if executable(i) && executable(p) {
			return i, p, nil
		}
	}
	i, err1 := exec.LookPath("initdb")
	p, err2 := exec.LookPath("postgres")
	if err1 != nil || err2 != nil {
		return "", "", errors.New("pgtest: initdb and postgres not found under /usr/lib/postgresql/*/bin or on PATH: run make test (installs postgresql), or apt-get install -y postgresql")
	}
	return i, p, nil
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// runAs returns the credential to run initdb and postgres with when the
// test runs as root (postgres refuses root): user postgres, else nobody.
// It returns nil for any other user.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		uid, gid, ok := lookupUser(name)
		if ok {
			return &syscall.Credential{Uid: uid, Gid: gid}, nil
		}
	}
	return nil, errors.New("pgtest: running as root, and neither user postgres nor nobody exists to run postgres as")
}

// lookupUser reads name's uid and gid from /etc/passwd (os/user may need
// cgo for other sources; system users are in the file).
func lookupUser(name string) (uid, gid uint32, ok bool) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || f[0] != name {
			continue
		}
		u, err1 := strconv.ParseUint(f[2], 10, 32)
		g, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		return uint32(u), uint32(g), true
	}
	return 0, 0, false
}

// openPath lets any user enter every directory from dir up to the
// temporary directory (a root test's temporary directories are 0700),
// without listing them. It changes nothing outside the temporary
// directory: a directory there that others cannot enter is an error.
func openPath(dir string) error {
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		inside := d != tmp && strings.HasPrefix(d, tmp+string(filepath.Separator))
		if fi.Mode().Perm()&0o001 == 0 {
			if !inside {
				return fmt.Errorf("pgtest: postgres (not root) cannot enter %s; set TMPDIR to a directory others may enter", d)
			}
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("pgtest: let postgres enter %s: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
