package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// herdUpstream is a provider with fixed windows of w from start and quota
// calls each. In the Retry-After style it announces nothing until it
// refuses, with a 429 and only Retry-After (whole seconds, rounded up, to
// the window's end); in the GitHub style every response carries
// x-ratelimit-remaining and x-ratelimit-reset (Unix seconds, rounded up),
// and a refusal is a 429 with a remaining count of 0. It counts per window
// the calls accepted and refused, and the early sends: calls that arrived
// before the latest time it said to wait for (a Retry-After, or the reset
// of a remaining count of 0).
type herdUpstream struct {
	*httptest.Server
	w        time.Duration
	quota    int
	announce bool

	mu       sync.Mutex
	start    time.Time
	hinted   time.Time // the latest time a Retry-After asked for
	accepted map[int]int
	refused  map[int]int
	early    map[int]int
	seen     map[string]bool // X-Call values that arrived
}

func newHerdUpstream(t *testing.T, w time.Duration, quota int, announce bool) *herdUpstream {
	u := &herdUpstream{
		w: w, quota: quota, announce: announce, start: time.Now(),
		accepted: map[int]int{}, refused: map[int]int{}, early: map[int]int{}, seen: map[string]bool{},
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		now := time.Now()
		u.mu.Lock()
		u.seen[r.Header.Get("X-Call")] = true
		win := int(now.Sub(u.start) / u.w)
		if now.Before(u.hinted) {
			u.early[win]++
		}
		end := u.start.Add(time.Duration(win+1) * u.w)
		ok := u.accepted[win] < u.quota
		if ok {
			u.accepted[win]++
		} else {
			u.refused[win]++
		}
		remaining := u.quota - u.accepted[win]
		var wait time.Time // what this response asks the caller to wait for
		if u.announce {
			reset := time.Unix(end.Add(time.Second-1).Unix(), 0)
			rw.Header().Set("x-ratelimit-limit", strconv.Itoa(u.quota))
			rw.Header().Set("x-ratelimit-remaining", strconv.Itoa(remaining))
			rw.Header().Set("x-ratelimit-reset", strconv.FormatInt(reset.Unix(), 10))
			if remaining == 0 {
				wait = reset
			}
		} else if !ok {
			secs := int((end.Sub(now) + time.Second - 1) / time.Second)
			rw.Header().Set("Retry-After", strconv.Itoa(secs))
			wait = now.Add(time.Duration(secs) * time.Second)
		}
		if wait.After(u.hinted) {
			u.hinted = wait
		}
		u.mu.Unlock()
		if !ok {
			rw.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// restart starts the provider's windows afresh at now.
func (u *herdUpstream) restart(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.start, u.hinted = now, time.Time{}
	clear(u.accepted)
	clear(u.refused)
	clear(u.early)
	clear(u.seen)
}

// sent reports whether a call with this X-Call value reached the provider.
func (u *herdUpstream) sent(call string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[call]
}

func (u *herdUpstream) counts(win int) (accepted, refused, early int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.accepted[win], u.refused[win], u.early[win]
}

// TestHundredCallersAtOnce (issue 18): 100 callers that all start at the
// same moment, more than the quota, against a provider the broker never saw
// (50 calls per 2 s window), in both styles: one that announces nothing
// until it refuses (Retry-After only) and one that announces its remaining
// count on every response (GitHub's headers). Callers honour the broker's
// retry_after, with long deadlines (the end of the run, so the broker may
// hold calls) or short ones (3 s), through one broker on its memory store
// or three replicas on one Redis. The first window, where nothing is known,
// refuses at most a quarter of the quota when nothing is announced and at
// most one call when the quota is; every window after it at most one call,
// with no early send; and the quota is used.
func TestHundredCallersAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about a minute of real time")
	}
	const (
		window  = 2 * time.Second
		quota   = 50
		windows = 4
		callers = 100
	)
	type style struct {
		name     string
		announce bool
		provider string
	}
	retryAfter, github := style{"retry-after", false, ""}, style{"github", true, "github"}
	for _, tc := range []struct {
		style    style
		deadline time.Duration // 0: the end of the run
		replicas int           // 0: one broker on its memory store
	}{
		{retryAfter, 0, 0},
		{retryAfter, 3 * time.Second, 0},
		{github, 0, 0},
		{github, 3 * time.Second, 0},
		{retryAfter, 0, 3},
		{github, 3 * time.Second, 3},
	} {
		name := tc.style.name + "/long deadlines"
		if tc.deadline > 0 {
			name = tc.style.name + "/short deadlines"
		}
		if tc.replicas > 0 {
			name += "/3 replicas on Redis"
		}
		t.Run(name, func(t *testing.T) {
			up := newHerdUpstream(t, window, quota, tc.style.announce)
			var brokers []*brokerProc
			if tc.replicas == 0 {
				brokers = append(brokers, startProc(t, "--allow-destinations", "127.0.0.1/32"))
			} else {
				redisURL := redistest.Start(t)
				for range tc.replicas {
					brokers = append(brokers, startProc(t, "--redis", redisURL, "--allow-destinations", "127.0.0.1/32"))
				}
				for _, b := range brokers {
					b.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
				}
			}
			start := time.Now().Add(100 * time.Millisecond)
			up.restart(start)
			end := start.Add(windows * window)
			var wg sync.WaitGroup
			var mu sync.Mutex
			outcomes := map[rbv1.Outcome]int{}
			var rpcErrs []error
			heldToDeadline, cutInFlight := 0, 0 // calls that ended at their deadline without a send, and with one
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					b := brokers[c%len(brokers)]
					time.Sleep(time.Until(start)) // all at once
					for n := 0; time.Now().Before(end); n++ {
						call := strconv.Itoa(c) + "-" + strconv.Itoa(n)
						d := end
						if short := time.Now().Add(tc.deadline); tc.deadline > 0 && short.Before(end) {
							d = short
						}
						ctx, cancel := context.WithDeadline(context.Background(), d)
						resp, err := b.client.Execute(ctx, &rbv1.ExecuteRequest{
							Request: &rbv1.HttpRequest{
								Url: up.URL + "/api", Headers: []*rbv1.HttpHeader{{Name: "X-Call", Value: call}},
							},
							Provider: tc.style.provider,
						})
						cancel()
						mu.Lock()
						switch {
						case status.Code(err) == codes.DeadlineExceeded:
							// The caller's deadline cut an attempt in flight
							// (on a loaded machine, a slow answer), or the
							// broker held the call to its deadline unsent.
							switch {
							case !time.Now().Before(end.Add(-100 * time.Millisecond)):
							case up.sent(call):
								cutInFlight++
							default:
								heldToDeadline++
							}
						case err != nil:
							if time.Now().Before(end.Add(-100 * time.Millisecond)) {
								rpcErrs = append(rpcErrs, err)
							}
						default:
							outcomes[resp.GetOutcome()]++
						}
						mu.Unlock()
						if ra := resp.GetRetryAfter(); ra != nil {
							time.Sleep(min(ra.AsDuration(), time.Until(end)))
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("outcomes %v; cut in flight by the caller's deadline: %d", outcomes, cutInFlight)
			if len(rpcErrs) > 0 {
				t.Errorf("%d calls failed as RPCs before the end of the run, first: %v", len(rpcErrs), rpcErrs[0])
			}
			if heldToDeadline > 0 {
				t.Errorf("%d calls were held to their deadline and never sent: a held call must end (GATE_CLOSED with a retry_after) while it can still be told", heldToDeadline)
			}
			firstMax := quota / 4
			if tc.style.announce {
				firstMax = 1
			}
			total := 0
			for win := range windows {
				acc, ref, early := up.counts(win)
				t.Logf("window %d: %d accepted, %d refused, %d early", win, acc, ref, early)
				switch {
				case win == 0 && ref > firstMax:
					t.Errorf("the first window refused %d calls, want at most %d", ref, firstMax)
				case win > 0 && ref > 1:
					t.Errorf("window %d refused %d calls, want at most 1 after the first window", win, ref)
				}
				if win > 0 && early > 0 {
					t.Errorf("window %d: %d calls sent before the provider said they could be", win, early)
				}
				if win > 0 && win < windows-1 {
					total += acc
				}
			}
			// The windows between the first and the last are used.
			if want := quota * (windows - 2) * 95 / 100; total < want {
				t.Errorf("windows 1 to %d accepted %d calls, want at least %d (95%% of their quota)", windows-2, total, want)
			}
		})
	}
}
