package providers

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// RuleCostLimit is the CEL runtime cost limit of one rule evaluation (one
// condition or one delay expression). An evaluation that would exceed it
// stops with an error, and the rule does not match: a hostile body cannot
// make a rule expensive. Looking up a field costs about 1, comparing a
// string about 1 per 10 bytes, so ordinary rules cost well under 100.
const RuleCostLimit = 100_000

// Variables a rule's expressions see.
const (
	celStatus   = "status"
	celMethod   = "method"
	celAttempt  = "attempt"
	celHeaders  = "headers"
	celBody     = "body"
	celBodyText = "body_text"
)

// ruleEnv is the one CEL environment every rule is compiled in. Building it
// is the costly part of CEL; compiling an expression in it is cheap, which
// is what lets a configuration with many custom providers load fast.
var ruleEnv = sync.OnceValues(func() (*cel.Env, error) {
	bounded, err := boundedFunctions()
	if err != nil {
		return nil, err
	}
	opts := []cel.EnvOption{
		cel.Variable(celStatus, cel.IntType),
		cel.Variable(celMethod, cel.StringType),
		cel.Variable(celAttempt, cel.IntType),
		cel.Variable(celHeaders, cel.MapType(cel.StringType, cel.ListType(cel.StringType))),
		cel.Variable(celBody, cel.DynType),
		cel.Variable(celBodyText, cel.StringType),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
		ext.Math(),
		ext.Lists(ext.ListsMaxRangeSize(MaxRuleListLen)),
		ext.Bindings(),
	}
	return cel.NewEnv(append(opts, bounded...)...)
})

// celProgram is one compiled expression.
type celProgram struct {
	src       string
	prg       cel.Program
	needsBody bool
}

// celIssue is a compile error inside an expression, 1-based.
type celIssue struct {
	line, column int
	msg          string
}

// compileCEL compiles src in the rule environment and checks its type with
// accept. Errors carry their position inside src.
func compileCEL(src string, accept func(*cel.Type) bool, want string) (*celProgram, []celIssue) {
	env, err := ruleEnv()
	if err != nil {
		return nil, []celIssue{{msg: "CEL environment: " + err.Error()}}
	}
	if strings.TrimSpace(src) == "" {
		return nil, []celIssue{{msg: "empty expression"}}
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		var out []celIssue
		for _, e := range iss.Errors() {
			out = append(out, celIssue{line: e.Location.Line(), column: e.Location.Column() + 1, msg: e.Message})
		}
		return nil, out
	}
	if t := ast.OutputType(); !accept(t) {
		return nil, []celIssue{{line: 1, column: 1, msg: fmt.Sprintf("expression has type %s, want %s", t, want)}}
	}
	if bad := findUnbounded(ast); len(bad) > 0 {
		var out []celIssue
		for _, b := range bad {
			loc := ast.NativeRep().SourceInfo().GetStartLocation(b.id)
			out = append(out, celIssue{line: loc.Line(), column: loc.Column() + 1, msg: b.msg})
		}
		return nil, out
	}
	prg, err := env.Program(ast, cel.CostLimit(RuleCostLimit), cel.EvalOptions(cel.OptOptimize),
		cel.InterruptCheckFrequency(MaxRuleIterations), costTrackers())
	if err != nil {
		return nil, []celIssue{{msg: err.Error()}}
	}
	p := &celProgram{src: src, prg: prg}
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name == celBody || r.Name == celBodyText {
			p.needsBody = true
		}
	}
	return p, nil
}

func isBoolOrDyn(t *cel.Type) bool {
	return t.IsExactType(cel.BoolType) || t.IsExactType(cel.DynType)
}

func isDelayType(t *cel.Type) bool {
	for _, ok := range []*cel.Type{cel.DurationType, cel.DoubleType, cel.IntType, cel.UintType, cel.DynType} {
		if t.IsExactType(ok) {
			return true
		}
	}
	return false
}

