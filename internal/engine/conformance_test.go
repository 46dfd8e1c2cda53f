package engine_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/vectors"
)

// maxRand always draws the top of the range, minRand the bottom, so the
// backoff bounds of the vectors are checked at both edges.
type maxRand struct{}

func (maxRand) Int64N(n int64) int64 { return n - 1 }

type minRand struct{}

func (minRand) Int64N(int64) int64 { return 0 }

// decideVector runs one vector through the engine in-process.
func decideVector(t *testing.T, v *vectors.Vector, rnd engine.Rand) engine.Decision {
	t.Helper()
	p := engine.DefaultPolicy()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	in := engine.Input{Method: v.Method, Attempt: v.Attempt, Reader: p.ReaderFor(v.Provider), Now: v.Now}
	h := http.Header{}
	for _, kv := range v.Headers {
		h.Add(kv[0], kv[1])
	}
	in.HasIdempotencyKey = h.Get(p.IdempotencyHeader) != ""
	if v.TransportError != "" {
		k, ok := engine.ParseTransportError(v.TransportError)
		if !ok {
			t.Fatalf("unknown transport_error %q", v.TransportError)
		}
		in.Transport = k
	} else {
		in.Response = &providers.Response{
			Status: v.Status, Header: h, Body: []byte(v.Body), Now: v.Now,
			Method: v.Method, Attempt: v.Attempt,
		}
	}
	return p.Decide(&in, rnd)
}

// readVector reads a vector's response with its provider's reader, for the
// quota and scope expectations a decision does not carry.
func readVector(v *vectors.Vector) vectors.GotReading {
	p := engine.DefaultPolicy()
	h := http.Header{}
	for _, kv := range v.Headers {
		h.Add(kv[0], kv[1])
	}
	r := &providers.Response{Status: v.Status, Header: h, Body: []byte(v.Body), Now: v.Now, Method: v.Method, Attempt: v.Attempt}
	got := p.ReaderFor(v.Provider).Read(r)
	out := vectors.GotReading{HasQuota: got.HasQuota, Scope: got.Scope}
	if got.HasQuota {
		out.Remaining, out.ResetIn, out.Source, out.Limit = got.Quota.Remaining, got.Quota.Reset.Sub(v.Now), got.Quota.Source, got.Quota.Limit
	}
	return out
}

func toGot(d engine.Decision) vectors.Got {
	return vectors.Got{
		Action: d.Action.String(), Delay: d.Delay, HintSource: d.HintSource,
		Reason: d.Reason.String(), Hint: d.Hint, HasHint: d.HasHint, Rule: d.Rule,
	}
}

// TestConformanceVectorsInProcess runs the shared vectors
// (testdata/classify.jsonl) and the catalog's (testdata/catalog.jsonl).
func TestConformanceVectorsInProcess(t *testing.T) {
	vs, err := vectors.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i := range vs {
		v := &vs[i]
		t.Run(v.Name, func(t *testing.T) {
			for _, rnd := range []engine.Rand{engine.GlobalRand, maxRand{}, minRand{}} {
				if err := v.Check(toGot(decideVector(t, v, rnd))); err != nil {
					t.Errorf("rand %T: %v", rnd, err)
				}
			}
			// The catalog's vectors also say which quota (or none) and scope
			// the reader reports.
			if v.TransportError == "" && strings.HasPrefix(v.Name, "catalog-") {
				if err := v.CheckReading(readVector(v)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
