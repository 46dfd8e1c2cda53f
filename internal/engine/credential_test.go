package engine_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// fakeCred is a broker-held credential that records what each Apply saw:
// it sets X-Key: tok<generation>, fails while fail is set, and answers
// Rejected with rejected (renewing itself when true).
type fakeCred struct {
	name     string
	mu       sync.Mutex
	gen      uint64
	fail     error
	rejected bool
	seen     []http.Header // the request's headers when Apply was called
	rejects  int
}

func (c *fakeCred) Name() string          { return c.name }
func (c *fakeCred) Kind() credential.Kind { return credential.KindHeader }
func (c *fakeCred) Headers() []string     { return []string{"X-Key"} }
func (c *fakeCred) Overwrite() bool       { return false }
func (c *fakeCred) Rejected(credential.Stamp) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rejects++
	if c.rejected {
		c.gen++
	}
	return c.rejected
}

func (c *fakeCred) Apply(_ context.Context, req *http.Request, call *credential.Call) (credential.Stamp, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, req.Header.Clone())
	if c.fail != nil {
		return credential.Stamp{}, &credential.UnavailableError{Credential: c.name, Cause: c.fail}
	}
	if call == nil {
		return credential.Stamp{}, errors.New("no per-call state")
	}
	req.Header.Set("X-Key", "tok"+string(rune('0'+c.gen)))
	return credential.Stamp{Generation: c.gen}, nil
}

// credObserver records the runner's credential events.
type credObserver struct {
	engine.NopObserver
	mu          sync.Mutex
	unavailable []string
	applied     int
}

func (o *credObserver) CredentialUnavailable(tenant, cred string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unavailable = append(o.unavailable, tenant+"/"+cred+": "+err.Error())
}

func (o *credObserver) CredentialApplied(string, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applied++
}

// TestRunCredentialUnavailableSendsNothing: a credential that cannot be
// had ends the call with OutcomeCredentialsUnavailable before anything is
// sent; the attempt's record and the observer carry the cause, and the
// admission is given back (the next call on the gate is admitted at once).
func TestRunCredentialUnavailableSendsNothing(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	st := memstore.New()
	obs := &credObserver{}
	r := engine.NewRunner(st, engine.WithObserver(obs))
	cred := &fakeCred{name: "k", fail: errors.New("token endpoint answered 503")}
	p := mustPolicy(t, func(p *engine.Policy) { p.Credential = cred; p.AttemptHeader = "X-Attempt" })
	res, err := r.Run(t.Context(), newCall(t, up.URL+"/x", "GET", p, ""))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != engine.OutcomeCredentialsUnavailable || up.count() != 0 || res.Response != nil {
		t.Fatalf("outcome %s, upstream saw %d, response %v; want credentials_unavailable, nothing sent", res.Outcome, up.count(), res.Response)
	}
	if len(res.Attempts) != 1 {
		t.Fatalf("%d attempts recorded, want 1 (not sent)", len(res.Attempts))
	}
	a := res.Attempts[0]
	if a.Decision.Reason != engine.ReasonCredentialsUnavailable || a.Decision.Action != engine.ActionDoNotRetry || a.Status != 0 ||
		!strings.Contains(a.Error, "credential k unavailable: token endpoint answered 503") {
		t.Fatalf("attempt %+v", a)
	}
	if len(obs.unavailable) != 1 || !strings.HasPrefix(obs.unavailable[0], "t1/k: ") || obs.applied != 0 {
		t.Fatalf("observer: unavailable %q, applied %d", obs.unavailable, obs.applied)
	}
	// The credential is back: the same gate admits and the call succeeds.
	cred.mu.Lock()
	cred.fail = nil
	cred.mu.Unlock()
	res, err = r.Run(t.Context(), newCall(t, up.URL+"/x", "GET", p, ""))
	if err != nil || res.Outcome != engine.OutcomeSuccess || up.count() != 1 || obs.applied != 1 {
		t.Fatalf("after recovery: %v outcome %s, upstream saw %d, applied %d", err, res.Outcome, up.count(), obs.applied)
	}
	if got := up.requests[0].Header.Get("X-Key"); got != "tok0" {
		t.Fatalf("upstream saw X-Key %q", got)
	}
}

