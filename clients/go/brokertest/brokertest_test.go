package brokertest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/clients/go/brokertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, c *broker.Client, url string, opts ...broker.CallOption) (*http.Response, *broker.Result, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Execute(t.Context(), req, opts...)
}

// TestRoundTripperRetriesOnFakeClock: an http.Client using the broker's
// RoundTripper sees only the final 200; the broker retried after the hint,
// on the fake clock, without waiting.
func TestRoundTripperRetriesOnFakeClock(t *testing.T) {
	b := brokertest.New(t)
	b.Script("https://api.example.com/", brokertest.Status(503, "Retry-After: 30"), brokertest.Status(200))
	start := b.Clock().Now()
	begin := time.Now()
	hc := &http.Client{Transport: b.Client().RoundTripper()}
	resp, err := hc.Get("https://api.example.com/items?page=2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if time.Since(begin) > 5*time.Second {
		t.Fatalf("took %v of real time; the fake clock must not wait", time.Since(begin))
	}
	reqs := b.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream requests, want 2", len(reqs))
	}
	if gap := reqs[1].Time.Sub(reqs[0].Time); gap != 30*time.Second {
		t.Fatalf("fake gap between attempts %v, want the 30s hint", gap)
	}
	if adv := b.Clock().Now().Sub(start); adv != 30*time.Second {
		t.Fatalf("clock advanced %v, want 30s", adv)
	}
	if got := b.Clock().Sleeps(); !slices.Equal(got, []time.Duration{30 * time.Second}) {
		t.Fatalf("sleeps %v", got)
	}
	if reqs[0].URL != "https://api.example.com/items?page=2" || reqs[0].Method != "GET" {
		t.Fatalf("recorded %s %s", reqs[0].Method, reqs[0].URL)
	}
}

func TestBackoffWithoutJitter(t *testing.T) {
	b := brokertest.New(t, brokertest.WithoutJitter(), brokertest.WithBackoff(100*time.Millisecond, time.Second))
	b.Script("svc.test/", brokertest.Status(500), brokertest.Status(502), brokertest.Status(200))
	resp, res, err := get(t, b.Client(), "http://svc.test/x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(res.Attempts) != 3 {
		t.Fatalf("status %d after %d attempts", resp.StatusCode, len(res.Attempts))
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}
	if got := b.Clock().Sleeps(); !slices.Equal(got, want) {
		t.Fatalf("sleeps %v, want %v", got, want)
	}
	if res.Attempts[0].Decision.Reason != broker.ReasonBackoff || res.Attempts[1].Waited != 100*time.Millisecond {
		t.Fatalf("attempts %+v", res.Attempts)
	}
}

