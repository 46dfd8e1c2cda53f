package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// herdUpstream is a provider that announces nothing until it refuses:
// fixed windows of w from start, quota calls each, then a 429 with only
// Retry-After (whole seconds, rounded up, to the window's end). It counts
// per window the calls accepted and refused, and the early sends: calls
// that arrived before the latest time its Retry-After asked for.
type herdUpstream struct {
	*httptest.Server
	w     time.Duration
	quota int

	mu       sync.Mutex
	start    time.Time
	hinted   time.Time // the latest time a Retry-After asked for
	accepted map[int]int
	refused  map[int]int
	early    map[int]int
}

func newHerdUpstream(t *testing.T, w time.Duration, quota int) *herdUpstream {
	u := &herdUpstream{w: w, quota: quota, start: time.Now(), accepted: map[int]int{}, refused: map[int]int{}, early: map[int]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		now := time.Now()
		u.mu.Lock()
		win := int(now.Sub(u.start) / u.w)
		if now.Before(u.hinted) {
			u.early[win]++
		}
		ok := u.accepted[win] < u.quota
		var secs int
		if ok {
			u.accepted[win]++
		} else {
			u.refused[win]++
			end := u.start.Add(time.Duration(win+1) * u.w)
			secs = int((end.Sub(now) + time.Second - 1) / time.Second)
			if h := now.Add(time.Duration(secs) * time.Second); h.After(u.hinted) {
				u.hinted = h
			}
		}
		u.mu.Unlock()
		if ok {
			return
		}
		rw.Header().Set("Retry-After", strconv.Itoa(secs))
		rw.WriteHeader(http.StatusTooManyRequests)
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
}

func (u *herdUpstream) counts(win int) (accepted, refused, early int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.accepted[win], u.refused[win], u.early[win]
}

// TestHundredCallersAtOnce (issue 18): 100 callers that all start at the
// same moment, more than the quota, against a provider the broker never saw
// that announces nothing until it refuses (50 calls per 2 s window,
// Retry-After only), through one broker on its memory store. Callers honour
// the broker's retry_after. With long deadlines (the end of the run, so the
// broker may hold calls) and short ones (3 s): the first window, where
// nothing is known, refuses at most a quarter of the quota; every window
// after it at most one call, with no early send; and the quota is used.
func TestHundredCallersAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 20 s of real time")
	}
	const (
		window  = 2 * time.Second
		quota   = 50
		windows = 4
		callers = 100
	)
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: the end of the run
	}{{"long deadlines", 0}, {"short deadlines", 3 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			up := newHerdUpstream(t, window, quota)
			b := startProc(t, "--allow-destinations", "127.0.0.1/32")
			start := time.Now().Add(100 * time.Millisecond)
			up.restart(start)
			end := start.Add(windows * window)
			var wg sync.WaitGroup
			var mu sync.Mutex
			outcomes := map[rbv1.Outcome]int{}
			var rpcErrs []error
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Until(start)) // all at once
					for time.Now().Before(end) {
						d := end
						if short := time.Now().Add(tc.deadline); tc.deadline > 0 && short.Before(end) {
							d = short
						}
						ctx, cancel := context.WithDeadline(context.Background(), d)
						resp, err := b.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/api"}})
						cancel()
						mu.Lock()
						if err != nil {
							if time.Now().Before(end.Add(-100 * time.Millisecond)) {
								rpcErrs = append(rpcErrs, err)
							}
						} else {
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
			t.Logf("outcomes %v", outcomes)
			if len(rpcErrs) > 0 {
				t.Errorf("%d calls failed as RPCs before the end of the run, first: %v", len(rpcErrs), rpcErrs[0])
			}
			total := 0
			for win := range windows {
				acc, ref, early := up.counts(win)
				t.Logf("window %d: %d accepted, %d refused, %d early", win, acc, ref, early)
				switch {
				case win == 0 && ref > quota/4:
					t.Errorf("the first window refused %d calls, want at most %d (a quarter of the quota)", ref, quota/4)
				case win > 0 && ref > 1:
					t.Errorf("window %d refused %d calls, want at most 1 after the first window", win, ref)
				}
				if win > 0 && early > 0 {
					t.Errorf("window %d: %d calls sent before the provider's Retry-After", win, early)
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
