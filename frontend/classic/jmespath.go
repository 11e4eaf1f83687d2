// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jmespath-community/go-jmespath/pkg/parsing"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Scope says what the request's variables are in CEL, for the expression
// compiled: Kyverno rewrites request.object to request.oldObject on a
// DELETE, and judges the old object of an UPDATE as a CREATE of it.
type Scope struct {
	// Object is the CEL for request.object, such as "object".
	Object string
	// OldObject is the CEL for request.oldObject; empty refuses it.
	OldObject string
	// Operation is the CEL for request.operation, such as
	// "request.operation".
	Operation string
}

// RequestScope is the scope of an admission request a rule sees on
// every operation: on a DELETE, Kyverno reads request.object as the old
// object (variables/vars.go substituteVariablesIfAny).
var RequestScope = Scope{
	Object:    "(request.operation == 'DELETE' ? oldObject : object)",
	OldObject: "oldObject",
	Operation: "request.operation",
}

// MaxExpressionLength bounds a JMESPath expression compiled.
const MaxExpressionLength = 1024

// value is a JMESPath expression, or a literal, compiled to CEL.
type value struct {
	// cel gives Kyverno's value where Kyverno's evaluation succeeds, and
	// fails to evaluate where Kyverno's fails (a key missing from a map
	// on the path: the NotFoundError of Kyverno's go-jmespath fork).
	cel string
	// fails is a CEL predicate, which never fails to evaluate, that holds
	// where Kyverno's evaluation fails; "" when it never does.
	fails string
	// safe gives Kyverno's value with a failure read as null (as || and
	// Kyverno's comparators read it); it never fails to evaluate.
	safe string
	// literal is the value when it is known at compile time.
	literal any
	// isLiteral says that literal is set (it may be nil: JSON null).
	isLiteral bool
}

// variable matches a condition operand that is one Kyverno variable and
// nothing else: Kyverno returns the variable's value, typed, for such an
// operand, and interpolates a string otherwise.
var variable = regexp.MustCompile(`^\{\{(.*)\}\}$`)

// operand compiles a condition's key or value, as Kyverno substitutes it
// (variables.SubstituteAllInPreconditions): a string that is one
// variable is the variable's value; a value without variables is itself.
func operand(raw any, scope Scope, b *binder, at string) (value, *model.Refusal) {
	switch typed := raw.(type) {
	case string:
		if strings.Contains(typed, "$(") {
			return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a reference $(...) in %q at %s", typed, at)
		}
		if !strings.Contains(typed, "{{") {
			if strings.Contains(typed, `\{{`) {
				return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "an escaped brace in %q at %s", typed, at)
			}
			return literal(typed), nil
		}
		match := variable.FindStringSubmatch(typed)
		if match == nil || strings.Contains(match[1], "{{") || strings.Contains(match[1], "}}") {
			return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a variable inside a longer string (%q) at %s", typed, at)
		}
		expression := strings.TrimSpace(match[1])
		if strings.HasPrefix(expression, "-") {
			return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a shallow substitution {{- ...}} (%q) at %s", typed, at)
		}
		return jmesPath(expression, scope, b, at)
	case map[string]any, []any:
		data, _ := json.Marshal(typed)
		if strings.Contains(string(data), "{{") || strings.Contains(string(data), "$(") {
			return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a variable inside a map or a list at %s", at)
		}
		return literal(typed), nil
	}
	return literal(raw), nil
}

// literal is a value known at compile time, as Kyverno reads it (JSON:
// numbers are float64).
func literal(v any) value {
	l := celLiteral(v)
	return value{cel: l, safe: l, literal: v, isLiteral: true}
}

// celLiteral writes a JSON value as a CEL literal (a number as a double).
func celLiteral(v any) string {
	switch typed := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(typed)
	case string:
		return kyverno.CELString(typed)
	case float64:
		return celDouble(typed)
	case []any:
		items := make([]string, len(typed))
		for i, item := range typed {
			items[i] = celLiteral(item)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(typed))
		for k := range typed {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		entries := make([]string, len(keys))
		for i, k := range keys {
			entries[i] = kyverno.CELString(k) + ": " + celLiteral(typed[k])
		}
		return "{" + strings.Join(entries, ", ") + "}"
	}
	return fmt.Sprintf("%v", v)
}

// celDouble is a CEL double literal of f.
func celDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "double('Infinity')"
	case math.IsInf(f, -1):
		return "double('-Infinity')"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// jmesPath compiles the JMESPath expression of one variable. The forms
// compiled are the request's object, old object and operation, paths of
// fields into them, literals, and a || b (which Kyverno's fork evaluates
// with a missing key read as null). Any other form is refused, named.
func jmesPath(expression string, scope Scope, b *binder, at string) (value, *model.Refusal) {
	if len(expression) > MaxExpressionLength {
		return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a JMESPath expression longer than %d bytes at %s", MaxExpressionLength, at)
	}
	node, err := parsing.NewParser().Parse(expression)
	if err != nil {
		return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "the JMESPath expression %q does not parse: %v", expression, err)
	}
	c := &pathCompiler{scope: scope, binder: b, expression: expression, at: at}
	return c.compile(node, 0)
}

