// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// RewriteOrValue gives the API server's CEL the meaning Kyverno gives
// orValue. Kyverno v1.19.1 compiles every ClusterPolicy CEL rule and every
// ValidatingPolicy with a compatibility macro (pkg/cel/compiler/env.go,
// OrValueCompatEnvOptions): cel-go 0.28 made `x.orValue(y)` on a value that
// is not an optional fail with "no such overload"; Kyverno rewrites every
// such call to a function that returns the optional's value or y when x is
// an optional, and x itself otherwise (both arguments evaluated, errors
// propagated). The API server has no such macro, so the same expression
// denies (or errors) in a VAP where Kyverno passes.
//
// The rewrite uses standard CEL only: every `X.orValue(Y)` becomes
//
//	(type(X) == optional_type ? dyn(X).orValue(Y) : [dyn(X), dyn(Y)][0])
//
// which is X's value or Y for an optional X, and X otherwise, evaluating
// both X and Y as Kyverno's strict function does. dyn() keeps the type
// checker from refusing a statically non-optional X or a list of two types.
//
// The rewrite is textual on the call's receiver and argument (found by
// scanning balanced brackets and string literals), so the rest of the
// expression, comments included, is unchanged; an expression without
// ".orValue(" is returned as is. changed says whether anything was
// rewritten; an error means the expression could not be scanned (unbalanced
// brackets or quotes): it is left to the compiler to report.
func RewriteOrValue(expression string) (out string, changed bool, err error) {
	const call = ".orValue("
	if !strings.Contains(expression, call) {
		return expression, false, nil
	}
	s := expression
	// One call per round, the first remaining: calls inside its receiver or
	// argument are copied unrewritten and rewritten in later rounds; the
	// call a round generates is marked so that it is not found again.
	for rounds := 0; rounds < maxOrValueRounds; rounds++ {
		at := firstCallOutsideStrings(s, call)
		if at < 0 {
			return strings.ReplaceAll(s, generatedCall, ".orValue("), true, nil
		}
		start, err := receiverStart(s, at)
		if err != nil {
			return expression, false, err
		}
		argStart := at + len(call)
		argEnd, err := closingParen(s, argStart)
		if err != nil {
			return expression, false, err
		}
		x := s[start:at]
		y := s[argStart:argEnd]
		s = s[:start] + "(type(" + x + ") == optional_type ? dyn(" + x + ")" + generatedCall + y + ") : [dyn(" + x + "), dyn(" + y + ")][0])" + s[argEnd+1:]
	}
	return expression, false, fmt.Errorf("more than %d orValue calls (each copies its receiver)", maxOrValueRounds)
}

const (
	// generatedCall marks the calls RewriteOrValue generated, until it returns.
	generatedCall = ".orValue\x00("
	// maxOrValueRounds bounds the rewrite: each call copies its receiver
	// and argument twice, so nested calls grow the expression fast.
	maxOrValueRounds = 64
)

// firstCallOutsideStrings is the index of the first occurrence of call that
// is not inside a string literal (or comment), or -1.
func firstCallOutsideStrings(s, call string) int {
	first := -1
	scan(s, func(i int) bool {
		if strings.HasPrefix(s[i:], call) {
			first = i
			return false
		}
		return true
	})
	return first
}

// scan calls visit for every byte offset of s that is code (not inside a
// string literal or a // comment), until visit returns false.
func scan(s string, visit func(int) bool) {
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "//"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		case s[i] == '"' || s[i] == '\'':
			i = skipString(s, i)
			continue
		}
		if !visit(i) {
			return
		}
		i++
	}
}

// skipString returns the offset just after the string literal starting at
// i (plain, triple-quoted, or raw with an r/R prefix before i).
func skipString(s string, i int) int {
	q := s[i]
	raw := i > 0 && (s[i-1] == 'r' || s[i-1] == 'R') && (i < 2 || !identByte(s[i-2]))
	if strings.HasPrefix(s[i:], string([]byte{q, q, q})) {
		end := strings.Index(s[i+3:], string([]byte{q, q, q}))
		if end < 0 {
			return len(s)
		}
		return i + 3 + end + 3
	}
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && !raw:
			j++
		case s[j] == q:
			return j + 1
		case s[j] == '\n':
			return j
		}
	}
	return len(s)
}

