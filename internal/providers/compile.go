package providers

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"golang.org/x/net/http/httpguts"
)

// SpecError is a problem with one field of an EntrySpec, found by Compile.
// Path names the field from the entry ("rules[2].when", "hints[0].format");
// for a CEL expression, Line and Column (1-based) point inside the
// expression's text, so that a configuration loader can add them to the
// position of the YAML scalar. Line is 0 when the error has no position.
type SpecError struct {
	Path   string
	Line   int
	Column int
	Msg    string
}

// Error formats the error as "path: msg" or "path:line:column: msg".
func (e *SpecError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.Path, e.Line, e.Column, e.Msg)
	}
	return e.Path + ": " + e.Msg
}

// Formats returns the value formats a hint step, a quota reset or a rule's
// delay header may use, with what each means, in documentation order.
func Formats() []FormatInfo {
	out := make([]FormatInfo, len(formats))
	for i, f := range formats {
		out[i] = FormatInfo{Name: f.name, Where: f.def.places.where(), Doc: f.doc}
	}
	return out
}

// FormatInfo describes one value format.
type FormatInfo struct {
	Name string
	// Where is "header" (a header's value, or a structured field of its
	// own) or "body".
	Where string
	Doc   string
}

// formatPlace is where a value format may be used, as a set.
type formatPlace uint8

const (
	// placeHeader: a delay or time in one header value: a hint's header,
	// a rule's delay header, a quota's reset header.
	placeHeader formatPlace = 1 << iota
	// placeField: a structured field of its own (IETF RateLimit): a
	// hint's header, or a quota's header.
	placeField
	// placeBody: a hint's body field.
	placeBody
)

// formatDef is how a value format reads and where it may be used. Every
// check of a spec's format asks it (formatFor), so the places of a format
// are data, not a list of names repeated at each place.
type formatDef struct {
	vf     valueFormat
	places formatPlace
}

// formats is every value format, in documentation order: how it reads,
// where it may be used, and what it means.
var formats = []struct {
	name string
	def  formatDef
	doc  string
}{
	{"retry_after", formatDef{formatRetryAfter, placeHeader}, "delay-seconds or an HTTP-date (Retry-After)"},
	{"seconds", formatDef{formatSeconds, placeHeader}, "whole seconds (delay-seconds)"},
	{"milliseconds", formatDef{formatMilliseconds, placeHeader}, "whole milliseconds"},
	{"decimal_seconds", formatDef{formatDecimalSeconds, placeHeader}, "decimal seconds such as `2.5`"},
	{"decimal_or_date", formatDef{formatDecimalOrDate, placeHeader}, "decimal seconds or an HTTP-date"},
	{"unix_seconds", formatDef{formatUnixSeconds, placeHeader}, "absolute time, whole seconds since the Unix epoch"},
	{"http_date", formatDef{formatHTTPDate, placeHeader}, "absolute time, an RFC 9110 HTTP-date (GMT)"},
	{"iso8601", formatDef{formatISO8601, placeHeader}, "absolute time, ISO 8601 with a zone, seconds optional"},
	{"rfc3339", formatDef{formatRFC3339, placeHeader}, "absolute time, RFC 3339"},
	{"go_duration", formatDef{formatGoDuration, placeHeader}, "a Go duration such as `6m0s` or `1m30.5s`"},
	{"ietf_ratelimit", formatDef{formatIETFRateLimit, placeField}, "the IETF RateLimit structured-field list: the largest `t` among items with `r=0`"},
	{"json_seconds", formatDef{formatJSONSeconds, placeBody}, "a JSON number of seconds at a dotted path of the body"},
	{"google_retry_info", formatDef{formatGoogleRetryInfo, placeBody}, "the `retryDelay` of a google.rpc.RetryInfo in `error.details`"},
}

// formatByName indexes formats.
var formatByName = func() map[string]formatDef {
	m := make(map[string]formatDef, len(formats))
	for _, f := range formats {
		m[f.name] = f.def
	}
	return m
}()

// formatFor returns the format called name when it may be used in one of
// places (what names that use in the error); otherwise it adds the error at
// path.
func formatFor(se *specErrors, path, name string, places formatPlace, what string) (formatDef, bool) {
	def, known := formatByName[name]
	switch {
	case !known:
		se.add(path, "unknown format %q (see `broker providers docs`)", name)
	case def.places&places == 0:
		se.add(path, "format %q cannot be used for %s (it reads %s)", name, what, def.places.reads())
	default:
		return def, true
	}
	return formatDef{}, false
}

