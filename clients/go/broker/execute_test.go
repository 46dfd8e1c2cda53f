package broker_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/clients/go/brokertest"
)

func TestExecuteBuildsHTTPResponse(t *testing.T) {
	b := brokertest.New(t)
	b.Script("api.test/", brokertest.Reply{
		Status:  201,
		Headers: []string{"X-Dup: first", "Content-Type: text/plain", "X-Dup: second"},
		Body:    "created",
	})
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/things", nil)
	var seen *broker.Result
	resp, res, err := b.Client().Execute(t.Context(), req, broker.OnResult(func(r *broker.Result) { seen = r }))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.Status != "201 Created" || resp.StatusCode != 201 || resp.Proto != "HTTP/1.1" ||
		string(body) != "created" || resp.ContentLength != 7 || resp.Request != req {
		t.Fatalf("response %+v body %q", resp, body)
	}
	if got := resp.Header.Values("X-Dup"); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("X-Dup %v", got)
	}
	var dups []string
	for _, h := range res.ResponseHeaders {
		if h.Name == "X-Dup" {
			dups = append(dups, h.Value)
		}
	}
	if !slices.Equal(dups, []string{"first", "second"}) {
		t.Fatalf("ResponseHeaders %v", res.ResponseHeaders)
	}
	if seen != res || res.Outcome != broker.OutcomeSuccess || res.Provider != "retry-after" || res.BodyTruncated {
		t.Fatalf("result %+v", res)
	}
	a := res.Attempts[0]
	if a.Number != 1 || a.Status != 201 || a.Start.IsZero() || a.Decision.Action != broker.ActionDoNotRetry || a.Decision.Reason != broker.ReasonSuccess {
		t.Fatalf("attempt %+v", a)
	}
}

