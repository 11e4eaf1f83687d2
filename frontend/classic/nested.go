// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// A variable nested in another's expression, as in
//
//	{{ regex_match('^[0-9a-f]{8}$', '{{ request.object.metadata.labels.id }}') }}
//
// is substituted first (variables.substituteVariablesIfAny: the inner
// variables are the only ones Kyverno's variable regex finds, and their
// values are pasted into the text), then the outer expression is parsed
// and evaluated. The pasted text is part of the expression, so its value
// could change how the expression reads: the compiler takes only inner
// variables inside raw string literals ('...') whose value is a label
// (request.object or request.oldObject's metadata.labels), which the API
// server holds to its syntax (letters, digits, '-', '_', '.'): no quote,
// brace or backslash, so the literal is the label's value. A value that is
// no valid label value (possible only outside a cluster, as in a test's
// resource file) makes the condition fail with InvalidLabelValue.

// InvalidLabelValue is the failure of a compiled condition where a label
// value pasted into an expression is not one the API server accepts:
// Kyverno would parse an expression that depends on it.
var InvalidLabelValue = failure("a label value that is no valid label value (possible only outside a cluster), pasted into a JMESPath expression")

// labelValue is the API server's syntax of a label value
// (validation.IsValidLabelValue).
const labelValue = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`

// nestedPlaceholder stands for the i-th inner variable while the outer
// expression is parsed.
func nestedPlaceholder(i int) string { return fmt.Sprintf("kyvap_nested_%d_", i) }

// kyvernoVariable is Kyverno's variable regex (variables/regex
// RegexVariables): a variable not preceded by a backslash.
var kyvernoVariable = regexp.MustCompile(`(^|[^\\])(\{\{(?:\{[^{}]*\}|[^{}])*\}\})`)

// nestedOperand compiles an operand that is one variable holding others
// in raw string literals (see above).
func nestedOperand(text string, scope Scope, b *binder, at string) (value, *model.Refusal) {
	refuse := func(why string) (value, *model.Refusal) {
		return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a variable inside a longer string (%q) at %s: %s", text, at, why)
	}
	if strings.Contains(text, "kyvap_nested_") {
		return refuse("it holds the compiler's placeholder text")
	}
	nested := map[string]value{}
	// pre holds where an inner variable fails (its substitution fails the
	// operand, whatever the outer expression does with the literal).
	pre := ""
	replaced := text
	for i, loc := range kyvernoVariable.FindAllStringSubmatchIndex(text, -1) {
		inner := text[loc[4]:loc[5]]
		expression := strings.TrimSpace(inner[2 : len(inner)-2])
		node, err := parseJMESPath(expression)
		if err != nil {
			return refuse(fmt.Sprintf("the inner expression %q does not parse: %v", expression, err))
		}
		fields, ok := fieldChain(node)
		if !ok || len(fields) != 5 || fields[0] != "request" || (fields[1] != "object" && fields[1] != "oldObject") || fields[2] != "metadata" || fields[3] != "labels" {
			return refuse(fmt.Sprintf("the inner variable %q is no label of the request's object, whose value the API server keeps from changing the expression", inner))
		}
		v, fl := jmesPath(expression, scope, b, at)
		if fl != nil {
			return value{}, fl
		}
		// Every label value the API server admits is a string of its
		// syntax; anything else fails, named.
		x := b.fresh("l")
		valid := "type(" + x + ") == string && string(" + x + ").matches(" + kyverno.CELString(labelValue) + ")"
		s := "[" + v.cel + "].map(" + x + ", " + valid + " ? string(" + x + ") : " + InvalidLabelValue + ")[0]"
		invalid := guarded(v.fails(), "["+v.safe+"].exists("+x+", !("+valid+"))")
		fails := or(v.fails(), invalid)
		pre = joinOr(pre, guarded(pre, fails))
		placeholder := nestedPlaceholder(i)
		nested[placeholder] = value{cel: s, safe: s}
		replaced = strings.Replace(replaced, inner, placeholder, 1)
	}
	match := variable.FindStringSubmatch(replaced)
	if match == nil || strings.Contains(match[1], "{{") || strings.Contains(match[1], "}}") || kyvernoVariable.FindString(replaced) != replaced {
		return refuse("the string is no single variable once its inner variables are substituted")
	}
	outer := strings.TrimSpace(match[1])
	if strings.HasPrefix(outer, "-") {
		return refuse("a shallow substitution")
	}
	if !placeholdersInRawStrings(outer, len(nested)) {
		return refuse("an inner variable outside a raw string literal")
	}
	node, err := parseJMESPath(outer)
	if err != nil {
		return refuse(fmt.Sprintf("the expression does not parse: %v", err))
	}
	c := &pathCompiler{scope: scope, binder: b, vars: scope.Variables, expression: outer, at: at, nested: nested}
	v, fl := c.compile(node, 0)
	if fl != nil {
		return value{}, fl
	}
	if len(c.nested) != 0 {
		return refuse("an inner variable the expression does not read as a string literal")
	}
	loads, fl := c.loaded(outer)
	if fl != nil {
		return value{}, fl
	}
	if loads != "" {
		return refuse("a context variable in the outer expression")
	}
	if pre != "" {
		v.nf, v.oe = guarded(pre, v.nf), joinOr(pre, guarded(pre, v.oe))
		v.isLiteral, v.literal = false, nil
	}
	return v, nil
}

// placeholdersInRawStrings reports whether each of the n placeholders is
// inside a raw string literal of the expression, and nowhere else.
func placeholdersInRawStrings(expression string, n int) bool {
	inside := make([]bool, len(expression))
	var quote byte // the delimiter of the literal being read, if any
	for i := 0; i < len(expression); i++ {
		ch := expression[i]
		switch {
		case quote == 0 && (ch == '\'' || ch == '"' || ch == '`'):
			quote = ch
		case quote != 0 && ch == '\\':
			i++
		case quote != 0 && ch == quote:
			quote = 0
		case quote == '\'':
			inside[i] = true
		}
	}
	for i := 0; i < n; i++ {
		p := nestedPlaceholder(i)
		at := strings.Index(expression, p)
		if at < 0 || strings.Count(expression, p) != 1 || !inside[at] || !inside[at+len(p)-1] {
			return false
		}
	}
	return true
}

// nestedLiteral is a raw string literal holding placeholders: its text
// with each inner variable's value in place (taken from c.nested).
func (c *pathCompiler) nestedLiteral(s string) (value, bool) {
	if c.nested == nil || !strings.Contains(s, "kyvap_nested_") {
		return value{}, false
	}
	var parts []string
	rest := s
	for rest != "" {
		next, which := len(rest), ""
		for p := range c.nested {
			if at := strings.Index(rest, p); at >= 0 && at < next {
				next, which = at, p
			}
		}
		if next > 0 {
			parts = append(parts, kyverno.CELString(rest[:next]))
		}
		if which == "" {
			break
		}
		parts = append(parts, c.nested[which].cel)
		delete(c.nested, which)
		rest = rest[next+len(which):]
	}
	cel := "(" + strings.Join(parts, " + ") + ")"
	return value{cel: cel, safe: cel, str: true}, true
}