// where is the column of `broker providers docs`: "body" or "header".
func (p formatPlace) where() string {
	if p&placeBody != 0 {
		return "body"
	}
	return "header"
}

// reads says what a format of these places reads, for an error.
func (p formatPlace) reads() string {
	switch {
	case p&placeBody != 0:
		return "the body"
	case p&placeField != 0:
		return "a structured field of its own"
	}
	return "one header value"
}

var (
	entryNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	ruleNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_]{0,62}$`)
	bodyPathRE  = regexp.MustCompile(`^[A-Za-z0-9_@$-]+(\.[A-Za-z0-9_@$-]+)*$`)
)

// specErrors collects SpecErrors under a path prefix.
type specErrors struct {
	errs []*SpecError
}

func (s *specErrors) add(path, format string, args ...any) {
	s.errs = append(s.errs, &SpecError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Compile checks spec and builds the entry. Every problem is reported, each
// with the path of its field; the entry is nil when there is any. CEL
// expressions are compiled once here, in one environment shared by every
// entry, so compiling an entry costs tens of microseconds per expression.
// The entry's Origin is empty (the built-in catalog's entries have none).
func Compile(spec EntrySpec) (*Entry, []*SpecError) {
	var c Compiler
	return c.Compile(spec, "")
}

// Compiler compiles entries like Compile, and compiles each distinct CEL
// expression once: entries that repeat an expression (a configuration
// whose tenants define the same rule) share its compiled program, which is
// safe because programs are immutable. The zero value is ready to use. A
// Compiler holds every expression it compiled, so use one per catalog load
// rather than one for the life of the process. It is not safe for
// concurrent use.
type Compiler struct {
	programs map[celKey]celResult
}

// celKey identifies a compiled expression: its text and what it must yield.
type celKey struct {
	src  string
	want string
}

// celResult is what compileCEL returned for a celKey.
type celResult struct {
	prg    *celProgram
	issues []celIssue
}

// cel compiles src (or returns the earlier result for the same text and
// type).
func (c *Compiler) cel(src string, accept func(*cel.Type) bool, want string) (*celProgram, []celIssue) {
	if c == nil {
		return compileCEL(src, accept, want)
	}
	k := celKey{src, want}
	if r, ok := c.programs[k]; ok {
		return r.prg, r.issues
	}
	prg, issues := compileCEL(src, accept, want)
	if c.programs == nil {
		c.programs = make(map[celKey]celResult)
	}
	c.programs[k] = celResult{prg, issues}
	return prg, issues
}

// Compile checks spec and builds the entry, as the package-level Compile
// does; origin is what the entry's Origin reports (for example
// "broker.yaml:12", where a configuration defined it).
func (c *Compiler) Compile(spec EntrySpec, origin string) (*Entry, []*SpecError) {
	var se specErrors
	e := &Entry{spec: spec, name: spec.Name, origin: origin}
	if !entryNameRE.MatchString(spec.Name) {
		se.add("name", "%q is not a provider name (lower-case letters, digits, '-' and '_', starting with a letter or digit)", spec.Name)
	}
	for i, h := range spec.Hosts {
		if _, _, ok := hostPattern(h); !ok {
			se.add(fmt.Sprintf("hosts[%d]", i), "%q is not a host name or a *.suffix wildcard", h)
		}
	}
	e.hosts = spec.Hosts
	for i, s := range spec.RetryStatuses {
		if s < 100 || s > 599 {
			se.add(fmt.Sprintf("retry_statuses[%d]", i), "status %d is not between 100 and 599", s)
		}
	}
	if len(spec.RetryStatuses) > 0 {
		e.extra = slices.Compact(slices.Sorted(slices.Values(spec.RetryStatuses)))
	}
	for i, h := range spec.Hints {
		if st, ok := compileHint(&se, fmt.Sprintf("hints[%d]", i), h, true); ok {
			e.hints = append(e.hints, st)
		}
	}
	for i, h := range spec.ShouldRetry {
		if f, ok := headerField(&se, fmt.Sprintf("should_retry[%d]", i), h); ok {
			e.verdicts = append(e.verdicts, f)
			e.notExecuted = append(e.notExecuted, false)
		}
	}
	for i, h := range spec.NotExecuted {
		found := false
		for j := range e.verdicts {
			if strings.EqualFold(e.verdicts[j].source, h) {
				e.notExecuted[j], found = true, true
			}
		}
		if !found {
			se.add(fmt.Sprintf("not_executed[%d]", i), "%q is not one of should_retry's headers (%s)", h, strings.Join(spec.ShouldRetry, ", "))
		}
	}
	for i, q := range spec.Quotas {
		if st, ok := compileQuota(&se, fmt.Sprintf("quotas[%d]", i), q); ok {
			e.quotas = append(e.quotas, st)
		}
	}
	if spec.Scope != nil {
		e.scope = &scopeStep{}
		if spec.Scope.Header != "" {
			if f, ok := headerField(&se, "scope.header", spec.Scope.Header); ok {
				e.scope.header = &f
			}
		}
		if spec.Scope.Global != "" {
			if f, ok := headerField(&se, "scope.global", spec.Scope.Global); ok {
				e.scope.global = &f
			}
		}
		if spec.Scope.Header == "" && spec.Scope.Global == "" {
			se.add("scope", "needs header or global")
		}
	}
	seen := map[string]bool{}
	for i, r := range spec.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		if seen[r.Name] {
			se.add(path+".name", "rule %q is defined twice", r.Name)
		}
		seen[r.Name] = true
		if ru, ok := c.compileRule(&se, path, spec.Name, r); ok {
			e.rules = append(e.rules, ru)
		}
	}
	if len(se.errs) > 0 {
		return nil, se.errs
	}
	e.computeBodyNeeds()
	return e, nil
}

// computeBodyNeeds fills the NeedsBody table.
func (e *Entry) computeBodyNeeds() {
	bodyHints := false
	for i := range e.hints {
		if e.hints[i].readsBody() {
			bodyHints = true
		}
	}
	for s := range e.bodyFor {
		need := bodyHints && s >= 400
		for _, ru := range e.rules {
			if ru.needsBody && statusIn(s, ru.statuses) {
				need = true
			}
		}
		e.bodyFor[s] = need
	}
	for _, ru := range e.rules {
		if ru.needsBody && len(ru.statuses) == 0 {
			e.bodyOthers = true
		}
	}
	e.bodyOthers = e.bodyOthers || bodyHints
}

func headerField(se *specErrors, path, name string) (field, bool) {
	if !httpguts.ValidHeaderFieldName(name) {
		se.add(path, "%q is not a header name (an RFC 9110 token)", name)
		return field{}, false
	}
	return newField(name), true
}

func checkStatuses(se *specErrors, path string, ss []int) {
	for i, s := range ss {
		if s < 100 || s > 599 {
			se.add(fmt.Sprintf("%s[%d]", path, i), "status %d is not between 100 and 599", s)
		}
	}
}

func compileHint(se *specErrors, path string, h HintSpec, top bool) (hintStep, bool) {
	n := len(se.errs)
	st := hintStep{statuses: h.Statuses}
	checkStatuses(se, path+".statuses", h.Statuses)
	if h.WhenZero != "" {
		if f, ok := headerField(se, path+".when_zero", h.WhenZero); ok {
			st.whenZero = &f
		}
	}
	kinds := 0
	for _, set := range []bool{h.Header != "", h.Body != "" || h.Format == "google_retry_info", len(h.Longest) > 0} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		se.add(path, "needs exactly one of header, body (or format google_retry_info) and longest")
		return st, false
	}
	var conds []string
	if len(h.Statuses) > 0 {
		conds = append(conds, "status "+joinInts(h.Statuses, "/"))
	}
	if h.WhenZero != "" {
		conds = append(conds, lowerASCII(h.WhenZero)+" is 0")
	}
	when := ""
	if len(conds) > 0 {
		when = " when " + strings.Join(conds, " and ")
	}
	switch {
	case len(h.Longest) > 0:
		if !top {
			se.add(path+".longest", "groups do not nest")
			return st, false
		}
		if h.Format != "" {
			se.add(path+".format", "a longest group has no format of its own")
		}
		group := &longestHintReader{}
		var parts []string
		for i, sub := range h.Longest {
			s, ok := compileHint(se, fmt.Sprintf("%s.longest[%d]", path, i), sub, false)
			if ok {
				group.steps = append(group.steps, s)
				parts = append(parts, s.desc)
			}
		}
		st.reader = group
		st.desc = "the longest of (" + strings.Join(parts, "; ") + ")" + when
	case h.Header != "":
		f, ok := headerField(se, path+".header", h.Header)
		if !ok {
			return st, false
		}
		name := h.Format
		if name == "" {
			name = "retry_after"
		}
		def, ok := formatFor(se, path+".format", name, placeHeader|placeField, "a hint header")
		if !ok {
			return st, false
		}
		if def.places&placeField != 0 {
			st.reader = &rateLimitHintReader{f: f}
		} else {
			st.reader = &headerHintReader{f: f, format: def.vf}
		}
		st.desc = "header " + f.source + " (" + name + ")" + when
	default:
		name := h.Format
		if name == "" {
			name = "json_seconds"
		}
		def, ok := formatFor(se, path+".format", name, placeBody, "a hint in the body")
		if !ok {
			return st, false
		}
		switch def.vf {
		case formatJSONSeconds:
			if !bodyPathRE.MatchString(h.Body) {
				se.add(path+".body", "%q is not a dotted path of JSON keys", h.Body)
				return st, false
			}
			st.reader = &bodyFieldHintReader{path: strings.Split(h.Body, "."), source: "body:" + h.Body}
			st.desc = "body field " + h.Body + " (json_seconds)" + when
		case formatGoogleRetryInfo:
			if h.Body != "" {
				se.add(path+".body", "format google_retry_info has a fixed place in the body; leave body empty")
			}
			st.reader = googleRetryInfoReader{}
			st.desc = "body error.details[RetryInfo].retryDelay (google_retry_info)" + when
		}
	}
	return st, len(se.errs) == n
}

func compileQuota(se *specErrors, path string, q QuotaSpec) (quotaStep, bool) {
	n := len(se.errs)
	var st quotaStep
	resetIn := time.Duration(q.ResetIn)
	if q.Limit != "" {
		if f, ok := headerField(se, path+".limit", q.Limit); ok {
			st.limit = &f
		}
	}
	if q.ResetIn < 0 {
		se.add(path+".reset_in", "must not be negative")
	}
	switch {
	case q.Header != "":
		if q.Remaining != "" || q.RemainingPrefix != "" || q.Reset != "" {
			se.add(path, "header (a structured field) excludes remaining, remaining_prefix and reset")
		}
		if q.Format == "" {
			se.add(path+".format", "a structured quota header needs format ietf_ratelimit")
		} else {
			formatFor(se, path+".format", q.Format, placeField, "a structured quota header")
		}
		f, ok := headerField(se, path+".header", q.Header)
		if !ok {
			return st, false
		}
		rq := &rateLimitQuota{header: f}
		st.desc = "structured field " + f.source
		if q.Policy != "" {
			if p, ok := headerField(se, path+".policy", q.Policy); ok {
				rq.policy = &p
				st.desc += " with " + p.source
			}
		}
		st.reader = rq
	case q.RemainingPrefix != "":
		if q.Remaining != "" || q.Reset != "" {
			se.add(path, "remaining_prefix excludes remaining and reset")
		}
		if !httpguts.ValidHeaderFieldName(q.RemainingPrefix) {
			se.add(path+".remaining_prefix", "%q is not the start of a header name", q.RemainingPrefix)
		}
		if q.ResetIn <= 0 {
			se.add(path+".reset_in", "a quota without a reset header needs reset_in")
		}
		st.reader = &prefixQuota{prefix: q.RemainingPrefix, resetIn: resetIn}
		st.desc = "the smallest " + lowerASCII(q.RemainingPrefix) + "* count, reset in " + resetIn.String()
	case q.Remaining != "":
		f, ok := headerField(se, path+".remaining", q.Remaining)
		if !ok {
			return st, false
		}
		if q.Reset == "" {
			if q.ResetIn <= 0 {
				se.add(path+".reset_in", "a quota without a reset header needs reset_in")
			}
			st.reader = &countQuota{remaining: f, resetIn: resetIn}
			st.desc = f.source + ", reset in " + resetIn.String()
			break
		}
		rf, ok := headerField(se, path+".reset", q.Reset)
		if !ok {
			return st, false
		}
		def, _ := formatFor(se, path+".format", q.Format, placeHeader, "a quota's reset header")
		st.reader = &headerQuota{remaining: f, reset: rf, format: def.vf}
		st.desc = f.source + " + " + rf.source + " (" + q.Format + ")"
	default:
		se.add(path, "needs remaining, remaining_prefix or header")
	}
	if st.limit != nil {
		st.desc += ", limit " + st.limit.source
	}
	return st, len(se.errs) == n
}

func (c *Compiler) compileRule(se *specErrors, path, entry string, r RuleSpec) (*rule, bool) {
	n := len(se.errs)
	ru := &rule{name: entry + "/" + r.Name, statuses: r.Statuses, reason: r.Reason, notExecuted: r.NotExecuted}
	if !ruleNameRE.MatchString(r.Name) {
		se.add(path+".name", "%q is not a rule name (lower-case letters, digits and '_')", r.Name)
	}
	checkStatuses(se, path+".statuses", r.Statuses)
	for i, c := range r.BodyContains {
		if c == "" {
			se.add(fmt.Sprintf("%s.body_contains[%d]", path, i), "must not be empty")
		}
		ru.contains = append(ru.contains, []byte(c))
	}
	when, issues := c.cel(r.When, isBoolOrDyn, "bool")
	for _, is := range issues {
		se.errs = append(se.errs, &SpecError{Path: path + ".when", Line: is.line, Column: is.column, Msg: is.msg})
	}
	ru.when = when
	switch r.Action {
	case "retry":
		ru.action = actionRetry
	case "do_not_retry":
		ru.action = actionDoNotRetry
		if r.Delay != nil {
			se.add(path+".delay", "a do_not_retry rule has no delay")
		}
		if strings.TrimSpace(r.Reason) == "" {
			se.add(path+".reason", "a do_not_retry rule says why")
		}
		if r.NotExecuted {
			se.add(path+".not_executed", "only a retry rule can say that the request was not executed")
		}
	default:
		se.add(path+".action", "%q is not retry or do_not_retry", r.Action)
	}
	if r.Delay != nil && r.Action == "retry" {
		ru.delay = c.compileDelay(se, path+".delay", ru.name, *r.Delay)
	}
	if len(se.errs) > n {
		return nil, false
	}
	ru.needsBody = len(ru.contains) > 0 || ru.when.needsBody || (ru.delay != nil && ru.delay.needsBody())
	return ru, true
}

func (d *delayStep) needsBody() bool {
	return d.path != nil || (d.expr != nil && d.expr.needsBody)
}

func (c *Compiler) compileDelay(se *specErrors, path, ruleName string, d DelaySpec) *delayStep {
	set := 0
	for _, s := range []string{d.Header, d.Body, d.Expr} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		se.add(path, "needs exactly one of header, body and expr")
		return nil
	}
	st := &delayStep{}
	switch {
	case d.Header != "":
		f, ok := headerField(se, path+".header", d.Header)
		if !ok {
			return nil
		}
		name := d.Format
		if name == "" {
			name = "retry_after"
		}
		def, _ := formatFor(se, path+".format", name, placeHeader, "a rule's delay header")
		st.header, st.format, st.source = &f, def.vf, f.source
	case d.Body != "":
		if !bodyPathRE.MatchString(d.Body) {
			se.add(path+".body", "%q is not a dotted path of JSON keys", d.Body)
			return nil
		}
		switch d.Unit {
		case "", "s":
			st.unit = time.Second
		case "ms":
			st.unit = time.Millisecond
		default:
			se.add(path+".unit", "%q is not s or ms", d.Unit)
		}
		st.path, st.source = strings.Split(d.Body, "."), "body:"+d.Body
	default:
		p, issues := c.cel(d.Expr, isDelayType, "duration, double or int")
		for _, is := range issues {
			se.errs = append(se.errs, &SpecError{Path: path + ".expr", Line: is.line, Column: is.column, Msg: is.msg})
		}
		st.expr, st.source = p, "rule:"+ruleName
	}
	return st
}

func joinInts(ns []int, sep string) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, sep)
}

// hostPattern normalises a host pattern: lower case, no trailing dot, IPv6
// brackets removed. wild reports a "*.suffix" pattern (rest is the suffix
// without "*.").
func hostPattern(pattern string) (rest string, wild, ok bool) {
	p := strings.TrimSuffix(lowerASCII(pattern), ".")
	if r, isWild := strings.CutPrefix(p, "*."); isWild {
		return r, true, validHostName(r)
	}
	if validIP(p) {
		return strings.TrimSuffix(strings.TrimPrefix(p, "["), "]"), false, true
	}
	return p, false, validHostName(p)
}
