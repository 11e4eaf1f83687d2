// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"sort"
	"strconv"
	"strings"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// A pattern value that is one variable, as in a foreach's
//
//	volumeMounts:
//	- <(name): '{{ element.name }}'
//
// is substituted before the pattern is matched (validator.substitutePatterns:
// the value becomes the variable's value, typed), so the pattern Kyverno
// matches is known only at run time. The compiler binds the value to a
// CEL variable and compiles, in place of the leaf, Kyverno's pattern
// validation against a value known at run time (runtimeScalar): a string
// is a value string, split and read in CEL as Kyverno reads a literal one
// (operators, ranges, durations, quantities, wildcards). Two forms have
// no exact CEL and fail to evaluate, named: a value substituted with
// anything else (SubstitutedNonString), and a
// floating-point value in the resource against a value string (Kyverno
// formats it with "%f" and 'E': FloatAgainstRuntimeValueString).

// SubstitutedNonString is the failure of a compiled pattern value whose
// substituted value is no string: a map or a list (Kyverno matches the
// resource against it as a pattern); null, a number or a bool, where the
// differential found Kyverno's verdicts to differ from those of the same
// literal pattern (under elementScope false, Kyverno passes a Pod whose
// label a substituted null or number does not match).
var SubstitutedNonString = failure("a pattern value substituted with null, a number, a bool, a map or a list")

// FloatAgainstRuntimeValueString is the failure of a floating-point value
// checked against a value string known only at run time: Kyverno reads
// the value with Go's "%f" and 'E' formats, which CEL does not write.
var FloatAgainstRuntimeValueString = failure("a floating-point value against a value string known only at run time")