// TestRunCredentialAppliedLastOnEveryAttempt: the credential is applied
// once per attempt, after the attempt header and traceparent (which it
// sees), into a copy: the caller's header is never written.
func TestRunCredentialAppliedLastOnEveryAttempt(t *testing.T) {
	up := newUpstream(t, reply{status: 503}, reply{status: 503}, reply{status: 200})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	cred := &fakeCred{name: "k"}
	p := mustPolicy(t, func(p *engine.Policy) { p.Credential = cred; p.AttemptHeader = "X-Attempt" })
	call := newCall(t, up.URL+"/x", "GET", p, "")
	call.Header.Set("X-Caller", "1")
	res, err := f.runner.Run(t.Context(), call)
	if err != nil || res.Outcome != engine.OutcomeSuccess || up.count() != 3 {
		t.Fatalf("%v outcome %s, upstream saw %d", err, res.Outcome, up.count())
	}
	if len(cred.seen) != 3 {
		t.Fatalf("applied %d times, want once per attempt (3)", len(cred.seen))
	}
	for i, h := range cred.seen {
		if h.Get("X-Attempt") != string(rune('1'+i)) || h.Get("Traceparent") == "" || h.Get("X-Caller") != "1" {
			t.Errorf("attempt %d: Apply saw headers %v, want the attempt header, traceparent and the caller's set before it", i+1, h)
		}
		if up.requests[i].Header.Get("X-Key") != "tok0" {
			t.Errorf("attempt %d carried X-Key %q", i+1, up.requests[i].Header.Get("X-Key"))
		}
	}
	if len(call.Header) != 1 {
		t.Fatalf("the caller's header was written: %v", call.Header)
	}
}

// TestRunCredentialRejectedRepeatsOnce: a 401 to an attempt whose
// credential renews itself is repeated at once, once, with the new value,
// even with max_retries 0 (a repeat is an attempt, not a retry); a
// credential with nothing to renew gets no repeat.
func TestRunCredentialRejectedRepeatsOnce(t *testing.T) {
	for _, renew := range []bool{true, false} {
		up := newUpstream(t, reply{status: 401})
		clock := engine.NewFakeClock(time.Now())
		f := newFixture(t, clock, memstore.New())
		cred := &fakeCred{name: "k", rejected: renew}
		p := mustPolicy(t, func(p *engine.Policy) { p.Credential = cred; p.MaxRetries = 0 })
		res, err := f.runner.Run(t.Context(), newCall(t, up.URL+"/x", "GET", p, ""))
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if renew {
			want = 2
		}
		if up.count() != want || len(res.Attempts) != want || res.Outcome != engine.OutcomeNotRetryable {
			t.Fatalf("renew=%v: upstream saw %d, %d attempts, outcome %s; want %d sends", renew, up.count(), len(res.Attempts), res.Outcome, want)
		}
		if cred.rejects != 1 {
			t.Fatalf("renew=%v: Rejected called %d times, want 1", renew, cred.rejects)
		}
		if renew {
			if d := res.Attempts[0].Decision; d.Reason != engine.ReasonCredentialRejected || d.Action != engine.ActionRetry || d.Delay != 0 {
				t.Fatalf("first attempt's decision %+v", d)
			}
			if a, b := up.requests[0].Header.Get("X-Key"), up.requests[1].Header.Get("X-Key"); a != "tok0" || b != "tok1" {
				t.Fatalf("sent X-Key %q then %q, want tok0 then the renewed tok1", a, b)
			}
			if len(clock.Sleeps()) != 0 {
				t.Fatalf("waited %v before the repeat, want none", clock.Sleeps())
			}
		}
	}
}

// TestRunCredentialGatesByName: two policies with different credentials
// to the same host have separate gates: a 429 with Retry-After on one
// does not close the other's.
func TestRunCredentialGatesByName(t *testing.T) {
	limited := newUpstream(t, reply{status: 429, kv: []string{"Retry-After", "600"}})
	clock := engine.NewFakeClock(time.Now())
	f := newFixture(t, clock, memstore.New())
	pa := mustPolicy(t, func(p *engine.Policy) { p.Credential = &fakeCred{name: "a"}; p.MaxDelay = time.Second })
	pb := mustPolicy(t, func(p *engine.Policy) { p.Credential = &fakeCred{name: "b"}; p.MaxDelay = time.Second })
	res, err := f.runner.Run(t.Context(), newCall(t, limited.URL+"/x", "GET", pa, ""))
	if err != nil || res.Outcome != engine.OutcomeHintExceedsMaxDelay || limited.count() != 1 {
		t.Fatalf("a: %v outcome %s, sent %d", err, res.Outcome, limited.count())
	}
	// a's gate is closed: a second call on a is refused without a send.
	res, err = f.runner.Run(t.Context(), newCall(t, limited.URL+"/x", "GET", pa, ""))
	if err != nil || res.Outcome != engine.OutcomeGateClosed || limited.count() != 1 {
		t.Fatalf("a again: %v outcome %s, sent %d; want gate_closed", err, res.Outcome, limited.count())
	}
	// b, another credential to the same host, is not behind a's gate.
	_, err = f.runner.Run(t.Context(), newCall(t, limited.URL+"/x", "GET", pb, ""))
	if err != nil || limited.count() != 2 {
		t.Fatalf("b: %v, sent %d; want b's attempt sent", err, limited.count())
	}
}

