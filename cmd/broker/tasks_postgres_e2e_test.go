package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/proctest"
	"github.com/retrybroker/retrybroker/internal/tasks/pgtest"
)

// sendLog is a loopback upstream's record of the sends of each task (its
// URL path names the task): the idempotency keys they carried, how many
// were in flight at once, and whether two ever overlapped.
type sendLog struct {
	mu       sync.Mutex
	keys     map[string][]string // task id -> keys, in order
	inflight map[string]int      // idempotency key -> sends in flight
	overlaps []string            // keys sent while already in flight
	total    atomic.Int64
}

func newSendLog() *sendLog {
	return &sendLog{keys: map[string][]string{}, inflight: map[string]int{}}
}

// handler answers 200 after delay, recording each send.
func (l *sendLog) handler(delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/t/")
		key := r.Header.Get("Idempotency-Key")
		l.mu.Lock()
		l.keys[id] = append(l.keys[id], key)
		l.inflight[key]++
		if l.inflight[key] > 1 {
			l.overlaps = append(l.overlaps, key)
		}
		l.mu.Unlock()
		l.total.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		l.mu.Lock()
		l.inflight[key]--
		l.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
}

// TestTasksTwoReplicasOnPostgresSurviveSIGKILL is issue 20's durability
// target: two real brokers share one real PostgreSQL (--tasks-postgres);
// 2,000 tasks are created on both; one broker is killed with SIGKILL
// mid-drain, with dispatches in flight. Every task ends SUCCEEDED (0
// lost), every send of a task carries the task's idempotency key (so a
// duplicate carries the first send's), and no task is ever sent twice at
// once (River holds a job on one replica; the rescue of the dead one's
// jobs waits --tasks-rescue-after, beyond the dispatch bound).
func TestTasksTwoReplicasOnPostgresSurviveSIGKILL(t *testing.T) {
	const n = 2000
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	log := newSendLog()
	up := httptest.NewServer(log.handler(50 * time.Millisecond))
	t.Cleanup(up.Close)

	args := []string{"--allow-destinations", "127.0.0.1/32", "--tasks-postgres", dsn, "--tasks-rescue-after", "4s"}
	replicas := []*brokerProc{startProc(t, args...), startProc(t, args...)}
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()
	start := time.Now()

	// Create the tasks on both replicas at once, the kill racing the drain.
	keys := make([]string, n)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			req := &rbv1.CreateTaskRequest{
				TaskId:  fmt.Sprintf("t%d", i),
				Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "POST", Url: fmt.Sprintf("%s/t/t%d", up.URL, i), Body: []byte(`{}`)}},
			}
			task, err := replicas[i%2].client.CreateTask(ctx, req)
			if err != nil && i%2 == 0 {
				// The killed replica: the caller creates again on the
				// survivor with the same task_id, which deduplicates a
				// task the dead one stored but did not acknowledge.
				task, err = replicas[1].client.CreateTask(ctx, req)
			}
			if err != nil {
				return fmt.Errorf("create t%d: %w", i, err)
			}
			keys[i] = task.GetIdempotencyKey()
			return nil
		})
	}
	// SIGKILL replica 0 once a quarter of the tasks were sent: started
	// first, it is most likely River's leader, the harder case (the
	// survivor must take over the lease before it rescues anything).
	killed := make(chan int64, 1)
	go func() {
		for log.total.Load() < n/4 && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		_ = replicas[0].cmd.Process.Kill()
		killed <- log.total.Load()
	}()
	createErr := g.Wait()
	sentAtKill := <-killed
	err := <-replicas[0].done
	replicas[0].done <- err // for the cleanup, which waits for it
	if createErr != nil {
		t.Fatal(createErr)
	}

	// Every task ends SUCCEEDED on the survivor.
	survivor := replicas[1]
	var notDone []string
	for deadline := start.Add(100 * time.Second); ; {
		notDone = notDone[:0]
		seen := 0
		for token := ""; ; {
			page, err := survivor.client.ListTasks(ctx, &rbv1.ListTasksRequest{PageSize: 1000, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range page.GetTasks() {
				seen++
				if task.GetState() != rbv1.TaskState_TASK_STATE_SUCCEEDED {
					notDone = append(notDone, task.GetTaskId()+":"+task.GetState().String())
				}
			}
			if token = page.GetNextPageToken(); token == "" {
				break
			}
		}
		if seen != n {
			t.Fatalf("%d tasks stored, want %d", seen, n)
		}
		if len(notDone) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if len(notDone) > 0 {
		t.Fatalf("%d tasks not SUCCEEDED after %s (lost): %v", len(notDone), elapsed.Round(time.Second), notDone[:min(10, len(notDone))])
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	duplicates := 0
	for i, key := range keys {
		sent := log.keys[fmt.Sprintf("t%d", i)]
		if len(sent) == 0 {
			t.Errorf("t%d SUCCEEDED but was never sent", i)
		}
		duplicates += max(0, len(sent)-1)
		for j, k := range sent {
			if k != key {
				t.Errorf("send %d of t%d carried key %q, want the task's %q", j+1, i, k, key)
			}
		}
	}
	if len(log.overlaps) > 0 {
		t.Errorf("%d sends overlapped another send of the same task (ran on two replicas at once): %v", len(log.overlaps), log.overlaps[:min(5, len(log.overlaps))])
	}
	t.Logf("%d tasks, 0 lost, %d duplicate sends (each with the first send's key), replica killed after %d sends, all SUCCEEDED %s after the start",
		n, duplicates, sentAtKill, elapsed.Round(100*time.Millisecond))
}

// TestTasksStoreFlags: --tasks-sqlite and --tasks-postgres are exclusive,
// and the bounds of the PostgreSQL pool and the rescue delay are checked.
func TestTasksStoreFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tasks-sqlite", "/tmp/x.db", "--tasks-postgres", "postgres://127.0.0.1/x"}, "exclusive"},
		{[]string{"--tasks-postgres-max-conns", "0"}, "--tasks-postgres-max-conns"},
		{[]string{"--tasks-rescue-after", "1s"}, "--tasks-rescue-after"},
	} {
		_, err := parseFlags(c.args, &proctest.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// TestTasksPostgresErrorHidesPassword: a broker that cannot use its
// --tasks-postgres URL exits with an error naming the flag and never the
// password, whether the URL does not parse or the server refuses.
func TestTasksPostgresErrorHidesPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://broker:hunter2-s3cret@127.0.0.1:1/tasks?sslmode=disable",        // nothing listens on port 1
		"postgres://broker:hunter2-s3cret@127.0.0.1:notaport/tasks?sslmode=disable", // does not parse
		"host=127.0.0.1 port=1 user=broker password=hunter2-s3cret dbname=tasks sslmode=disable",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, brokerBin, "--listen", freePort(t), "--tasks-postgres", dsn)
		proctest.DieWithTest(cmd)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			t.Fatalf("%s: the broker started", dsn)
		}
		if !strings.Contains(string(out), "--tasks-postgres") || strings.Contains(string(out), "hunter2") {
			t.Errorf("broker output for a bad --tasks-postgres:\n%s", out)
		}
	}
}
