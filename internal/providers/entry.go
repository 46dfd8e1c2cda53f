package providers

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Entry is a compiled catalog entry: a provider's hint readers, verdict
// headers, quota signals, scope headers and rules. It implements HintReader
// and BodyReader, is immutable, and is safe for concurrent use. Build one
// with Compile or take one from a Catalog.
type Entry struct {
	spec     EntrySpec
	name     string
	origin   string
	hosts    []string
	extra    []int
	hints    []hintStep
	verdicts []field
	// notExecuted[i] reports that verdicts[i]'s "true" says the request
	// was not executed.
	notExecuted []bool
	quotas      []quotaStep
	scope       *scopeStep
	rules       []*rule
	// bodyFor[s] reports whether a response with status s needs the body.
	bodyFor    [600]bool
	bodyOthers bool // statuses outside 0-599
}

// hintStep is one compiled HintSpec: when it applies (the statuses, a
// header that must say 0) and its reader.
type hintStep struct {
	statuses []int
	whenZero *field
	reader   hintReader
	desc     string
}

// hintReader reads a hint from one place of a response. Each kind of hint
// (a header in a value format, an IETF RateLimit field, a body field, a
// google.rpc.RetryInfo, the longest of a group) compiles into a type of its
// own.
type hintReader interface {
	read(r *Response) (Hint, bool)
	// readsBody reports whether the reader looks at the body (which the
	// engine then peeks at for error statuses: Entry.NeedsBody).
	readsBody() bool
}

// headerHintReader reads a delay in one single-value header.
type headerHintReader struct {
	f      field
	format valueFormat
}

// rateLimitHintReader reads an IETF RateLimit field: the largest reset
// among items with nothing remaining.
type rateLimitHintReader struct{ f field }

// bodyFieldHintReader reads a JSON number of seconds at a dotted path of
// an error response's body.
type bodyFieldHintReader struct {
	path   []string
	source string
}

// googleRetryInfoReader reads the retryDelay of a google.rpc.RetryInfo in
// an error response's body.
type googleRetryInfoReader struct{}

// longestHintReader is a group: the longest of its steps' valid hints.
type longestHintReader struct{ steps []hintStep }

// quotaStep is one compiled QuotaSpec: its reader, and the header that
// gives the quota's limit, if any.
type quotaStep struct {
	reader quotaReader
	limit  *field
	desc   string
}

// quotaReader reads the remaining count and its reset from a response.
// Each kind of quota (a count with a reset header, a count reset after a
// fixed time, the smallest of a header family, an IETF RateLimit field)
// compiles into a type of its own.
type quotaReader interface {
	read(r *Response) (Quota, bool)
}

// headerQuota reads a remaining-count header and a reset header in a value
// format.
type headerQuota struct {
	remaining, reset field
	format           valueFormat
}

// countQuota reads a remaining-count header whose reset is a fixed resetIn
// after the response.
type countQuota struct {
	remaining field
	resetIn   time.Duration
}

// prefixQuota reads the smallest count among the headers that start with
// prefix (canonical), reset after resetIn.
type prefixQuota struct {
	prefix  string
	resetIn time.Duration
}

// rateLimitQuota reads an IETF RateLimit field, with its RateLimit-Policy
// field when policy is set.
type rateLimitQuota struct {
	header field
	policy *field
}

// scopeStep is a compiled ScopeSpec.
type scopeStep struct {
	header *field
	global *field
}

// ruleAction is a rule's outcome.
type ruleAction int8

const (
	actionRetry ruleAction = iota
	actionDoNotRetry
)

// rule is one compiled RuleSpec.
type rule struct {
	name      string // "entry/rule"
	statuses  []int
	contains  [][]byte // BodyContains
	when      *celProgram
	action    ruleAction
	reason    string
	delay     *delayStep
	needsBody bool
	// notExecuted marks a retry rule whose match says the request was not
	// executed.
	notExecuted bool
	// failed is set at the rule's first evaluation error, which is logged
	// once; later errors are not.
	failed atomic.Bool
}

// reportError logs the rule's first evaluation error (the rule does not
// match). The error names what failed (a bound, a missing field), never
// the response's values.
func (ru *rule) reportError(err error) {
	if ru.failed.CompareAndSwap(false, true) {
		slog.Warn("provider rule failed to evaluate; it does not match (logged once per rule)",
			"rule", ru.name, "error", err.Error())
	}
}

// delayStep is a compiled DelaySpec.
type delayStep struct {
	header *field
	format valueFormat
	path   []string
	unit   time.Duration
	expr   *celProgram
	source string
}

