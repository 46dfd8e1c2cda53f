package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of redis-server processes on loopback ports:
// masters that share the hash slots evenly, each with the same number of
// replicas. It is formed with plain cluster commands (CLUSTER ADDSLOTSRANGE,
// MEET, REPLICATE), without redis-cli.
type Cluster struct {
	dir      string
	password string         // UserBroker's
	nodes    []*clusterNode // masters first, then replicas in master order
	replicas int            // how many of the nodes are replicas
}

type clusterNode struct {
	*node
	bus int    // cluster bus port
	id  string // node id, once started
}

// ClusterConfig shapes a Cluster.
type ClusterConfig struct {
	// Masters is the number of masters (at least 1; 3 when zero).
	Masters int
	// ReplicasPerMaster is the number of replicas of each master.
	ReplicasPerMaster int
}

// StartCluster forms a cluster for tb and stops it at cleanup. It calls
// tb.Fatal when the cluster cannot be formed.
func StartCluster(tb testing.TB, cfg ClusterConfig) *Cluster {
	tb.Helper()
	dir := tb.TempDir()
	c, err := NewCluster(dir, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// NewCluster forms a cluster whose processes keep their files under dir,
// and returns once every node agrees that the cluster is ok and every
// replica is in sync. The caller must Close it. On error nothing is left
// running.
func NewCluster(dir string, cfg ClusterConfig) (c *Cluster, err error) {
	if cfg.Masters <= 0 {
		cfg.Masters = 3
	}
	bin, err := lookPath()
	if err != nil {
		return nil, err
	}
	c = &Cluster{dir: dir, replicas: cfg.Masters * cfg.ReplicasPerMaster}
	if c.password, err = newPassword(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Close()
			c = nil
		}
	}()
	total := cfg.Masters * (1 + cfg.ReplicasPerMaster)
	for i := range total {
		ndir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(ndir, 0o700); err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		acl, err := writeBrokerACL(ndir, c.password)
		if err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		cn := &clusterNode{node: &node{bin: bin, dir: ndir}}
		cn.args = func() []string {
			return append(baseArgs(cn.port, cn.dir),
				"--aclfile", acl,
				"--cluster-enabled", "yes",
				"--cluster-port", strconv.Itoa(cn.bus),
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "1000",
				"--cluster-replica-validity-factor", "0", // a replica may always fail over
			)
		}
		cn.ready = func(ctx context.Context) error { return ping(ctx, cn.addr()) }
		pick := func() error {
			_ = os.Remove(filepath.Join(cn.dir, "nodes.conf"))
			var err error
			if cn.port, err = freePort(); err != nil {
				return err
			}
			cn.bus, err = freePort()
			if err == nil && cn.bus == cn.port {
				err = errors.New("the same free port twice")
			}
			return err
		}
		if err := startOnFreePorts(cn.node, pick); err != nil {
			return nil, fmt.Errorf("redistest: cluster node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, cn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	if err := c.form(ctx, cfg); err != nil {
		return nil, fmt.Errorf("redistest: form cluster: %w", err)
	}
	return c, nil
}

// form assigns slots, introduces the nodes, attaches the replicas and waits
// until the cluster is ok everywhere.
func (c *Cluster) form(ctx context.Context, cfg ClusterConfig) error {
	for _, n := range c.nodes {
		id, err := n.admin(ctx, "cluster", "myid").Text()
		if err != nil {
			return err
		}
		n.id = id
	}
	for i := range cfg.Masters {
		lo := i * clusterSlots / cfg.Masters
		hi := (i+1)*clusterSlots/cfg.Masters - 1
		if err := c.nodes[i].admin(ctx, "cluster", "addslotsrange", lo, hi).Err(); err != nil {
			return err
		}
		// Distinct epochs, so that no collision needs resolving.
		if err := c.nodes[i].admin(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			return err
		}
	}
	for _, n := range c.nodes[1:] {
		if err := c.nodes[0].admin(ctx, "cluster", "meet", "127.0.0.1", n.port, n.bus).Err(); err != nil {
			return err
		}
	}
	if err := c.waitAll(ctx, "every node knows every other", func(ctx context.Context, n *clusterNode) error {
		nodes, err := n.admin(ctx, "cluster", "nodes").Text()
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(nodes), "\n")
		if len(lines) != len(c.nodes) || strings.Contains(nodes, "handshake") || strings.Contains(nodes, "noaddr") {
			return fmt.Errorf("knows %d nodes", len(lines))
		}
		return nil
	}); err != nil {
		return err
	}
	for r := range cfg.ReplicasPerMaster {
		for m := range cfg.Masters {
			replica := c.nodes[cfg.Masters*(1+r)+m]
			if err := replica.admin(ctx, "cluster", "replicate", c.nodes[m].id).Err(); err != nil {
				return err
			}
		}
	}
	return c.WaitHealthy(ctx)
}

// WaitHealthy waits until every running node reports the cluster ok with
// all slots served, every node agrees on the replicas, and every replica's
// link to its master is up.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return c.waitAll(ctx, "cluster ok", func(ctx context.Context, n *clusterNode) error {
		info, err := n.admin(ctx, "cluster", "info").Text()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return errors.New("cluster_state not ok")
		}
		nodes, err := n.admin(ctx, "cluster", "nodes").Text()
		if err != nil {
			return err
		}
		if strings.Contains(nodes, "fail") {
			return errors.New("a node is flagged failing")
		}
		if got := strings.Count(nodes, "slave"); got != c.replicas {
			return fmt.Errorf("sees %d replicas, want %d", got, c.replicas)
		}
		repl, err := n.admin(ctx, "info", "replication").Text()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return errors.New("replica link down")
		}
		return nil
	})
}

