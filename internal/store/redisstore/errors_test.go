package redisstore_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
)

// reply is an error reply, as go-redis returns them (a redis.Error).
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// TestClassify checks the rules on replies and errors that the topology
// tests cannot all provoke (they provoke the common ones on real servers).
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want store.Cause
	}{
		{nil, store.CauseNone},
		{reply("MOVED 3999 127.0.0.1:6381"), store.CauseMoved},
		{reply("ASK 3999 127.0.0.1:6381"), store.CauseMoved},
		{reply("CROSSSLOT Keys in request don't hash to the same slot"), store.CauseCrossSlot},
		{reply("NOPERM this user has no permissions to run the 'evalsha' command"), store.CauseNoPerm},
		{reply("ERR The user executing the script can't run this command or subcommand script: 1, on @user_script:1."), store.CauseNoPerm},
		{reply("WRONGPASS invalid username-password pair or user is disabled."), store.CauseWrongPass},
		{reply("NOAUTH Authentication required."), store.CauseWrongPass},
		{reply("ERR invalid password"), store.CauseWrongPass},
		{reply("ERR Protocol error: unauthenticated multibulk length"), store.CauseWrongPass},
		{reply("OOM command not allowed when used memory > 'maxmemory'."), store.CauseOOM},
		{reply("READONLY You can't write against a read only replica."), store.CauseReadOnly},
		{reply("ERR This instance has cluster support disabled"), store.CauseNotCluster},
		{reply("CLUSTERDOWN The cluster is down"), store.CauseClusterDown},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), store.CauseClusterDown},
		{reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), store.CauseMasterDown},
		{reply("LOADING Redis is loading the dataset in memory"), store.CauseLoading},
		{reply("BUSY Redis is busy running a script."), store.CauseOther},
		{reply("ERR unknown command 'evalsha'"), store.CauseOther},
		{redis.Nil, store.CauseUnexpected},
		{fmt.Errorf("script: %w", reply("OOM command not allowed")), store.CauseOOM},
		{x509.UnknownAuthorityError{}, store.CauseTLS},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, store.CauseTLS},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, store.CauseUnreachable},
		{context.DeadlineExceeded, store.CauseUnreachable},
		{errors.New("EOF"), store.CauseUnreachable},
		{fmt.Errorf("redis: all sentinels specified in configuration are unreachable: %w", redis.Nil), store.CauseSentinel},
		{fmt.Errorf("redis: all sentinels specified in configuration are unreachable: %w",
			&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), store.CauseUnreachable},
	} {
		if got := redisstore.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestCrossSlotOnCluster runs a script whose keys hash to two slots on the
// real cluster, and classifies the server's answer.
func TestCrossSlotOnCluster(t *testing.T) {
	c := cluster3.Get(t)
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cl.Eval(ctx, "return redis.call('GET', KEYS[2])", []string{"{t:a}:g", "{t:b}:g"}).Err()
	if got := redisstore.Classify(err); got != store.CauseCrossSlot {
		t.Fatalf("Classify(%v) = %q, want crossslot", err, got)
	}
}

func TestConfigTopology(t *testing.T) {
	for _, c := range []struct {
		cfg  redisstore.Config
		want redisstore.Topology
	}{
		{redisstore.Config{URL: "redis://h:1/0"}, redisstore.Single},
		{redisstore.Config{ClusterAddrs: []string{"h:1"}}, redisstore.Cluster},
		{redisstore.Config{SentinelMaster: "m", SentinelAddrs: []string{"h:1"}}, redisstore.Sentinel},
		{redisstore.Config{}, ""},
		{redisstore.Config{URL: "redis://h:1/0", ClusterAddrs: []string{"h:1"}}, ""},
		{redisstore.Config{SentinelMaster: "m"}, ""},
		{redisstore.Config{SentinelAddrs: []string{"h:1"}}, ""},
	} {
		got, err := c.cfg.Topology()
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("Topology(%+v) = %q, %v; want %q", c.cfg, got, err, c.want)
		}
		if c.want == "" {
			if s, err := redisstore.Open(context.Background(), c.cfg); err == nil {
				_ = s.Close()
				t.Errorf("Open(%+v) succeeded", c.cfg)
			}
		}
	}
}

// TestOpenRejectsBadInputWithoutLeaking checks that invalid
// configurations fail at Open, and that no error repeats a password.
func TestOpenRejectsBadInputWithoutLeaking(t *testing.T) {
	for _, cfg := range []redisstore.Config{
		{URL: "redis://user:s3cret@localhost:6379/0", Password: "s3cret"},
		{URL: "redis://user:s3cret@localhost:port/0"},
		{ClusterAddrs: []string{"no-port"}, Password: "s3cret"},
		{SentinelMaster: "m", SentinelAddrs: []string{"h:99999"}, Password: "s3cret"},
	} {
		s, err := redisstore.Open(context.Background(), cfg)
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open error leaks the password: %v", err)
		}
	}
}