// Name returns the entry's name, as used in policies.
func (e *Entry) Name() string { return e.name }

// Origin says where the entry was defined: empty for the built-in catalog's
// entries, else what the Compiler was given (the configuration loader
// gives "FILE:LINE", with ", extends NAME" for an entry that extends
// another).
func (e *Entry) Origin() string { return e.origin }

// Spec returns the declarative form the entry was compiled from. The
// returned value shares slices with the entry: callers must not modify it.
func (e *Entry) Spec() EntrySpec { return e.spec }

// Hosts returns the host patterns the entry serves; callers must not modify
// the slice.
func (e *Entry) Hosts() []string { return e.hosts }

// ExtraRetryableStatuses returns the statuses the entry adds to the policy's
// retryable list; callers must not modify the slice.
func (e *Entry) ExtraRetryableStatuses() []int { return e.extra }

// NeedsBody reports whether Read looks at the body of a response with this
// status: when a rule that applies to the status references body or
// body_text, or, for error statuses (>= 400), when a hint step reads a body
// field.
func (e *Entry) NeedsBody(status int) bool {
	if status >= 0 && status < len(e.bodyFor) {
		return e.bodyFor[status]
	}
	return e.bodyOthers
}

// Read returns what the response says. The hint steps run in order (the
// first valid hint wins), then the verdict headers (error statuses only),
// the quota signals (the first that reads wins) and the scope headers; then
// the rules that apply to the status are evaluated in order, and the first
// that matches sets the verdict, possibly the hint, and Reading.Rule. A nil
// response gives an empty Reading.
func (e *Entry) Read(r *Response) Reading {
	var out Reading
	if r != nil {
		e.read(r, &out, nil)
	}
	return out
}

// Trace says which part of an entry produced each part of a Reading, for
// `broker providers test`.
type Trace struct {
	// Hint describes the hint step that produced the hint; empty without.
	Hint string
	// Verdict describes the header that gave the verdict; empty when none
	// did (a rule's verdict is in Rules).
	Verdict string
	// Quota describes the quota step that read the quota; empty without.
	Quota string
	// Rules lists the rules that were evaluated, in order.
	Rules []RuleTrace
}

// RuleTrace is one rule evaluation.
type RuleTrace struct {
	// Name is "entry/rule".
	Name string
	// Matched reports whether the condition held.
	Matched bool
	// Err is the evaluation error, if any (the rule then does not match),
	// or why a matching rule's delay could not be computed.
	Err string
}

// Explain reads the response like Read and also says where each part of
// the Reading came from.
func (e *Entry) Explain(r *Response) (Reading, Trace) {
	var out Reading
	var tr Trace
	if r != nil {
		e.read(r, &out, &tr)
	}
	return out, tr
}

func (e *Entry) read(r *Response, out *Reading, tr *Trace) {
	for i := range e.hints {
		if h, ok := e.hints[i].read(r); ok {
			out.Hint, out.HasHint = h, true
			if tr != nil && tr.Hint == "" {
				tr.Hint = e.hints[i].desc
			}
			break
		}
	}
	if r.Status >= 400 {
		for i, f := range e.verdicts {
			if v, ok := single(r.Header, f.key); ok {
				switch trimOWS(v) {
				case "true":
					out.Verdict = VerdictRetry
					out.NotExecuted = e.notExecuted[i]
				case "false":
					out.Verdict = VerdictDoNotRetry
				}
				if out.Verdict != VerdictNone {
					if tr != nil {
						tr.Verdict = "should_retry " + f.source + ": " + out.Verdict.String()
						if out.NotExecuted {
							tr.Verdict += " (not executed: safe for any method)"
						}
					}
					break
				}
			}
		}
	}
	for i := range e.quotas {
		if q, ok := e.quotas[i].read(r); ok {
			out.Quota, out.HasQuota = q, true
			if tr != nil {
				tr.Quota = e.quotas[i].desc
			}
			break
		}
	}
	if e.scope != nil {
		out.Scope = e.scope.read(r.Header)
	}
	if len(e.rules) > 0 {
		e.applyRules(r, out, tr)
	}
}

