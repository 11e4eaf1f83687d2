// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp/syntax"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// randomLib is Kyverno's kyverno.random: random(pattern) a random string
// matching a regular expression, random() one matching [0-9a-z]{8}. Kyverno
// generates with github.com/zach-klippenstein/goregen, whose rules kyvap
// follows (see newRegen): the pattern is parsed without Perl extensions (no
// \d, no (?:...), no flags), an unbounded repetition repeats up to 4096
// times, and . is any rune but 0 (the newline included).
type randomLib struct{}

func (*randomLib) LibraryName() string { return "kyverno.random" }

func (*randomLib) CompileOptions() []cel.EnvOption {
	overloads := func(suffix string) []cel.FunctionOpt {
		return []cel.FunctionOpt{
			cel.Overload("random_string_"+suffix, []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(arg ref.Val) ref.Val {
					pattern, err := convertToNative[string](arg)
					if err != nil {
						return types.WrapErr(err)
					}
					return randomString(pattern)
				})),
			cel.Overload("random_string_default_expr_"+suffix, []*cel.Type{}, cel.StringType,
				cel.FunctionBinding(func(...ref.Val) ref.Val { return randomString("[0-9a-z]{8}") })),
		}
	}
	return []cel.EnvOption{
		cel.Function("random", overloads("non_prefixed")...),
		cel.Function("random.random", overloads("prefixed")...),
	}
}

func (*randomLib) ProgramOptions() []cel.ProgramOption { return nil }

func randomString(pattern string) ref.Val {
	re, err := syntax.Parse(pattern, 0)
	if err != nil {
		return types.WrapErr(err)
	}
	gen, err := newRegen(re)
	if err != nil {
		return types.WrapErr(err)
	}
	return types.String(gen())
}

// regenMaxRepeat bounds *, + and {n,} (goregen's DefaultMaxUnboundedRepeatCount).
const regenMaxRepeat = 4096

// regenError is goregen's error: a message and the error it wraps, on the
// next line.
type regenError struct {
	msg   string
	cause error
}

func (e *regenError) Error() string {
	if e.cause != nil {
		return e.msg + "\ncaused by " + e.cause.Error()
	}
	return e.msg
}

// newRegen builds a generator for the simplified expression as goregen
// does, operator by operator, so that a pattern goregen rejects is rejected
// with its message.
func newRegen(re *syntax.Regexp) (func() string, error) {
	s := re.Simplify()
	empty := func() string { return "" }
	switch s.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return empty, nil
	case syntax.OpLiteral:
		lit := string(s.Rune)
		return func() string { return lit }, nil
	case syntax.OpAnyChar:
		return func() string { return string(rand.Int32()) }, nil
	case syntax.OpAnyCharNotNL:
		// goregen's range: every rune from 1 up (most are not valid
		// runes and come out as U+FFFD), newline not excluded.
		return charClassGen([]rune{1, math.MaxInt32}), nil
	case syntax.OpCharClass:
		return charClassGen(s.Rune), nil
	case syntax.OpQuest:
		return repeatGen(s, 0, 1)
	case syntax.OpStar:
		return repeatGen(s, 0, regenMaxRepeat)
	case syntax.OpPlus:
		return repeatGen(s, 1, regenMaxRepeat)
	case syntax.OpRepeat:
		lo, hi := s.Min, s.Max
		if lo == -1 {
			lo = 0
		}
		if hi == -1 {
			hi = regenMaxRepeat
		}
		return repeatGen(s, lo, hi)
	case syntax.OpConcat, syntax.OpAlternate:
		gens := make([]func() string, len(s.Sub))
		for i, sub := range s.Sub {
			g, err := newRegen(sub)
			if err != nil {
				kind := "concat"
				if s.Op == syntax.OpAlternate {
					kind = "alternate"
				}
				return nil, &regenError{fmt.Sprintf("error creating generators for %s pattern /%s/", kind, s), err}
			}
			gens[i] = g
		}
		if s.Op == syntax.OpAlternate {
			return func() string { return gens[rand.IntN(len(gens))]() }, nil
		}
		return func() string {
			var b strings.Builder
			for _, g := range gens {
				b.WriteString(g())
			}
			return b.String()
		}, nil
	case syntax.OpCapture:
		if len(s.Sub) != 1 {
			return nil, &regenError{msg: fmt.Sprintf("OpCapture expected 1 sub-expression, but got %d: %s", len(s.Sub), s)}
		}
		return newRegen(s.Sub[0])
	}
	return nil, &regenError{msg: fmt.Sprintf("invalid generator pattern: /%s/ as /%s/\n%s", re, s, inspectRegexp(s, ""))}
}

func repeatGen(re *syntax.Regexp, lo, hi int) (func() string, error) {
	if len(re.Sub) != 1 {
		return nil, &regenError{msg: fmt.Sprintf("Op%s expected 1 sub-expression, but got %d: %s", re.Op, len(re.Sub), re)}
	}
	g, err := newRegen(re.Sub[0])
	if err != nil {
		return nil, &regenError{fmt.Sprintf("failed to create generator for subexpression: /%s/", re), err}
	}
	return func() string {
		n := lo + rand.IntN(hi-lo+1)
		var b strings.Builder
		for range n {
			b.WriteString(g())
		}
		return b.String()
	}, nil
}

// charClassGen picks a rune uniformly among a class's ranges (pairs of
// bounds). Like goregen it moves a range starting at 0 to 1 and panics where
// goregen panics: Kyverno's evaluation then fails with an internal error.
func charClassGen(ranges []rune) func() string {
	type span struct {
		start rune
		size  int32
	}
	var spans []span
	var total int32
	for i := 0; i+1 < len(ranges); i += 2 {
		start, end := ranges[i], ranges[i+1]
		if start == 0 {
			start = 1
		}
		size := end - start + 1
		if size < 1 {
			panic("char class range size must be at least 1")
		}
		spans = append(spans, span{start, size})
		total += size
	}
	return func() string {
		if total <= 0 {
			// An empty class ([^\x00-\x{10FFFF}]): goregen's
			// math/rand panics so, at generation time.
			panic("invalid argument to Int31n")
		}
		i := rand.Int32N(total)
		for _, s := range spans {
			if i < s.size {
				return string(s.start + i)
			}
			i -= s.size
		}
		panic("index out of bounds")
	}
}

// inspectRegexp is goregen's dump of an expression in its errors.
func inspectRegexp(r *syntax.Regexp, indent string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s{\n", indent)
	fmt.Fprintf(&b, "%s  Op: Op%s\n", indent, r.Op)
	fmt.Fprintf(&b, "%s  Flags: %x\n", indent, r.Flags)
	if len(r.Sub) > 0 {
		fmt.Fprintf(&b, "%s  Sub: [\n", indent)
		for _, sub := range r.Sub {
			b.WriteString(inspectRegexp(sub, indent+"    "))
		}
		fmt.Fprintf(&b, "%s  ]\n", indent)
	} else {
		fmt.Fprintf(&b, "%s  Sub: []\n", indent)
	}
	var decimals strings.Builder
	for _, r := range r.Rune {
		fmt.Fprintf(&decimals, "%d, ", r)
	}
	fmt.Fprintf(&b, "%s  Rune: %s (%s)\n", indent, string(r.Rune), decimals.String())
	fmt.Fprintf(&b, "%s  [Min, Max]: [%d, %d]\n", indent, r.Min, r.Max)
	fmt.Fprintf(&b, "%s  Cap: %d\n", indent, r.Cap)
	fmt.Fprintf(&b, "%s  Name: %s\n", indent, r.Name)
	return b.String()
}
