package suite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/retrybroker/retrybroker/bench/fakeprovider"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tasks/pgtest"
)

// TasksParams sizes the tasks scenario (issue 20's targets): deferred
// calls on the embedded SQLite store, through real broker processes.
type TasksParams struct {
	// Callers are the concurrent CreateTask callers of the creation rows.
	Callers int
	// Created is the number of tasks created (due in an hour) for the
	// creation rate and the memory row (the 100,000).
	Created int
	// Dispatched is the number of tasks, all due at the same moment, of
	// the dispatch rate row.
	Dispatched int
	// Lag is the number of tasks of the dispatch lag row, due one by one
	// over LagSpread (half of them more than River's 5 s scheduler
	// interval ahead).
	Lag       int
	LagSpread time.Duration
	// Reopen is the number of tasks waiting on one closed gate.
	Reopen int
	// Citizenship is the number of tasks on one gate of a fake provider
	// with a quota of CitizenQuota per CitizenWindow (the 10,000,
	// 50 per 2 s).
	Citizenship   int
	CitizenQuota  int
	CitizenWindow time.Duration
	// Postgres runs the creation, dispatch and lag rows on PostgreSQL too,
	// and the failover row: Kill tasks on two replicas, one of them killed
	// (TasksKill).
	Postgres bool
	Kill     int
}

// tasksParams returns the scenario's sizes for a full or quick run.
func tasksParams(quick bool) TasksParams {
	if quick {
		return TasksParams{
			Callers: 16, Created: 1_000, Dispatched: 300, Lag: 30, LagSpread: 7 * time.Second, Reopen: 20,
			Citizenship: 200, CitizenQuota: 50, CitizenWindow: 2 * time.Second, Postgres: true, Kill: 200,
		}
	}
	return TasksParams{
		Callers: 32, Created: 100_000, Dispatched: 10_000, Lag: 200, LagSpread: 11 * time.Second, Reopen: 100,
		Citizenship: 10_000, CitizenQuota: 50, CitizenWindow: 2 * time.Second, Postgres: true, Kill: 2_000,
	}
}

// TasksRows are the rows the scenario measures on each store.
type TasksRows struct {
	// Store names the store: "SQLite" or "PostgreSQL".
	Store string
	// CreateRate is CreateTask calls per second (Callers concurrent
	// callers, Created tasks); ClassifyRate is the same callers' rate of
	// ClassifyResponse on the same broker, an RPC that stores nothing
	// (the baseline).
	CreateRate, ClassifyRate float64
	CreateErrors             int
	// RSSBefore and RSSAfter are the broker's RSS before the first create
	// and after Created tasks were stored (all SCHEDULED an hour ahead).
	RSSBefore, RSSAfter int64
	// DispatchRate is tasks sent per second, from their common due time
	// to the last send; DispatchLost counts tasks never sent within the
	// bound; DispatchDup counts sends beyond one per task.
	DispatchRate float64
	DispatchLost int
	DispatchDup  int
	// LagP50, LagP99 and LagMax are send time minus not_before.
	LagP50, LagP99, LagMax time.Duration
	LagLost                int
	// The rows that ran to the end; a row that did not is not judged.
	CreateMeasured, DispatchMeasured, LagMeasured bool
}

// TasksReport is the tasks scenario's result: the rows of both stores
// (SQLite's embedded), and the reopen and citizenship rows (SQLite).
type TasksReport struct {
	Params TasksParams
	TasksRows
	// Postgres is the same rows on PostgreSQL; nil when it did not run.
	Postgres *TasksRows
	// Kill is the failover row (PostgreSQL); nil when it did not run.
	Kill *TasksKill
	// ReopenP50 ... are send time minus the gate's reopening (a refusal's
	// arrival plus its Retry-After).
	ReopenP50, ReopenP99, ReopenMax time.Duration
	ReopenLost                      int
	// Citizen is what the fake provider saw of the citizenship row;
	// CitizenSucceeded counts tasks SUCCEEDED at its end, CitizenWindows
	// the windows it took.
	Citizen          fakeprovider.Stats
	CitizenSucceeded int
	CitizenWindows   int
	// The rows that ran to the end; a row that did not is not judged.
	ReopenMeasured, CitizenMeasured bool
}