func (e *Entry) applyRules(r *Response, out *Reading, tr *Trace) {
	var in *ruleInput
	for _, ru := range e.rules {
		if !statusIn(r.Status, ru.statuses) || !containsAny(r.Body, ru.contains) {
			continue
		}
		if in == nil {
			in = &ruleInput{r: r}
		}
		matched, err := ru.when.evalBool(in)
		rt := RuleTrace{Name: ru.name, Matched: matched}
		if err != nil {
			rt.Err = err.Error()
			if errRuleLimit(err) {
				ru.reportError(err)
			}
		}
		if !matched {
			if tr != nil {
				tr.Rules = append(tr.Rules, rt)
			}
			continue
		}
		out.Rule = ru.name
		switch ru.action {
		case actionDoNotRetry:
			out.Verdict, out.NotExecuted = VerdictDoNotRetry, false
		case actionRetry:
			out.Verdict = VerdictRetry
			out.NotExecuted = out.NotExecuted || ru.notExecuted
			if ru.delay != nil {
				h, err := ru.delay.eval(in)
				if err != nil {
					rt.Err = "delay: " + err.Error()
				} else {
					out.Hint, out.HasHint = h, true
					if tr != nil {
						tr.Hint = "rule " + ru.name
					}
				}
			}
		}
		if tr != nil {
			tr.Rules = append(tr.Rules, rt)
		}
		return
	}
}

// containsAny reports whether body contains one of subs; no subs means
// yes.
func containsAny(body []byte, subs [][]byte) bool {
	if len(subs) == 0 {
		return true
	}
	for _, s := range subs {
		if bytes.Contains(body, s) {
			return true
		}
	}
	return false
}

func statusIn(status int, statuses []int) bool {
	if len(statuses) == 0 {
		return true
	}
	for _, s := range statuses {
		if s == status {
			return true
		}
	}
	return false
}

// read runs one hint step.
func (s *hintStep) read(r *Response) (Hint, bool) {
	if !statusIn(r.Status, s.statuses) {
		return Hint{}, false
	}
	if s.whenZero != nil && !isZero(r.Header, *s.whenZero) {
		return Hint{}, false
	}
	return s.reader.read(r)
}

func (s *hintStep) readsBody() bool { return s.reader.readsBody() }

func (h *headerHintReader) read(r *Response) (Hint, bool) { return headerHint(r, h.f, h.format) }
func (*headerHintReader) readsBody() bool                 { return false }

func (h *rateLimitHintReader) read(r *Response) (Hint, bool) {
	lines := r.Header[h.f.key]
	if len(lines) == 0 {
		return Hint{}, false
	}
	d, ok := RateLimitDelay(lines)
	return Hint{Delay: d, Source: h.f.source}, ok
}
func (*rateLimitHintReader) readsBody() bool { return false }

func (h *bodyFieldHintReader) read(r *Response) (Hint, bool) {
	if r.Status < 400 || len(r.Body) == 0 {
		return Hint{}, false
	}
	raw, ok := lookupJSONPath(parseJSONBody(r.Body), h.path)
	if !ok {
		return Hint{}, false
	}
	d, err := jsonSeconds(raw, time.Second)
	return Hint{Delay: d, Source: h.source}, err == nil
}
func (*bodyFieldHintReader) readsBody() bool { return true }

func (googleRetryInfoReader) read(r *Response) (Hint, bool) {
	if r.Status < 400 {
		return Hint{}, false
	}
	d, ok := ParseGoogleRetryInfo(r.Body)
	return Hint{Delay: d, Source: sourceGoogleBody}, ok
}
func (googleRetryInfoReader) readsBody() bool { return true }

func (h *longestHintReader) read(r *Response) (Hint, bool) {
	var best Hint
	found := false
	for i := range h.steps {
		if hint, ok := h.steps[i].read(r); ok && (!found || hint.Delay > best.Delay) {
			best, found = hint, true
		}
	}
	return best, found
}

func (h *longestHintReader) readsBody() bool {
	for i := range h.steps {
		if h.steps[i].readsBody() {
			return true
		}
	}
	return false
}

// Errors of rule delays, reported by Explain.
var (
	errNotNumber = errors.New("value is not a non-negative JSON number")
	errNoHeader  = errors.New("header absent or invalid")
	errNoField   = errors.New("body field absent")
)

// jsonSeconds converts a raw JSON number of units (seconds or
// milliseconds) to a delay, exactly to the nanosecond for seconds (see
// parseJSONSeconds). Negative numbers and other JSON types are errors.
func jsonSeconds(raw []byte, unit time.Duration) (time.Duration, error) {
	d, ok := parseJSONSeconds(raw)
	if !ok {
		return 0, errNotNumber
	}
	if unit == time.Millisecond {
		return d / 1000, nil
	}
	return d, nil
}

// read runs one quota step.
func (q *quotaStep) read(r *Response) (Quota, bool) {
	out, ok := q.reader.read(r)
	if !ok || out.Reset.IsZero() {
		return Quota{}, false
	}
	if q.limit != nil {
		if v, ok := single(r.Header, q.limit.key); ok {
			if n, ok := ParseCount(v); ok {
				out.Limit = n
			}
		}
	}
	return out, true
}

