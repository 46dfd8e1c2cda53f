package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the sentinel monitors its master under.
const SentinelMaster = "rbmaster"

// sentinelDownAfter is how long the sentinel waits before it considers a
// silent master down and fails over.
const sentinelDownAfter = 1000 * time.Millisecond

// Sentinel is one master, one replica and one sentinel (redis-server
// --sentinel) watching them with a quorum of 1, on loopback ports.
type Sentinel struct {
	master, replica, sentinel *node
	password                  string // UserBroker's
}

// StartSentinel starts the three processes for tb and stops them at
// cleanup. It calls tb.Fatal when they cannot be started.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	s, err := NewSentinel(tb.TempDir())
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

// NewSentinel starts a master, its replica and a sentinel, keeping their
// files under dir, and returns once the sentinel knows the replica and the
// replica is in sync. The caller must Close it. On error nothing is left
// running.
func NewSentinel(dir string) (s *Sentinel, err error) {
	bin, err := lookPath()
	if err != nil {
		return nil, err
	}
	s = &Sentinel{}
	if s.password, err = newPassword(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = s.Close()
			s = nil
		}
	}()
	mk := func(name string) (*node, error) {
		d := filepath.Join(dir, name)
		return &node{bin: bin, dir: d}, os.MkdirAll(d, 0o700)
	}
	if s.master, err = mk("master"); err != nil {
		return nil, err
	}
	acl, err := writeBrokerACL(dir, s.password)
	if err != nil {
		return nil, err
	}
	s.master.args = func() []string { return append(baseArgs(s.master.port, s.master.dir), "--aclfile", acl) }
	s.master.ready = func(ctx context.Context) error { return ping(ctx, s.master.addr()) }
	if err := startOnFreePorts(s.master, func() (err error) { s.master.port, err = freePort(); return err }); err != nil {
		return nil, fmt.Errorf("redistest: sentinel's master: %w", err)
	}
	if s.replica, err = mk("replica"); err != nil {
		return nil, err
	}
	s.replica.args = func() []string {
		return append(baseArgs(s.replica.port, s.replica.dir), "--aclfile", acl, "--replicaof", "127.0.0.1", strconv.Itoa(s.master.port))
	}
	s.replica.ready = func(ctx context.Context) error { return ping(ctx, s.replica.addr()) }
	if err := startOnFreePorts(s.replica, func() (err error) { s.replica.port, err = freePort(); return err }); err != nil {
		return nil, fmt.Errorf("redistest: sentinel's replica: %w", err)
	}
	if s.sentinel, err = mk("sentinel"); err != nil {
		return nil, err
	}
	conf := filepath.Join(s.sentinel.dir, "sentinel.conf")
	s.sentinel.args = func() []string { return []string{conf, "--sentinel"} }
	s.sentinel.ready = func(ctx context.Context) error { return ping(ctx, s.sentinel.addr()) }
	writeConf := func() (err error) {
		if s.sentinel.port, err = freePort(); err != nil {
			return err
		}
		// The sentinel rewrites its file: it must be its own and writable.
		return os.WriteFile(conf, []byte(strings.Join([]string{
			"port " + strconv.Itoa(s.sentinel.port),
			"bind 127.0.0.1",
			"daemonize no",
			"loglevel warning",
			"dir " + s.sentinel.dir,
			"sentinel resolve-hostnames no",
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", SentinelMaster, s.master.port),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, sentinelDownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s 10000", SentinelMaster),
			fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster),
			"",
		}, "\n")), 0o600)
	}
	if err := startOnFreePorts(s.sentinel, writeConf); err != nil {
		return nil, fmt.Errorf("redistest: sentinel: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	if err := s.waitReplica(ctx, s.master, s.replica); err != nil {
		return nil, fmt.Errorf("redistest: sentinel setup: %w", err)
	}
	return s, nil
}