// TestStreamCredential: ExecuteStream applies the credential as Execute
// does: on every attempt, and a credential that cannot be had ends the
// stream with OutcomeCredentialsUnavailable, no head and the cause.
func TestStreamCredential(t *testing.T) {
	up := newUpstream(t, reply{status: 503, kv: []string{"Retry-After", "1"}}, reply{status: 200, body: "streamed"})
	f := newFixture(t, engine.NewFakeClock(time.Now()), nil)
	cred := &fakeCred{name: "k"}
	sink := &recordingSink{}
	res, err := f.runner.Stream(t.Context(), streamCall(t, up.URL, func(p *engine.Policy) { p.Credential = cred }), sink)
	if err != nil || res.Outcome != engine.OutcomeSuccess || sink.body() != "streamed" {
		t.Fatalf("%v outcome %s body %q", err, res.Outcome, sink.body())
	}
	if len(cred.seen) != 2 || up.requests[0].Header.Get("X-Key") != "tok0" || up.requests[1].Header.Get("X-Key") != "tok0" {
		t.Fatalf("applied %d times", len(cred.seen))
	}

	cred.fail = errors.New("no token")
	sink = &recordingSink{}
	n := up.count()
	res, err = f.runner.Stream(t.Context(), streamCall(t, up.URL, func(p *engine.Policy) { p.Credential = cred }), sink)
	if err != nil || res.Outcome != engine.OutcomeCredentialsUnavailable || res.HeadSent || up.count() != n ||
		res.BodyEnd != engine.BodyEndNoResponse || !strings.Contains(res.Error, "credential k unavailable: no token") {
		t.Fatalf("%v outcome %s head %v sent %d end %s error %q", err, res.Outcome, res.HeadSent, up.count()-n, res.BodyEnd, res.Error)
	}
}

// TestRunCredentialComponentMissingIsCallersError: a signature that covers
// a header the caller did not send cannot be made: the call returns the
// *credential.ComponentError (the server answers INVALID_ARGUMENT), sends
// nothing, and gives its admission back; it is not an unavailable
// credential (no OutcomeCredentialsUnavailable, nothing observed).
func TestRunCredentialComponentMissingIsCallersError(t *testing.T) {
	up := newUpstream(t, reply{status: 200})
	obs := &credObserver{}
	r := engine.NewRunner(memstore.New(), engine.WithObserver(obs))
	key := filepath.Join(t.TempDir(), "hmac")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	cred, err := credential.New(credential.Spec{Name: "sig", Kind: credential.KindHTTPSignature, Signature: &credential.SignatureSpec{
		Algorithm: "hmac-sha256", KeyID: "k", Key: credential.SecretRef{File: key}, Components: []string{"@method", "content-type"},
	}}, credential.Deps{Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	p := mustPolicy(t, func(p *engine.Policy) { p.Credential = cred })
	res, err := r.Run(t.Context(), newCall(t, up.URL+"/x", "GET", p, ""))
	var ce *credential.ComponentError
	if !errors.As(err, &ce) || ce.Component != "content-type" {
		t.Fatalf("Run: %v, want a *credential.ComponentError for content-type", err)
	}
	if up.count() != 0 || res.Outcome == engine.OutcomeCredentialsUnavailable || len(obs.unavailable) != 0 {
		t.Fatalf("upstream saw %d, outcome %s, unavailable %q: want nothing sent, not unavailable", up.count(), res.Outcome, obs.unavailable)
	}
	// The admission was given back: the same gate admits a good call at once.
	c := newCall(t, up.URL+"/x", "GET", p, "")
	c.Header = http.Header{"Content-Type": {"application/json"}}
	if res, err := r.Run(t.Context(), c); err != nil || res.Outcome != engine.OutcomeSuccess || up.count() != 1 {
		t.Fatalf("with the header: %v %s, upstream saw %d", err, res.Outcome, up.count())
	}
}
