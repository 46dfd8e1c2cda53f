package engine_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// cutShort is a loopback upstream that answers attempts with a scripted
// body fault, then (from attempt `healAt` on, when > 0) with a whole body.
type cutShort struct {
	*httptest.Server
	n atomic.Int32
}

// body faults
const (
	shortContentLength = iota // Content-Length 100, 10 bytes, close
	resetMidBody              // 10 bytes of a chunked body, then RST
	stallMidBody              // 10 bytes, then nothing (until the client gives up)
)

func newCutShort(t *testing.T, fault, healAt int) *cutShort {
	t.Helper()
	u := &cutShort{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(u.n.Add(1))
		if healAt > 0 && n >= healAt {
			_, _ = io.WriteString(w, "whole body")
			return
		}
		switch fault {
		case shortContentLength:
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, "0123456789")
			w.(http.Flusher).Flush()
			hijackClose(w, false)
		case resetMidBody:
			w.WriteHeader(200)
			_, _ = io.WriteString(w, "0123456789")
			w.(http.Flusher).Flush()
			hijackClose(w, true)
		case stallMidBody:
			w.WriteHeader(200)
			_, _ = io.WriteString(w, "0123456789")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// hijackClose closes the connection under a handler, with an RST when
// reset is set.
func hijackClose(w http.ResponseWriter, reset bool) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// TestCutShortBodiesAreNeverASuccess (issue #9, defect 4): a body that ends
// early (reset, short Content-Length, the attempt timing out while it is
// read) makes the attempt a transport failure, retried where the rules
// allow; with no retry left the response says plainly that its body is
// incomplete, and the outcome is not SUCCESS.
func TestCutShortBodiesAreNeverASuccess(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault int
	}{
		{"short content-length", shortContentLength},
		{"reset mid-body", resetMidBody},
		{"attempt timeout mid-body", stallMidBody},
	} {
		t.Run(tc.name+"/retried", func(t *testing.T) {
			up := newCutShort(t, tc.fault, 2)
			f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
			p := mustPolicy(t, func(p *engine.Policy) { p.AttemptTimeout = 300 * time.Millisecond })
			res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, ""))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Attempts) != 2 || res.Outcome != engine.OutcomeSuccess || string(res.Response.Body) != "whole body" {
				t.Fatalf("outcome %s after %d attempts, body %q; want the second attempt's whole body", res.Outcome, len(res.Attempts), res.Response.Body)
			}
			first := res.Attempts[0]
			if first.Transport != engine.TransportBodyIncomplete || first.Status != 200 || first.Decision.Action != engine.ActionRetry {
				t.Fatalf("first attempt %+v, want a retried body_incomplete with its status", first)
			}
		})
		t.Run(tc.name+"/no retries left", func(t *testing.T) {
			up := newCutShort(t, tc.fault, 0)
			f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
			p := mustPolicy(t, func(p *engine.Policy) { p.MaxRetries = 0; p.AttemptTimeout = 300 * time.Millisecond })
			res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "GET", p, ""))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome == engine.OutcomeSuccess || res.Response == nil || !res.Response.Incomplete {
				t.Fatalf("outcome %s, response %+v: a cut-short body must say so and not succeed", res.Outcome, res.Response)
			}
			if string(res.Response.Body) != "0123456789" {
				t.Fatalf("body %q, want what arrived", res.Response.Body)
			}
		})
	}
	t.Run("unsafe method is not retried", func(t *testing.T) {
		up := newCutShort(t, shortContentLength, 2)
		f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
		res, err := f.runner.Run(t.Context(), newCall(t, up.URL, "POST", mustPolicy(t, nil), ""))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Attempts) != 1 || res.Outcome != engine.OutcomeNotRetryable || !res.Response.Incomplete {
			t.Fatalf("outcome %s after %d attempts, incomplete %v", res.Outcome, len(res.Attempts), res.Response != nil && res.Response.Incomplete)
		}
		if r := res.Attempts[0].Decision.Reason; r != engine.ReasonUnsafeMethod {
			t.Fatalf("reason %s, want REASON_UNSAFE_METHOD", r)
		}
	})
}

// TestDrainEndsParkedCalls (issue #9, defect 9): a call parked in a wait
// that would outlast the drain deadline ends at once with its attempts,
// OUTCOME_SHUTTING_DOWN and the skipped wait as retry_after; an attempt
// still in progress at the deadline is cut and ends the same way.
func TestDrainEndsParkedCalls(t *testing.T) {
	t.Run("parked in a hint", func(t *testing.T) {
		up := newUpstream(t, reply{status: 503, kv: []string{"Retry-After", "30"}})
		f := newFixture(t, engine.SystemClock{}, nil)
		done := make(chan *engine.Result, 1)
		go func() {
			res, err := f.runner.Run(context.Background(), newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		waitFor(t, func() bool { return up.count() == 1 })
		time.Sleep(20 * time.Millisecond) // let the call park in its wait
		f.runner.Drain(time.Now().Add(5 * time.Second))
		select {
		case res := <-done:
			// retry_after is what was left of the 30 s wait.
			if res.Outcome != engine.OutcomeShuttingDown || len(res.Attempts) != 1 || !res.HasRetryAfter ||
				res.RetryAfter > 30*time.Second || res.RetryAfter < 25*time.Second {
				t.Fatalf("outcome %s, %d attempts, retry_after %v (%v)", res.Outcome, len(res.Attempts), res.RetryAfter, res.HasRetryAfter)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("the parked call did not end when the drain began")
		}
	})
	t.Run("sending at the deadline", func(t *testing.T) {
		block := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(up.Close)
		t.Cleanup(func() { close(block) })
		f := newFixture(t, engine.SystemClock{}, nil)
		done := make(chan *engine.Result, 1)
		go func() {
			res, err := f.runner.Run(context.Background(), newCall(t, up.URL, "GET", mustPolicy(t, nil), ""))
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		time.Sleep(50 * time.Millisecond)
		f.runner.Drain(time.Now().Add(200 * time.Millisecond))
		select {
		case res := <-done:
			if res.Outcome != engine.OutcomeShuttingDown || len(res.Attempts) != 1 {
				t.Fatalf("outcome %s after %d attempts, want shutting_down after 1", res.Outcome, len(res.Attempts))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the attempt was not cut at the drain deadline")
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
