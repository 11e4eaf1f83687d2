// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Long && and || chains.
//
// cel-go's type checker is quadratic in the number of polymorphic calls
// (==, !=, in, ...) of one expression: every overload resolution copies the
// substitution map of all the type variables bound so far in the
// expression (checker.mapping.copy in resolveOverload). A 94 KB chain of
// `object.metadata.name != 'x'` takes seconds to check, where a chain of
// `true` takes a tenth of a second. The API server checks the same way
// and accepts such expressions (its only limit is cel-go's 100,000 code
// points per expression), so kyvap must accept them too, and keeps
// translation linear by checking a long chain in pieces.
//
// The pieces are the chain's operands: the expression is split at its
// top-level && and || (recursively through parentheses around a whole
// operand), and consecutive operands are checked together, a few KB at a
// time, as `(a) && (b) && ...`. That is exact: && and || take two bools
// and give a bool, their operands share no type variables and no
// comprehension variables, so the whole expression type-checks (to bool)
// if and only if every operand does (to something assignable to bool),
// which is what checking the pieces proves. The whole expression is still
// parsed at once (the parser is linear, and its limits apply to the
// whole), the split is cross-checked against the parsed tree, and
// anything unusual (a top-level ?:, an operand the split cannot
// delimit, a piece that does not compile) falls back to compiling the
// whole expression, so messages are the API server's.

// chainThreshold is the size from which a chain is checked in pieces;
// chainPieceSize is the size of a piece. Variables for tests.
var (
	chainThreshold = 4 << 10
	chainPieceSize = 2 << 10
)

// compilesAsChain reports whether expression is a long && / || chain whose
// pieces all compile as bool conditions with compiler; false says nothing
// (compile the whole expression).
func compilesAsChain(compiler plugincel.Compiler, expression string, opts plugincel.OptionalVariableDeclarations, mode environment.Type, v *version.Version) bool {
	if len(expression) < chainThreshold {
		return false
	}
	operands, ok := chainOperands(expression)
	if !ok || len(operands) < 2 {
		return false
	}
	env, err := BaseEnvSet(v).Env(mode)
	if err != nil {
		return false
	}
	parsed, issues := env.Parse(expression)
	if issues.Err() != nil || countChainOperands(parsed) != len(operands) {
		return false
	}
	for _, piece := range chainPieces(operands) {
		res := compiler.CompileCELExpression(accessor{expression: piece, returns: []*cel.Type{cel.BoolType}}, opts, mode)
		if res.Error != nil {
			return false
		}
	}
	return true
}

// chainPieces joins consecutive operands into expressions of about
// chainPieceSize bytes, each a conjunction of at least two operands (so
// that its type is bool whatever the operands' types are). The closing
// parenthesis goes on a new line: an operand may end with a // comment.
func chainPieces(operands []string) []string {
	var pieces []string
	var b strings.Builder
	n := 0
	flush := func() {
		if n == 1 {
			b.WriteString(" && true")
		}
		pieces = append(pieces, b.String())
		b.Reset()
		n = 0
	}
	for _, op := range operands {
		if n > 0 {
			b.WriteString(" && ")
		}
		b.WriteString("(")
		b.WriteString(op)
		b.WriteString("\n)")
		n++
		if b.Len() >= chainPieceSize {
			flush()
		}
	}
	if n > 0 {
		flush()
	}
	return pieces
}

// countChainOperands counts the operands of the parsed expression's
// top-level && / || tree.
func countChainOperands(parsed *cel.Ast) int {
	var count func(e celast.Expr) int
	count = func(e celast.Expr) int {
		if e.Kind() == celast.CallKind {
			call := e.AsCall()
			if fn := call.FunctionName(); (fn == operators.LogicalAnd || fn == operators.LogicalOr) && !call.IsMemberFunction() {
				n := 0
				for _, arg := range call.Args() {
					n += count(arg)
				}
				return n
			}
		}
		return 1
	}
	return count(parsed.NativeRep().Expr())
}

// chainOperands splits a CEL expression at its top-level && and ||
// operators, recursively through parentheses that enclose a whole
// operand, and returns the operands' source texts. ok is false when the
// text has a top-level ?: (lower precedence than && and ||), when an
// operand is empty, or when the text cannot be scanned (an unterminated
// string or bracket): the caller then compiles the whole expression.
func chainOperands(expression string) ([]string, bool) {
	var out []string
	var split func(text string, depth int) bool
	split = func(text string, depth int) bool {
		if depth > 100 {
			return false
		}
		text = strings.TrimSpace(text)
		for enclosed(text) {
			text = strings.TrimSpace(text[1 : len(text)-1])
		}
		ops, ok := topLevelOperators(text)
		if !ok {
			return false
		}
		if len(ops) == 0 {
			if strings.TrimSpace(stripComments(text)) == "" {
				return false
			}
			out = append(out, text)
			return true
		}
		start := 0
		for _, at := range ops {
			if !split(text[start:at], depth+1) {
				return false
			}
			start = at + 2
		}
		return split(text[start:], depth+1)
	}
	if !split(expression, 0) {
		return nil, false
	}
	return out, true
}

