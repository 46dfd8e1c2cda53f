package suite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// TasksKill is the failover row on PostgreSQL: two broker processes share
// one database, the tasks are created on both, and one replica is killed
// (SIGKILL) while it dispatches. Every task must still succeed, sent at
// least once; the row reports how long the survivor took.
type TasksKill struct {
	// Tasks were created, half on each replica (a create that the kill
	// cut is made again on the survivor with the same task_id, which
	// deduplicates it); SentAtKill tasks had been sent when replica 0 was
	// killed.
	Tasks, SentAtKill int
	// RescueAfter is both brokers' --tasks-rescue-after.
	RescueAfter time.Duration
	// Sent counts the tasks sent at least once, Succeeded those SUCCEEDED
	// on the survivor at the end, Dup the accepted sends beyond one per
	// task (at least once: a task the killed replica was sending is sent
	// again, with its key).
	Sent, Succeeded, Dup int
	// KeyMismatch counts accepted sends that carried no Idempotency-Key,
	// or another than their task's first send.
	KeyMismatch int
	// KillToLast is from the kill to the last task's first send; Total
	// from the first create to it.
	KillToLast, Total time.Duration
	Measured          bool
}

// tasksKillRescue is the kill row's --tasks-rescue-after: the shortest the
// broker accepts, so that the killed replica's running tasks are rescued
// within the row (the default, 10 min, is a dispatch's job timeout).
const tasksKillRescue = 4 * time.Second

// tasksKillRow runs the failover row on a fresh database of store: n tasks
// due at once on a loopback upstream that answers after 50 ms (so that the
// killed replica has dispatches in flight), replica 0 killed once a
// quarter of them were sent.
func (s *suite) tasksKillRow(ctx context.Context, n int, store taskStore) (TasksKill, error) {
	row := TasksKill{Tasks: n, RescueAfter: tasksKillRescue}
	flags, err := store(ctx, "kill")
	if err != nil {
		return row, err
	}
	flags = append(flags, "--tasks-rescue-after", tasksKillRescue.String())
	up, err := startTaskUpstream(false)
	if err != nil {
		return row, err
	}
	up.delay = 50 * time.Millisecond
	defer up.close()
	var replicas [2]*broker
	var clients [2]rbv1.BrokerServiceClient
	for i := range replicas {
		b, err := startBroker(ctx, s.brokerBin, brokerOptions{extra: flags})
		if err != nil {
			return row, err
		}
		defer b.stop(10 * time.Second)
		c, conn, err := brokerClient(b.addr)
		if err != nil {
			return row, err
		}
		defer conn.Close()
		replicas[i], clients[i] = b, c
	}

	// SIGKILL replica 0 once a quarter of the tasks were sent: started
	// first, it is most likely River's leader, the harder case (the
	// survivor takes the lease over before it rescues anything).
	start := time.Now()
	var killedAt time.Time
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for up.sends.Load() < int64(n/4) && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		_ = replicas[0].cmd.Process.Kill()
		killedAt = time.Now()
		row.SentAtKill = up.distinct()
	}()
	var next, failed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				req := &rbv1.CreateTaskRequest{
					TaskId:  "k" + strconv.Itoa(i),
					Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.url + "/?i=" + strconv.Itoa(i)}},
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := clients[i%2].CreateTask(cctx, req)
				if err != nil && i%2 == 0 {
					_, err = clients[1].CreateTask(cctx, req) // the killed replica: again on the survivor
				}
				cancel()
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("CreateTask of task %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	<-killed
	<-replicas[0].exited
	if firstErr != nil {
		return row, fmt.Errorf("%d creates failed, the first: %w", failed.Load(), firstErr)
	}
	up.waitAccepted(ctx, n, 2*time.Minute)
	sent, dup := up.accepted()
	row.Sent, row.Dup = len(sent), dup
	up.mu.Lock()
	row.KeyMismatch = up.keyMismatch
	up.mu.Unlock()
	var last time.Time
	for _, t := range sent {
		last = later(last, t)
	}
	row.KillToLast, row.Total = last.Sub(killedAt), last.Sub(start)
	// An accepted send is recorded on its task just after: wait for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		done, err := countTasks(ctx, clients[1], rbv1.TaskState_TASK_STATE_SUCCEEDED)
		if err != nil {
			return row, err
		}
		row.Succeeded = done
		if done >= n || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if err := exitedDuring(replicas[1:]); err != nil {
		return row, err
	}
	if ctx.Err() != nil {
		return row, errors.New("the run's time was up")
	}
	row.Measured = true
	return row, nil
}
