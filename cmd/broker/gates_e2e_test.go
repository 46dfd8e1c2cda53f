package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// floodHosts is how many distinct hosts TestClosedGateOutlastsAHostFlood
// reports: past the default gate bound (10,000 per tenant), as in the
// issue's repro.
const floodHosts = 12_000

// TestClosedGateOutlastsAHostFlood (issue 17, defect 4): a gate closed for
// an hour by the upstream's Retry-After used to reopen after 10,000
// distinct-host ClassifyResponse reports (the gate bound evicted the gate
// that freed soonest: the closed one, when the flood's hints were longer),
// and the next Execute reached the upstream. A bound never evicts a closed
// gate now: the flood's new gates go untracked once the tenant is full,
// and the next Execute ends at the gate without reaching the upstream.
func TestClosedGateOutlastsAHostFlood(t *testing.T) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(up.Close)
	metricsAddr := freePort(t)
	p := startProc(t, "--allow-destinations", "127.0.0.1/32", "--metrics-listen", metricsAddr)
	ctx := context.Background()
	first, err := p.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 || first.GetResponse().GetStatusCode() != http.StatusTooManyRequests {
		t.Fatalf("first Execute: %d upstream hits, status %d; want 1 and 429", hits.Load(), first.GetResponse().GetStatusCode())
	}

	// The flood: distinct hosts, each closed for two hours (longer than
	// the upstream's gate, so that "soonest to free" would pick it).
	var wg sync.WaitGroup
	const workers = 8
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < floodHosts; i += workers {
				_, err := p.client.ClassifyResponse(ctx, &rbv1.ClassifyResponseRequest{
					Url: "https://h" + strconv.Itoa(i) + ".example/", StatusCode: http.StatusTooManyRequests,
					Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "7200"}},
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	second, err := p.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("after %d distinct hosts, the next Execute reached the upstream (%d hits, outcome %s): the closed gate reopened",
			floodHosts, n, second.GetOutcome())
	}
	if len(second.GetAttempts()) != 0 || second.GetRetryAfter().AsDuration() <= 0 {
		t.Fatalf("second Execute: %d attempts, retry_after %s; want none sent and the gate's retry_after",
			len(second.GetAttempts()), second.GetRetryAfter().AsDuration())
	}
	// The flood's gates past the bound were counted, and logged once.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var untracked float64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "retrybroker_gates_untracked_total "); ok {
			if untracked, err = strconv.ParseFloat(v, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if untracked < floodHosts-10_000 {
		t.Errorf("retrybroker_gates_untracked_total = %v, want at least %d", untracked, floodHosts-10_000)
	}
	if n := strings.Count(p.logs.String(), "gate bound reached"); n != 1 {
		t.Errorf("the untracked gates were logged %d times, want once", n)
	}
}
