package server

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"

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

// enumMap maps engine values to proto numbers and back, both by name. An
// engine value is a small non-negative int8, so the way to proto is a
// slice indexed by it (a map lookup hashed on every attempt of every
// call, three times).
type enumMap[E ~int8] struct {
	toProto   []int32 // by engine value; 0 (UNSPECIFIED) for a value out of range
	fromProto map[int32]E
	missing   []string // engine names without a proto value
}

func enumTable[E ~int8](values []E, name func(E) string, protoValues map[string]int32) enumMap[E] {
	m := enumMap[E]{fromProto: make(map[int32]E, len(values))}
	for _, v := range values {
		n, ok := protoValues[name(v)]
		if !ok {
			m.missing = append(m.missing, name(v))
			continue
		}
		if v < 0 {
			panic("enumTable: negative engine value " + name(v)) // engine enums start at 0
		}
		if int(v) >= len(m.toProto) {
			m.toProto = append(m.toProto, make([]int32, int(v)+1-len(m.toProto))...)
		}
		m.toProto[v] = n
		m.fromProto[n] = v
	}
	return m
}

func (m enumMap[E]) proto(v E) int32 {
	if v < 0 || int(v) >= len(m.toProto) {
		return 0
	}
	return m.toProto[v]
}

func (m enumMap[E]) engine(n int32) (E, bool) {
	v, ok := m.fromProto[n]
	return v, ok
}

// toHTTPHeader builds an http.Header keeping order and duplicates.
func toHTTPHeader(hs []*rbv1.HttpHeader) http.Header {
	h := make(http.Header, len(hs))
	// Each name's first value is a slice of one array for all of them (a
	// slice of capacity one, so a second value of the name is appended
	// elsewhere), not an allocation per name as Header.Add makes.
	first := make([]string, len(hs))
	for i, x := range hs {
		k := textproto.CanonicalMIMEHeaderKey(x.GetName())
		if vs, ok := h[k]; ok {
			h[k] = append(vs, x.GetValue())
			continue
		}
		first[i] = x.GetValue()
		h[k] = first[i : i+1 : i+1]
	}
	return h
}

// fromHTTPHeader lists h's lines: names in sorted order, each name's values
// in the order received, duplicates kept. (net/http does not keep the order
// across different names.) The messages share one allocation.
func fromHTTPHeader(h http.Header) []*rbv1.HttpHeader {
	return headersInto(h, nil, nil)
}

// headersInto is fromHTTPHeader into block and out when they have room
// (allocating one slice of messages and one of pointers when not).
func headersInto(h http.Header, block []rbv1.HttpHeader, out []*rbv1.HttpHeader) []*rbv1.HttpHeader {
	if len(h) == 0 {
		return nil
	}
	var kbuf [16]string
	keys := kbuf[:0]
	n := 0
	for k, vs := range h {
		keys = append(keys, k)
		n += len(vs)
	}
	slices.Sort(keys)
	if len(block) < n {
		block = make([]rbv1.HttpHeader, n)
	}
	if cap(out) < n {
		out = make([]*rbv1.HttpHeader, 0, n)
	}
	out = out[:0]
	for _, k := range keys {
		for _, v := range h[k] {
			m := &block[len(out)]
			m.Name, m.Value = k, v
			out = append(out, m)
		}
	}
	return out
}

func decisionToProto(d engine.Decision, provider string) *rbv1.Decision {
	var b decisionBlock
	return b.fill(d, provider)
}

// decisionBlock holds a Decision message and its durations, so that one
// allocation makes all three.
type decisionBlock struct {
	d           rbv1.Decision
	delay, hint durationpb.Duration
}

func (b *decisionBlock) fill(d engine.Decision, provider string) *rbv1.Decision {
	pd := &b.d
	pd.Action = rbv1.Action(actions.proto(d.Action))
	pd.Reason = rbv1.Reason(reasons.proto(d.Reason))
	pd.HintSource, pd.Provider, pd.Rule = d.HintSource, provider, d.Rule
	if d.Action == engine.ActionRetry {
		setDuration(&b.delay, d.Delay)
		pd.Delay = &b.delay
	}
	if d.HasHint {
		setDuration(&b.hint, d.Hint)
		pd.Hint = &b.hint
	}
	return pd
}

// setDuration sets m to d, as durationpb.New does.
func setDuration(m *durationpb.Duration, d time.Duration) {
	nanos := d.Nanoseconds()
	m.Seconds, m.Nanos = nanos/1e9, int32(nanos%1e9)
}
