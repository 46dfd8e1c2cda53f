package providers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"github.com/google/cel-go/parser"
)

// Bounds on what one rule evaluation may build. CEL's cost limit charges
// a call after it returns, by the size of its result, so a call whose
// result is far larger than its inputs (replace, join, format, flatten)
// would build the whole value before the limit could stop it. The
// functions below check the size of their result before they build it,
// and fail (the rule does not match) when it would pass these bounds.
const (
	// MaxRuleValueBytes bounds a string a rule builds with replace, join
	// or format, in bytes. (Concatenation with + builds no more than its
	// operands, and the cost limit charges it by the byte.)
	MaxRuleValueBytes = 1 << 20
	// MaxRuleListLen bounds the elements of a list a rule builds with
	// split, lists.range or flatten, or joins. (map and filter build one
	// element a step, within MaxRuleIterations; + on lists is refused at
	// load.)
	MaxRuleListLen = 1 << 16
	// MaxRuleIterations bounds the comprehension steps (exists, all, map,
	// filter, cel.bind, sortBy...) of one rule evaluation, summed over
	// every comprehension it runs. CEL's cost tracker does work that grows
	// with the square of a comprehension's length, so this, not the cost
	// limit, is what keeps a rule over a long list fast.
	MaxRuleIterations = 1_000
	// maxDistinctScan bounds the elements of a distinct(), which compares
	// every pair.
	maxDistinctScan = 1_000
)

var (
	errValueTooLarge = fmt.Errorf("rule would build a value over %d bytes", MaxRuleValueBytes)
	errListTooLong   = fmt.Errorf("rule would build a list over %d elements", MaxRuleListLen)
	errTooManySteps  = fmt.Errorf("rule ran over %d comprehension steps", MaxRuleIterations)
)

// stepLimit is the context every rule is evaluated with. It is done from
// the start, and the program checks it once every MaxRuleIterations
// comprehension steps: so the first check, at step MaxRuleIterations,
// stops the evaluation. The bound is a count, not a time, so a rule
// decides the same way on a loaded machine.
var stepLimit = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errTooManySteps)
	return ctx
}()

// costTrackers charges functions whose work per byte is well above what
// CEL charges them (0.1 a byte): strings.quote escapes every rune into a
// new string, so it costs a unit per byte of its input and of its result.
func costTrackers() cel.ProgramOption {
	return cel.CostTrackerOptions(
		interpreter.OverloadCostTracker("strings_quote", func(args []ref.Val, result ref.Val) *uint64 {
			n := uint64(1)
			if s, ok := result.(types.String); ok {
				n += uint64(len(s))
			}
			for _, v := range args {
				if s, ok := v.(types.String); ok {
					n += uint64(len(s))
				}
			}
			return &n
		}),
	)
}

