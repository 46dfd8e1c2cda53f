package broker_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/clients/go/brokertest"
)

// fakeSleeper records waits instead of waiting.
type fakeSleeper struct{ waits []time.Duration }

func (s *fakeSleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.waits = append(s.waits, d)
	return ctx.Err()
}

// trackedBody records whether it was read to the end and closed.
type trackedBody struct {
	io.Reader
	closed bool
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

func response(code int, body string, headers ...string) (*http.Response, *trackedBody) {
	tb := &trackedBody{Reader: strings.NewReader(body)}
	h := http.Header{}
	for _, l := range headers {
		name, value, _ := strings.Cut(l, ": ")
		h.Add(name, value)
	}
	return &http.Response{StatusCode: code, Header: h, Body: tb}, tb
}

func TestRetryWaitsTheBrokersDelays(t *testing.T) {
	b := brokertest.New(t)
	r1, b1 := response(503, "busy", "Retry-After: 2")
	r2, b2 := response(429, `{"err":"slow down"}`, "Retry-After: 1")
	r3, b3 := response(200, "ok")
	script := []*http.Response{r1, r2, r3}
	var attempts []int
	var events []broker.RetryEvent
	sl := &fakeSleeper{}
	begin := time.Now()
	resp, err := broker.Retry(t.Context(), b.Client(), func(_ context.Context, attempt int) (*http.Response, error) {
		attempts = append(attempts, attempt)
		return script[attempt-1], nil
	}, broker.WithSleeper(sl), broker.OnRetry(func(e broker.RetryEvent) { events = append(events, e) }))
	if err != nil {
		t.Fatal(err)
	}
	if resp != r3 || b3.closed {
		t.Fatal("Retry must return the final response unclosed")
	}
	if !slices.Equal(attempts, []int{1, 2, 3}) || !slices.Equal(sl.waits, []time.Duration{2 * time.Second, time.Second}) {
		t.Fatalf("attempts %v, waits %v", attempts, sl.waits)
	}
	if !b1.closed || !b2.closed {
		t.Fatal("discarded responses were not closed")
	}
	if n, _ := b1.Read(make([]byte, 1)); n != 0 {
		t.Fatal("discarded response was not drained")
	}
	if len(events) != 2 || events[0].Attempt != 1 || events[0].Response != r1 || events[0].Decision.HintSource != "retry-after" {
		t.Fatalf("events %+v", events)
	}
	if time.Since(begin) > 5*time.Second {
		t.Fatal("Retry waited for real")
	}
}

func TestRetryStopsOnDoNotRetry(t *testing.T) {
	b := brokertest.New(t)
	calls := 0
	r, body := response(404, "not here")
	resp, err := broker.Retry(t.Context(), b.Client(), func(context.Context, int) (*http.Response, error) {
		calls++
		return r, nil
	}, broker.WithSleeper(&fakeSleeper{}))
	if err != nil || resp != r || calls != 1 || body.closed {
		t.Fatalf("resp %v, err %v, calls %d", resp, err, calls)
	}
	// POST is not retried without an idempotency key...
	calls = 0
	r503, _ := response(503, "")
	resp, err = broker.Retry(t.Context(), b.Client(), func(context.Context, int) (*http.Response, error) {
		calls++
		return r503, nil
	}, broker.Method(http.MethodPost), broker.WithSleeper(&fakeSleeper{}))
	if err != nil || resp.StatusCode != 503 || calls != 1 {
		t.Fatalf("POST: resp %v, err %v, calls %d", resp, err, calls)
	}
	// ...but is with one.
	calls = 0
	_, err = broker.Retry(t.Context(), b.Client(), func(context.Context, int) (*http.Response, error) {
		calls++
		r, _ := response(503, "")
		return r, nil
	}, broker.Method(http.MethodPost), broker.RequestHeader(http.Header{"Idempotency-Key": {"k1"}}), broker.WithSleeper(&fakeSleeper{}))
	if err != nil || calls != 4 {
		t.Fatalf("POST with key: err %v, calls %d, want 4 (max_retries 3)", err, calls)
	}
}

func TestRetryTransportErrors(t *testing.T) {
	b := brokertest.New(t)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	calls := 0
	sl := &fakeSleeper{}
	resp, err := broker.Retry(t.Context(), b.Client(), func(context.Context, int) (*http.Response, error) {
		calls++
		if calls < 3 {
			return nil, refused
		}
		r, _ := response(200, "ok")
		return r, nil
	}, broker.WithSleeper(sl))
	if err != nil || resp.StatusCode != 200 || calls != 3 || len(sl.waits) != 2 {
		t.Fatalf("resp %v, err %v, calls %d, waits %v", resp, err, calls, sl.waits)
	}
	// A rejected certificate is not retried; the error says so and wraps fn's.
	certErr := &wrappedError{x509.UnknownAuthorityError{}}
	calls = 0
	resp, err = broker.Retry(t.Context(), b.Client(), func(context.Context, int) (*http.Response, error) {
		calls++
		return nil, certErr
	}, broker.WithSleeper(&fakeSleeper{}))
	var re *broker.RetryError
	if resp != nil || !errors.As(err, &re) || calls != 1 || !errors.Is(err, certErr) {
		t.Fatalf("resp %v, err %v, calls %d", resp, err, calls)
	}
	if re.Attempts != 1 || re.Decision.Reason != broker.ReasonTransportErrorNotRetryable {
		t.Fatalf("retry error %+v", re)
	}
	// Retryable errors until the attempts run out.
	calls = 0
	_, err = broker.Retry(t.Context(), b.Client(), func(context.Context, int) (*http.Response, error) {
		calls++
		return nil, refused
	}, broker.WithSleeper(&fakeSleeper{}))
	if !errors.As(err, &re) || re.Attempts != 4 || re.Decision.Reason != broker.ReasonAttemptsExhausted || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("exhausted: %v", err)
	}
}

