package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// Topologies shared by the tests of this package: each starts on first use
// and stops in TestMain.
var (
	cluster3  = redistest.SharedCluster(redistest.ClusterConfig{Masters: 3})
	cluster33 = redistest.SharedCluster(redistest.ClusterConfig{Masters: 3, ReplicasPerMaster: 1})
	sentinel  = redistest.SharedSentinel()
	tlsACL    = redistest.SharedTLS()
)

// prefixes numbers the key prefixes of stores on the shared topologies.
var prefixes atomic.Int64

// sharedPrefix returns a key prefix that no other store of this test
// process has used: the shared topologies outlive one run of a test
// (go test -count=N), and keys an earlier run left would be read as this
// run's state.
func sharedPrefix(name string) string {
	return fmt.Sprintf("rb:v1:%s%d:", name, prefixes.Add(1))
}

func closeTopologies() error {
	return errors.Join(cluster3.Close(), cluster33.Close(), sentinel.Close(), tlsACL.Close())
}

// topology is a way to open a store on one of the shared topologies.
type topology struct {
	name string
	cfg  func(t *testing.T) redisstore.Config
}

func topologies() []topology {
	return []topology{
		{"cluster-3-masters", func(t *testing.T) redisstore.Config {
			c := cluster3.Get(t)
			return redisstore.Config{ClusterAddrs: c.Addrs()[:1], Username: redistest.UserBroker, Password: c.BrokerPassword()}
		}},
		{"cluster-3-masters-3-replicas", func(t *testing.T) redisstore.Config {
			c := cluster33.Get(t)
			return redisstore.Config{ClusterAddrs: c.Addrs(), Username: redistest.UserBroker, Password: c.BrokerPassword()}
		}},
		{"sentinel", func(t *testing.T) redisstore.Config {
			s := sentinel.Get(t)
			return redisstore.Config{
				SentinelMaster: redistest.SentinelMaster, SentinelAddrs: []string{s.Addr()},
				Username: redistest.UserBroker, Password: s.BrokerPassword(),
			}
		}},
		{"tls-acl", func(t *testing.T) redisstore.Config {
			s := tlsACL.Get(t)
			cfg, err := s.ClientTLS()
			if err != nil {
				t.Fatal(err)
			}
			return redisstore.Config{URL: s.URL(), Username: redistest.UserBroker, Password: s.Password(redistest.UserBroker), TLS: cfg}
		}},
	}
}

