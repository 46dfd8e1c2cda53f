package suite

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// ParkedParams sizes the parked-calls scenario.
type ParkedParams struct {
	// Calls are the numbers of concurrent parked Execute calls.
	Calls []int
	// Conns is the number of gRPC connections the calls are spread over
	// (a connection carries at most 4096 concurrent streams).
	Conns int
	// Hold is how long the upstream keeps answering 503; zero picks
	// 2.5 s + 0.3 ms per call.
	Hold time.Duration
	// Settle is the pause after the warm-up, before the first sample.
	Settle time.Duration
}

// memSample is one reading of the broker's memory and goroutines.
type memSample struct {
	RSS        int64   // VmRSS, bytes
	HeapInuse  float64 // go_memstats_heap_inuse_bytes
	StackInuse float64 // go_memstats_stack_inuse_bytes
	Goroutines float64 // go_goroutines
	Waiting    float64 // retrybroker_calls_waiting, all causes
	InFlight   float64 // retrybroker_calls_in_flight
}

// ParkedResult is one size of the scenario.
type ParkedResult struct {
	Calls int
	// Before, Parked and After are sampled before the calls, while they
	// are parked, and after they have all finished.
	Before, Parked, After memSample
	// Succeeded counts calls that ended with a 200 after the hold.
	Succeeded int
	Errors    int
	// IssueTime is how long it took until every call was parked.
	IssueTime time.Duration
	FirstErr  string
}

// HeapPerCall is the Go heap in use per parked call, in bytes.
func (r ParkedResult) HeapPerCall() float64 {
	if r.Parked.Waiting <= 0 {
		return math.NaN()
	}
	return (r.Parked.HeapInuse - r.Before.HeapInuse) / r.Parked.Waiting
}

// GoMemPerCall is the Go heap and goroutine stacks in use per parked
// call, in bytes: what the parked calls hold.
func (r ParkedResult) GoMemPerCall() float64 {
	if r.Parked.Waiting <= 0 {
		return math.NaN()
	}
	return (r.Parked.HeapInuse + r.Parked.StackInuse - r.Before.HeapInuse - r.Before.StackInuse) / r.Parked.Waiting
}

// RSSPerCall is the resident memory per parked call, in bytes.
func (r ParkedResult) RSSPerCall() float64 {
	if r.Parked.Waiting <= 0 {
		return math.NaN()
	}
	return float64(r.Parked.RSS-r.Before.RSS) / r.Parked.Waiting
}

// GoroutinesPerCall is the extra goroutines per parked call.
func (r ParkedResult) GoroutinesPerCall() float64 {
	if r.Parked.Waiting <= 0 {
		return math.NaN()
	}
	return (r.Parked.Goroutines - r.Before.Goroutines) / r.Parked.Waiting
}

func (s *suite) parkedRun(ctx context.Context, p ParkedParams) ([]ParkedResult, error) {
	var out []ParkedResult
	for _, n := range p.Calls {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		s.logf("parked: %d calls", n)
		r, err := s.parkedOne(ctx, p, n)
		if err != nil {
			return out, fmt.Errorf("%d calls: %w", n, err)
		}
		s.logf("parked: %d calls: heap+stacks %.0f B/call, heap %.0f B/call, RSS %.0f B/call, goroutines %.0f -> %.0f -> %.0f, waiting %.0f after %v, ok %d, errors %d %s",
			n, r.GoMemPerCall(), r.HeapPerCall(), r.RSSPerCall(), r.Before.Goroutines, r.Parked.Goroutines, r.After.Goroutines, r.Parked.Waiting, r.IssueTime, r.Succeeded, r.Errors, r.FirstErr)
		out = append(out, r)
	}
	return out, nil
}

// holdUpstream answers 503 with Retry-After (whole seconds until release,
// rounded up) until release, then 200. Keep-alives are off, so that no
// idle pooled connection (and its goroutines) outlives the calls.
type holdUpstream struct {
	srv     *http.Server
	url     string
	release atomic.Int64 // Unix nanoseconds
	held    atomic.Int64
	served  atomic.Int64
}

func startHoldUpstream(release time.Time) (*holdUpstream, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return nil, err
	}
	u := &holdUpstream{url: "http://" + lis.Addr().String()}
	u.release.Store(release.UnixNano())
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	u.srv.SetKeepAlivesEnabled(false)
	go func() { _ = u.srv.Serve(lis) }()
	return u, nil
}