func TestExecuteSendsRequestAndDropsHopByHopHeaders(t *testing.T) {
	b := brokertest.New(t)
	b.Reply("api.test/", 200)
	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/upload", body)
	req.Header.Set("Connection", "keep-alive")
	req.Header.Set("Transfer-Encoding", "chunked")
	req.Header.Set("Idempotency-Key", "k-1")
	req.Header.Add("Accept", "a")
	req.Header.Add("Accept", "b")
	if _, _, err := b.Client().Execute(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if !body.closed {
		t.Fatal("Execute did not close the request body")
	}
	got := b.Requests()[0]
	if string(got.Body) != "payload" || got.Method != "POST" || got.Header.Get("Idempotency-Key") != "k-1" ||
		!slices.Equal(got.Header.Values("Accept"), []string{"a", "b"}) || got.Header.Get("Connection") != "" {
		t.Fatalf("upstream got %+v", got)
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestExecuteRefusesOversizedBodyLocally(t *testing.T) {
	b := brokertest.New(t)
	b.Reply("api.test/", 200)
	c := b.Client(broker.WithMaxRequestBody(8))
	body := &closeRecorder{Reader: bytes.NewReader(make([]byte, 9))}
	req, _ := http.NewRequest(http.MethodPut, "http://api.test/", body)
	req.ContentLength = -1 // unknown: the limit is found while reading
	_, _, err := c.Execute(t.Context(), req)
	if !errors.Is(err, broker.ErrRequestBodyTooLarge) || !body.closed {
		t.Fatalf("err = %v (closed %v), want ErrRequestBodyTooLarge", err, body.closed)
	}
	req, _ = http.NewRequest(http.MethodPut, "http://api.test/", bytes.NewReader(make([]byte, 100)))
	if _, _, err := c.Execute(t.Context(), req); !errors.Is(err, broker.ErrRequestBodyTooLarge) {
		t.Fatalf("err = %v, want ErrRequestBodyTooLarge from Content-Length", err)
	}
	if n := len(b.Requests()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}

func TestExecuteOverrides(t *testing.T) {
	b := brokertest.New(t)
	b.Reply("api.test/", 503, "Retry-After: 10")
	c := b.Client()
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	_, res, err := c.Execute(t.Context(), req, broker.MaxRetries(0))
	if err != nil || len(res.Attempts) != 1 || res.Outcome != broker.OutcomeAttemptsExhausted {
		t.Fatalf("MaxRetries(0): err %v, result %+v", err, res)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://other.test/", nil)
	b.Reply("other.test/", 503, "Retry-After: 10")
	resp, res, err := c.Execute(t.Context(), req, broker.MaxDelay(5*time.Second), broker.TotalTimeout(time.Minute), broker.AttemptTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || res.Outcome != broker.OutcomeHintExceedsMaxDelay || res.RetryAfter != 10*time.Second {
		t.Fatalf("MaxDelay(5s) against a 10s hint: outcome %s, retry after %v", res.Outcome, res.RetryAfter)
	}
	_, _, err = c.Execute(t.Context(), req, broker.MaxRetries(50))
	if !broker.IsInvalidArgument(err) {
		t.Fatalf("MaxRetries above the policy: %v", err)
	}
	if _, _, err := c.Execute(t.Context(), req, broker.MaxRetries(-1)); err == nil {
		t.Fatal("MaxRetries(-1) accepted")
	}
}

func TestExecuteTruncatesBody(t *testing.T) {
	b := brokertest.New(t)
	b.Script("big.test/", brokertest.Reply{Status: 200, Body: strings.Repeat("x", 100)})
	req, _ := http.NewRequest(http.MethodGet, "http://big.test/", nil)
	resp, res, err := b.Client().Execute(t.Context(), req, broker.MaxResponseBody(10))
	if err != nil {
		t.Fatal(err)
	}
	if !res.BodyTruncated || resp.ContentLength != 10 {
		t.Fatalf("truncated %v, length %d", res.BodyTruncated, resp.ContentLength)
	}
}

// TestExecuteGateClosedIsNoResponseError: after a 429 with a long hint, the
// tenant's cooldown gate is closed; the next call to the same destination
// sends nothing and reports when to come back.
func TestExecuteGateClosedIsNoResponseError(t *testing.T) {
	b := brokertest.New(t)
	b.Reply("quota.test/", 429, "Retry-After: 300")
	c := b.Client()
	req, _ := http.NewRequest(http.MethodGet, "http://quota.test/a", nil)
	resp, res, err := c.Execute(t.Context(), req)
	if err != nil || resp.StatusCode != 429 || res.Outcome != broker.OutcomeHintExceedsMaxDelay {
		t.Fatalf("first call: err %v, outcome %v", err, res)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://quota.test/b", nil)
	resp, res, err = c.Execute(t.Context(), req)
	var nre *broker.NoResponseError
	if resp != nil || !errors.As(err, &nre) {
		t.Fatalf("second call: resp %v, err %v; want *NoResponseError", resp, err)
	}
	if nre.Outcome != broker.OutcomeGateClosed || nre.RetryAfter < 299*time.Second || nre.RetryAfter > 300*time.Second || nre.Result != res || len(res.Attempts) != 0 {
		t.Fatalf("no-response error %+v", nre)
	}
	if n := len(b.Requests()); n != 1 {
		t.Fatalf("%d upstream requests; a closed gate must send none", n)
	}
}

func TestExecuteInvalidArgumentHasFieldViolations(t *testing.T) {
	b := brokertest.New(t)
	req, _ := http.NewRequest(http.MethodGet, "ftp://files.test/x", nil)
	_, _, err := b.Client().Execute(t.Context(), req, broker.Provider("friendster"))
	var be *broker.Error
	if !errors.As(err, &be) || !broker.IsInvalidArgument(err) {
		t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
	}
	fields := map[string]bool{}
	for _, fv := range be.FieldViolations {
		fields[fv.Field] = fv.Description != ""
	}
	if !fields["request.url"] || !fields["provider"] {
		t.Fatalf("field violations %+v, want request.url and provider", be.FieldViolations)
	}
	if !strings.Contains(be.Error(), "invalid request (INVALID_ARGUMENT)") {
		t.Fatalf("error text %q", be.Error())
	}
}

func TestExecuteUnknownPolicy(t *testing.T) {
	b := brokertest.New(t)
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	_, _, err := b.Client(broker.WithDefaultPolicy("nope")).Execute(t.Context(), req)
	if !broker.IsUnknownPolicy(err) || broker.IsInvalidArgument(err) {
		t.Fatalf("err = %v, want FAILED_PRECONDITION", err)
	}
	// An explicit Policy("") overrides the client's default: the tenant's default.
	b.Reply("api.test/", 200)
	if _, _, err := b.Client(broker.WithDefaultPolicy("nope")).Execute(t.Context(), req, broker.Policy("")); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripperReturnsFinalNon2xxAndErrors(t *testing.T) {
	b := brokertest.New(t, brokertest.WithoutJitter())
	b.Reply("gone.test/", 404)
	b.Reply("down.test/", 503)
	b.Script("dead.test/", brokertest.Fail(broker.KindConnectionRefused))
	var results []*broker.Result
	hc := &http.Client{Transport: b.Client().RoundTripper(broker.OnResult(func(r *broker.Result) { results = append(results, r) }))}

	// The bodies stream: OnResult is called when a body's end arrives.
	resp, err := hc.Get("http://gone.test/")
	if err != nil || resp.StatusCode != 404 {
		t.Fatalf("404: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	resp, err = hc.Get("http://down.test/")
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("503: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if len(results) != 2 || len(results[0].Attempts) != 1 || len(results[1].Attempts) != 4 {
		t.Fatalf("results %d", len(results))
	}
	if got := b.Clock().Sleeps(); !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Fatalf("broker backoff %v", got)
	}
	_, err = hc.Get("http://dead.test/")
	var te *broker.TransportError
	if !errors.As(err, &te) || te.Kind != broker.KindConnectionRefused || len(te.Result.Attempts) != 4 {
		t.Fatalf("dead: %v", err)
	}
}
