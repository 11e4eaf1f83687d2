// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"regexp"
	"strings"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Kyverno's value-string operators (pkg/engine/operator/operator.go).
const (
	opEqual      = ""
	opNotEqual   = "!"
	opMoreEqual  = ">="
	opLessEqual  = "<="
	opMore       = ">"
	opLess       = "<"
	opInRange    = "-"
	opNotInRange = "!-"
)

var (
	inRange    = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
	notInRange = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)!-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
)

// operatorOf is Kyverno's GetOperatorFromStringPattern.
func operatorOf(pattern string) string {
	if len(pattern) < 2 {
		return opEqual
	}
	for _, op := range []string{opMoreEqual, opLessEqual, opMore, opLess, opNotEqual} {
		if strings.HasPrefix(pattern, op) {
			return op
		}
	}
	switch {
	case notInRange.MatchString(pattern):
		return opNotInRange
	case inRange.MatchString(pattern):
		return opInRange
	}
	return opEqual
}

// valueString is Kyverno's validateStringPatterns of x against the value
// string s: the value itself, or any of its |-separated alternatives, each
// a conjunction of &-separated conditions.
func (c *compiler) valueString(x, s, path string) (string, *model.Refusal) {
	if strings.Contains(s, "{{") || strings.Contains(s, "$(") {
		return "", model.Refuse(model.ReasonPatternNotExpressible, "a variable in %q at %s", s, path)
	}
	var alternatives []string
	subsumed := false // the value equal to s passes the conditions anyway
	for _, alternative := range strings.Split(s, "|") {
		alternative = strings.Trim(alternative, " ")
		var all []string
		for _, condition := range strings.Split(alternative, "&") {
			condition = strings.Trim(condition, " ")
			check, fl := c.valueCondition(x, condition, path)
			if fl != nil {
				return "", fl
			}
			all = append(all, check)
			subsumed = subsumed || (condition == s && operatorOf(s) == opEqual && strings.TrimSpace(s) == s)
		}
		alternatives = append(alternatives, "("+strings.Join(all, " && ")+")")
	}
	if !subsumed {
		// Last: CEL's || evaluates left to right, and a value that passes
		// is mostly one the alternatives take.
		alternatives = append(alternatives, "(type("+x+") == string && "+x+" == "+kyverno.CELString(s)+")")
	}
	if len(alternatives) == 1 {
		return alternatives[0], nil
	}
	return "(" + strings.Join(alternatives, " || ") + ")", nil
}

// valueCondition is Kyverno's validateStringPattern: a range as two
// comparisons; an operand compared as a duration, a quantity
// (operandCompare) or a string (compareString).
func (c *compiler) valueCondition(x, condition, path string) (string, *model.Refusal) {
	op := operatorOf(condition)
	switch op {
	case opInRange, opNotInRange:
		re := inRange
		if op == opNotInRange {
			re = notInRange
		}
		m := re.FindStringSubmatch(condition)
		if m == nil {
			return "false", nil
		}
		lowOp, highOp, join := ">= ", "<= ", " && "
		if op == opNotInRange {
			lowOp, highOp, join = "< ", "> ", " || "
		}
		low, fl := c.valueCondition(x, lowOp+m[1], path)
		if fl != nil {
			return "", fl
		}
		high, fl := c.valueCondition(x, highOp+m[2], path)
		if fl != nil {
			return "", fl
		}
		return "(" + low + join + high + ")", nil
	}
	operand := strings.TrimSpace(condition[len(op):])
	compared, fl := c.operandCompare(x, op, operand, path)
	if fl != nil || compared != "" {
		return compared, fl
	}
	return compareString(x, op, operand, path)
}