// open opens a store with patient timeouts on cfg.
func open(t *testing.T, cfg redisstore.Config, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), cfg, append([]redisstore.Option{redisstore.WithTimeouts(5*time.Second, 5*time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSuiteTopologies runs the shared store suite on a 3-master cluster,
// a 3-master + 3-replica cluster, Sentinel, and a TLS server that
// requires a client certificate and the broker's ACL user.
func TestSuiteTopologies(t *testing.T) {
	for _, topo := range topologies() {
		t.Run(topo.name, func(t *testing.T) {
			cfg := topo.cfg(t)
			storetest.Run(t, func(t *testing.T) store.Store {
				s := open(t, cfg, redisstore.WithKeyPrefix(sharedPrefix(topo.name)))
				ready(t, s) // local admission on, with its subscription on this topology
				return s
			})
		})
	}
}

// TestVerifyTopologies checks that Verify passes on every topology, and
// on a cluster really ran on every master.
func TestVerifyTopologies(t *testing.T) {
	for _, topo := range topologies() {
		t.Run(topo.name, func(t *testing.T) {
			s := open(t, topo.cfg(t))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Verify(ctx); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
	t.Run("every master", func(t *testing.T) {
		c := cluster33.Get(t)
		prefix := sharedPrefix("every")
		s := open(t, redisstore.Config{ClusterAddrs: c.Addrs()}, redisstore.WithKeyPrefix(prefix))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Verify(ctx); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		masters := c.Masters(ctx)
		if len(masters) != 3 {
			t.Fatalf("masters %v", masters)
		}
		for _, addr := range masters {
			n := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
			keys, err := n.Keys(ctx, prefix+"{t:%00verify-*}:q:*").Result()
			_ = n.Close()
			if err != nil || len(keys) != 1 {
				t.Errorf("master %s holds verification quota keys %q (%v), want one", addr, keys, err)
			}
		}
	})
}

// misconfigured is a store that Verify must refuse with a named cause.
type misconfigured struct {
	name  string
	cause store.Cause
	open  func(t *testing.T) *redisstore.Store
}

func misconfigurations() []misconfigured {
	tlsCfg := func(t *testing.T, s *redistest.TLSServer) redisstore.Config {
		c, err := s.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		return redisstore.Config{URL: s.URL(), TLS: c}
	}
	return []misconfigured{
		{"cluster behind a single-node client", store.CauseMoved, func(t *testing.T) *redisstore.Store {
			return open(t, redisstore.Config{URL: "redis://" + cluster3.Get(t).Addrs()[0] + "/0"})
		}},
		{"cluster client on a plain server", store.CauseNotCluster, func(t *testing.T) *redisstore.Store {
			return open(t, redisstore.Config{ClusterAddrs: []string{redistest.StartServer(t).Addr()}})
		}},
		{"read-only replica", store.CauseReadOnly, func(t *testing.T) *redisstore.Store {
			return open(t, redisstore.Config{URL: "redis://" + sentinel.Get(t).ReplicaAddr() + "/0"})
		}},
		{"wrong password", store.CauseWrongPass, func(t *testing.T) *redisstore.Store {
			cfg := tlsCfg(t, tlsACL.Get(t))
			cfg.Username, cfg.Password = redistest.UserBroker, "not-the-password"
			return open(t, cfg)
		}},
		{"no password", store.CauseWrongPass, func(t *testing.T) *redisstore.Store {
			return open(t, tlsCfg(t, tlsACL.Get(t)))
		}},
		{"requirepass without a password", store.CauseWrongPass, func(t *testing.T) *redisstore.Store {
			return open(t, redisstore.Config{URL: redistest.StartServer(t, "--requirepass", "s3cret").URL()})
		}},
		{"ACL user without writes", store.CauseNoPerm, func(t *testing.T) *redisstore.Store {
			s := tlsACL.Get(t)
			cfg := tlsCfg(t, s)
			cfg.Username, cfg.Password = redistest.UserReadOnly, s.Password(redistest.UserReadOnly)
			return open(t, cfg)
		}},
		{"ACL user without the broker's keys", store.CauseNoPerm, func(t *testing.T) *redisstore.Store {
			s := tlsACL.Get(t)
			cfg := tlsCfg(t, s)
			cfg.Username, cfg.Password = redistest.UserOtherKeys, s.Password(redistest.UserOtherKeys)
			return open(t, cfg)
		}},
		{"ACL user without the announcement channel", store.CauseNoPerm, func(t *testing.T) *redisstore.Store {
			srv := redistest.StartServer(t)
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer admin.Close()
			// The broker's ACL but for the channel: resetchannels alone.
			acl := []any{"ACL", "SETUSER", "nochannel", "on", ">pw", "~rb:v1:*", "resetchannels", "-@all"}
			for _, c := range strings.Fields(redistest.BrokerACL) {
				acl = append(acl, c)
			}
			if err := admin.Do(context.Background(), acl...).Err(); err != nil {
				t.Fatal(err)
			}
			return open(t, redisstore.Config{URL: srv.URL(), Username: "nochannel", Password: "pw"})
		}},
		{"out of memory", store.CauseOOM, func(t *testing.T) *redisstore.Store {
			return open(t, redisstore.Config{URL: redistest.StartServer(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction").URL()})
		}},
		{"no client certificate", store.CauseTLS, func(t *testing.T) *redisstore.Store {
			s := tlsACL.Get(t)
			cfg := tlsCfg(t, s)
			cfg.TLS.Certificates = nil
			cfg.Username, cfg.Password = redistest.UserBroker, s.Password(redistest.UserBroker)
			return open(t, cfg)
		}},
		{"unknown CA", store.CauseTLS, func(t *testing.T) *redisstore.Store {
			s := tlsACL.Get(t)
			cfg := tlsCfg(t, s)
			cfg.TLS.RootCAs = nil // the system roots do not know the test CA
			cfg.Username, cfg.Password = redistest.UserBroker, s.Password(redistest.UserBroker)
			return open(t, cfg)
		}},
		{"unknown sentinel master", store.CauseSentinel, func(t *testing.T) *redisstore.Store {
			return open(t, redisstore.Config{SentinelMaster: "no-such-master", SentinelAddrs: []string{sentinel.Get(t).Addr()}})
		}},
		{"nothing listening", store.CauseUnreachable, func(t *testing.T) *redisstore.Store {
			srv := redistest.StartServer(t)
			srv.Stop()
			return open(t, redisstore.Config{URL: srv.URL()})
		}},
	}
}

// TestVerifyNamesMisconfigurations checks that each misconfiguration is
// named by its cause, in the error and through store.CauseOf, and that a
// misconfiguration is never reported as unreachable; and that the store's
// operations report the same cause.
func TestVerifyNamesMisconfigurations(t *testing.T) {
	for _, m := range misconfigurations() {
		t.Run(m.name, func(t *testing.T) {
			s := m.open(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.Verify(ctx)
			if got := store.CauseOf(err); got != m.cause {
				t.Fatalf("Verify: cause %q (%v), want %q", got, err, m.cause)
			}
			if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), ": "+string(m.cause)+": ") {
				t.Fatalf("Verify error %q does not wrap ErrUnavailable or name %q", err, m.cause)
			}
			if m.cause != store.CauseUnreachable && strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("a misconfiguration reported as unreachable: %v", err)
			}
			t.Logf("%v", err)
			if m.cause == store.CauseMoved {
				return // some tenants' keys are on the node at hand
			}
			if strings.Contains(m.name, "announcement channel") {
				// Only a script that closes a gate publishes: an Admit
				// works, the Complete of a refusal does not.
				g := store.GateKey{Tenant: "acme", Scope: "github"}
				if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, FirstAttempt: true, Budget: store.DefaultBudget(), Now: storetest.T0}); err != nil {
					t.Fatalf("Admit: %v", err)
				}
				_, err = s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: storetest.T0.Add(time.Minute)}, Result: store.ResultRefused, Now: storetest.T0})
				if got := store.CauseOf(err); got != m.cause {
					t.Fatalf("Observe: cause %q (%v), want %q", got, err, m.cause)
				}
				return
			}
			_, err = s.Admit(ctx, store.AdmitRequest{Gate: store.GateKey{Tenant: "acme", Scope: "github"}, FirstAttempt: true, Budget: store.DefaultBudget(), Now: storetest.T0})
			if got := store.CauseOf(err); got != m.cause {
				t.Fatalf("Admit: cause %q (%v), want %q", got, err, m.cause)
			}
		})
	}
}

// TestClusterOneRoundTrip counts, on every master of the cluster, what the
// server saw for n Admits as the broker's ACL user: n EVALSHA, no COMMAND
// and nothing refused (the cluster client must not look up command
// policies with COMMAND, which that user may not run: one refused round
// trip per call and master).
func TestClusterOneRoundTrip(t *testing.T) {
	c := cluster3.Get(t)
	s := open(t, redisstore.Config{ClusterAddrs: c.Addrs(), Username: redistest.UserBroker, Password: c.BrokerPassword()},
		redisstore.WithKeyPrefix(sharedPrefix("rt")), redisstore.WithLocalAdmission(0)) // every Admit a round trip
	ctx := context.Background()
	gates := []store.GateKey{{Tenant: "acme"}, {Tenant: "globex"}, {Tenant: "initech"}, {Tenant: "umbrella"}}
	// Warm up: load the slot map and the scripts on every master.
	for _, g := range gates {
		if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: storetest.T0}); err != nil {
			t.Fatal(err)
		}
	}
	// seen sums, over the masters, the EVALSHA calls, the COMMAND calls
	// (run or refused) and every refused call.
	seen := func() (evalsha, command, rejected int64) {
		for _, addr := range c.Addrs() {
			n := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
			info, err := n.Info(ctx, "commandstats").Result()
			_ = n.Close()
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.SplitSeq(info, "\n") {
				name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
				if !ok || !strings.HasPrefix(name, "cmdstat_") {
					continue
				}
				var calls, refused int64
				for field := range strings.SplitSeq(rest, ",") {
					k, v, _ := strings.Cut(field, "=")
					switch k {
					case "calls":
						_, _ = fmt.Sscan(v, &calls)
					case "rejected_calls":
						_, _ = fmt.Sscan(v, &refused)
					}
				}
				rejected += refused
				switch name {
				case "cmdstat_evalsha":
					evalsha += calls
				case "cmdstat_command":
					command += calls + refused
				}
			}
		}
		return evalsha, command, rejected
	}
	const n = 100
	e0, c0, r0 := seen()
	for i := range n {
		g := gates[i%len(gates)]
		if _, err := s.Admit(ctx, store.AdmitRequest{Gate: g, FirstAttempt: true, Budget: store.DefaultBudget(), Now: storetest.T0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	e1, c1, r1 := seen()
	if e1-e0 != n || c1-c0 != 0 || r1-r0 != 0 {
		t.Fatalf("%d Admits: %d EVALSHA, %d COMMAND, %d refused calls on the masters; want %d, 0, 0", n, e1-e0, c1-c0, r1-r0, n)
	}
}