// boundedFunctions returns the environment options that replace the
// value-building overloads of the strings and lists extensions (replace,
// join, split, format, flatten, distinct) with versions that check the
// size of their result first. The replaced implementations are taken from
// an environment with the same extensions, so the semantics stay CEL's.
func boundedFunctions() ([]cel.EnvOption, error) {
	base, err := cel.NewEnv(ext.Strings(), ext.Lists())
	if err != nil {
		return nil, err
	}
	orig := map[string]*functions.Overload{}
	for _, fd := range base.Functions() {
		bs, err := fd.Bindings()
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			orig[b.Operator] = b
		}
	}
	fn := func(id string) (functions.FunctionOp, error) {
		o := orig[id]
		if o == nil {
			return nil, fmt.Errorf("CEL overload %s not found", id)
		}
		switch {
		case o.Function != nil:
			return o.Function, nil
		case o.Binary != nil:
			return func(args ...ref.Val) ref.Val { return o.Binary(args[0], args[1]) }, nil
		case o.Unary != nil:
			return func(args ...ref.Val) ref.Val { return o.Unary(args[0]) }, nil
		}
		return nil, fmt.Errorf("CEL overload %s has no implementation", id)
	}
	// guard wraps the original implementation of id with check, which runs
	// on the arguments first.
	var firstErr error
	guard := func(id string, check func(args []ref.Val) error) cel.OverloadOpt {
		impl, err := fn(id)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return cel.FunctionBinding(func(args ...ref.Val) ref.Val {
			for _, a := range args {
				if types.IsUnknownOrError(a) {
					return a
				}
			}
			if err := check(args); err != nil {
				return types.WrapErr(err)
			}
			return impl(args...)
		})
	}
	str, lst := cel.StringType, cel.ListType
	listT := lst(cel.TypeParamType("T"))
	opts := []cel.EnvOption{
		cel.Function("replace",
			cel.MemberOverload("string_replace_string_string", []*cel.Type{str, str, str}, str,
				guard("string_replace_string_string", checkReplace)),
			cel.MemberOverload("string_replace_string_string_int", []*cel.Type{str, str, str, cel.IntType}, str,
				guard("string_replace_string_string_int", checkReplace))),
		cel.Function("join",
			cel.MemberOverload("list_join", []*cel.Type{lst(str)}, str, guard("list_join", checkJoin)),
			cel.MemberOverload("list_join_string", []*cel.Type{lst(str), str}, str, guard("list_join_string", checkJoin))),
		cel.Function("split",
			cel.MemberOverload("string_split_string", []*cel.Type{str, str}, lst(str),
				guard("string_split_string", checkSplit)),
			cel.MemberOverload("string_split_string_int", []*cel.Type{str, str, cel.IntType}, lst(str),
				guard("string_split_string_int", checkSplit))),
		cel.Function("format",
			cel.MemberOverload("string_format", []*cel.Type{str, lst(cel.DynType)}, str,
				guard("string_format", checkFormat))),
		cel.Function("flatten",
			cel.MemberOverload("list_flatten", []*cel.Type{lst(listT)}, listT, guard("list_flatten", checkFlatten)),
			cel.MemberOverload("list_flatten_int", []*cel.Type{lst(cel.DynType), cel.IntType}, lst(cel.DynType),
				guard("list_flatten_int", checkFlatten))),
		cel.Function("distinct",
			cel.MemberOverload("list_distinct", []*cel.Type{listT}, listT, guard("list_distinct", checkDistinct))),
	}
	return opts, firstErr
}

func listLen(l traits.Lister) int {
	n, _ := l.Size().(types.Int)
	return int(n)
}

// checkReplace computes the length of s.replace(old, new[, n]) before it
// is built.
func checkReplace(args []ref.Val) error {
	s, old, repl := string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String))
	if len(repl) <= len(old) {
		return nil // the result is no longer than s
	}
	var count int
	if old == "" {
		count = utf8.RuneCountInString(s) + 1
	} else {
		count = strings.Count(s, old)
	}
	if len(args) == 4 {
		if n := int64(args[3].(types.Int)); n >= 0 && int64(count) > n {
			count = int(n)
		}
	}
	if int64(len(s))+int64(count)*int64(len(repl)-len(old)) > MaxRuleValueBytes {
		return errValueTooLarge
	}
	return nil
}

// checkJoin sums the lengths of a join's parts.
func checkJoin(args []ref.Val) error {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	n := listLen(l)
	if n > MaxRuleListLen {
		return errListTooLong
	}
	total := 0
	if len(args) == 2 && n > 1 {
		total = (n - 1) * len(args[1].(types.String))
	}
	for it := l.Iterator(); it.HasNext() == types.True; {
		if s, ok := it.Next().(types.String); ok {
			total += len(s)
		}
		if total > MaxRuleValueBytes {
			return errValueTooLarge
		}
	}
	if total > MaxRuleValueBytes {
		return errValueTooLarge
	}
	return nil
}

// checkSplit counts a split's parts.
func checkSplit(args []ref.Val) error {
	s, sep := string(args[0].(types.String)), string(args[1].(types.String))
	var n int
	if sep == "" {
		n = utf8.RuneCountInString(s)
	} else {
		n = strings.Count(s, sep) + 1
	}
	if n > MaxRuleListLen {
		return errListTooLong
	}
	return nil
}