// binder names the values an expression reads more than once: CEL's
// comprehensions bind them ([x].all(v, ...), [x].map(v, ...)[0]), so that
// an expression stays linear in the size of the conditions.
type binder struct {
	vars int
	// roots are the request's variables read, bound once around the
	// whole predicate: their CEL, by the name bound.
	roots map[string]string
}

// fresh is a new variable name.
func (b *binder) fresh(prefix string) string {
	b.vars++
	return fmt.Sprintf("%s%d", prefix, b.vars)
}

// root binds a request variable's CEL (such as the object of the scope).
func (b *binder) root(name, expression string) string {
	if b.roots == nil {
		b.roots = map[string]string{}
	}
	b.roots[name] = expression
	return name
}

// wrap binds the roots around a predicate.
func (b *binder) wrap(predicate string) string {
	names := make([]string, 0, len(b.roots))
	for name := range b.roots {
		names = append(names, name)
	}
	sort.Strings(names)
	for i := len(names) - 1; i >= 0; i-- {
		predicate = "[" + b.roots[names[i]] + "].all(" + names[i] + ", " + predicate + ")"
	}
	return predicate
}

type pathCompiler struct {
	scope      Scope
	binder     *binder
	expression string
	at         string
}

func (c *pathCompiler) refuse(format string, args ...any) *model.Refusal {
	return model.Refuse(model.ReasonJMESPathNotExpressible, "%s in the JMESPath expression %q at %s", fmt.Sprintf(format, args...), c.expression, c.at)
}