// receiverStart finds where the receiver of the member call whose '.' is
// at dot starts: a primary expression (identifier, literal, parenthesised
// or bracketed group, function call) followed by selections (.f, .?f),
// indexes ([i], [?i]) and calls.
func receiverStart(s string, dot int) (int, error) {
	i := dot
	for {
		j := i - 1
		for j >= 0 && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j--
		}
		if j < 0 {
			return 0, fmt.Errorf("orValue without a receiver")
		}
		switch c := s[j]; {
		case c == ')' || c == ']' || c == '}':
			open, err := matchingOpen(s, j)
			if err != nil {
				return 0, err
			}
			i = open
			// a call or index: its function name or operand precedes it
			if k := prevNonSpace(s, open); k >= 0 && (identByte(s[k]) || s[k] == ')' || s[k] == ']') {
				if c == ')' && !identByte(s[k]) {
					return i, nil // a parenthesised group after an operand is not a call target
				}
				continue
			}
			return i, nil
		case c == '"' || c == '\'':
			start, err := stringStart(s, j)
			if err != nil {
				return 0, err
			}
			return start, nil
		case identByte(c):
			k := j
			for k >= 0 && identByte(s[k]) {
				k--
			}
			i = k + 1
			// selection: preceded by '.' or '.?'
			p := prevNonSpace(s, i)
			if p >= 0 && s[p] == '.' {
				i = p
				continue
			}
			if p >= 1 && s[p] == '?' && s[p-1] == '.' {
				i = p - 1
				continue
			}
			// a leading '.' of a fully qualified name stays out
			return i, nil
		default:
			return 0, fmt.Errorf("orValue receiver ends with %q", c)
		}
	}
}

func prevNonSpace(s string, i int) int {
	j := i - 1
	for j >= 0 && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
		j--
	}
	return j
}

// matchingOpen finds the bracket opening the one closing at end, skipping
// string literals (scanned forward to know where they are).
func matchingOpen(s string, end int) (int, error) {
	var stack []int
	found := -1
	scan(s[:end+1], func(i int) bool {
		switch s[i] {
		case '(', '[', '{':
			stack = append(stack, i)
		case ')', ']', '}':
			if len(stack) == 0 {
				return false
			}
			open := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if i == end {
				found = open
				return false
			}
		}
		return true
	})
	if found < 0 {
		return 0, fmt.Errorf("unbalanced brackets")
	}
	return found, nil
}

// stringStart finds the start of the string literal ending at end.
func stringStart(s string, end int) (int, error) {
	start := -1
	for i := 0; i <= end; {
		if s[i] == '"' || s[i] == '\'' {
			next := skipString(s, i)
			if next == end+1 {
				start = i
				if i > 0 && (s[i-1] == 'r' || s[i-1] == 'R' || s[i-1] == 'b' || s[i-1] == 'B') {
					start = i - 1
				}
				break
			}
			i = next
			continue
		}
		if strings.HasPrefix(s[i:], "//") {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		i++
	}
	if start < 0 {
		return 0, fmt.Errorf("unterminated string")
	}
	return start, nil
}

// closingParen finds the ')' closing the call whose arguments start at from.
func closingParen(s string, from int) (int, error) {
	depth := 0
	found := -1
	scan(s[from:], func(i int) bool {
		switch s[from+i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				if s[from+i] == ')' {
					found = from + i
				}
				return false
			}
			depth--
		}
		return true
	})
	if found < 0 {
		return 0, fmt.Errorf("unbalanced parentheses")
	}
	return found, nil
}

func identByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// RewriteOrValueInSpec applies Kyverno's orValue compatibility (see
// RewriteOrValue) to the expressions of a spec that Kyverno compiles
// with it: variables, validations and their message expressions, audit
// annotations, and the match conditions not named in skip (kyvap's own). It
// returns whether anything changed. An expression the rewrite cannot scan
// is left for the compiler to report.
func RewriteOrValueInSpec(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, skip map[string]bool) bool {
	changed := false
	rewrite := func(e *string) {
		if out, ok, err := RewriteOrValue(*e); err == nil && ok {
			*e, changed = out, true
		}
	}
	for i := range spec.Variables {
		rewrite(&spec.Variables[i].Expression)
	}
	for i := range spec.MatchConditions {
		if !skip[spec.MatchConditions[i].Name] {
			rewrite(&spec.MatchConditions[i].Expression)
		}
	}
	for i := range spec.Validations {
		rewrite(&spec.Validations[i].Expression)
		rewrite(&spec.Validations[i].MessageExpression)
	}
	for i := range spec.AuditAnnotations {
		rewrite(&spec.AuditAnnotations[i].ValueExpression)
	}
	return changed
}

// OrValueWarning is the warning for a rule whose orValue calls were
// rewritten (RewriteOrValueInSpec).
func OrValueWarning(rule string) string {
	return rule + ": calls to orValue are rewritten for the API server so that a receiver that is not an optional gives its own value, as Kyverno's compatibility macro does (the API server alone would fail with \"no such overload\")"
}