// checkFormat bounds what format may write: each argument renders in at
// most renderBound bytes.
func checkFormat(args []ref.Val) error {
	budget := MaxRuleValueBytes - len(args[0].(types.String))
	if budget < 0 || renderBound(args[1], &budget) {
		return errValueTooLarge
	}
	return nil
}

// renderBound takes from budget an upper bound of the bytes v renders in
// (a string quoted with every byte escaped; a number in its longest form
// with the largest precision format allows), and reports whether the
// budget ran out. It stops as soon as it does, so it visits at most about
// MaxRuleValueBytes values.
func renderBound(v ref.Val, budget *int) bool {
	switch x := v.(type) {
	case types.String:
		*budget -= 6*len(x) + 2
	case types.Bytes:
		*budget -= 4*len(x) + 2
	case *jsonObject:
		*budget -= 6*len(x.raw) + 2
	case *jsonArray:
		*budget -= 6*len(x.raw) + 2
	case traits.Mapper:
		*budget -= 2
		for it := x.Iterator(); *budget >= 0 && it.HasNext() == types.True; {
			k := it.Next()
			*budget -= 2
			if renderBound(k, budget) {
				return true
			}
			if e, ok := x.Find(k); ok && renderBound(e, budget) {
				return true
			}
		}
	case traits.Lister:
		*budget -= 2
		for it := x.Iterator(); *budget >= 0 && it.HasNext() == types.True; {
			*budget -= 2
			if renderBound(it.Next(), budget) {
				return true
			}
		}
	default:
		*budget -= 512
	}
	return *budget < 0
}

// checkFlatten counts the elements a flatten returns, visiting at most
// MaxRuleListLen+1 of them.
func checkFlatten(args []ref.Val) error {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	depth := int64(1)
	if len(args) == 2 {
		depth = int64(args[1].(types.Int))
	}
	budget := MaxRuleListLen
	if flatCount(l, depth, &budget) {
		return errListTooLong
	}
	return nil
}

func flatCount(l traits.Lister, depth int64, budget *int) bool {
	for it := l.Iterator(); it.HasNext() == types.True; {
		*budget--
		if *budget < 0 {
			return true
		}
		if sub, ok := it.Next().(traits.Lister); ok && depth > 0 && flatCount(sub, depth-1, budget) {
			return true
		}
	}
	return false
}

// checkDistinct bounds distinct, which compares every pair of elements
// (CEL's implementation, whatever their type) before the cost limit
// charges it: 65,536 integers are 4*10^9 comparisons.
func checkDistinct(args []ref.Val) error {
	if l, ok := args[0].(traits.Lister); ok && listLen(l) > maxDistinctScan {
		return fmt.Errorf("distinct of more than %d elements", maxDistinctScan)
	}
	return nil
}

// unboundedCall is a call that no runtime check can bound, found at load.
type unboundedCall struct {
	id  int64
	msg string
}