func (u *holdUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/warm" {
		if wait := time.Until(time.Unix(0, u.release.Load())); wait > 0 {
			u.held.Add(1)
			w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	u.served.Add(1)
	_, _ = io.WriteString(w, `{"ok":true}`)
}

func (s *suite) sample(b *broker) (memSample, error) {
	m, err := b.metrics()
	if err != nil {
		return memSample{}, err
	}
	rss, err := b.rssBytes()
	if err != nil {
		return memSample{}, err
	}
	return memSample{
		RSS: rss, HeapInuse: m["go_memstats_heap_inuse_bytes"], StackInuse: m["go_memstats_stack_inuse_bytes"], Goroutines: m["go_goroutines"],
		Waiting: m["retrybroker_calls_waiting"], InFlight: m["retrybroker_calls_in_flight"],
	}, nil
}

// parkedOne starts a broker, warms its connections, samples it, then
// issues n Execute calls at once against an upstream that holds them with
// 503 + Retry-After until a release time: the first answers close the
// host's cooldown gate, so every call parks (in a hint or cooldown wait).
// It samples while all are parked, and again after they have finished.
func (s *suite) parkedOne(ctx context.Context, p ParkedParams, n int) (ParkedResult, error) {
	res := ParkedResult{Calls: n}
	b, err := startBroker(ctx, s.brokerBin, brokerOptions{metrics: true})
	if err != nil {
		return res, err
	}
	defer b.stop(5 * time.Second)
	hold := p.Hold
	if hold <= 0 {
		hold = 2500*time.Millisecond + time.Duration(n)*300*time.Microsecond
	}
	conns := max(p.Conns, (n+3999)/4000)
	var clients []rbv1.BrokerServiceClient
	for range conns {
		cl, conn, err := brokerClient(b.addr)
		if err != nil {
			return res, err
		}
		defer conn.Close()
		clients = append(clients, cl)
	}
	// The upstream is created with a release time far enough away; the
	// warm-up path is never held.
	up, err := startHoldUpstream(time.Now().Add(time.Hour))
	if err != nil {
		return res, err
	}
	defer up.srv.Close()

	// Warm up: every connection carries calls, the runtime settles.
	warm := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.url + "/warm"}}
	for i := range 20 * conns {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := clients[i%conns].Execute(cctx, warm, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	time.Sleep(p.Settle) // let the runtime settle (GC, closed connections)
	// The baseline is the quietest of a few samples: connections of the
	// warm-up may still be closing.
	for i := range 5 {
		m, err := s.sample(b)
		if err != nil {
			return res, err
		}
		if i == 0 || m.Goroutines < res.Before.Goroutines {
			res.Before = m
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A primer call gets the first 503 and closes the host's cooldown gate
	// until the release; then the other n-1 calls come and park on the
	// closed gate without reaching the upstream.
	release := time.Now().Add(hold)
	up.release.Store(release.UnixNano())
	started := time.Now()
	cctx, cancel := context.WithTimeout(ctx, hold+60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var ok, errs atomic.Int64
	var firstErr atomic.Value
	call := func(i int) {
		req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.url + "/items/" + strconv.Itoa(i)}}
		resp, err := clients[i%conns].Execute(cctx, req)
		switch {
		case err != nil:
			errs.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		case resp.GetResponse().GetStatusCode() == 200:
			ok.Add(1)
		default:
			errs.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d, outcome %v", resp.GetResponse().GetStatusCode(), resp.GetOutcome()))
		}
	}
	wg.Go(func() { call(0) })
	for {
		m, err := s.sample(b)
		if err == nil && m.Waiting >= 1 {
			break
		}
		if time.Until(release) < hold/2 {
			cancel()
			wg.Wait()
			return res, fmt.Errorf("the primer call did not park (upstream answered %d times)", up.held.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 1; i < n; i++ {
		wg.Go(func() { call(i) })
	}
	// Wait until all are parked (or the release is near), then sample.
	for {
		m, err := s.sample(b)
		if err == nil && m.Waiting >= float64(n) {
			res.IssueTime = time.Since(started)
			break
		}
		if time.Until(release) < 700*time.Millisecond {
			res.IssueTime = time.Since(started)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	res.Parked, err = s.sample(b)
	if err != nil {
		cancel()
		wg.Wait()
		return res, err
	}
	wg.Wait()
	res.Succeeded, res.Errors = int(ok.Load()), int(errs.Load())
	if v := firstErr.Load(); v != nil {
		res.FirstErr = v.(string)
	}
	// After: wait (bounded) for the goroutines to come back down.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res.After, err = s.sample(b)
		if err != nil {
			return res, err
		}
		if res.After.Goroutines <= res.Before.Goroutines || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return res, nil
}
