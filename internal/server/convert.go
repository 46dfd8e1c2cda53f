package server

import (
	"net/http"
	"slices"

	"google.golang.org/protobuf/types/known/durationpb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/engine"
)

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
		Action:     rbv1.Action(d.Action),
		Reason:     rbv1.Reason(d.Reason),
		HintSource: d.HintSource,
		Provider:   provider,
	}
	if d.Action == engine.ActionRetry {
		pd.Delay = durationpb.New(d.Delay)
	}
	if d.HasHint {
		pd.Hint = durationpb.New(d.Hint)
	}
	return pd
}
