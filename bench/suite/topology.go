package suite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// Topology is how a broker reaches Redis.
type Topology string

// The Redis topologies of the suite, all of redis-server processes on
// loopback ports that the suite starts and stops by their pids.
const (
	// TopoSingle is one redis-server (--redis URL).
	TopoSingle Topology = "one server"
	// TopoCluster is a Redis Cluster of 3 masters without replicas
	// (--redis-cluster seeds).
	TopoCluster Topology = "3-master cluster"
	// TopoSentinel is a master, a replica and a sentinel
	// (--redis-sentinel MASTER@ADDR).
	TopoSentinel Topology = "master + replica + sentinel"
)

// Topologies lists the topologies of the scale table, in order.
var Topologies = []Topology{TopoSingle, TopoCluster, TopoSentinel}

// clusterMasters is the number of masters of the suite's cluster.
const clusterMasters = 3

// cluster starts the suite's Redis Cluster on first use (3 masters, no
// replicas, formed by internal/store/redistest: CLUSTER ADDSLOTSRANGE,
// MEET; bounded by its own start and form timeouts). Run stops it by its
// pids at the end.
func (s *suite) cluster(ctx context.Context) (*redistest.Cluster, error) {
	s.clusterOnce.Do(func() {
		if err := ctx.Err(); err != nil {
			s.clusterErr = err
			return
		}
		dir := filepath.Join(s.tmp, "cluster")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			s.clusterErr = err
			return
		}
		t0 := time.Now()
		s.clusterSrv, s.clusterErr = redistest.NewCluster(dir, redistest.ClusterConfig{Masters: clusterMasters})
		if s.clusterErr == nil {
			s.logf("redis cluster: %d masters formed in %v: %s (pids %v)", clusterMasters, time.Since(t0), s.clusterSrv.Seeds(), s.clusterSrv.Pids())
		}
	})
	return s.clusterSrv, s.clusterErr
}

// closeCluster stops the cluster's processes, if it was started.
func (s *suite) closeCluster() {
	if s.clusterSrv == nil {
		return
	}
	if err := s.clusterSrv.Close(); err != nil {
		s.logf("redis cluster: stop: %v", err)
	}
}

// flushAll empties every node at addrs (FLUSHALL; on a cluster each
// master holds its own slots).
func flushAll(addrs []string) error {
	var errs []error
	for _, a := range addrs {
		if _, err := redisCommand(a, "FLUSHALL"); err != nil {
			errs = append(errs, fmt.Errorf("FLUSHALL on %s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

// ignoredCommands returns the commands that count nowhere on topo: those
// the broker never sends that the suite and the topology's own processes
// send to a master: INFO (the suite's own INFO commandstats, and a
// sentinel's INFO every 10 s), REPLCONF (a replica's ACK every second) and
// PUBLISH (a sentinel's hello every 2 s); with Sentinel also PING, which
// the sentinel sends its master every second and a broker sends only to
// probe a Redis it lost (redisOpsOn checks that the broker stayed on
// shared state throughout).
func ignoredCommands(topo Topology) map[string]bool {
	m := map[string]bool{"info": true, "replconf": true, "publish": true}
	if topo == TopoSentinel {
		m["ping"] = true
	}
	return m
}

// dataCommands returns the commands of the ACL categories @read and
// @write of the Redis at addr (ACL CAT): the commands that read or write
// data, which the broker runs only inside its scripts (it sends EVALSHA,
// EVAL and PING itself, and its client HELLO, CLUSTER SLOTS, ...).
func dataCommands(addr string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, cat := range []string{"read", "write"} {
		list, err := redisCommand(addr, "ACL CAT "+cat)
		if err != nil {
			return nil, fmt.Errorf("ACL CAT %s on %s: %w", cat, addr, err)
		}
		for _, name := range strings.Split(list, "\n") {
			if name = strings.TrimSpace(name); name != "" {
				out[strings.ToLower(name)] = true
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ACL CAT on %s: no command", addr)
	}
	return out, nil
}

// commandDelta is what the masters ran between two INFO commandstats.
type commandDelta struct {
	// Commands are the calls of every command (scripts' inner commands
	// included), by name; Total their sum.
	Commands map[string]int64
	Total    int64
	// TopLevel counts the commands clients sent: calls of every command
	// that is not a data command (see dataCommands), plus every refused
	// call (rejected_calls: refused before it ran, so never by a script).
	TopLevel int64
	// TopCommands breaks TopLevel down ("rejected NAME" for refused calls).
	TopCommands map[string]int64
	// Reached is the number of masters that received a top-level command.
	Reached int
}

// snapshot reads INFO commandstats of every master.
func snapshot(masters []string) ([]map[string]commandCount, error) {
	out := make([]map[string]commandCount, len(masters))
	for i, a := range masters {
		st, err := commandStats(a)
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats on %s: %w", a, err)
		}
		out[i] = st
	}
	return out, nil
}

// diffStats returns what ran between the snapshots before and after (one
// map per master, in the same order), without the commands of ignore;
// data names the data commands.
func diffStats(before, after []map[string]commandCount, data, ignore map[string]bool) commandDelta {
	d := commandDelta{Commands: map[string]int64{}, TopCommands: map[string]int64{}}
	for i := range after {
		var top int64
		for name, a := range after[i] {
			if ignore[name] {
				continue
			}
			var b commandCount
			if i < len(before) {
				b = before[i][name]
			}
			calls, rejected := a.Calls-b.Calls, a.Rejected-b.Rejected
			if calls > 0 {
				d.Commands[name] += calls
				d.Total += calls
				if !data[name] {
					top += calls
					d.TopCommands[name] += calls
				}
			}
			if rejected > 0 {
				top += rejected
				d.TopCommands["rejected "+name] += rejected
			}
		}
		d.TopLevel += top
		if top > 0 {
			d.Reached++
		}
	}
	return d
}

// sentinelCommands returns total_commands_processed of the sentinel at
// addr (INFO stats): a sentinel keeps no INFO commandstats. Every INFO
// the suite sends counts once, after it ran.
func sentinelCommands(addr string) (int64, error) {
	info, err := redisCommand(addr, "INFO stats")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO stats on %s: no total_commands_processed", addr)
}