func (q *headerQuota) read(r *Response) (Quota, bool) {
	return quota(r, q.remaining, q.reset, q.format)
}

func (q *countQuota) read(r *Response) (Quota, bool) {
	v, ok := single(r.Header, q.remaining.key)
	if !ok {
		return Quota{}, false
	}
	var out Quota
	out.Remaining, ok = ParseCount(v)
	out.Reset, out.Source = r.Now.Add(q.resetIn), q.remaining.source
	return out, ok
}

// read reads the smallest count among headers starting with the
// prefix. Headers that are not a single count (Azure's
// x-ms-ratelimit-remaining-resource lists "name;count" pairs) are skipped.
func (q *prefixQuota) read(r *Response) (Quota, bool) {
	var out Quota
	found := false
	for k, vs := range r.Header {
		if len(k) < len(q.prefix) || !strings.EqualFold(k[:len(q.prefix)], q.prefix) || len(vs) != 1 {
			continue
		}
		n, ok := ParseCount(vs[0])
		if !ok {
			continue
		}
		src := lowerASCII(k)
		// The smallest count wins; among equal counts the first name in
		// sorted order, so the result does not depend on map order.
		if !found || n < out.Remaining || (n == out.Remaining && src < out.Source) {
			out.Remaining, out.Source, found = n, src, true
		}
	}
	if !found {
		return Quota{}, false
	}
	out.Reset = r.Now.Add(q.resetIn)
	return out, true
}

// read reads an IETF RateLimit field as a quota: the most
// constraining item (the smallest remaining count; on a tie the latest
// reset) among items counted in requests. RateLimit-Policy, when present and
// valid, says each policy's quota unit ("qu"; items of a policy counted in
// another unit, such as content-bytes, are skipped), its window ("w",
// used as the reset of an item without "t") and its quota ("q", reported as
// Limit).
func (q *rateLimitQuota) read(r *Response) (Quota, bool) {
	lines := r.Header[q.header.key]
	if len(lines) == 0 {
		return Quota{}, false
	}
	items, ok := ParseRateLimit(lines)
	if !ok {
		return Quota{}, false
	}
	var policies []RateLimitPolicy
	if q.policy != nil {
		policies, _ = ParseRateLimitPolicy(r.Header[q.policy.key])
	}
	var out Quota
	found := false
	for _, it := range items {
		if !it.HasRemaining {
			continue
		}
		pol, hasPol := findPolicy(policies, it.Name)
		if hasPol && !pol.CountsRequests() {
			continue
		}
		var reset time.Duration
		switch {
		case it.HasReset:
			reset = it.Reset
		case hasPol && pol.HasWindow:
			reset = pol.Window
		default:
			continue
		}
		at := r.Now.Add(reset)
		if !found || it.Remaining < out.Remaining || (it.Remaining == out.Remaining && at.After(out.Reset)) {
			out = Quota{Remaining: it.Remaining, Reset: at, Source: q.header.source}
			if hasPol {
				out.Limit = pol.Quota
			}
			found = true
		}
	}
	return out, found
}

func findPolicy(ps []RateLimitPolicy, name string) (RateLimitPolicy, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p, true
		}
	}
	return RateLimitPolicy{}, false
}

// read returns the scope: the scope header's value in lower case, or
// ScopeGlobal when the global header says "true" (it wins).
func (s *scopeStep) read(h http.Header) string {
	if s.global != nil {
		if v, ok := single(h, s.global.key); ok && strings.EqualFold(trimOWS(v), "true") {
			return ScopeGlobal
		}
	}
	if s.header != nil {
		if v, ok := single(h, s.header.key); ok {
			if v = trimOWS(v); v != "" && len(v) <= 32 {
				return lowerASCII(v)
			}
		}
	}
	return ""
}

// eval computes a rule's delay.
func (d *delayStep) eval(in *ruleInput) (Hint, error) {
	switch {
	case d.header != nil:
		h, ok := headerHint(in.r, *d.header, d.format)
		if !ok {
			return Hint{}, errNoHeader
		}
		return h, nil
	case d.path != nil:
		raw, ok := lookupJSONPath(in.parsedBody(), d.path)
		if !ok {
			return Hint{}, errNoField
		}
		delay, err := jsonSeconds(raw, d.unit)
		if err != nil {
			return Hint{}, err
		}
		return Hint{Delay: delay, Source: d.source}, nil
	default:
		delay, err := d.expr.evalDelay(in)
		if err != nil {
			return Hint{}, err
		}
		return Hint{Delay: delay, Source: d.source}, nil
	}
}