// CitizenLater is the citizenship row's windows after the first, up to
// the last full one (the one before the window of the last send).
func (r *TasksReport) CitizenLater() fakeprovider.Stats {
	st := r.Citizen.From(1)
	if n := r.CitizenWindows - 2; n >= 0 && n < len(st.Windows) {
		st.Windows = st.Windows[:n]
		st.Accepted, st.Refused, st.Early = 0, 0, 0
		for _, w := range st.Windows {
			st.Accepted += w.Accepted
			st.Refused += w.Refused
			st.Early += w.Early
		}
	}
	return st
}

// taskUpstream is a loopback HTTP server that records when each path was
// first sent and how many times; before reopenAt it refuses with 429 and
// a Retry-After up to reopenAt (when refuse is set).
type taskUpstream struct {
	srv   *http.Server
	url   string
	mu    sync.Mutex
	first map[string]time.Time
	count map[string]int
	// refuse makes every request before the gate's reopening a 429; the
	// reopening is set by the first request (2 s later) and pushed to the
	// latest arrival plus its Retry-After.
	refuse   bool
	reopenAt time.Time
	sends    atomic.Int64
	// delay is how long each accepted request waits before its answer.
	delay time.Duration
	// idem is the Idempotency-Key of each key's first accepted send;
	// keyMismatch counts accepted sends without one or with another.
	idem        map[string]string
	keyMismatch int
}

func startTaskUpstream(refuse bool) (*taskUpstream, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return nil, err
	}
	u := &taskUpstream{first: map[string]time.Time{}, count: map[string]int{}, idem: map[string]string{}, refuse: refuse}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	u.url = "http://" + lis.Addr().String()
	go func() { _ = u.srv.Serve(lis) }()
	return u, nil
}

func (u *taskUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	u.sends.Add(1)
	u.mu.Lock()
	if u.refuse {
		if u.reopenAt.IsZero() {
			u.reopenAt = now.Add(2 * time.Second)
		}
		if now.Before(u.reopenAt) {
			ra := int(math.Ceil(u.reopenAt.Sub(now).Seconds()))
			// The broker's gate reopens ra seconds after this answer.
			u.reopenAt = later(u.reopenAt, now.Add(time.Duration(ra)*time.Second))
			u.mu.Unlock()
			w.Header().Set("Retry-After", strconv.Itoa(ra))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
	}
	key := r.URL.RawQuery
	if _, ok := u.first[key]; !ok {
		u.first[key] = now
		u.idem[key] = r.Header.Get(engine.DefaultIdempotencyKey)
	}
	if k := r.Header.Get(engine.DefaultIdempotencyKey); k == "" || k != u.idem[key] {
		u.keyMismatch++
	}
	u.count[key]++
	u.mu.Unlock()
	if u.delay > 0 {
		time.Sleep(u.delay)
	}
	w.WriteHeader(http.StatusOK)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// accepted returns the first accepted send of each key and the number of
// accepted sends beyond one per key.
func (u *taskUpstream) accepted() (map[string]time.Time, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	dup := 0
	for _, n := range u.count {
		dup += n - 1
	}
	return maps.Clone(u.first), dup
}

func (u *taskUpstream) close() { _ = u.srv.Close() }

// distinct is the number of keys sent so far.
func (u *taskUpstream) distinct() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.first)
}