// wrappedError wraps an error the way *url.Error does, to show that KindOf
// looks through wrapping.
type wrappedError struct{ err error }

func (e *wrappedError) Error() string { return "Get https://api.example.com/: " + e.err.Error() }
func (e *wrappedError) Unwrap() error { return e.err }

func TestRetryDeadlineAndCancel(t *testing.T) {
	b := brokertest.New(t)
	// The context's deadline goes to the broker, which refuses a wait that
	// would outlast it.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	r, _ := response(503, "", "Retry-After: 30")
	sl := &fakeSleeper{}
	resp, err := broker.Retry(ctx, b.Client(), func(context.Context, int) (*http.Response, error) { return r, nil }, broker.WithSleeper(sl))
	if err != nil || resp != r || len(sl.waits) != 0 {
		t.Fatalf("resp %v, err %v, waits %v", resp, err, sl.waits)
	}
	// Canceling during a wait ends the loop with the context's error.
	ctx, cancel = context.WithCancel(t.Context())
	calls := 0
	_, err = broker.Retry(ctx, b.Client(), func(context.Context, int) (*http.Response, error) {
		calls++
		r, _ := response(503, "")
		return r, nil
	}, broker.WithSleeper(broker.SleeperFunc(func(ctx context.Context, _ time.Duration) error {
		cancel()
		return ctx.Err()
	})))
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

// TestRetryBrokerDown: when the broker cannot be asked, a response is
// returned with the error rather than lost.
func TestRetryBrokerDown(t *testing.T) {
	c, _ := bufClient(t, &fakeService{err: errors.New("boom")})
	r, _ := response(200, "ok")
	resp, err := broker.Retry(t.Context(), c, func(context.Context, int) (*http.Response, error) { return r, nil })
	var be *broker.Error
	if resp != r || !errors.As(err, &be) {
		t.Fatalf("resp %v, err %v", resp, err)
	}
}