// waitReplica waits until replica is in sync with master and the sentinel
// names master and lists replica as a healthy replica.
func (s *Sentinel) waitReplica(ctx context.Context, master, replica *node) error {
	for {
		err := s.checkReplica(ctx, master, replica)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Sentinel) checkReplica(ctx context.Context, master, replica *node) error {
	repl, err := adminCmd(ctx, redis.Options{Addr: replica.addr()}, "info", "replication").Text()
	if err != nil {
		return err
	}
	if !strings.Contains(repl, "master_link_status:up") || !strings.Contains(repl, "master_port:"+strconv.Itoa(master.port)+"\r") {
		return errors.New("replica not in sync")
	}
	if got, err := s.masterAddr(ctx); err != nil || got != master.addr() {
		return fmt.Errorf("sentinel names master %q (%v), want %s", got, err, master.addr())
	}
	v, err := adminCmd(ctx, redis.Options{Addr: s.sentinel.addr()}, "sentinel", "replicas", SentinelMaster).Slice()
	if err != nil {
		return err
	}
	for _, r := range v {
		fields := fieldMap(r)
		if fields["port"] == strconv.Itoa(replica.port) && fields["flags"] == "slave" && fields["master-link-status"] == "ok" {
			return nil
		}
	}
	return fmt.Errorf("sentinel does not list %s as a healthy replica", replica.addr())
}

// fieldMap turns a SENTINEL REPLICAS entry (a flat list, or a map in RESP3)
// into a map.
func fieldMap(v any) map[string]string {
	out := map[string]string{}
	switch e := v.(type) {
	case []any:
		for i := 0; i+1 < len(e); i += 2 {
			k, _ := e[i].(string)
			val, _ := e[i+1].(string)
			out[k] = val
		}
	case map[any]any:
		for k, val := range e {
			ks, _ := k.(string)
			vs, _ := val.(string)
			out[ks] = vs
		}
	}
	return out
}

// masterAddr asks the sentinel for the master's address.
func (s *Sentinel) masterAddr(ctx context.Context) (string, error) {
	v, err := adminCmd(ctx, redis.Options{Addr: s.sentinel.addr()}, "sentinel", "get-master-addr-by-name", SentinelMaster).StringSlice()
	if err != nil {
		return "", err
	}
	if len(v) != 2 {
		return "", fmt.Errorf("unexpected reply %q", v)
	}
	return net.JoinHostPort(v[0], v[1]), nil
}

// BrokerPassword returns the password of the ACL user UserBroker, whom
// the master and the replica know with BrokerACL. The default user needs
// no password; the sentinel has no ACL.
func (s *Sentinel) BrokerPassword() string { return s.password }

// Addr returns the sentinel's host:port.
func (s *Sentinel) Addr() string { return s.sentinel.addr() }

// Flag returns MASTER@ADDR, as --redis-sentinel takes it.
func (s *Sentinel) Flag() string { return SentinelMaster + "@" + s.Addr() }

// MasterAddr returns the current master's host:port (the replica's after
// a failover).
func (s *Sentinel) MasterAddr() string { return s.master.addr() }

// ReplicaAddr returns the current replica's host:port.
func (s *Sentinel) ReplicaAddr() string { return s.replica.addr() }

// MasterPid returns the current master's process id.
func (s *Sentinel) MasterPid() int { return s.master.pid() }

// Pids returns the process id of every running process.
func (s *Sentinel) Pids() []int {
	var out []int
	for _, n := range []*node{s.master, s.replica, s.sentinel} {
		if n != nil && n.pid() != 0 {
			out = append(out, n.pid())
		}
	}
	return out
}

// KillMaster kills the master by its pid (SIGKILL) and waits until the
// sentinel has promoted the replica and the replica acts as master. It
// returns how long after the kill the sentinel named the new master. The
// killed master stays down; RestartOldMaster brings it back as a replica.
func (s *Sentinel) KillMaster(ctx context.Context) (time.Duration, error) {
	old, promoted := s.master, s.replica
	killed := time.Now()
	if err := old.stop(); err != nil {
		return 0, err
	}
	for {
		addr, err := s.masterAddr(ctx)
		if err == nil && addr == promoted.addr() {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("redistest: sentinel failover after killing %s: %w (master %q, %v)", old.addr(), ctx.Err(), addr, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	took := time.Since(killed)
	for {
		role, err := adminCmd(ctx, redis.Options{Addr: promoted.addr()}, "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("redistest: %s never acted as master: %w", promoted.addr(), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.master, s.replica = promoted, old
	return took, nil
}

// RestartOldMaster restarts the process KillMaster killed, as a replica of
// the new master (the sentinel would reconfigure it so anyway), and waits
// until it is in sync and known to the sentinel.
func (s *Sentinel) RestartOldMaster(ctx context.Context) error {
	r := s.replica
	if r.pid() != 0 {
		return errors.New("redistest: the old master is running")
	}
	master, acl := s.master, filepath.Join(filepath.Dir(r.dir), "users.acl")
	r.args = func() []string {
		return append(baseArgs(r.port, r.dir), "--aclfile", acl, "--replicaof", "127.0.0.1", strconv.Itoa(master.port))
	}
	if err := r.start(); err != nil {
		return fmt.Errorf("redistest: restart the old master: %w", err)
	}
	return s.waitReplica(ctx, master, r)
}

// Close stops the three processes by their pids.
func (s *Sentinel) Close() error {
	var errs []error
	for _, n := range []*node{s.sentinel, s.replica, s.master} {
		if n != nil {
			errs = append(errs, n.stop())
		}
	}
	return errors.Join(errs...)
}