// runtimeLeaves are the distinct string leaves of a decoded pattern that
// are one variable (a value, not a key), sorted.
func runtimeLeaves(p any) []string {
	seen := map[string]bool{}
	var walk func(x any)
	walk = func(x any) {
		switch typed := x.(type) {
		case map[string]any:
			for _, v := range typed {
				walk(v)
			}
		case []any:
			for _, v := range typed {
				walk(v)
			}
		case string:
			if m := variable.FindStringSubmatch(typed); m != nil && !strings.Contains(m[1], "{{") && !strings.Contains(m[1], "}}") {
				seen[typed] = true
			}
		}
	}
	walk(p)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// runtimeLeaf is the CEL variable bound to the substituted value of the
// pattern value p, when p is one variable the caller bound.
func (c *compiler) runtimeLeaf(p any) (string, bool) {
	s, ok := p.(string)
	if !ok || c.runtime == nil {
		return "", false
	}
	v, ok := c.runtime[s]
	return v, ok
}

// runtimeScalar is pattern.Validate of x (a CEL expression that never
// fails to evaluate) against the substituted value v (a CEL variable): a
// value string. Any other value fails to evaluate, named
// (SubstitutedNonString).
func (c *compiler) runtimeScalar(x, v string) string {
	return "(type(" + v + ") == string ? " + c.runtimeValueString(x, v, parsedValueString(v)) + " : " + SubstitutedNonString + " == true)"
}

// rangeLeft is the left bound of Kyverno's range operators (the first
// group of operator.InRangeRegex and NotInRangeRegex): the greedy match
// from the start is the group, since the character after it is '-' or
// '!', which the group never holds.
const rangeLeft = `^[-|+]?[0-9]+([.][0-9]+)?[A-Za-z]*`

// parsedValueString is the CEL variable holding the value string of the
// substituted value v parsed (runtimeParse), beside v.
func parsedValueString(v string) string { return v + "s" }

// runtimeParse is Kyverno's reading of the value string p (a CEL string)
// into the conditions validateStringPatterns checks, independent of the
// value checked: its |-separated alternatives, each a list of its
// &-separated conditions trimmed of spaces; a condition is
// [join, comparisons] ("&": all comparisons hold; "|": one does), a
// comparison [op, operand, the operand as a Go duration ([] or [ns]),
// whether it is a quantity], op one of "", "!", ">", "<", ">=", "<="
// (validateStringPattern: ranges are two comparisons).
func runtimeParse(fresh func() string, p string) string {
	a, k, t, l, o := fresh(), fresh(), fresh(), fresh(), fresh()
	trimmed := "(" + k + ".matches('^ *$') ? '' : " + k + ".substring(size(" + k + ".find('^ *')), size(" + k + ") - size(" + k + ".find(' *$'))))"
	notIn := kyverno.CELString(notInRange.String())
	in := kyverno.CELString(inRange.String())
	one := func(join, op, operand string) string {
		return "[dyn('" + join + "'), dyn([['" + op + "', " + operand + "]])]"
	}
	two := func(join, op1, op2 string, width int) string {
		return "[" + t + ".find('" + rangeLeft + "')].map(" + l + ", [dyn('" + join + "'), dyn([['" + op1 + "', " + l + "], ['" + op2 + "', " + t + ".substring(size(" + l + ") + " + strconv.Itoa(width) + ")]])])[0]"
	}
	// The operator (GetOperatorFromStringPattern) and its operands.
	spec := "(size(" + t + ") < 2 ? " + one("&", "", t+".trim()") +
		" : " + t + ".startsWith('>=') ? " + one("&", ">=", t+".substring(2).trim()") +
		" : " + t + ".startsWith('<=') ? " + one("&", "<=", t+".substring(2).trim()") +
		" : " + t + ".startsWith('>') ? " + one("&", ">", t+".substring(1).trim()") +
		" : " + t + ".startsWith('<') ? " + one("&", "<", t+".substring(1).trim()") +
		" : " + t + ".startsWith('!') ? " + one("&", "!", t+".substring(1).trim()") +
		" : " + t + ".matches(" + notIn + ") ? " + two("|", "<", ">", 2) +
		" : " + t + ".matches(" + in + ") ? " + two("&", ">=", "<=", 1) +
		" : " + one("&", "", t+".trim()") + ")"
	// Each comparison with its operand read as a duration and a quantity.
	comparison := "dyn([dyn(" + o + "[0]), dyn(" + o + "[1]), dyn(" + goDuration(fresh, o+"[1]", func(v string) string { return "[" + v + "]" }, "[]") + "), dyn(isQuantity(" + o + "[1]))])"
	condition := "[" + spec + "].map(" + l + ", dyn([dyn(" + l + "[0]), dyn(" + l + "[1].map(" + o + ", " + comparison + "))]))[0]"
	return p + ".split('|').map(" + a + ", " + a + ".split('&').map(" + k + ", [" + trimmed + "].map(" + t + ", " + condition + ")[0]))"
}

// runtimeValueString is validateStringPatterns of x (never failing)
// against the value string p (a CEL string) parsed as runtimeParse
// does (the CEL variable parsed): p itself, or any alternative all of
// whose conditions hold.
func (c *compiler) runtimeValueString(x, p, parsed string) string {
	xs, xd, a, k, q, n := c.variable(), c.variable(), c.variable(), c.variable(), c.variable(), c.variable()
	asList := func(v string) string { return "[" + v + "]" }
	s := c.variable()
	xDuration := "(size(" + xs + ") > 0 ? [" + xs + "[0]].map(" + s + ", " + goDuration(c.variable, s, asList, "[]") + ")[0] : [])"
	holds := k + "[1].filter(" + q + ", " + c.runtimeCompare(x, xs, xd, q) + ")"
	condition := "[size(" + holds + ")].all(" + n + ", " + k + "[0] == '|' ? " + n + " > 0 : " + n + " == size(" + k + "[1]))"
	// x as validateString reads it for durations and quantities
	// (convertNumberToString): null as "0", an int in decimal.
	asString := "(" + x + " == null ? ['0'] : type(" + x + ") == string || type(" + x + ") == int ? [string(" + x + ")] : [])"
	alternatives := "[" + asString + "].all(" + xs + ", [" + xDuration + "].all(" + xd + ", " + parsed + ".exists(" + a + ", " + a + ".all(" + k + ", " + condition + "))))"
	return "(type(" + x + ") == double ? " + FloatAgainstRuntimeValueString + " == true : ((type(" + x + ") == string && " + x + " == " + p + ") || " + alternatives + "))"
}

// runtimeCompare is validateString of x against the comparison q (of
// runtimeParse): as Go durations when both parse as one, else as
// quantities when both parse as one, else as strings (equality and
// inequality only, with wildcards). xs is x as a string ([] when it is
// none), xd that string as a duration ([] when it is none).
func (c *compiler) runtimeCompare(x, xs, xd, q string) string {
	op, o := q+"[0]", q+"[1]"
	ordered := func(a, b string) string {
		return "(" + op + " == '' ? " + a + " == " + b + " : " + op + " == '!' ? " + a + " != " + b + " : " + op + " == '>' ? " + a + " > " + b +
			" : " + op + " == '<' ? " + a + " < " + b + " : " + op + " == '>=' ? " + a + " >= " + b + " : " + a + " <= " + b + ")"
	}
	return "(size(" + q + "[2]) > 0 && size(" + xd + ") > 0 ? " + ordered(xd+"[0]", q+"[2][0]") +
		" : " + q + "[3] && size(" + xs + ") > 0 && isQuantity(" + xs + "[0]) ? " + ordered("quantity("+xs+"[0]).compareTo(quantity("+o+"))", "0") +
		" : " + c.runtimeCompareString(x, op, o) + ")"
}

// runtimeCompareString is compareString of x against the operand o:
// equality and inequality of a wildcard pattern with the value's string
// form (a string, an int in decimal, a bool); any other value, and any
// ordering operator, is false.
func (c *compiler) runtimeCompareString(x, op, o string) string {
	s := c.variable()
	return "((" + op + " == '' || " + op + " == '!') && (type(" + x + ") == string || type(" + x + ") == int || type(" + x + ") == bool) && [string(" + x + ")].all(" + s + ", (" + op + " == '!') != " + runtimeWildcard(o, s) + "))"
}

// runtimeWildcard is wildcard.Match of the pattern o against s (CEL
// strings): equality without '*' or '?'; else an RE2 match of o quoted
// (regexp.QuoteMeta's characters), '*' any runes, '?' one.
func runtimeWildcard(o, s string) string {
	quoted := o
	for _, meta := range []string{`\`, `.`, `+`, `(`, `)`, `|`, `[`, `]`, `{`, `}`, `^`, `$`} {
		quoted += ".replace(" + kyverno.CELString(meta) + ", " + kyverno.CELString(`\`+meta) + ")"
	}
	quoted += ".replace('*', '.*').replace('?', '.')"
	return "((" + o + ".contains('*') || " + o + ".contains('?')) ? " + s + ".matches('^(?s:' + " + quoted + " + ')$') : " + s + " == " + o + ")"
}

// RulePattern compiles a rule's validate.pattern, or its anyPattern
// (anyPattern true), as its JSON, into Kyverno's verdict on resource in
// scope: validator.substitutePatterns, then validatePatterns. Context
// variables holding constant strings are substituted when compiling
// (SubstituteConstants); other pattern values that are one variable are
// substituted at run time (runtimeScalar). Kyverno substitutes before it
// looks at the operation, so where a substitution fails the verdict is
// its error on every operation, DELETE included: substitutionFails (never
// failing, "false" for none) holds there, and the verdict's Fails with
// it.
func RulePattern(raw []byte, anyPattern bool, resource string, scope Scope) (v Verdict, substitutionFails string, fl *model.Refusal) {
	raw, fl = SubstituteConstants(raw, scope.Variables)
	if fl != nil {
		return Verdict{}, "", fl
	}
	b := &binder{}
	bound, fails, fl := bindPatternVariables(raw, scope, b, "pattern")
	if fl != nil {
		return Verdict{}, "", fl
	}
	if anyPattern {
		v, fl = anyPatternVerdict(raw, resource, bound.names)
	} else {
		v, fl = patternVerdict(raw, resource, bound.names)
	}
	if fl != nil || len(bound.order) == 0 {
		return v, "false", fl
	}
	subst := b.wrap(orFalse(fails))
	guarded := func(p string) string {
		if p == "false" {
			return p
		}
		return "(!" + subst + " && " + b.wrap(bound.wrap(p)) + ")"
	}
	out := Verdict{
		Passes:   "(" + subst + " ? " + failure("a pattern variable failed to substitute") + " == true : " + b.wrap(bound.wrap(v.Passes)) + ")",
		Skips:    guarded(v.Skips),
		Violates: guarded(v.Violates),
		Fails:    subst,
	}
	if v.Fails != "false" {
		out.Fails = "(" + subst + " || " + b.wrap(bound.wrap(v.Fails)) + ")"
	}
	return out, subst, nil
}
