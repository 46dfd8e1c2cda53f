package suite

import (
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// A handler's share counts the samples under it, leaves out those under
// the HTTP client, and names its parts per call.
func TestHandlerShares(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	handler := fn(1, "github.com/retrybroker/retrybroker/internal/server.(*Service).Execute")
	run := fn(2, "github.com/retrybroker/retrybroker/internal/engine.(*Runner).Run")
	grow := fn(3, "github.com/retrybroker/retrybroker/internal/engine.(*callState).received")
	do := fn(4, "net/http.(*Client).Do")
	other := fn(5, "github.com/retrybroker/retrybroker/bench/baseline.Forwarder.Execute")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lh, lr, lg, ld, lo := loc(1, handler), loc(2, run), loc(3, grow), loc(4, do), loc(5, other)
	ms := int64(time.Millisecond)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lg, lr, lh}, Value: []int64{1, 30 * ms}}, // leaf first
			{Location: []*profile.Location{lr, lh}, Value: []int64{1, 70 * ms}},
			{Location: []*profile.Location{ld, lr, lh}, Value: []int64{1, 500 * ms}}, // the HTTP client: left out
			{Location: []*profile.Location{lo}, Value: []int64{1, 900 * ms}},         // another handler
		},
	}
	got := handlerShares(p, []HandlerShare{{Variant: "broker", Handler: handler.Name, Calls: 1000}}, 8)
	if len(got) != 1 {
		t.Fatalf("shares: %+v", got)
	}
	h := got[0]
	if h.PerCall != 100*time.Microsecond {
		t.Errorf("per call %v, want 100µs (30 ms + 70 ms over 1000 calls, the client's 500 ms left out)", h.PerCall)
	}
	// Run holds all of it (a wrapper, not named); received 30 µs is named.
	if len(h.Top) != 1 || h.Top[0].Func != "engine.(*callState).received" || h.Top[0].PerCall != 30*time.Microsecond {
		t.Errorf("parts %+v, want engine.(*callState).received 30µs alone", h.Top)
	}
	if s := shareText(h); !strings.Contains(s, "broker: 100 µs") || !strings.Contains(s, "engine.(*callState).received 30 µs") {
		t.Errorf("text %q", s)
	}
	if h.Samples != 3 {
		t.Errorf("samples %d, want 3 (the client's one too)", h.Samples)
	}

	// A handler the profile does not hold is reported as unknown, not
	// as 0 µs per call.
	gone := handlerShares(p, []HandlerShare{{Variant: "broker", Handler: "github.com/retrybroker/retrybroker/internal/server.(*Service).renamed", Calls: 1000}}, 8)
	if len(gone) != 1 || gone[0].Samples != 0 || sharesKnown([]HandlerShare{gone[0], h}) {
		t.Fatalf("missing handler: %+v", gone)
	}
	if s := shareText(gone[0]); !strings.Contains(s, "not in the profile") || strings.Contains(s, "0 µs") {
		t.Errorf("missing handler's text %q", s)
	}
}

func TestShortFunc(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/retrybroker/retrybroker/internal/engine.(*callState).received":         "engine.(*callState).received",
		"google.golang.org/grpc.(*GenericServerStream[go.shape.struct { a [3]int }]).Send": "google.golang.org/grpc.(*GenericServerStream[…]).Send",
	} {
		if got := shortFunc(in); got != want {
			t.Errorf("shortFunc(%q) = %q, want %q", in, got, want)
		}
	}
}