// waitAll polls check on every running node until it passes on all of them.
func (c *Cluster) waitAll(ctx context.Context, what string, check func(context.Context, *clusterNode) error) error {
	for {
		var failed error
		for i, n := range c.nodes {
			if n.pid() == 0 {
				continue
			}
			if err := check(ctx, n); err != nil {
				failed = fmt.Errorf("node %d (%s): %w", i, n.addr(), err)
				break
			}
		}
		if failed == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (%w)", what, ctx.Err(), failed)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addrs returns the host:port of every node, masters first: seeds for a
// cluster client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr()
	}
	return out
}

// BrokerPassword returns the password of the ACL user UserBroker, whom
// every node knows with BrokerACL. The default user needs no password.
func (c *Cluster) BrokerPassword() string { return c.password }

// Seeds returns Addrs joined by commas, as --redis-cluster takes them.
func (c *Cluster) Seeds() string { return strings.Join(c.Addrs(), ",") }

// Masters returns the host:port of the nodes that are masters now.
func (c *Cluster) Masters(ctx context.Context) []string {
	var out []string
	for _, n := range c.nodes {
		if n.pid() != 0 && n.role(ctx) == "master" {
			out = append(out, n.addr())
		}
	}
	return out
}

// Pids returns the process id of every running node.
func (c *Cluster) Pids() []int {
	var out []int
	for _, n := range c.nodes {
		if p := n.pid(); p != 0 {
			out = append(out, p)
		}
	}
	return out
}

// Failover makes a replica of the master at masterAddr take over with
// CLUSTER FAILOVER (the coordinated manual failover: the master pauses its
// clients until the replica caught up), and waits until the cluster is
// healthy again with the replica as master. It returns the replica's
// address.
func (c *Cluster) Failover(ctx context.Context, masterAddr string) (string, error) {
	var master *clusterNode
	for _, n := range c.nodes {
		if n.addr() == masterAddr {
			master = n
		}
	}
	if master == nil {
		return "", fmt.Errorf("redistest: failover: no node %s", masterAddr)
	}
	var replica *clusterNode
	for _, n := range c.nodes {
		if n == master || n.pid() == 0 {
			continue
		}
		repl, err := n.admin(ctx, "info", "replication").Text()
		if err == nil && strings.Contains(repl, "master_port:"+strconv.Itoa(master.port)+"\r") {
			replica = n
			break
		}
	}
	if replica == nil {
		return "", fmt.Errorf("redistest: failover: %s has no replica", masterAddr)
	}
	if err := replica.admin(ctx, "cluster", "failover").Err(); err != nil {
		return "", fmt.Errorf("redistest: CLUSTER FAILOVER on %s: %w", replica.addr(), err)
	}
	for replica.role(ctx) != "master" || master.role(ctx) != "slave" {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("redistest: failover of %s to %s: %w", masterAddr, replica.addr(), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return "", fmt.Errorf("redistest: after failover: %w", err)
	}
	return replica.addr(), nil
}

// Close stops every node by its pid and waits for each to exit.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.stop())
	}
	return errors.Join(errs...)
}

// role returns "master" or "slave" (ROLE), or "" when the node does not
// answer.
func (n *clusterNode) role(ctx context.Context) string {
	v, err := n.admin(ctx, "role").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	s, _ := v[0].(string)
	return s
}

// admin sends one command to the node on a short-lived connection.
func (n *clusterNode) admin(ctx context.Context, args ...any) *redis.Cmd {
	return adminCmd(ctx, redis.Options{Addr: n.addr()}, args...)
}

// adminCmd sends one command on a short-lived connection with o (no
// retries, a one-second bound on top of ctx).
func adminCmd(ctx context.Context, o redis.Options, args ...any) *redis.Cmd {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	// PoolSize 2: one failed dial must not start the pool's background
	// redial loop, which outlives Close by up to a second.
	o.MaxRetries, o.DialerRetries, o.PoolSize, o.DisableIdentity, o.Protocol = -1, 1, 2, true, 2
	o.ContextTimeoutEnabled = true
	cl := redis.NewClient(&o)
	defer cl.Close()
	return cl.Do(ctx, args...)
}