// enclosed reports text that is one parenthesised expression: "(...)"
// whose opening parenthesis closes at the end.
func enclosed(text string) bool {
	if len(text) < 2 || text[0] != '(' || text[len(text)-1] != ')' {
		return false
	}
	closing := -1
	ok := scan(text, func(i int, depth int, c byte) bool {
		if c == ')' && depth == 0 {
			closing = i
			return false
		}
		return true
	})
	return ok && closing == len(text)-1
}

// topLevelOperators returns the offsets of the && operators of text at
// bracket depth 0, or of its || operators when it has any (|| binds less
// tightly: the && are inside its operands). ok is false for a top-level
// "?" (a conditional, or an optional field selection: not split) and for
// text that cannot be scanned.
func topLevelOperators(text string) (ops []int, ok bool) {
	var ands, ors []int
	question := false
	ok = scan(text, func(i int, depth int, c byte) bool {
		if depth != 0 {
			return true
		}
		switch {
		case c == '?':
			question = true
			return false
		case c == '&' && i+1 < len(text) && text[i+1] == '&':
			ands = append(ands, i)
		case c == '|' && i+1 < len(text) && text[i+1] == '|':
			ors = append(ors, i)
		}
		return true
	})
	if !ok || question {
		return nil, false
	}
	// Operators are two characters; the scanner reports both.
	dedupe := func(at []int) []int {
		var out []int
		for _, i := range at {
			if len(out) > 0 && out[len(out)-1] == i-1 {
				continue
			}
			out = append(out, i)
		}
		return out
	}
	if len(ors) > 0 {
		return dedupe(ors), true
	}
	return dedupe(ands), true
}

// scan walks the characters of CEL source text outside string literals,
// quoted identifiers and comments, with their bracket depth (a closing
// bracket is reported at the depth it closes to, and only when it closes
// an opening one). visit returning false stops the walk. ok is false for
// unterminated strings, quoted identifiers or brackets, and unbalanced
// closing brackets.
func scan(text string, visit func(i, depth int, c byte) bool) (ok bool) {
	depth := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			nl := strings.IndexByte(text[i:], '\n')
			if nl < 0 {
				return depth == 0
			}
			i += nl
		case c == '\'' || c == '"':
			end, good := stringEnd(text, i)
			if !good {
				return false
			}
			i = end
		case c == '`':
			end := strings.IndexByte(text[i+1:], '`')
			if end < 0 {
				return false
			}
			i += end + 1
		case c == '(' || c == '[' || c == '{':
			if !visit(i, depth, c) {
				return true
			}
			depth++
		case c == ')' || c == ']' || c == '}':
			if depth == 0 {
				return false
			}
			depth--
			if !visit(i, depth, c) {
				return true
			}
		default:
			if !visit(i, depth, c) {
				return true
			}
		}
	}
	return depth == 0
}

// stringEnd returns the offset of the last character of the string
// literal whose opening quote is at start: single or triple quoted, raw
// when an r or R prefixes it (with or without b or B), escapes skipped
// otherwise.
func stringEnd(text string, start int) (int, bool) {
	// A prefix is up to two of r, R, b, B right before the quote, not
	// preceded by more of an identifier.
	raw := false
	j := start
	for j > 0 && start-j < 2 && isPrefixChar(text[j-1]) {
		j--
	}
	if j == 0 || !isIdentChar(text[j-1]) {
		raw = strings.ContainsAny(text[j:start], "rR")
	}
	q := text[start]
	if strings.HasPrefix(text[start:], strings.Repeat(string(q), 3)) {
		closing := strings.Repeat(string(q), 3)
		for i := start + 3; i < len(text); i++ {
			if !raw && text[i] == '\\' {
				i++
				continue
			}
			if strings.HasPrefix(text[i:], closing) {
				return i + 2, true
			}
		}
		return 0, false
	}
	for i := start + 1; i < len(text); i++ {
		switch text[i] {
		case '\\':
			if !raw {
				i++
			}
		case '\n', '\r':
			return 0, false
		case q:
			return i, true
		}
	}
	return 0, false
}

func isIdentChar(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func isPrefixChar(c byte) bool { return c == 'r' || c == 'R' || c == 'b' || c == 'B' }

// stripComments removes // comments (for telling an empty operand).
func stripComments(text string) string {
	var b strings.Builder
	last := 0
	scanComments(text, func(from, to int) {
		b.WriteString(text[last:from])
		last = to
	})
	b.WriteString(text[last:])
	return b.String()
}

// scanComments calls found with the byte range of every // comment outside
// strings.
func scanComments(text string, found func(from, to int)) {
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			nl := strings.IndexByte(text[i:], '\n')
			if nl < 0 {
				found(i, len(text))
				return
			}
			found(i, i+nl)
			i += nl
		case c == '\'' || c == '"':
			end, ok := stringEnd(text, i)
			if !ok {
				return
			}
			i = end
		case c == '`':
			end := strings.IndexByte(text[i+1:], '`')
			if end < 0 {
				return
			}
			i += end + 1
		}
	}
}
