package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/proctest"
)

// dialsDuring connects to a broker started with args through a dialer that
// counts its dials, keeps one Execute call in flight to an upstream that
// answers after hold, sends a Classify call every 100 ms meanwhile, and
// returns the number of connections the client opened and the outcome of
// the call in flight.
func dialsDuring(t *testing.T, hold time.Duration, args ...string) (int32, rbv1.Outcome) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	p := startProc(t, append([]string{"--allow-destinations", "127.0.0.1/32"}, args...)...)
	var dials atomic.Int32
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rbv1.NewBrokerServiceClient(conn)
	classify := func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := client.ClassifyResponse(ctx, &rbv1.ClassifyResponseRequest{StatusCode: 503}); err != nil {
			t.Errorf("ClassifyResponse: %v", err)
		}
	}
	classify() // connected before the call in flight starts
	type result struct {
		outcome rbv1.Outcome
		err     error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), hold+20*time.Second)
		defer cancel()
		r, err := client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/slow"}})
		done <- result{r.GetOutcome(), err}
	}()
	deadline := time.After(hold + time.Second)
	for {
		select {
		case <-deadline:
			r := <-done
			if r.err != nil {
				t.Fatalf("the call in flight failed: %v", r.err)
			}
			return dials.Load(), r.outcome
		case <-time.After(100 * time.Millisecond):
			classify()
		}
	}
}

// TestMaxConnectionAgeRebalances: with --max-connection-age 1s the broker
// sends GOAWAY to the client's connection after about a second; the client
// reconnects for its next calls, and the call in flight on the old
// connection (3 s, within the grace) finishes. Without the flag, the
// client keeps its one connection.
func TestMaxConnectionAgeRebalances(t *testing.T) {
	const hold = 3 * time.Second
	dials, outcome := dialsDuring(t, hold, "--max-connection-age", "1s", "--max-connection-age-grace", "30s")
	if outcome != rbv1.Outcome_OUTCOME_SUCCESS {
		t.Errorf("the call in flight across the connection's age ended %s, want success", outcome)
	}
	if dials < 2 {
		t.Errorf("client dialled %d times in %v with --max-connection-age 1s, want at least 2 (a reconnect after GOAWAY)", dials, hold)
	}
	dials, _ = dialsDuring(t, hold)
	if dials != 1 {
		t.Errorf("without --max-connection-age the client dialled %d times, want 1", dials)
	}
}

// TestMaxConnectionAgeFlagsRefuseNegative: a negative age or grace is a
// usage error.
func TestMaxConnectionAgeFlagsRefuseNegative(t *testing.T) {
	for _, args := range [][]string{{"--max-connection-age", "-1s"}, {"--max-connection-age-grace", "-1s"}} {
		if _, err := parseFlags(args, &proctest.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
