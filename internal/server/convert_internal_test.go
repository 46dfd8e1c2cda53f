package server

import (
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// TestEnumTablesComplete: every engine value has a proto value of the same
// name and every proto value an engine one, so conversions never fall back
// to UNSPECIFIED.
func TestEnumTablesComplete(t *testing.T) {
	for name, tc := range map[string]struct {
		missing   []string
		converted int
		proto     int
	}{
		"reason":    {reasons.missing, len(reasons.fromProto), len(rbv1.Reason_name)},
		"action":    {actions.missing, len(actions.fromProto), len(rbv1.Action_name)},
		"outcome":   {outcomes.missing, len(outcomes.fromProto), len(rbv1.Outcome_name)},
		"transport": {transports.missing, len(transports.fromProto), len(rbv1.TransportError_name)},
	} {
		if len(tc.missing) > 0 {
			t.Errorf("%s: engine values without a proto value: %v", name, tc.missing)
		}
		if tc.converted != tc.proto {
			t.Errorf("%s: %d engine values map to the %d proto values", name, tc.converted, tc.proto)
		}
	}
	// Conversions go by name: spot-check values whose numbers could drift.
	if got := rbv1.Reason(reasons.proto(engine.ReasonBreakerOpen)); got != rbv1.Reason_REASON_BREAKER_OPEN {
		t.Errorf("ReasonBreakerOpen -> %s", got)
	}
	if got := rbv1.Outcome(outcomes.proto(engine.OutcomeShuttingDown)); got != rbv1.Outcome_OUTCOME_SHUTTING_DOWN {
		t.Errorf("OutcomeShuttingDown -> %s", got)
	}
	if k, ok := transports.engine(int32(rbv1.TransportError_TRANSPORT_ERROR_BODY_INCOMPLETE)); !ok || k != engine.TransportBodyIncomplete {
		t.Errorf("TRANSPORT_ERROR_BODY_INCOMPLETE -> %v, %v", k, ok)
	}
	if got := rbv1.Action(actions.proto(engine.ActionDoNotRetry)); got != rbv1.Action_ACTION_DO_NOT_RETRY {
		t.Errorf("ActionDoNotRetry -> %s", got)
	}
}

// TestFullStreamChunkFitsThePoolTier: a chunk message carrying a full
// engine.StreamChunkSize of body encodes within 32 KiB, the largest tier
// of grpc-go's buffer pool below 1 MiB, so each queued chunk holds 32 KiB
// and not 1 MiB.
func TestFullStreamChunkFitsThePoolTier(t *testing.T) {
	m := &rbv1.ExecuteStreamResponse{Event: &rbv1.ExecuteStreamResponse_Chunk{Chunk: make([]byte, engine.StreamChunkSize)}}
	if n := proto.Size(m); n > 32<<10 {
		t.Fatalf("a full chunk encodes to %d bytes, above the 32 KiB pool tier", n)
	}
}

// resultToProto's one-allocation block gives the same message as the
// slices of their own, below, at and above its room (one attempt, six
// header lines).
func TestResultToProtoBlock(t *testing.T) {
	at := func(n int) engine.AttemptRecord {
		return engine.AttemptRecord{
			Number: n, Start: time.Unix(1700000000, int64(n)), Duration: time.Duration(n) * time.Millisecond, Status: 503,
			Decision: engine.Decision{Action: engine.ActionRetry, Reason: engine.ReasonServerHint, Delay: time.Second, HasHint: true, Hint: time.Second, HintSource: "retry-after"},
		}
	}
	for _, tc := range []struct{ attempts, headers int }{{0, 0}, {1, 0}, {1, 6}, {2, 6}, {1, 7}, {3, 9}} {
		h := http.Header{}
		for i := range tc.headers {
			h.Add("X-H"+strconv.Itoa(i%4), strconv.Itoa(i)) // repeated names too
		}
		res := &engine.Result{
			Outcome: engine.OutcomeAttemptsExhausted, HasRetryAfter: true, RetryAfter: time.Second,
			Response: &engine.FinalResponse{Status: 503, Header: h, Body: []byte("x")},
		}
		for i := range tc.attempts {
			res.Attempts = append(res.Attempts, at(i+1))
		}
		got := resultToProto(res, "github")
		want := &rbv1.ExecuteResponse{
			Outcome: rbv1.Outcome_OUTCOME_ATTEMPTS_EXHAUSTED, Provider: "github", RetryAfter: durationpb.New(time.Second),
			Response: &rbv1.HttpResponse{StatusCode: 503, Headers: fromHTTPHeader(h), Body: []byte("x")},
			Attempts: attemptsToProto(res.Attempts, "github"),
		}
		if !proto.Equal(got, want) {
			t.Errorf("%d attempts, %d headers:\n got %v\nwant %v", tc.attempts, tc.headers, got, want)
		}
		if len(got.GetAttempts()) != tc.attempts || len(got.GetResponse().GetHeaders()) != tc.headers {
			t.Errorf("%d attempts, %d headers: got %d and %d", tc.attempts, tc.headers, len(got.GetAttempts()), len(got.GetResponse().GetHeaders()))
		}
	}
}

// TestToHTTPHeaderAsAdd: toHTTPHeader gives what Header.Add gives line by
// line (canonical names, values in order, duplicates kept), and a value
// added afterwards to one name leaves the others as they were.
func TestToHTTPHeaderAsAdd(t *testing.T) {
	for _, lines := range [][][2]string{
		nil,
		{{"retry-after", "5"}},
		{{"Retry-After", "5"}, {"content-type", "application/json"}},
		{{"x-a", "1"}, {"X-B", "2"}, {"X-A", "3"}, {"x-b", "4"}, {"x-a", "5"}},
		{{"weird name", "v"}, {"", "empty name"}, {"x-c", ""}},
	} {
		var hs []*rbv1.HttpHeader
		want := http.Header{}
		for _, l := range lines {
			hs = append(hs, &rbv1.HttpHeader{Name: l[0], Value: l[1]})
			want.Add(l[0], l[1])
		}
		got := toHTTPHeader(hs)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %v, want %v", lines, got, want)
			continue
		}
		before := got.Clone()
		for k := range got {
			got.Add(k, "added")
			for k2, vs := range got {
				if k2 != k && !slices.Equal(vs, before[k2]) {
					t.Errorf("%q: adding to %q changed %q to %q", lines, k, k2, vs)
				}
			}
			got[k] = before[k]
		}
	}
}