func TestPolicyOptions(t *testing.T) {
	b := brokertest.New(t,
		brokertest.WithMaxRetries(1),
		brokertest.WithAttemptHeader("X-Retry-Attempt"),
		brokertest.WithNamedPolicy("once", brokertest.WithMaxRetries(0)),
		brokertest.WithNamedPolicy("github", brokertest.WithProvider("github"), brokertest.WithRetryUnsafeMethods()),
	)
	b.Reply("down.test", 503)
	c := b.Client()

	_, res, err := get(t, c, "http://down.test/")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 2 || res.Outcome != broker.OutcomeAttemptsExhausted {
		t.Fatalf("default policy: %d attempts, %s", len(res.Attempts), res.Outcome)
	}
	reqs := b.Requests()
	if reqs[0].Header.Get("X-Retry-Attempt") != "1" || reqs[1].Header.Get("X-Retry-Attempt") != "2" {
		t.Fatalf("attempt headers %q %q", reqs[0].Header.Get("X-Retry-Attempt"), reqs[1].Header.Get("X-Retry-Attempt"))
	}

	_, res, err = get(t, c, "http://down.test/", broker.Policy("once"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 1 {
		t.Fatalf("policy once: %d attempts", len(res.Attempts))
	}

	req, _ := http.NewRequest(http.MethodPost, "http://down.test/", strings.NewReader("x"))
	_, res, err = b.Client(broker.WithDefaultPolicy("github")).Execute(t.Context(), req, broker.MaxRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 2 || res.Provider != "github" {
		t.Fatalf("policy github: %d attempts, provider %q", len(res.Attempts), res.Provider)
	}

	_, _, err = get(t, c, "http://down.test/", broker.Policy("ghost"))
	if !broker.IsUnknownPolicy(err) {
		t.Fatalf("unknown policy: %v", err)
	}
}

func TestInvalidPolicyOption(t *testing.T) {
	if _, err := brokertest.Start(brokertest.WithMaxRetries(-1)); err == nil || !strings.Contains(err.Error(), "max_retries") {
		t.Fatalf("err = %v, want a max_retries error", err)
	}
}

func TestScriptMatching(t *testing.T) {
	b := brokertest.New(t, brokertest.WithMaxRetries(0))
	b.Reply("api.test/", 201)
	b.Reply("api.test/v2/", 202)
	b.Reply("https://api.test/v2/special", 203)
	c := b.Client()
	for url, want := range map[string]int{
		"http://api.test/v1":          201,
		"http://api.test/v2/x":        202,
		"https://api.test/v2/special": 203,
		"http://api.test/v2/special":  202,
	} {
		resp, _, err := get(t, c, url)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", url, resp.StatusCode, want)
		}
	}
	// An unscripted URL is a transport failure that says what happened.
	_, _, err := get(t, c, "http://elsewhere.test/")
	var te *broker.TransportError
	if !errors.As(err, &te) || te.Kind != broker.KindOther || !strings.Contains(te.Message, "no reply scripted") {
		t.Fatalf("unscripted: %v", err)
	}
	if err := b.Upstream().Script("x", brokertest.Status(200, "no colon")); err == nil {
		t.Fatal("a malformed header line was accepted")
	}
	if err := b.Upstream().Script("x", brokertest.Fail("bogus")); err == nil {
		t.Fatal("an unknown transport kind was accepted")
	}
}

func TestScriptedTransportFailures(t *testing.T) {
	b := brokertest.New(t, brokertest.WithMaxRetries(0))
	c := b.Client()
	for _, kind := range []broker.TransportErrorKind{
		broker.KindConnectionRefused, broker.KindConnectionReset, broker.KindEOF, broker.KindTimeout,
		broker.KindDNSTemporary, broker.KindDNSNotFound, broker.KindTLSCertificate, broker.KindInvalidURL, broker.KindOther,
	} {
		t.Run(string(kind), func(t *testing.T) {
			url := "http://" + strings.ReplaceAll(string(kind), "_", "-") + ".test/"
			b.Script(url, brokertest.Fail(kind))
			resp, res, err := get(t, c, url)
			var te *broker.TransportError
			if resp != nil || !errors.As(err, &te) {
				t.Fatalf("resp %v, err %v; want a *TransportError", resp, err)
			}
			if te.Kind != kind || res.Attempts[0].TransportError != kind {
				t.Fatalf("kind %q, want %q (%v)", te.Kind, kind, err)
			}
		})
	}
	// A refused destination is an RPC error, as in a real broker.
	b.Script("http://metadata.test/", brokertest.Fail(broker.KindDestinationRefused))
	if _, _, err := get(t, c, "http://metadata.test/"); !broker.IsPermissionDenied(err) {
		t.Fatalf("destination refused: %v", err)
	}
}

func TestTransportFailureRetried(t *testing.T) {
	b := brokertest.New(t, brokertest.WithoutJitter())
	b.Script("flaky.test/", brokertest.Fail(broker.KindConnectionReset), brokertest.Reply{Status: 200, Body: "ok", Latency: 250 * time.Millisecond})
	resp, res, err := get(t, b.Client(), "http://flaky.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "ok" || len(res.Attempts) != 2 || res.Attempts[0].TransportError != broker.KindConnectionReset {
		t.Fatalf("body %q, attempts %+v", body, res.Attempts)
	}
	if res.Attempts[1].Duration != 250*time.Millisecond {
		t.Fatalf("attempt 2 took %v, want the scripted 250ms latency", res.Attempts[1].Duration)
	}
}

func TestRequestsRecordBodyAndHeaders(t *testing.T) {
	b := brokertest.New(t)
	b.Reply("api.test/", 200)
	req, _ := http.NewRequest(http.MethodPut, "http://api.test/doc", strings.NewReader(`{"a":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Multi", "1")
	req.Header.Add("X-Multi", "2")
	if _, _, err := b.Client().Execute(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	r := b.Requests()[0]
	if r.Method != "PUT" || string(r.Body) != `{"a":1}` || r.Header.Get("Content-Type") != "application/json" ||
		!slices.Equal(r.Header.Values("X-Multi"), []string{"1", "2"}) {
		t.Fatalf("recorded %+v", r)
	}
}

// TestDeadlineOnFakeClock: gRPC deadlines are real times and the fake
// clock starts at the real time, so a short deadline still makes the
// broker give up on a long hint.
func TestDeadlineOnFakeClock(t *testing.T) {
	b := brokertest.New(t)
	b.Reply("slow.test/", 429, "Retry-After: 5")
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequest(http.MethodGet, "http://slow.test/", nil)
	resp, res, err := b.Client().Execute(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 429 || res.Outcome != broker.OutcomeDeadlineTooShort || res.RetryAfter != 5*time.Second {
		t.Fatalf("status %d, outcome %s, retry after %v", resp.StatusCode, res.Outcome, res.RetryAfter)
	}
}

func TestCloseIsIdempotentAndStopsClients(t *testing.T) {
	b, err := brokertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	c := b.Client()
	b.Close()
	b.Close()
	_, err = c.Classify(t.Context(), &http.Response{StatusCode: 503})
	var be *broker.Error
	if !errors.As(err, &be) {
		t.Fatalf("after Close: %v, want an *broker.Error", err)
	}
}

// TestClockIsASleeper: broker.Retry can wait on the broker's fake clock.
func TestClockIsASleeper(t *testing.T) {
	b := brokertest.New(t)
	var _ broker.Sleeper = b.Clock()
	n := 0
	resp, err := broker.Retry(t.Context(), b.Client(), func(context.Context, int) (*http.Response, error) {
		n++
		if n == 1 {
			return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"7"}}, Body: http.NoBody}, nil
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}, broker.WithSleeper(b.Clock()))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("resp %v, err %v", resp, err)
	}
	if got := b.Clock().Sleeps(); !slices.Equal(got, []time.Duration{7 * time.Second}) {
		t.Fatalf("sleeps %v", got)
	}
}

// TestDeadlinesFollowTheFakeClock: after the fake clock has run far ahead
// of the real one, a deadline still means "time left".
func TestDeadlinesFollowTheFakeClock(t *testing.T) {
	b := brokertest.New(t)
	b.Clock().Advance(time.Hour)
	b.Script("short.test/", brokertest.Status(503, "Retry-After: 1"), brokertest.Status(200))
	b.Reply("long.test/", 503, "Retry-After: 5")
	c := b.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequest(http.MethodGet, "http://short.test/", nil)
	resp, res, err := c.Execute(ctx, req)
	if err != nil || resp.StatusCode != 200 || len(res.Attempts) != 2 {
		t.Fatalf("1s hint within 1.5s: err %v, result %+v", err, res)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://long.test/", nil)
	_, res, err = c.Execute(ctx, req)
	if err != nil || res.Outcome != broker.OutcomeDeadlineTooShort {
		t.Fatalf("5s hint within 1.5s: err %v, result %+v", err, res)
	}
	// The same for Retry, which sends its context's deadline to ClassifyResponse.
	n := 0
	resp, err = broker.Retry(ctx, c, func(context.Context, int) (*http.Response, error) {
		n++
		if n == 1 {
			return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody}, nil
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}, broker.WithSleeper(b.Clock()))
	if err != nil || resp.StatusCode != 200 || n != 2 {
		t.Fatalf("Retry: resp %v, err %v, %d calls", resp, err, n)
	}
}

// TestStreamDeadlinesFollowTheFakeClock: ExecuteStream (and so the
// RoundTripper) sees its deadline on the fake clock too, after the clock
// has run far ahead: a 1s hint fits in 1.5s, a 5s hint does not.
func TestStreamDeadlinesFollowTheFakeClock(t *testing.T) {
	b := brokertest.New(t)
	b.Clock().Advance(time.Hour)
	b.Script("short.test/", brokertest.Status(503, "Retry-After: 1"), brokertest.Reply{Status: 200, Body: "streamed"})
	b.Reply("long.test/", 503, "Retry-After: 5")
	var res *broker.Result
	hc := &http.Client{Transport: b.Client().RoundTripper(broker.OnResult(func(r *broker.Result) { res = r }))}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://short.test/", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "streamed" || len(res.Attempts) != 2 {
		t.Fatalf("1s hint within 1.5s: status %d body %q err %v result %+v", resp.StatusCode, body, err, res)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://long.test/", nil)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 503 || res.Outcome != broker.OutcomeDeadlineTooShort || res.RetryAfter != 5*time.Second {
		t.Fatalf("5s hint within 1.5s: status %d result %+v", resp.StatusCode, res)
	}
}