// ruleInput is the activation a rule is evaluated against: the response,
// with the headers map and the parsed body built on first use and then
// shared by every rule of one Read.
type ruleInput struct {
	r        *Response
	headers  ref.Val
	body     ref.Val
	bodyText ref.Val
	bodyDone bool
	textDone bool
	// meter bounds the comparisons of body values, for every rule of one
	// Read.
	meter jsonMeter
}

var _ interpreter.Activation = (*ruleInput)(nil)

// ResolveName implements interpreter.Activation.
func (in *ruleInput) ResolveName(name string) (any, bool) {
	switch name {
	case celStatus:
		return types.Int(in.r.Status), true
	case celMethod:
		m := in.r.Method
		if m == "" {
			m = "GET"
		}
		return types.String(m), true
	case celAttempt:
		return types.Int(max(in.r.Attempt, 1)), true
	case celHeaders:
		if in.headers == nil {
			m := make(map[string][]string, len(in.r.Header))
			for k, vs := range in.r.Header {
				lk := lowerASCII(k)
				m[lk] = append(m[lk], vs...)
			}
			in.headers = types.DefaultTypeAdapter.NativeToValue(m)
		}
		return in.headers, true
	case celBody:
		return in.parsedBody(), true
	case celBodyText:
		if !in.textDone {
			in.textDone = true
			in.bodyText = types.String(in.r.Body)
		}
		return in.bodyText, true
	}
	return nil, false
}

// parsedBody returns the body as a lazy JSON value, or null.
func (in *ruleInput) parsedBody() ref.Val {
	if !in.bodyDone {
		in.bodyDone = true
		in.body = parseJSONBodyMetered(in.r.Body, &in.meter)
	}
	return in.body
}

// Parent implements interpreter.Activation.
func (in *ruleInput) Parent() interpreter.Activation { return nil }

// errNegativeDelay is returned for a delay expression that yields a
// negative delay: an invalid hint, as a negative header value is.
var errNegativeDelay = errors.New("delay is negative")

// errNotBool is returned when a condition yields a value that is not a bool.
var errNotBool = errors.New("condition did not yield a bool")

// evalBool evaluates a condition. An evaluation error, or a result that is
// not a bool, is reported as an error: the rule does not match.
func (p *celProgram) evalBool(in *ruleInput) (bool, error) {
	out, _, err := p.prg.ContextEval(stepLimit, in)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, errNotBool
	}
	return bool(b), nil
}

// evalDelay evaluates a delay expression: a duration, or a number of
// seconds. It obeys what every hint obeys: a negative delay, NaN,
// infinities and values beyond time.Duration are invalid (an error), so
// that the rule's retry falls back to backoff, as an invalid header or body
// hint does. Zero is valid (retry at once).
func (p *celProgram) evalDelay(in *ruleInput) (time.Duration, error) {
	out, _, err := p.prg.ContextEval(stepLimit, in)
	if err != nil {
		return 0, err
	}
	return delayOf(out, time.Second)
}

// delayOf converts a CEL number (in units of unit) or duration to a delay.
func delayOf(v ref.Val, unit time.Duration) (time.Duration, error) {
	switch x := v.(type) {
	case types.Duration:
		if x.Duration < 0 {
			return 0, errNegativeDelay
		}
		return x.Duration, nil
	case types.Int:
		return scaleDelay(float64(x), unit)
	case types.Uint:
		return scaleDelay(float64(x), unit)
	case types.Double:
		return scaleDelay(float64(x), unit)
	}
	return 0, fmt.Errorf("delay has type %s, want a duration or a number", v.Type().TypeName())
}

func scaleDelay(n float64, unit time.Duration) (time.Duration, error) {
	if math.IsNaN(n) {
		return 0, errors.New("delay is NaN")
	}
	if n < 0 {
		return 0, errNegativeDelay
	}
	if n == 0 {
		return 0, nil
	}
	ns := n * float64(unit)
	if ns >= math.MaxInt64 {
		return 0, errors.New("delay overflows")
	}
	return time.Duration(ns), nil
}
