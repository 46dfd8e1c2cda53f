package broker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// drainLimit bounds how much of a discarded response body Retry reads so
// that the connection can be reused.
const drainLimit = 64 << 10

// Sleeper waits. Sleep waits for d or until ctx is done, whichever comes
// first, and returns ctx.Err() when ctx ended the wait; a d <= 0 returns at
// once.
type Sleeper interface {
	Sleep(ctx context.Context, d time.Duration) error
}

// SleeperFunc adapts a function to Sleeper.
type SleeperFunc func(ctx context.Context, d time.Duration) error

// Sleep calls f.
func (f SleeperFunc) Sleep(ctx context.Context, d time.Duration) error { return f(ctx, d) }

// timerSleeper waits on a real timer and ctx.Done().
type timerSleeper struct{}

func (timerSleeper) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RetryEvent describes a failed attempt that Retry is about to retry.
type RetryEvent struct {
	// Attempt is the 1-based number of the attempt that failed.
	Attempt int
	// Decision is the broker's decision (Action is ActionRetry); Retry
	// waits Decision.Delay next.
	Decision Decision
	// Response is the failed attempt's response, when fn returned one. Its
	// body is drained and closed after the callback returns.
	Response *http.Response
	// Err is fn's error, when it returned one.
	Err error
}

// Retry calls fn until the broker says stop, for callers that make their
// own HTTP calls: fn makes the call, ClassifyResponse decides (with the
// tenant's policy and the provider's hints), and Retry waits the delay it
// returns. The rules then live in the broker, even when the traffic does
// not go through it.
//
// attempt is 1-based. Each response or error of fn is classified with
// AttemptNumber(attempt), the context's deadline as Deadline (so the broker
// gives up, rather than let Retry wait past it), and the Policy, Provider,
// Method, URL and RequestHeader options. Responses are classified with
// Classify, errors with ClassifyError (KindOf maps them to kinds).
//
// Retry returns:
//   - the last response and nil when the broker says not to retry it,
//     whatever its status (check it);
//   - nil and a *RetryError wrapping fn's last error when that error is not
//     retried;
//   - the context's error when ctx ends, during fn or a wait;
//   - when the broker cannot be asked (an *Error): fn's last response, if
//     any, together with that error, so that a successful call is not lost.
//     Close it.
//
// Responses that are retried are drained (up to 64 KiB) and closed before
// the wait. Waits use WithSleeper when given (tests pass a fake so that
// they never wait), else a real timer that ctx can interrupt.
func Retry(ctx context.Context, c *Client, fn func(ctx context.Context, attempt int) (*http.Response, error), opts ...RetryOption) (*http.Response, error) {
	cfg := retryConfig{sleeper: timerSleeper{}}
	for _, o := range opts {
		o.applyRetry(&cfg)
	}
	base := cfg.classifyOptions()
	if d, ok := ctx.Deadline(); ok {
		base = append(base, Deadline(d))
	}
	for attempt := 1; ; attempt++ {
		resp, err := fn(ctx, attempt)
		if err != nil && resp != nil {
			discard(resp) // e.g. a CheckRedirect error: the error wins
			resp = nil
		}
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err() // the caller gave up; nothing to classify
		}
		copts := append(base[:len(base):len(base)], AttemptNumber(attempt))
		var d Decision
		var berr error
		if err != nil {
			d, berr = c.ClassifyError(ctx, err, copts...)
		} else {
			if resp == nil {
				return nil, errorf("Retry: attempt %d returned neither a response nor an error", attempt)
			}
			d, berr = c.Classify(ctx, resp, copts...)
		}
		if berr != nil {
			if err != nil {
				return nil, fmt.Errorf("broker: retry: attempt %d failed (%w) and could not be classified: %w", attempt, err, berr)
			}
			return resp, fmt.Errorf("broker: retry: classify attempt %d (status %d): %w", attempt, resp.StatusCode, berr)
		}
		if d.Action != ActionRetry {
			if err != nil {
				return nil, &RetryError{Attempts: attempt, Decision: d, Err: err}
			}
			return resp, nil
		}
		if cfg.onRetry != nil {
			cfg.onRetry(RetryEvent{Attempt: attempt, Decision: d, Response: resp, Err: err})
		}
		if resp != nil {
			discard(resp)
		}
		if err := cfg.sleeper.Sleep(ctx, d.Delay); err != nil {
			return nil, err
		}
	}
}

func (cfg *retryConfig) classifyOptions() []ClassifyOption {
	r := cfg.requestInfo
	return []ClassifyOption{classifyFunc(func(c *classifyConfig) {
		attempt := c.attempt
		c.requestInfo = r
		c.attempt = attempt
	})}
}

// discard drains (bounded) and closes a response body.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	_ = resp.Body.Close()
}