// waitAccepted waits until n keys were accepted or the bound passes.
func (u *taskUpstream) waitAccepted(ctx context.Context, n int, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		u.mu.Lock()
		got := len(u.first)
		u.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// taskStore gives the broker flags of a fresh task store for a phase.
type taskStore func(ctx context.Context, phase string) ([]string, error)

// sqliteStore is a fresh SQLite file of the suite per phase.
func (s *suite) sqliteStore(_ context.Context, phase string) ([]string, error) {
	return []string{"--tasks-sqlite", filepath.Join(s.tmp, "tasks-"+phase+".db")}, nil
}

// tasksBroker starts a broker process with tasks on a fresh store of
// store; config is a --config file ("" for the dev tenant).
func (s *suite) tasksBroker(ctx context.Context, store taskStore, name, config string) (*broker, rbv1.BrokerServiceClient, func(), error) {
	flags, err := store(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := startBroker(ctx, s.brokerBin, brokerOptions{config: config, extra: flags})
	if err != nil {
		return nil, nil, nil, err
	}
	var client rbv1.BrokerServiceClient
	var closeConn func() error
	if config != "" {
		c, conn, err := tenantClient(b.addr)
		if err != nil {
			b.stop(5 * time.Second)
			return nil, nil, nil, err
		}
		client, closeConn = c, conn.Close
	} else {
		c, conn, err := brokerClient(b.addr)
		if err != nil {
			b.stop(5 * time.Second)
			return nil, nil, nil, err
		}
		client, closeConn = c, conn.Close
	}
	return b, client, func() { _ = closeConn(); b.stop(10 * time.Second) }, nil
}

// createTasks creates n tasks from callers concurrent callers; task i
// calls url + "/?i=" + i and is due at due(i). It returns the creation
// rate and the number of failed creates; the first failure is logged.
func (s *suite) createTasks(ctx context.Context, client rbv1.BrokerServiceClient, callers, n int, url string, due func(i int) time.Time) (float64, int) {
	var next, errs atomic.Int64
	var logged sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := client.CreateTask(cctx, &rbv1.CreateTaskRequest{
					NotBefore: timestamppb.New(due(i)),
					Execute:   &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: url + "/?i=" + strconv.Itoa(i)}},
				})
				cancel()
				if err != nil {
					errs.Add(1)
					logged.Do(func() { s.logf("tasks: CreateTask of task %d failed: %v", i, err) })
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), int(errs.Load())
}