func (c *pathCompiler) compile(node parsing.ASTNode, depth int) (value, *model.Refusal) {
	if depth > MaxPatternDepth {
		return value{}, c.refuse("nesting deeper than %d", MaxPatternDepth)
	}
	switch node.NodeType {
	case parsing.ASTLiteral:
		if s, ok := node.Value.(string); ok && strings.Contains(s, `\`) {
			// The raw-string escapes of the parsers differ; a backslash
			// could read differently in Kyverno's.
			return value{}, c.refuse("a backslash in a literal")
		}
		data, err := json.Marshal(node.Value)
		if err != nil {
			return value{}, c.refuse("a literal of type %T", node.Value)
		}
		var v any
		_ = json.Unmarshal(data, &v)
		return literal(v), nil
	case parsing.ASTOrExpression:
		left, fl := c.compile(node.Children[0], depth+1)
		if fl != nil {
			return value{}, fl
		}
		right, fl := c.compile(node.Children[1], depth+1)
		if fl != nil {
			return value{}, fl
		}
		// A missing key on either side reads as null (interpreter.go
		// ASTOrExpression); the right side is taken when the left one is
		// false in JMESPath's sense.
		if left.isLiteral {
			if jmesFalse(left.literal) {
				return value{cel: right.safe, safe: right.safe, literal: right.literal, isLiteral: right.isLiteral}, nil
			}
			return left, nil
		}
		x := c.binder.fresh("l")
		or := "[" + left.safe + "].map(" + x + ", " + jmesFalsy(x) + " ? " + right.safe + " : " + x + ")[0]"
		return value{cel: or, safe: or}, nil
	case parsing.ASTField, parsing.ASTSubexpression:
		fields, fl := c.fields(node)
		if fl != nil {
			return value{}, fl
		}
		return c.path(fields)
	}
	return value{}, c.refuse("%s", strings.TrimPrefix(node.NodeType.String(), "AST"))
}

// fields flattens a chain of field selections.
func (c *pathCompiler) fields(node parsing.ASTNode) ([]string, *model.Refusal) {
	switch node.NodeType {
	case parsing.ASTField:
		name, ok := node.Value.(string)
		if !ok {
			return nil, c.refuse("a field that is not a name")
		}
		return []string{name}, nil
	case parsing.ASTSubexpression:
		if len(node.Children) != 2 {
			return nil, c.refuse("a malformed path")
		}
		left, fl := c.fields(node.Children[0])
		if fl != nil {
			return nil, fl
		}
		right, fl := c.fields(node.Children[1])
		if fl != nil {
			return nil, fl
		}
		return append(left, right...), nil
	}
	return nil, c.refuse("%s in a path", strings.TrimPrefix(node.NodeType.String(), "AST"))
}

// path compiles request.object.a.b..., request.oldObject... and
// request.operation. Kyverno's fork reads a field of a map that lacks it
// as a failure (NotFoundError), and a field of anything else (null, a
// string, a list) as null.
func (c *pathCompiler) path(fields []string) (value, *model.Refusal) {
	if len(fields) < 2 || fields[0] != "request" {
		return value{}, c.refuse("the variable %q (only request.object, request.oldObject and request.operation are compiled)", strings.Join(fields, "."))
	}
	var root string
	switch fields[1] {
	case "object":
		root = c.binder.root("obj", c.scope.Object)
	case "oldObject":
		if c.scope.OldObject == "" {
			return value{}, c.refuse("request.oldObject where Kyverno judges the old object of an UPDATE")
		}
		root = c.binder.root("oldObj", c.scope.OldObject)
	case "operation":
		if len(fields) > 2 {
			return value{}, c.refuse("a field of request.operation")
		}
		return value{cel: c.scope.Operation, safe: c.scope.Operation}, nil
	default:
		return value{}, c.refuse("the variable request.%s (only request.object, request.oldObject and request.operation are compiled)", fields[1])
	}
	steps := fields[2:]
	if len(steps) == 0 {
		return value{cel: root, safe: root}, nil
	}
	// prefixes[i] selects the first i steps; each is evaluated only once
	// the one before it is known to be a map.
	prefixes := []string{root}
	for _, step := range steps {
		prefixes = append(prefixes, field(prefixes[len(prefixes)-1], step))
	}
	var valueTerms, failTerms, safeTerms strings.Builder
	for i, step := range steps {
		valueTerms.WriteString("type(" + prefixes[i] + ") != map ? null : ")
		safeTerms.WriteString("type(" + prefixes[i] + ") != map || !(" + presence(prefixes[i], step) + ") ? null : ")
		failTerms.WriteString("(type(" + prefixes[i] + ") == map && (!(" + presence(prefixes[i], step) + ")")
		if i < len(steps)-1 {
			failTerms.WriteString(" || ")
		}
	}
	valueTerms.WriteString(prefixes[len(steps)])
	safeTerms.WriteString(prefixes[len(steps)])
	fails := failTerms.String() + strings.Repeat("))", len(steps))
	return value{cel: "(" + valueTerms.String() + ")", fails: fails, safe: "(" + safeTerms.String() + ")"}, nil
}

// jmesFalsy is JMESPath's falsiness of x (go-jmespath util.go isFalse):
// null, false, and the empty string, list and map.
func jmesFalsy(x string) string {
	return "(type(" + x + ") == null_type || (type(" + x + ") == bool && !dyn(" + x + ")) || ((type(" + x + ") == string || type(" + x + ") == list || type(" + x + ") == map) && size(dyn(" + x + ")) == 0))"
}

// jmesFalse is JMESPath's falsiness of a JSON value.
func jmesFalse(v any) bool {
	switch typed := v.(type) {
	case nil:
		return true
	case bool:
		return !typed
	case string:
		return typed == ""
	case []any:
		return len(typed) == 0
	case map[string]any:
		return len(typed) == 0
	}
	return false
}

// wrapValue binds the roots around an expression of any type.
func (b *binder) wrapValue(expression string) string {
	names := make([]string, 0, len(b.roots))
	for name := range b.roots {
		names = append(names, name)
	}
	sort.Strings(names)
	for i := len(names) - 1; i >= 0; i-- {
		expression = "[" + b.roots[names[i]] + "].map(" + names[i] + ", " + expression + ")[0]"
	}
	return expression
}

// messageVariable is Kyverno's variable syntax in a string
// (variables/regex RegexVariables, without its escape prefix).
var messageVariable = regexp.MustCompile(`\{\{(?:\{[^{}]*\}|[^{}])*\}\}`)

// Message compiles a rule's message that holds variables into a CEL
// messageExpression: the text with each variable's value in its place, as
// Kyverno substitutes it (a string as it is, any other value as JSON; CEL
// formats a null as "null", a bool and an int as JSON does, a double in
// the shortest form, which JSON writes without an exponent below 1e21). A
// map or a list, and a variable that fails (a missing key), make the
// expression fail: the API server then shows the static message, the
// template. A variable of a form the compiler does not take is refused.
func Message(template string, scope Scope) (string, *model.Refusal) {
	if strings.Contains(template, "$(") || strings.Contains(template, `\{{`) {
		return "", model.Refuse(model.ReasonJMESPathNotExpressible, "a reference or an escaped brace in the message %q", template)
	}
	b := &binder{}
	var parts []string
	offset := 0
	for _, loc := range messageVariable.FindAllStringIndex(template, -1) {
		if loc[0] > offset {
			parts = append(parts, kyverno.CELString(template[offset:loc[0]]))
		}
		inner := strings.TrimSpace(template[loc[0]+2 : loc[1]-2])
		if strings.HasPrefix(inner, "-") || strings.Contains(inner, "{{") {
			return "", model.Refuse(model.ReasonJMESPathNotExpressible, "the variable %q in the message", template[loc[0]:loc[1]])
		}
		v, fl := jmesPath(inner, scope, b, "the message")
		if fl != nil {
			return "", fl
		}
		x := b.fresh("m")
		parts = append(parts, "["+v.cel+"].map("+x+", type("+x+") == string ? string("+x+") : type("+x+") == null_type ? 'null' : string("+x+"))[0]")
		offset = loc[1]
	}
	if offset < len(template) {
		parts = append(parts, kyverno.CELString(template[offset:]))
	}
	return b.wrapValue(strings.Join(parts, " + ")), nil
}
