package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/admin"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// windowUpstream is a provider that announces nothing until it refuses:
// fixed windows of length w starting at start, quota calls each, and a 429
// with only Retry-After (whole seconds up to the next window) beyond the
// quota. It counts accepted and refused calls per window.
type windowUpstream struct {
	*httptest.Server
	start time.Time
	w     time.Duration
	quota int

	mu       sync.Mutex
	accepted map[int]int
	refused  map[int]int
	events   []string
}

func newWindowUpstream(t *testing.T, w time.Duration, quota int) *windowUpstream {
	u := &windowUpstream{start: time.Now(), w: w, quota: quota, accepted: map[int]int{}, refused: map[int]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		now := time.Now()
		win := int(now.Sub(u.start) / u.w)
		u.mu.Lock()
		ok := u.accepted[win] < u.quota
		if ok {
			u.accepted[win]++
		} else {
			u.refused[win]++
		}
		u.events = append(u.events, fmt.Sprintf("%d+%dms %v", win, now.Sub(u.start.Add(time.Duration(win)*u.w)).Milliseconds(), ok))
		u.mu.Unlock()
		if ok {
			return
		}
		end := u.start.Add(time.Duration(win+1) * u.w)
		secs := int((end.Sub(now) + time.Second - 1) / time.Second)
		rw.Header().Set("Retry-After", strconv.Itoa(secs))
		rw.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *windowUpstream) counts(win int) (accepted, refused int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.accepted[win], u.refused[win]
}

// TestTwoBrokersLearnARetryAfterOnlyQuota (issue #11): two broker processes
// sharing one Redis, six callers, a provider that says nothing until it
// refuses (quota 10 per 2 s window, Retry-After only). Reacting to refusals
// alone let callers − 1 calls per window be refused; with learned quotas,
// after the first window (where nothing can be known) at most one call per
// window is refused, and the windows' quotas are used.
func TestTwoBrokersLearnARetryAfterOnlyQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 12 s of real time")
	}
	const (
		window  = 2 * time.Second
		quota   = 10
		windows = 6
	)
	up := newWindowUpstream(t, window, quota)
	adminAddr := freePort(t)
	var brokers []*brokerProc
	if os.Getenv("LEARNING_MEM") != "" {
		b := startProc(t, "--allow-destinations", "127.0.0.1/32", "--admin-listen", adminAddr)
		brokers = []*brokerProc{b, b}
	} else {
		redisURL := redistest.Start(t)
		brokers = []*brokerProc{
			startProc(t, "--redis", redisURL, "--allow-destinations", "127.0.0.1/32", "--admin-listen", adminAddr),
			startProc(t, "--redis", redisURL, "--allow-destinations", "127.0.0.1/32"),
		}
	}
	// Restart the provider's windows now that both brokers are up.
	up.mu.Lock()
	up.start = time.Now()
	up.mu.Unlock()
	deadline := up.start.Add(windows * window)
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := brokers[c%2]
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithDeadline(context.Background(), deadline)
				_, err := b.client.Execute(ctx, &rbv1.ExecuteRequest{
					Request:   &rbv1.HttpRequest{Url: up.URL + "/api"},
					Overrides: &rbv1.ExecuteOverrides{MaxRetries: new(uint32)},
				})
				cancel()
				if err != nil && ctx.Err() == nil {
					t.Errorf("Execute: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if os.Getenv("LEARNING_TRACE") != "" {
		for _, e := range up.events {
			t.Log(e)
		}
	}
	// The admin view shows what the replicas learned.
	resp, err := http.Get("http://" + adminAddr + AdminGatePath + "?tenant=dev&host=" + strings.TrimPrefix(up.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	var view admin.GateJSON
	err = json.NewDecoder(resp.Body).Decode(&view)
	_ = resp.Body.Close()
	if err != nil || view.Learning == nil || view.Learning.LearnedQuota == nil || *view.Learning.LearnedQuota != quota {
		t.Errorf("admin view %+v (%v), want a learned quota of %d", view, err, quota)
	}
	for win := range windows {
		acc, ref := up.counts(win)
		t.Logf("window %d: %d accepted, %d refused", win, acc, ref)
		if win == 0 {
			continue // nothing is known before the first answer
		}
		if ref > 1 {
			t.Errorf("window %d: %d refused calls, want at most 1 after the first window", win, ref)
		}
		if win >= 2 && win < windows-1 && acc < quota*8/10 {
			t.Errorf("window %d: only %d of %d quota used", win, acc, quota)
		}
	}
}