// compareString is Kyverno's compareString of the value x against the
// operand, for equality and inequality: a wildcard match on the value's
// string form.
func compareString(x, op, operand, path string) (string, *model.Refusal) {
	negate := op == opNotEqual
	onDouble, ok := matchesFloatForm(operand)
	if !ok {
		return "", model.Refuse(model.ReasonPatternNotExpressible, "the wildcard %q against a floating-point value at %s", operand, path)
	}
	match := func(v string) string {
		if !kyverno.ContainsWildcard(operand) {
			return v + " == " + kyverno.CELString(operand)
		}
		return kyverno.CELPatternMatch(v, []string{operand})
	}
	static := func(matched bool) string {
		if matched != negate {
			return "true"
		}
		return "false"
	}
	not := ""
	if negate {
		not = "!"
	}
	// compareString: a string as it is, an int and a bool as Go formats
	// them (as CEL's string() does), a double in Go's 'E' format; any
	// other value (null, a map, a list) matches nothing, negated or not.
	terms := []string{"(type(" + x + ") == string && " + not + "(" + match(x) + "))"}
	switch onInt, ok := matchesIntForm(operand); {
	case !ok:
		terms = append(terms, "(type("+x+") == int && "+not+"("+match("string("+x+")")+"))")
	case static(onInt) == "true":
		terms = append(terms, "type("+x+") == int")
	}
	onTrue, onFalse := static(kyverno.WildcardMatch(operand, "true")), static(kyverno.WildcardMatch(operand, "false"))
	switch {
	case onTrue == "true" && onFalse == "true":
		terms = append(terms, "type("+x+") == bool")
	case onTrue == "true":
		terms = append(terms, "(type("+x+") == bool && "+x+")")
	case onFalse == "true":
		terms = append(terms, "(type("+x+") == bool && !"+x+")")
	}
	if static(onDouble) == "true" {
		terms = append(terms, "type("+x+") == double")
	}
	return "(" + strings.Join(terms, " || ") + ")", nil
}

// matchesIntForm says whether the wildcard operand matches every int in
// Go's decimal format ("-12"), or none (a character no such number holds):
// ok is false when that depends on the value.
func matchesIntForm(operand string) (matches, ok bool) {
	for _, r := range operand {
		if r != '*' && r != '?' && r != '-' && (r < '0' || r > '9') {
			return false, true
		}
	}
	if operand == "*" {
		return true, true
	}
	return false, false
}

// floatFormAlphabet holds every character of a finite float64 formatted
// by strconv.FormatFloat(v, 'E', -1, 64), which Kyverno compares patterns
// with ("1.5E+00"); floatForm is that format, floatFormPrefix and
// floatFormSuffix accept (at least) its prefixes and suffixes.
const floatFormAlphabet = "0123456789.E+-"

var (
	floatForm       = regexp.MustCompile(`^-?[0-9](\.[0-9]+)?E[+-][0-9]{2,3}$`)
	floatFormPrefix = regexp.MustCompile(`^(-?([0-9]((\.[0-9]*)?(E([+-][0-9]{0,3})?)?)?)?)?$`)
	floatFormSuffix = regexp.MustCompile(`^(-?[0-9.]*E)?([+-])?[0-9]*$`)
)

// matchesFloatForm says whether the wildcard operand matches every finite
// float in Kyverno's 'E' format, or none: ok is false when that depends on
// the value.
func matchesFloatForm(operand string) (matches, ok bool) {
	literal := strings.Map(func(r rune) rune {
		if r == '*' || r == '?' {
			return -1
		}
		return r
	}, operand)
	for _, r := range literal {
		if !strings.ContainsRune(floatFormAlphabet, r) {
			return false, true // a character no form holds
		}
	}
	if !kyverno.ContainsWildcard(operand) {
		return false, !floatForm.MatchString(operand)
	}
	star := strings.Contains(operand, "*")
	if literal == "" {
		// Wildcards only: with a '*', every form at least as long as the
		// '?'s (a form has 5 characters or more); without, exactly as long.
		questions := strings.Count(operand, "?")
		if star {
			return questions <= 5, questions <= 5
		}
		return false, questions < 5
	}
	if prefix := operand[:strings.IndexAny(operand, "*?")]; !floatFormPrefix.MatchString(prefix) {
		return false, true // no form starts so
	}
	if star {
		if suffix := operand[strings.LastIndex(operand, "*")+1:]; !strings.Contains(suffix, "?") && !floatFormSuffix.MatchString(suffix) {
			return false, true // no form ends so
		}
	}
	return false, false
}