// classifyRate is the rate of n ClassifyResponse calls from callers
// concurrent callers: the same RPC path as CreateTask, storing nothing.
func classifyRate(ctx context.Context, client rbv1.BrokerServiceClient, callers, n int) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && int(next.Add(1)) <= n {
				_, _ = client.ClassifyResponse(ctx, &rbv1.ClassifyResponseRequest{StatusCode: 200})
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// lagStats returns the p50, p99 and max of sent[k] - due[k], and how many
// keys of due were never sent.
func lagStats(due, sent map[string]time.Time) (p50, p99, maxLag time.Duration, lost int) {
	var lags []time.Duration
	for k, d := range due {
		at, ok := sent[k]
		if !ok {
			lost++
			continue
		}
		lags = append(lags, at.Sub(d))
	}
	if len(lags) == 0 {
		return 0, 0, 0, lost
	}
	slices.Sort(lags)
	return percentile(lags, 0.50), percentile(lags, 0.99), lags[len(lags)-1], lost
}

// tasksRows measures the rows every store has: the creation rate and the
// memory of stored tasks, the dispatch rate and the dispatch lag after
// not_before, each phase on a fresh store of store.
func (s *suite) tasksRows(ctx context.Context, p TasksParams, rep *TasksRows, store taskStore) []error {
	var errs []error

	// Creation rate and memory: Created tasks due in an hour.
	if err := func() error {
		b, client, stop, err := s.tasksBroker(ctx, store, "create", "")
		if err != nil {
			return err
		}
		defer stop()
		rep.ClassifyRate = classifyRate(ctx, client, p.Callers, max(p.Created/10, 1000))
		runtime.GC()
		time.Sleep(500 * time.Millisecond)
		if rep.RSSBefore, err = b.rssBytes(); err != nil {
			return err
		}
		hour := time.Now().Add(time.Hour)
		s.logf("tasks (%s): creating %d tasks from %d callers", rep.Store, p.Created, p.Callers)
		rep.CreateRate, rep.CreateErrors = s.createTasks(ctx, client, p.Callers, p.Created, "http://127.0.0.1:9", func(int) time.Time { return hour })
		time.Sleep(time.Second)
		if rep.RSSAfter, err = b.rssBytes(); err != nil {
			return err
		}
		rep.CreateMeasured = true
		return nil
	}(); err != nil {
		errs = append(errs, fmt.Errorf("creation: %w", err))
	}

	// Dispatch rate and lag after not_before.
	if err := func() error {
		up, err := startTaskUpstream(false)
		if err != nil {
			return err
		}
		defer up.close()
		_, client, stop, err := s.tasksBroker(ctx, store, "dispatch", "")
		if err != nil {
			return err
		}
		defer stop()
		// All due at one moment, after they are all created (at the
		// creation rate measured, with room to spare).
		createFor := time.Duration(float64(p.Dispatched) / max(rep.CreateRate, 100) * 1.5 * float64(time.Second))
		dueAt := time.Now().Add(createFor + 2*time.Second)
		s.logf("tasks (%s): %d tasks due at once", rep.Store, p.Dispatched)
		if _, n := s.createTasks(ctx, client, p.Callers, p.Dispatched, up.url, func(int) time.Time { return dueAt }); n > 0 {
			return fmt.Errorf("%d creates failed", n)
		}
		if time.Now().After(dueAt) {
			return errors.New("creating the tasks took longer than planned: the dispatch rate would be understated")
		}
		up.waitAccepted(ctx, p.Dispatched, time.Until(dueAt)+2*time.Minute)
		sent, dup := up.accepted()
		var last time.Time
		for _, at := range sent {
			last = later(last, at)
		}
		rep.DispatchLost, rep.DispatchDup = p.Dispatched-len(sent), dup
		if len(sent) > 0 {
			rep.DispatchRate = float64(len(sent)) / last.Sub(dueAt).Seconds()
		}
		rep.DispatchMeasured = true

		// Lag: tasks due one by one over LagSpread, from 1 s ahead.
		lagUp, err := startTaskUpstream(false)
		if err != nil {
			return err
		}
		defer lagUp.close()
		base := time.Now().Add(time.Second)
		due := map[string]time.Time{}
		step := p.LagSpread / time.Duration(max(p.Lag, 1))
		for i := range p.Lag {
			due["i="+strconv.Itoa(i)] = base.Add(time.Duration(i) * step).Truncate(time.Microsecond)
		}
		if _, n := s.createTasks(ctx, client, 4, p.Lag, lagUp.url, func(i int) time.Time { return due["i="+strconv.Itoa(i)] }); n > 0 {
			return fmt.Errorf("%d creates failed", n)
		}
		lagUp.waitAccepted(ctx, p.Lag, p.LagSpread+30*time.Second)
		sentLag, _ := lagUp.accepted()
		rep.LagP50, rep.LagP99, rep.LagMax, rep.LagLost = lagStats(due, sentLag)
		rep.LagMeasured = true
		return nil
	}(); err != nil {
		errs = append(errs, fmt.Errorf("dispatch: %w", err))
	}

	return errs
}

// tasksRun measures issue 20's targets on SQLite: the creation rate and
// the memory of stored tasks, the dispatch rate, the dispatch lag after
// not_before and after a gate's reopening, and quota citizenship of a
// task backlog on one gate.
func (s *suite) tasksRun(ctx context.Context, p TasksParams) (*TasksReport, error) {
	rep := &TasksReport{Params: p}
	rep.Store = "SQLite"
	errs := s.tasksRows(ctx, p, &rep.TasksRows, s.sqliteStore)

	// The same rows on PostgreSQL: one postgres (internal/tasks/pgtest:
	// Debian's, as a non-root user, on loopback, fsync off), a fresh
	// database per phase.
	if p.Postgres && ctx.Err() == nil {
		if err := func() error {
			dir := filepath.Join(s.tmp, "postgres")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			srv, err := pgtest.NewServer(dir)
			if err != nil {
				return err
			}
			defer func() { _ = srv.Close() }()
			rows := &TasksRows{Store: "PostgreSQL"}
			rep.Postgres = rows
			pgStore := func(ctx context.Context, _ string) ([]string, error) {
				url, err := srv.CreateDatabase(ctx)
				return []string{"--tasks-postgres", url}, err
			}
			errs := s.tasksRows(ctx, p, rows, pgStore)
			if p.Kill > 0 && ctx.Err() == nil {
				s.logf("tasks: failover, %d tasks on two replicas on PostgreSQL, one killed", p.Kill)
				k, err := s.tasksKillRow(ctx, p.Kill, pgStore)
				rep.Kill = &k
				if err != nil {
					errs = append(errs, fmt.Errorf("failover: %w", err))
				}
				s.logf("tasks: failover: %d of %d sent, %d SUCCEEDED, %d sent twice, last first send %s after the kill", k.Sent, k.Tasks, k.Succeeded, k.Dup, k.KillToLast.Round(time.Millisecond))
			}
			return errors.Join(errs...)
		}(); err != nil {
			errs = append(errs, fmt.Errorf("postgres: %w", err))
		}
	}
	// Lag after a gate's reopening: Reopen tasks at once on a gate closed
	// by a 2 s Retry-After, above the policy's 1 s max_delay, so they wait
	// as tasks (WAITING), not as parked calls.
	if err := func() error {
		cfg, err := s.writeBrokerConfig(ctx, brokerConfig{Name: "tasks-reopen", Policy: []string{"max_delay: 1s"}})
		if err != nil {
			return err
		}
		up, err := startTaskUpstream(true)
		if err != nil {
			return err
		}
		defer up.close()
		_, client, stop, err := s.tasksBroker(ctx, s.sqliteStore, "reopen", cfg)
		if err != nil {
			return err
		}
		defer stop()
		now := time.Now()
		if _, n := s.createTasks(ctx, client, 4, p.Reopen, up.url, func(int) time.Time { return now }); n > 0 {
			return fmt.Errorf("%d creates failed", n)
		}
		up.waitAccepted(ctx, p.Reopen, time.Minute)
		sent, _ := up.accepted()
		up.mu.Lock()
		reopen := up.reopenAt
		up.mu.Unlock()
		due := map[string]time.Time{}
		for i := range p.Reopen {
			due["i="+strconv.Itoa(i)] = reopen
		}
		rep.ReopenP50, rep.ReopenP99, rep.ReopenMax, rep.ReopenLost = lagStats(due, sent)
		rep.ReopenMeasured = true
		return nil
	}(); err != nil {
		errs = append(errs, fmt.Errorf("reopen: %w", err))
	}

	// Citizenship: a backlog on one gate of a Retry-After provider.
	if err := func() error {
		windows := p.Citizenship/p.CitizenQuota + 4
		prov, err := fakeprovider.Start(fakeprovider.Config{Style: fakeprovider.RetryAfter, Quota: p.CitizenQuota, Window: p.CitizenWindow, Windows: windows})
		if err != nil {
			return err
		}
		defer func() { _ = prov.Close() }()
		cfg, err := s.writeBrokerConfig(ctx, quotaBrokerConfig)
		if err != nil {
			return err
		}
		_, client, stop, err := s.tasksBroker(ctx, s.sqliteStore, "citizen", cfg)
		if err != nil {
			return err
		}
		defer stop()
		s.logf("tasks: %d tasks on one gate (quota %d per %s): about %s", p.Citizenship, p.CitizenQuota, p.CitizenWindow,
			time.Duration(windows)*p.CitizenWindow)
		// Created from window 0 on, all due at once.
		start := prov.WindowStart(0)
		time.Sleep(time.Until(start))
		now := time.Now()
		if _, n := s.createTasks(ctx, client, p.Callers, p.Citizenship, prov.URL(), func(int) time.Time { return now }); n > 0 {
			return fmt.Errorf("%d creates failed", n)
		}
		for ctx.Err() == nil && time.Now().Before(prov.End()) {
			if prov.Stats().Accepted >= p.Citizenship {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		rep.Citizen = prov.Stats()
		rep.CitizenWindows = 0
		for _, w := range rep.Citizen.Windows {
			if w.Accepted+w.Refused > 0 {
				rep.CitizenWindows = w.Index + 1
			}
		}
		// An accepted send is recorded on its task just after: wait for it.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			n, err := countTasks(ctx, client, rbv1.TaskState_TASK_STATE_SUCCEEDED)
			if err != nil {
				return err
			}
			rep.CitizenSucceeded = n
			if n >= p.Citizenship || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
		}
		rep.CitizenMeasured = true
		return nil
	}(); err != nil {
		errs = append(errs, fmt.Errorf("citizenship: %w", err))
	}
	return rep, errors.Join(errs...)
}

// countTasks counts the caller's tasks in state, page by page.
func countTasks(ctx context.Context, client rbv1.BrokerServiceClient, state rbv1.TaskState) (int, error) {
	n, tok := 0, ""
	for range 100_000 {
		resp, err := client.ListTasks(ctx, &rbv1.ListTasksRequest{State: state, PageSize: 1000, PageToken: tok})
		if err != nil {
			return n, err
		}
		n += len(resp.GetTasks())
		if tok = resp.GetNextPageToken(); tok == "" {
			return n, nil
		}
	}
	return n, errors.New("too many pages")
}

// tasksTargets are issue 20's targets on SQLite.
func (r *Report) tasksTargets() []Target {
	tr := r.Tasks
	if tr == nil {
		return nil
	}
	p := tr.Params
	growth := float64(tr.RSSAfter - tr.RSSBefore)
	later := tr.CitizenLater()
	judge := func(measured, ok bool) string {
		if !measured {
			return "n/a (did not run to the end)"
		}
		return yesNo(ok)
	}
	out := []Target{
		{fmt.Sprintf("tasks (SQLite): ≥ 2,000 tasks/s created (%d callers)", p.Callers), fmt.Sprintf("%.0f/s", tr.CreateRate), judge(tr.CreateMeasured, tr.CreateRate >= 2000 && tr.CreateErrors == 0)},
		{fmt.Sprintf("tasks (SQLite): ≥ 1,000 tasks/s dispatched to a loopback upstream (%d due at once)", p.Dispatched), fmt.Sprintf("%.0f/s, %d lost, %d duplicate sends", tr.DispatchRate, tr.DispatchLost, tr.DispatchDup), judge(tr.DispatchMeasured, tr.DispatchRate >= 1000 && tr.DispatchLost == 0)},
		{fmt.Sprintf("tasks (SQLite): dispatch lag p99 ≤ 100 ms after not_before (%d tasks over %s)", p.Lag, p.LagSpread), fmt.Sprintf("p50 %s, p99 %s, max %s, %d lost", fmtDur(tr.LagP50), fmtDur(tr.LagP99), fmtDur(tr.LagMax), tr.LagLost), judge(tr.LagMeasured, tr.LagP99 <= 100*time.Millisecond && tr.LagLost == 0)},
		{fmt.Sprintf("tasks (SQLite): dispatch lag p99 ≤ 100 ms after the gate reopens (%d tasks waiting)", p.Reopen), fmt.Sprintf("p50 %s, p99 %s, max %s, %d lost", fmtDur(tr.ReopenP50), fmtDur(tr.ReopenP99), fmtDur(tr.ReopenMax), tr.ReopenLost), judge(tr.ReopenMeasured, tr.ReopenP99 <= 100*time.Millisecond && tr.ReopenLost == 0)},
		{fmt.Sprintf("tasks (SQLite): %d stored tasks cost ≤ 32 MiB of RSS more than none", p.Created), fmtBytes(growth), judge(tr.CreateMeasured, growth <= 32<<20 && tr.CreateErrors == 0)},
		{fmt.Sprintf("tasks (SQLite): %d tasks on one gate (quota %d per %s) all succeed", p.Citizenship, p.CitizenQuota, p.CitizenWindow), fmt.Sprintf("%d succeeded", tr.CitizenSucceeded), judge(tr.CitizenMeasured, tr.CitizenSucceeded == p.Citizenship)},
		{"tasks (SQLite): ≤ 1 refused per window after the first", fmt.Sprintf("%.2f per window, at most %d", later.RefusedPerWindow(), later.MaxRefusedInAWindow()), judge(tr.CitizenMeasured, later.MaxRefusedInAWindow() <= 1)},
		{"tasks (SQLite): goodput ≥ 95% of the quota after the first window", fmt.Sprintf("%.1f%% over %d windows", 100*later.Goodput(), len(later.Windows)), judge(tr.CitizenMeasured && len(later.Windows) > 0, later.Goodput() >= 0.95)},
	}
	if pg := tr.Postgres; pg != nil {
		out = append(out,
			Target{fmt.Sprintf("tasks (PostgreSQL): dispatch lag p99 ≤ 100 ms after not_before (%d tasks over %s)", p.Lag, p.LagSpread), fmt.Sprintf("p50 %s, p99 %s, max %s, %d lost", fmtDur(pg.LagP50), fmtDur(pg.LagP99), fmtDur(pg.LagMax), pg.LagLost), judge(pg.LagMeasured, pg.LagP99 <= 100*time.Millisecond && pg.LagLost == 0)},
			Target{fmt.Sprintf("tasks (PostgreSQL): every one of %d tasks due at once sent, once", p.Dispatched), fmt.Sprintf("%.0f/s, %d lost, %d duplicate sends", pg.DispatchRate, pg.DispatchLost, pg.DispatchDup), judge(pg.DispatchMeasured, pg.DispatchLost == 0 && pg.DispatchDup == 0)},
		)
	}
	if k := tr.Kill; k != nil {
		out = append(out, Target{
			fmt.Sprintf("tasks (PostgreSQL): two replicas, one killed (SIGKILL) while dispatching: every one of %d tasks sent and SUCCEEDED, each send with its task's Idempotency-Key", k.Tasks),
			fmt.Sprintf("%d sent (%d lost), %d SUCCEEDED, %d sent twice, %d sends with another key", k.Sent, k.Tasks-k.Sent, k.Succeeded, k.Dup, k.KeyMismatch),
			judge(k.Measured, k.Sent == k.Tasks && k.Succeeded == k.Tasks && k.KeyMismatch == 0),
		})
	}
	return out
}

// TasksTable is the tasks scenario's table.
func (r *Report) TasksTable() string {
	tr := r.Tasks
	if tr == nil {
		return ""
	}
	p := tr.Params
	var b strings.Builder
	b.WriteString("| store | row | figure | baseline or bound |\n|---|---|---:|---|\n")
	rows := []*TasksRows{&tr.TasksRows}
	if tr.Postgres != nil {
		rows = append(rows, tr.Postgres)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | CreateTask, %d callers, %d tasks due in 1 h | %.0f/s (%d errors) | ClassifyResponse (stores nothing), same callers: %.0f/s (%.0f%%) |\n",
			r.Store, p.Callers, p.Created, r.CreateRate, r.CreateErrors, r.ClassifyRate, 100*r.CreateRate/max(r.ClassifyRate, 1))
		fmt.Fprintf(&b, "| %s | RSS with %d stored tasks | %s → %s (%+.1f MiB) | ≤ 32 MiB more |\n", r.Store, p.Created, fmtBytes(float64(r.RSSBefore)), fmtBytes(float64(r.RSSAfter)), float64(r.RSSAfter-r.RSSBefore)/(1<<20))
		fmt.Fprintf(&b, "| %s | dispatch, %d tasks due at once | %.0f/s (%d lost, %d duplicate sends) | ≥ 1,000/s (SQLite) |\n", r.Store, p.Dispatched, r.DispatchRate, r.DispatchLost, r.DispatchDup)
		fmt.Fprintf(&b, "| %s | lag after not_before, %d tasks over %s | p50 %s, p99 %s, max %s (%d lost) | p99 ≤ 100 ms |\n", r.Store, p.Lag, p.LagSpread, fmtDur(r.LagP50), fmtDur(r.LagP99), fmtDur(r.LagMax), r.LagLost)
	}
	if k := tr.Kill; k != nil {
		fmt.Fprintf(&b, "| PostgreSQL | failover: %d tasks created on two replicas, one killed (SIGKILL) after %d were sent, --tasks-rescue-after %s | %d sent (%d lost), %d SUCCEEDED on the survivor, %d sent twice (%d sends with another Idempotency-Key than their task's first); the last first send %s after the kill, %s after the first create | every task sent and SUCCEEDED, at least once, every send with its task's key |\n",
			k.Tasks, k.SentAtKill, k.RescueAfter, k.Sent, k.Tasks-k.Sent, k.Succeeded, k.Dup, k.KeyMismatch, fmtDur(k.KillToLast), fmtDur(k.Total))
	}
	fmt.Fprintf(&b, "| SQLite | lag after a gate reopens, %d tasks | p50 %s, p99 %s, max %s (%d lost) | p99 ≤ 100 ms |\n", p.Reopen, fmtDur(tr.ReopenP50), fmtDur(tr.ReopenP99), fmtDur(tr.ReopenMax), tr.ReopenLost)
	later := tr.CitizenLater()
	fmt.Fprintf(&b, "| SQLite | %d tasks on one gate, quota %d per %s (Retry-After) | %d succeeded in %d windows; after the first: %.2f refused per window (max %d), goodput %.1f%% | all succeed, ≤ 1 refused per window, goodput ≥ 95%% |\n",
		p.Citizenship, p.CitizenQuota, p.CitizenWindow, tr.CitizenSucceeded, tr.CitizenWindows, later.RefusedPerWindow(), later.MaxRefusedInAWindow(), 100*later.Goodput())
	return b.String()
}

// tasksSection writes the tasks section of the document.
func (r *Report) tasksSection(b *strings.Builder) {
	b.WriteString("## 9. Deferred calls (tasks)\n\n")
	b.WriteString("Issue 20's targets on the embedded SQLite store (`--tasks-sqlite`), run alone with `go run ./bench/cmd/benchsuite -only tasks`. " +
		"Each row runs a fresh broker process (built from `./cmd/broker`) on a fresh SQLite file, with loopback upstreams that record when each task was first sent. " +
		"The memory row's tasks are SCHEDULED an hour ahead: a task waiting for its time and one WAITING on a gate are the same row and River job. " +
		"The reopen row's policy has `max_delay: 1s` under a 2 s Retry-After, so its tasks wait as tasks, not as parked calls; its lag is from the gate's reopening (the latest refusal's arrival plus its Retry-After) to each task's send. " +
		"The citizenship row uses the fake provider of section 1 (Retry-After style) and the quota rows' policy. " +
		"The PostgreSQL rows run on one Debian `postgres` started by the suite (`internal/tasks/pgtest`: loopback, a fresh database per row, **fsync off**, so they measure the broker and River, not a disk), with the same flags otherwise. " +
		"The failover row runs two broker processes on one database: the tasks, due at once, are created on both (16 callers, alternating; a create that the kill cuts is made again on the survivor with the same task_id), the upstream answers each after 50 ms so that dispatches are in flight, and the replica started first (most likely River's leader) is killed with SIGKILL once a quarter of the tasks were sent; " +
		"with `--tasks-rescue-after 4s` (the shortest allowed; the default, 10 min, is a dispatch's job timeout) on both, the survivor takes River's leadership over and rescues the killed replica's running tasks, which are sent again with the same idempotency key.\n\n")
	b.WriteString(r.TasksTable())
	b.WriteString("\n")
}
