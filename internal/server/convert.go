package server

import (
	"net/http"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
)

// Enum tables between the engine and the contract, built by name: a value
// is matched to the proto value of the same name, never by number, so a
// reordered or renumbered enum cannot silently change meaning. A value
// without a counterpart maps to UNSPECIFIED (TestEnumTablesComplete fails
// when any does).
var (
	reasons    = enumTable(engine.Reasons(), func(r engine.Reason) string { return r.String() }, rbv1.Reason_value)
	actions    = enumTable([]engine.Action{engine.ActionUnspecified, engine.ActionRetry, engine.ActionDoNotRetry}, func(a engine.Action) string { return "ACTION_" + strings.ToUpper(a.String()) }, rbv1.Action_value)
	outcomes   = enumTable(engine.Outcomes(), func(o engine.Outcome) string { return "OUTCOME_" + strings.ToUpper(o.String()) }, rbv1.Outcome_value)
	transports = enumTable(engine.TransportErrors(), transportName, rbv1.TransportError_value)
)

func transportName(k engine.TransportError) string {
	if k == engine.TransportNone {
		return "TRANSPORT_ERROR_UNSPECIFIED"
	}
	return "TRANSPORT_ERROR_" + strings.ToUpper(k.String())
}

// enumMap maps engine values to proto numbers and back, both by name.
type enumMap[E comparable] struct {
	toProto   map[E]int32
	fromProto map[int32]E
	missing   []string // engine names without a proto value
}

func enumTable[E comparable](values []E, name func(E) string, protoValues map[string]int32) enumMap[E] {
	m := enumMap[E]{toProto: make(map[E]int32, len(values)), fromProto: make(map[int32]E, len(values))}
	for _, v := range values {
		n, ok := protoValues[name(v)]
		if !ok {
			m.missing = append(m.missing, name(v))
			continue
		}
		m.toProto[v] = n
		m.fromProto[n] = v
	}
	return m
}

func (m enumMap[E]) proto(v E) int32 { return m.toProto[v] }

func (m enumMap[E]) engine(n int32) (E, bool) {
	v, ok := m.fromProto[n]
	return v, ok
}

// toHTTPHeader builds an http.Header keeping order and duplicates.
func toHTTPHeader(hs []*rbv1.HttpHeader) http.Header {
	h := make(http.Header, len(hs))
	for _, x := range hs {
		h.Add(x.GetName(), x.GetValue())
	}
	return h
}

// fromHTTPHeader lists h's lines: names in sorted order, each name's values
// in the order received, duplicates kept. (net/http does not keep the order
// across different names.)
func fromHTTPHeader(h http.Header) []*rbv1.HttpHeader {
	keys := make([]string, 0, len(h))
	n := 0
	for k, vs := range h {
		keys = append(keys, k)
		n += len(vs)
	}
	slices.Sort(keys)
	out := make([]*rbv1.HttpHeader, 0, n)
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(out, &rbv1.HttpHeader{Name: k, Value: v})
		}
	}
	return out
}

func decisionToProto(d engine.Decision, provider string) *rbv1.Decision {
	pd := &rbv1.Decision{
		Action:     rbv1.Action(actions.proto(d.Action)),
		Reason:     rbv1.Reason(reasons.proto(d.Reason)),
		HintSource: d.HintSource,
		Provider:   provider,
		Rule:       d.Rule,
	}
	if d.Action == engine.ActionRetry {
		pd.Delay = durationpb.New(d.Delay)
	}
	if d.HasHint {
		pd.Hint = durationpb.New(d.Hint)
	}
	return pd
}