// findUnbounded walks a checked expression for calls whose cost or result
// depends on the product of sizes the response controls, which a rule is
// refused for at load:
//   - matches with a pattern that is not a string literal: a pattern taken
//     from the response is compiled on every evaluation, and a large one
//     costs far more memory than the cost limit charges;
//   - replace with a replacement that is not a string literal: its result
//     grows with the product of two sizes the response sets (a 64 KiB body
//     of commas replaced by itself is 4 GiB);
//   - + on lists (CEL concatenates them lazily, so doubling is free) or on
//     dynamic values;
//   - a list or map held by a variable, a field or a call's result, put
//     into another list or map (a list literal, map(), a map literal, or
//     laundered through dyn() or a conditional): ten such levels of ten
//     references are 10^10 elements to one ==, in no memory at all.
func findUnbounded(a *cel.Ast) []unboundedCall {
	var out []unboundedCall
	native := a.NativeRep()
	// nested reports whether e puts a list or a map that it does not
	// write out (a variable, a field, a call's result) inside another.
	nested := func(e ast.Expr) bool {
		switch e.Kind() {
		case ast.ListKind, ast.MapKind, ast.LiteralKind:
			return false
		}
		return holdsContainer(native.GetType(e.ID()))
	}
	const nestedMsg = "a rule cannot put a list or a map it did not write out into another list or map (directly, through map(), dyn() or a conditional): " +
		"a few such steps make a value whose comparison takes the product of their sizes"
	// formatArgs holds the argument lists of format(): format only renders
	// them, within its own bound.
	formatArgs := map[int64]bool{}
	visit := ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.ListKind:
			if formatArgs[e.ID()] {
				return
			}
			for _, el := range e.AsList().Elements() {
				if nested(el) {
					out = append(out, unboundedCall{el.ID(), nestedMsg})
				}
			}
			return
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				if v := en.AsMapEntry().Value(); nested(v) {
					out = append(out, unboundedCall{v.ID(), nestedMsg})
				}
			}
			return
		case ast.CallKind:
		default:
			return
		}
		c := e.AsCall()
		args := c.Args()
		if c.FunctionName() == "format" && len(args) == 1 {
			formatArgs[args[0].ID()] = true
		}
		switch {
		case c.FunctionName() == "dyn" && len(args) == 1 && nested(args[0]):
			out = append(out, unboundedCall{args[0].ID(), nestedMsg})
		case c.FunctionName() == operators.Conditional && len(args) == 3 && native.GetType(e.ID()).Kind() == types.DynKind &&
			(nested(args[1]) || nested(args[2])):
			out = append(out, unboundedCall{e.ID(), nestedMsg})
		case c.FunctionName() == overloads.Matches && len(args) >= 1 && !isStringLiteral(args[len(args)-1]):
			out = append(out, unboundedCall{e.ID(), "the pattern of matches() must be a string literal: a pattern from the response could cost without bound"})
		case c.FunctionName() == "replace" && c.IsMemberFunction() && len(args) >= 2 && !isStringLiteral(args[1]):
			out = append(out, unboundedCall{e.ID(), "the replacement of replace() must be a string literal: with one from the response, the result grows with the product of two sizes the response sets"})
		case c.FunctionName() == operators.Add && len(args) == 2 && !isAccumulator(args[0]):
			// CEL concatenates lists lazily, so each + is cheap while
			// the list it makes doubles: 40 of them make a list that
			// no later step can walk. map and filter build their
			// results with + on their accumulator, which adds one
			// element a step and stays allowed. A + of dynamic values
			// (fields of the body) may be one of lists too.
			switch a.NativeRep().GetType(e.ID()).Kind() {
			case types.ListKind:
				out = append(out, unboundedCall{e.ID(), "lists cannot be concatenated in a rule: a list doubled with + a few times is one that no later step can walk"})
			case types.DynKind:
				out = append(out, unboundedCall{e.ID(), "+ of dynamic values (body fields) may concatenate lists, which a rule cannot: convert them first with double(), int() or string()"})
			}
		}
	})
	ast.PreOrderVisit(a.NativeRep().Expr(), visit)
	return out
}

// holdsContainer reports whether a value of type t is a list or a map, or
// an optional one.
func holdsContainer(t *types.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case types.ListKind, types.MapKind:
		return true
	case types.OpaqueKind:
		if t.TypeName() == "optional_type" && len(t.Parameters()) == 1 {
			return holdsContainer(t.Parameters()[0])
		}
	}
	return false
}

// isAccumulator reports whether e is the accumulator of a comprehension
// macro (map, filter).
func isAccumulator(e ast.Expr) bool {
	return e.Kind() == ast.IdentKind && (e.AsIdent() == parser.AccumulatorName || e.AsIdent() == parser.HiddenAccumulatorName)
}

func isStringLiteral(e ast.Expr) bool {
	if e.Kind() != ast.LiteralKind {
		return false
	}
	_, ok := e.AsLiteral().(types.String)
	return ok
}

// errRuleLimit reports whether err is one of the bounds of this file or
// CEL's cost limit (by its text too, for errors that CEL rewrapped).
func errRuleLimit(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errTooManySteps) || errors.Is(err, errValueTooLarge) || errors.Is(err, errListTooLong) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"cost limit", errTooManySteps.Error(), "rule would build", "maximum allowed", "distinct of more than"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
