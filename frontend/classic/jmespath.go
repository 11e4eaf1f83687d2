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
	"github.com/kyvap/kyvap/kyverno/cellib"
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
	// Variables are the rule's context variables (ParseContext).
	Variables []Variable
	// Element and ElementIndex are the CEL variables of foreach's
	// current element and its index (empty outside a foreach).
	Element, ElementIndex string
	// QueryObject is the CEL for request.object in a query that is no
	// variable substitution (a context variable's jmesPath): Kyverno
	// rewrites request.object on a DELETE only when it substitutes a
	// variable; empty means Object.
	QueryObject string
}

// RequestScope is the scope of an admission request a rule sees on
// every operation: on a DELETE, Kyverno reads request.object as the old
// object (variables/vars.go substituteVariablesIfAny).
var RequestScope = Scope{
	Object:      "(request.operation == 'DELETE' ? oldObject : object)",
	QueryObject: "object",
	OldObject:   "oldObject",
	Operation:   "request.operation",
}

// MaxExpressionLength bounds a JMESPath expression compiled.
const MaxExpressionLength = 1024

// value is a JMESPath expression, or a literal, compiled to CEL.
type value struct {
	// cel gives Kyverno's value where Kyverno's evaluation succeeds, and
	// fails to evaluate where Kyverno's fails.
	cel string
	// safe gives Kyverno's value with a missing key (the NotFoundError of
	// Kyverno's go-jmespath fork) read as null, as ||, pipes, projections
	// and function arguments read it; it fails to evaluate where Kyverno's
	// evaluation fails otherwise (oe).
	safe string
	// nf and oe are CEL predicates, which never fail to evaluate, that
	// hold where Kyverno's evaluation fails: with a missing key (nf), and
	// otherwise (oe, a function given a value of the wrong type); "" when
	// it never does.
	nf, oe string
	// literal is the value when it is known at compile time.
	literal any
	// isLiteral says that literal is set (it may be nil: JSON null).
	isLiteral bool
	// number says the value is a number whenever it evaluates (length()).
	number bool
	// str says the value is a string whenever it evaluates (a raw string
	// literal holding inner variables).
	str bool
	// shape, for a map built of values some of which are known at run
	// time only (a map holding variables), is its entries: its keys are
	// known when compiling.
	shape map[string]value
	// known, when hasKnown, is what safe gives wherever oe does not hold
	// (a literal selected from a context variable that may fail to load,
	// or null for a key known to be missing).
	known    any
	hasKnown bool
}

// staticSafe is the value v's safe form gives, wherever v.oe does not
// hold, when that is known when compiling.
func staticSafe(v value) (any, bool) {
	switch {
	case v.isLiteral:
		return v.literal, true
	case v.hasKnown:
		return v.known, true
	}
	return nil, false
}

// fails is the CEL predicate of every failure of v ("false" for none).
func (v value) fails() string { return or(orFalse(v.nf), orFalse(v.oe)) }

func orTrue(p string) string {
	if p == "" {
		return "true"
	}
	return p
}

func orFalse(p string) string {
	if p == "" {
		return "false"
	}
	return p
}

// joinOr joins failure predicates ("" for none).
func joinOr(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return "(" + a + " || " + b + ")"
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
			return nestedOperand(typed, scope, b, at)
		}
		expression := strings.TrimSpace(match[1])
		if strings.HasPrefix(expression, "-") {
			return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a shallow substitution {{- ...}} (%q) at %s", typed, at)
		}
		return jmesPath(expression, scope, b, at)
	case map[string]any, []any:
		data, _ := json.Marshal(typed)
		if strings.Contains(string(data), "$(") {
			return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a reference $(...) inside a map or a list at %s", at)
		}
		if !strings.Contains(string(data), "{{") {
			return literal(typed), nil
		}
		return compositeOperand(typed, scope, b, at)
	}
	return literal(raw), nil
}

// compositeOperand is a map or a list holding variables, as Kyverno
// substitutes it (jsonUtils.OnlyForLeafsAndKeys): each string leaf that
// is one variable becomes its value; the whole fails where a leaf does.
// A variable in a key, or inside a longer string, is refused (operand).
func compositeOperand(raw any, scope Scope, b *binder, at string) (value, *model.Refusal) {
	var items, safeItems []string
	nf, oe := "", ""
	add := func(v value) {
		items, safeItems = append(items, "dyn("+v.cel+")"), append(safeItems, "dyn("+v.safe+")")
		nf, oe = joinOr(nf, v.nf), joinOr(oe, v.oe)
	}
	element := func(x any) (value, *model.Refusal) {
		switch x.(type) {
		case map[string]any, []any:
			return compositeOperand(x, scope, b, at)
		}
		return operand(x, scope, b, at)
	}
	switch typed := raw.(type) {
	case []any:
		for _, x := range typed {
			v, fl := element(x)
			if fl != nil {
				return value{}, fl
			}
			add(v)
		}
		return value{cel: "dyn([" + strings.Join(items, ", ") + "])", safe: "dyn([" + strings.Join(safeItems, ", ") + "])", nf: nf, oe: oe}, nil
	case map[string]any:
		keys := make([]string, 0, len(typed))
		for k := range typed {
			if strings.Contains(k, "{{") {
				return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a variable in the key %q of a map at %s", k, at)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		shape := map[string]value{}
		for i, k := range keys {
			v, fl := element(typed[k])
			if fl != nil {
				return value{}, fl
			}
			add(v)
			shape[k] = v
			items[i] = kyverno.CELString(k) + ": " + items[i]
			safeItems[i] = kyverno.CELString(k) + ": " + safeItems[i]
		}
		return value{cel: "dyn({" + strings.Join(items, ", ") + "})", safe: "dyn({" + strings.Join(safeItems, ", ") + "})", nf: nf, oe: oe, shape: shape}, nil
	}
	return operand(raw, scope, b, at)
}

// literal is a value known at compile time, as Kyverno reads it (JSON:
// numbers are float64).
func literal(v any) value {
	l := celLiteral(v)
	switch v.(type) {
	case map[string]any, []any:
		// dyn: a field of it may be of any type, or absent.
		l = "dyn(" + l + ")"
	}
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
	case int64:
		return strconv.FormatInt(typed, 10)
	case []any:
		items := make([]string, len(typed))
		mixed := mixedKinds(typed)
		for i, item := range typed {
			items[i] = celLiteral(item)
			if mixed {
				// The API server takes no list of mixed types.
				items[i] = "dyn(" + items[i] + ")"
			}
		}
		return "[" + strings.Join(items, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(typed))
		for k := range typed {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		entries := make([]string, len(keys))
		values := make([]any, len(keys))
		for i, k := range keys {
			values[i] = typed[k]
		}
		mixed := mixedKinds(values)
		for i, k := range keys {
			entry := celLiteral(typed[k])
			if mixed {
				entry = "dyn(" + entry + ")"
			}
			entries[i] = kyverno.CELString(k) + ": " + entry
		}
		return "{" + strings.Join(entries, ", ") + "}"
	}
	return fmt.Sprintf("%v", v)
}

// mixedKinds says whether JSON values are of more than one CEL type (a
// null, and maps or lists whose own elements differ, count as their own).
func mixedKinds(values []any) bool {
	kind := func(v any) string {
		switch typed := v.(type) {
		case []any:
			if mixedKinds(typed) {
				return "mixed list"
			}
		case map[string]any:
			inner := make([]any, 0, len(typed))
			for _, x := range typed {
				inner = append(inner, x)
			}
			if mixedKinds(inner) {
				return "mixed map"
			}
		}
		return fmt.Sprintf("%T", v)
	}
	for i := 1; i < len(values); i++ {
		if kind(values[i]) != kind(values[0]) {
			return true
		}
	}
	return false
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
	node, err := parseJMESPath(expression)
	if err != nil {
		return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "the JMESPath expression %q does not parse: %v", expression, err)
	}
	c := &pathCompiler{scope: scope, binder: b, vars: scope.Variables, expression: expression, at: at}
	v, fl := c.compile(node, 0)
	if fl != nil {
		return value{}, fl
	}
	// Kyverno's deferred loading loads, before the query, every context
	// variable the query's text names; one that fails fails the query.
	loads, fl := c.loaded(expression)
	if fl != nil {
		return value{}, fl
	}
	if loads != "" {
		v.oe = joinOr(v.oe, loads)
		if v.isLiteral {
			v = value{cel: v.cel, safe: v.safe, oe: v.oe}
		}
		// The value is only read where nothing failed to load.
		v.cel = "(" + loads + " ? " + failure("a context variable failed to load") + " : " + v.cel + ")"
		v.safe = "(" + loads + " ? " + failure("a context variable failed to load") + " : " + v.safe + ")"
	}
	return v, nil
}

// jmesQuery compiles a JMESPath expression Kyverno queries the context
// with, outside a variable's substitution (a foreach list): no DELETE
// rewrite of request.object (Scope.QueryObject).
func jmesQuery(expression string, scope Scope, b *binder, at string) (value, *model.Refusal) {
	node, err := parseJMESPath(expression)
	if err != nil {
		return value{}, model.Refuse(model.ReasonJMESPathNotExpressible, "the JMESPath expression %q does not parse: %v", expression, err)
	}
	c := &pathCompiler{scope: scope, binder: b, vars: scope.Variables, expression: expression, at: at, query: true}
	v, fl := c.compile(node, 0)
	if fl != nil {
		return value{}, fl
	}
	if loads, fl := c.loaded(expression); fl != nil {
		return value{}, fl
	} else if loads != "" {
		return value{}, c.refuse("a context variable in a foreach list (Kyverno reads its failures by their text)")
	}
	return v, nil
}

// parseJMESPath parses a JMESPath expression.
func parseJMESPath(expression string) (parsing.ASTNode, error) {
	return parsing.NewParser().Parse(expression)
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
	return b.bindRoots(predicate, func(root, name, inner string) string {
		return "[" + root + "].all(" + name + ", " + inner + ")"
	})
}

// wrapValue binds the roots around an expression of any type.
func (b *binder) wrapValue(expression string) string {
	return b.bindRoots(expression, func(root, name, inner string) string {
		return "[" + root + "].map(" + name + ", " + inner + ")[0]"
	})
}

// bindRoots binds each root around inner, in name order, with bind.
func (b *binder) bindRoots(inner string, bind func(root, name, inner string) string) string {
	names := make([]string, 0, len(b.roots))
	for name := range b.roots {
		names = append(names, name)
	}
	sort.Strings(names)
	for i := len(names) - 1; i >= 0; i-- {
		inner = bind(b.roots[names[i]], names[i], inner)
	}
	return inner
}

type pathCompiler struct {
	scope  Scope
	binder *binder
	// vars are the context variables the expression sees.
	vars []Variable
	// query: the expression is a query of the context, not a variable's
	// substitution (Scope.QueryObject).
	query      bool
	expression string
	at         string
	// stored: the expression's value is a context variable's output,
	// which Kyverno stores as JSON (loadVariable's json.Marshal), so that
	// a function's Go-typed result reads as JSON after it.
	stored bool
	// nested are the values of the inner variables of the expression, by
	// their placeholders in its raw string literals (nestedOperand).
	nested map[string]value
}

func (c *pathCompiler) refuse(format string, args ...any) *model.Refusal {
	return model.Refuse(model.ReasonJMESPathNotExpressible, "%s in the JMESPath expression %q at %s", fmt.Sprintf(format, args...), c.expression, c.at)
}

// compile compiles node evaluated on the current node cur (a CEL
// variable that never fails to evaluate), or on Kyverno's JSON context
// when cur is "" (where only the request's variables are compiled).
func (c *pathCompiler) compile(node parsing.ASTNode, depth int) (value, *model.Refusal) {
	return c.on(node, "", depth)
}

func (c *pathCompiler) on(node parsing.ASTNode, cur string, depth int) (value, *model.Refusal) {
	if depth > MaxPatternDepth {
		return value{}, c.refuse("nesting deeper than %d", MaxPatternDepth)
	}
	switch node.NodeType {
	case parsing.ASTLiteral:
		if s, ok := node.Value.(string); ok && strings.Contains(s, `\`) && (strings.Contains(c.expression, `\\`) || strings.Contains(c.expression, "`")) {
			// The raw-string escapes of the parsers differ: both read \'
			// as a quote and keep a backslash before anything else, but
			// only the compiler's reads \\ as one backslash. Without a
			// double backslash (and JSON literals), the two agree.
			return value{}, c.refuse("a backslash in a literal of an expression holding two in a row or a JSON literal")
		}
		if s, ok := node.Value.(string); ok {
			if v, found := c.nestedLiteral(s); found {
				return v, nil
			}
		}
		data, err := json.Marshal(node.Value)
		if err != nil {
			return value{}, c.refuse("a literal of type %T", node.Value)
		}
		var v any
		_ = json.Unmarshal(data, &v)
		return literal(v), nil
	case parsing.ASTCurrentNode, parsing.ASTIdentity:
		if cur == "" {
			return value{}, c.refuse("@ on the whole context")
		}
		return value{cel: cur, safe: cur}, nil
	case parsing.ASTOrExpression:
		left, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		right, fl := c.on(node.Children[1], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		// A missing key on either side reads as null (interpreter.go
		// ASTOrExpression); the right side is taken when the left one is
		// false in JMESPath's sense; other failures stay failures.
		if left.isLiteral {
			if jmesFalse(left.literal) {
				return value{cel: right.safe, safe: right.safe, oe: right.oe, literal: right.literal, isLiteral: right.isLiteral}, nil
			}
			return left, nil
		}
		x := c.binder.fresh("l")
		or := "[" + left.safe + "].map(" + x + ", " + jmesFalsy(x) + " ? " + right.safe + " : " + x + ")[0]"
		oe := left.oe
		if right.oe != "" {
			oe = joinOr(oe, guarded(left.oe, "["+left.safe+"].exists("+x+", "+jmesFalsy(x)+" && "+right.oe+")"))
		}
		return value{cel: or, safe: or, oe: oe}, nil
	case parsing.ASTField, parsing.ASTSubexpression:
		if fields, ok := fieldChain(node); ok {
			if cur != "" {
				return path(cur, fields), nil
			}
			for i := len(c.vars) - 1; i >= 0; i-- {
				if c.vars[i].Name == fields[0] {
					return c.fromVariable(i, fields[1:])
				}
			}
			return c.requestPath(fields)
		}
		if node.NodeType == parsing.ASTField {
			return value{}, c.refuse("a field that is not a name")
		}
		return c.subexpression(node.Children[0], node.Children[1], cur, depth)
	case parsing.ASTIndexExpression:
		return c.subexpression(node.Children[0], node.Children[1], cur, depth)
	case parsing.ASTIndex:
		if cur == "" {
			return value{}, c.refuse("an index on the whole context")
		}
		i, ok := node.Value.(int)
		if !ok {
			return value{}, c.refuse("a malformed index")
		}
		// interpreter.go ASTIndex: a list's element, counted from the end
		// when negative; null out of range and on anything but a list.
		index := strconv.Itoa(i)
		if i < 0 {
			index = "size(dyn(" + cur + ")) - " + strconv.Itoa(-i)
		}
		v := "(type(" + cur + ") == list && " + index + " >= 0 && " + index + " < size(dyn(" + cur + ")) ? dyn(" + cur + ")[" + index + "] : null)"
		return value{cel: v, safe: v}, nil
	case parsing.ASTFlatten:
		left, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		// interpreter.go ASTFlatten: any failure of the left side, or a
		// value that is no list, is null; lists in the list are spliced.
		l := left.safe
		if f := joinOr(left.nf, left.oe); f != "" {
			l = "(" + f + " ? null : dyn(" + left.safe + "))"
		}
		x := c.binder.fresh("f")
		v := "[" + l + "].map(" + x + ", type(" + x + ") == list ? dyn(dyn(" + x + ").flatten()) : null)[0]"
		return value{cel: v, safe: v}, nil
	case parsing.ASTProjection:
		left, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		x, e := c.binder.fresh("p"), c.binder.fresh("e")
		right, fl := c.on(node.Children[1], e, depth+1)
		if fl != nil {
			return value{}, fl
		}
		// interpreter.go ASTProjection: a missing key on the left reads as
		// null; anything but a list projects to null; each element's
		// value, a missing key read as null, is kept unless null.
		v := "[" + left.safe + "].map(" + x + ", type(" + x + ") != list ? null : dyn(dyn(" + x + ").map(" + e + ", " + right.safe + ").filter(" + e + ", " + e + " != null)))[0]"
		oe := left.oe
		if right.oe != "" {
			oe = joinOr(oe, guarded(left.oe, "["+left.safe+"].exists("+x+", type("+x+") == list && dyn("+x+").exists("+e+", "+right.oe+"))"))
		}
		return value{cel: v, safe: v, oe: oe}, nil
	case parsing.ASTPipe:
		acc, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		for _, child := range node.Children[1:] {
			x := c.binder.fresh("q")
			next, fl := c.on(child, x, depth+1)
			if fl != nil {
				return value{}, fl
			}
			// interpreter.go ASTPipe: a missing key reads as null at every
			// stage; other failures stay failures.
			v := "[" + acc.safe + "].map(" + x + ", " + next.safe + ")[0]"
			oe := acc.oe
			if next.oe != "" {
				oe = joinOr(oe, guarded(acc.oe, "["+acc.safe+"].exists("+x+", "+next.oe+")"))
			}
			acc = value{cel: v, safe: v, oe: oe, number: next.number}
		}
		return acc, nil
	case parsing.ASTFunctionExpression:
		if name, _ := node.Value.(string); name == "items" {
			return c.items(node, cur, depth)
		}
		return c.function(node, cur, depth)
	case parsing.ASTComparator:
		left, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		right, fl := c.on(node.Children[1], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		// interpreter.go ASTComparator: a missing key reads as null on
		// either side; == and != compare any values (reflect.DeepEqual of
		// JSON values, CEL's equality); the others compare numbers, and
		// are null on anything else.
		a, b := c.binder.fresh("a"), c.binder.fresh("b")
		var cmp string
		switch node.Value {
		case parsing.TOKEQ:
			cmp = "dyn(" + a + ") == dyn(" + b + ")"
		case parsing.TOKNE:
			cmp = "dyn(" + a + ") != dyn(" + b + ")"
		default:
			op, ok := comparatorOf(node.Value)
			if !ok {
				return value{}, c.refuse("the comparator %v", node.Value)
			}
			cmp = "(" + isNumber(a) + " && " + isNumber(b) + " ? dyn(double(" + a + ") " + op + " double(" + b + ")) : null)"
		}
		v := "[" + left.safe + "].map(" + a + ", [" + right.safe + "].map(" + b + ", " + cmp + ")[0])[0]"
		return value{cel: v, safe: v, oe: joinOr(left.oe, guarded(left.oe, right.oe))}, nil
	case parsing.ASTAndExpression:
		left, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		right, fl := c.on(node.Children[1], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		// interpreter.go ASTAndExpression: a missing key on the left reads
		// as null; a false left side is the value; else the right side,
		// whose failures, a missing key included, are the expression's.
		x := c.binder.fresh("a")
		strict := "[" + left.safe + "].map(" + x + ", " + jmesFalsy(x) + " ? " + x + " : dyn(" + right.cel + "))[0]"
		soft := "[" + left.safe + "].map(" + x + ", " + jmesFalsy(x) + " ? " + x + " : dyn(" + right.safe + "))[0]"
		reaches := func(p string) string {
			if p == "" {
				return ""
			}
			return guarded(left.oe, "["+left.safe+"].exists("+x+", !"+jmesFalsy(x)+" && "+p+")")
		}
		return value{cel: strict, safe: soft, nf: reaches(right.nf), oe: joinOr(left.oe, reaches(right.oe))}, nil
	case parsing.ASTNotExpression:
		child, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		x := c.binder.fresh("x")
		v := "[" + child.safe + "].map(" + x + ", " + jmesFalsy(x) + ")[0]"
		return value{cel: v, safe: v, oe: child.oe}, nil
	case parsing.ASTFilterProjection:
		if len(node.Children) != 3 {
			return value{}, c.refuse("a malformed filter")
		}
		left, fl := c.on(node.Children[0], cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		x, e := c.binder.fresh("p"), c.binder.fresh("e")
		right, fl := c.on(node.Children[1], e, depth+1)
		if fl != nil {
			return value{}, fl
		}
		cond, fl := c.on(node.Children[2], e, depth+1)
		if fl != nil {
			return value{}, fl
		}
		// interpreter.go ASTFilterProjection: any failure of the left side,
		// or anything but a list, is null; the elements whose condition
		// (a missing key read as null) is true in JMESPath's sense are
		// projected, nulls left out.
		l := left.safe
		if f := joinOr(left.nf, left.oe); f != "" {
			l = "(" + f + " ? null : dyn(" + left.safe + "))"
		}
		y := c.binder.fresh("c")
		kept := "[" + cond.safe + "].all(" + y + ", !" + jmesFalsy(y) + ")"
		v := "[" + l + "].map(" + x + ", type(" + x + ") != list ? null : dyn(dyn(" + x + ").filter(" + e + ", " + kept + ").map(" + e + ", " + right.safe + ").filter(" + e + ", " + e + " != null)))[0]"
		oe := ""
		if cond.oe != "" || right.oe != "" {
			elementFails := orFalse(cond.oe)
			if right.oe != "" {
				elementFails = or(elementFails, guarded(cond.oe, "("+kept+" && "+right.oe+")"))
			}
			oe = "[" + l + "].exists(" + x + ", type(" + x + ") == list && dyn(" + x + ").exists(" + e + ", " + elementFails + "))"
		}
		return value{cel: v, safe: v, oe: oe}, nil
	case parsing.ASTMultiSelectList:
		// interpreter.go ASTMultiSelectList: null on null; each element
		// with a missing key read as null. The whole context is a map,
		// never null.
		items := make([]string, len(node.Children))
		oe := ""
		for i, child := range node.Children {
			item, fl := c.on(child, cur, depth+1)
			if fl != nil {
				return value{}, fl
			}
			items[i], oe = "dyn("+item.safe+")", joinOr(oe, item.oe)
		}
		if cur == "" {
			v := "dyn([" + strings.Join(items, ", ") + "])"
			return value{cel: v, safe: v, oe: oe}, nil
		}
		v := "(type(" + cur + ") == null_type ? null : dyn([" + strings.Join(items, ", ") + "]))"
		if oe != "" {
			oe = "(type(" + cur + ") != null_type && " + oe + ")"
		}
		return value{cel: v, safe: v, oe: oe}, nil
	}
	return value{}, c.refuse("%s", strings.TrimPrefix(node.NodeType.String(), "AST"))
}

// items compiles Kyverno's items(value, keyName, valueName) (jpItems):
// a map's entries in key order, or a list's elements with their index (a
// float), as a list of maps {keyName: key, valueName: value}. Its result
// is a Go []map[string]any, which Kyverno's operators read as no JSON
// value: it is compiled only as a context variable's whole expression,
// whose output Kyverno stores as JSON.
func (c *pathCompiler) items(node parsing.ASTNode, cur string, depth int) (value, *model.Refusal) {
	if !c.stored || depth != 0 {
		return value{}, c.refuse("the function items() other than as a context variable's whole jmesPath (its result is no JSON value)")
	}
	if len(node.Children) != 3 {
		return value{}, c.refuse("the function items() with %d arguments", len(node.Children))
	}
	names := make([]string, 2)
	for i, child := range node.Children[1:] {
		s, ok := child.Value.(string)
		if child.NodeType != parsing.ASTLiteral || !ok {
			return value{}, c.refuse("the function items() with names that are no string literals")
		}
		names[i] = s
	}
	subject, fl := c.on(node.Children[0], cur, depth+1)
	if fl != nil {
		return value{}, fl
	}
	entry := func(key, val string) string {
		if names[0] == names[1] {
			// Go's map literal keeps the later of two equal keys.
			return "{" + kyverno.CELString(names[1]) + ": dyn(" + val + ")}"
		}
		return "{" + kyverno.CELString(names[0]) + ": dyn(" + key + "), " + kyverno.CELString(names[1]) + ": dyn(" + val + ")}"
	}
	x, k, i, e := c.binder.fresh("f"), c.binder.fresh("k"), c.binder.fresh("i"), c.binder.fresh("e")
	v := "[" + subject.safe + "].map(" + x + ", type(" + x + ") == map ? dyn(dyn(" + x + ").map(" + k + ", " + k + ").sort().map(" + k + ", " + entry(k, "dyn("+x+")["+k+"]") + ")) : type(" + x + ") == list ? dyn(dyn(" + x + ").transformList(" + i + ", " + e + ", " + entry("double("+i+")", e) + ")) : " + failure("items() of a value that is neither a map nor a list") + ")[0]"
	wrong := guarded(subject.oe, "["+subject.safe+"].exists("+x+", type("+x+") != map && type("+x+") != list)")
	return value{cel: v, safe: v, oe: joinOr(subject.oe, wrong)}, nil
}

// comparatorOf is CEL's operator of a JMESPath ordering comparator.
func comparatorOf(token any) (string, bool) {
	switch token {
	case parsing.TOKGT:
		return ">", true
	case parsing.TOKGTE:
		return ">=", true
	case parsing.TOKLT:
		return "<", true
	case parsing.TOKLTE:
		return "<=", true
	}
	return "", false
}

// function compiles the functions whose CEL form is exact: length(),
// contains() (with keys() as its subject), starts_with(), ends_with().
// Arguments read a missing key as null (interpreter.go
// ASTFunctionExpression); a value of a type the function does not take is
// an error, as Kyverno's argument check.
func (c *pathCompiler) function(node parsing.ASTNode, cur string, depth int) (value, *model.Refusal) {
	name, _ := node.Value.(string)
	arity := map[string]int{"length": 1, "contains": 2, "starts_with": 2, "ends_with": 2, "type": 1, "abs": 1, "split": 2, "replace_all": 3, "join": 2, "regex_match": 2, "pattern_match": 2, "parse_json": 1, "parse_yaml": 1, "base64_decode": 1, "path_canonicalize": 1, "to_string": 1, "to_number": 1, "max": 1, "regex_replace_all": 3, "merge": -1}[name]
	if (name == "not_null" || name == "merge") && len(node.Children) > 0 {
		arity = len(node.Children) // variadic
	}
	if arity == 0 || len(node.Children) != arity {
		return value{}, c.refuse("the function %s()", name)
	}
	args := make([]value, len(node.Children))
	oe := ""
	for i, child := range node.Children {
		if name == "contains" && i == 0 && child.NodeType == parsing.ASTFunctionExpression {
			if inner, _ := child.Value.(string); inner == "keys" && len(child.Children) == 1 {
				// keys(): the map's keys, in no order; contains() alone
				// reads them here, whatever their order.
				m, fl := c.on(child.Children[0], cur, depth+1)
				if fl != nil {
					return value{}, fl
				}
				k, key := c.binder.fresh("k"), c.binder.fresh("key")
				keys := "[" + m.safe + "].map(" + k + ", type(" + k + ") == map ? dyn(dyn(" + k + ").map(" + key + ", " + key + ")) : " + failure("keys() of a value that is not a map") + ")[0]"
				wrong := guarded(m.oe, "["+m.safe+"].exists("+k+", type("+k+") != map)")
				args[i] = value{cel: keys, safe: keys, oe: joinOr(m.oe, wrong)}
				oe = joinOr(oe, guarded(oe, args[i].oe))
				continue
			}
		}
		arg, fl := c.on(child, cur, depth+1)
		if fl != nil {
			return value{}, fl
		}
		args[i] = arg
		oe = joinOr(oe, guarded(oe, arg.oe))
	}
	x := c.binder.fresh("f")
	switch name {
	case "length":
		// length() of a string (in runes), a list or a map, as a float;
		// any other value (null included) is an error, as CEL's size().
		v := "[" + args[0].safe + "].map(" + x + ", double(size(dyn(" + x + "))))[0]"
		wrong := guarded(args[0].oe, "["+args[0].safe+"].exists("+x+", !(type("+x+") == string || type("+x+") == list || type("+x+") == map))")
		return value{cel: v, safe: v, oe: joinOr(oe, wrong), number: true}, nil
	case "split", "replace_all":
		// Kyverno's jpfSplit (strings.Split) and jpfReplaceAll
		// (strings.ReplaceAll): CEL's split() and replace() are the same
		// functions; an argument that is no string is an error.
		var names []string
		for range args {
			names = append(names, c.binder.fresh("s"))
		}
		allStrings := make([]string, len(args))
		for i, n := range names {
			allStrings[i] = "type(" + n + ") == string"
		}
		call := "string(" + names[0] + ").split(string(" + names[1] + "))"
		if name == "replace_all" {
			call = "string(" + names[0] + ").replace(string(" + names[1] + "), string(" + names[2] + "))"
		}
		v := "(" + strings.Join(allStrings, " && ") + " ? dyn(" + call + ") : " + failure(name+"() of a value that is not a string") + ")"
		wrongTerm := "!(" + strings.Join(allStrings, " && ") + ")"
		for i := len(args) - 1; i >= 0; i-- {
			v = "[" + args[i].safe + "].map(" + names[i] + ", " + v + ")[0]"
			wrongTerm = "[" + args[i].safe + "].exists(" + names[i] + ", " + wrongTerm + ")"
		}
		return value{cel: v, safe: v, oe: joinOr(oe, guarded(oe, wrongTerm))}, nil
	case "join":
		// The fork's jpfJoin: a string glue and a list of strings.
		y := c.binder.fresh("g")
		ok := "type(" + x + ") == string && type(" + y + ") == list && dyn(" + y + ").all(i, type(i) == string)"
		v := "[" + args[0].safe + "].map(" + x + ", [" + args[1].safe + "].map(" + y + ", " + ok + " ? dyn(dyn(" + y + ").map(i, string(i)).join(string(" + x + "))) : " + failure("join() of a value that is not a string, or a list of strings") + ")[0])[0]"
		wrong := "[" + args[0].safe + "].exists(" + x + ", [" + args[1].safe + "].exists(" + y + ", !(" + ok + ")))"
		return value{cel: v, safe: v, oe: joinOr(oe, guarded(oe, wrong))}, nil
	case "not_null":
		// The fork's jpfNotNull: the first argument that is not null.
		v := "null"
		for i := len(args) - 1; i >= 0; i-- {
			n := c.binder.fresh("n")
			v = "[" + args[i].safe + "].map(" + n + ", type(" + n + ") != null_type ? dyn(" + n + ") : " + v + ")[0]"
		}
		return value{cel: v, safe: v, oe: oe}, nil
	case "merge":
		// The fork's jpfMerge: maps, the later one's entries replacing
		// the earlier's. The fork checks no argument of a variadic
		// function: one that is no map panics (KyvernoPanics). Built as
		// the list of the entries each later map does not replace, made a
		// map (transformMapEntry).
		names := make([]string, len(args))
		for i := range args {
			names[i] = c.binder.fresh("m")
		}
		k, e, p := c.binder.fresh("k"), c.binder.fresh("e"), c.binder.fresh("p")
		var entries, maps []string
		for i, n := range names {
			var later []string
			for _, m := range names[i+1:] {
				later = append(later, "!("+k+" in "+m+")")
			}
			filter := ""
			if len(later) > 0 {
				filter = strings.Join(later, " && ") + ", "
			}
			entries = append(entries, "dyn("+n+").transformList("+k+", "+e+", "+filter+"[dyn("+k+"), "+e+"])")
			maps = append(maps, "type("+n+") == map")
		}
		// The panic is no failure Kyverno reports (no oe): the value's
		// evaluation fails there, by KyvernoPanics.
		ok := strings.Join(maps, " && ")
		v := "(" + ok + " ? dyn((" + strings.Join(entries, " + ") + ").transformMapEntry(" + k + ", " + p + ", {" + p + "[0]: " + p + "[1]})) : " + KyvernoPanics + ")"
		for i := len(args) - 1; i >= 0; i-- {
			v = "[" + args[i].safe + "].map(" + names[i] + ", " + v + ")[0]"
		}
		return value{cel: v, safe: v, oe: oe}, nil
	case "type":
		// The fork's jpfType: JSON's type names, numbers as "number".
		v := "[" + args[0].safe + "].map(" + x + ", type(" + x + ") == int || type(" + x + ") == double ? 'number' : type(" + x + ") == string ? 'string' : type(" + x + ") == list ? 'array' : type(" + x + ") == map ? 'object' : type(" + x + ") == null_type ? 'null' : 'boolean')[0]"
		return value{cel: v, safe: v, oe: oe}, nil
	case "abs":
		// abs() of a number (math.Abs: -0 is 0); anything else is the
		// fork's argument type error.
		v := "[" + args[0].safe + "].map(" + x + ", type(" + x + ") == int || type(" + x + ") == double ? (double(" + x + ") <= 0.0 ? 0.0 - double(" + x + ") : double(" + x + ")) : " + failure("abs() of a value that is not a number") + ")[0]"
		wrong := guarded(args[0].oe, "["+args[0].safe+"].exists("+x+", !(type("+x+") == int || type("+x+") == double))")
		return value{cel: v, safe: v, oe: joinOr(oe, wrong), number: true}, nil
	case "regex_match", "pattern_match":
		// Kyverno's jpRegexMatch and jpPatternMatch, which kyvap's engine
		// evaluates (kyverno/cellib jmespathLib): a string, then a
		// string or a number (the fork's argument check), else an error;
		// an invalid regular expression is an error (a literal one is
		// checked here).
		first := node.Children[0]
		if lit, ok := first.Value.(string); name == "regex_match" && first.NodeType == parsing.ASTLiteral && ok {
			if _, err := regexp.Compile(lit); err != nil {
				return value{}, c.refuse("the invalid regular expression %q of regex_match()", lit)
			}
		} else if name == "regex_match" {
			return value{}, c.refuse("regex_match() with a regular expression that is no string literal")
		}
		y := c.binder.fresh("g")
		if lit, isString := first.Value.(string); name == "pattern_match" && first.NodeType == parsing.ASTLiteral && isString && strings.IndexFunc(lit, func(r rune) bool { return !strings.ContainsRune("0123456789.-+Inf*?", r) }) >= 0 {
			// A literal pattern holding a character no number's text (the
			// shortest digits of its float32, "+Inf" past float32's range)
			// has: a number matches it never, a string as a wildcard
			// pattern (CEL's string functions).
			ok := "type(" + y + ") == string || " + isNumber(y)
			v := "[" + args[1].safe + "].map(" + y + ", type(" + y + ") == string ? dyn(" + kyverno.CELPatternMatch("string("+y+")", []string{lit}) + ") : " + isNumber(y) + " ? dyn(false) : " + failure("pattern_match() of a value that is not a string or a number") + ")[0]"
			wrong := "[" + args[1].safe + "].exists(" + y + ", !(" + ok + "))"
			return value{cel: v, safe: v, oe: joinOr(oe, guarded(oe, wrong))}, nil
		}
		if lit, isString := first.Value.(string); name == "regex_match" && args[1].str && first.NodeType == parsing.ASTLiteral && isString {
			// A string source (a literal holding inner variables):
			// regexp.MatchString is CEL's matches().
			v := "[" + args[1].safe + "].map(" + y + ", dyn(string(" + y + ").matches(" + kyverno.CELString(lit) + ")))[0]"
			return value{cel: v, safe: v, oe: oe}, nil
		}
		ok := "type(" + x + ") == string && (type(" + y + ") == string || " + isNumber(y) + ")"
		v := "[" + args[0].safe + "].map(" + x + ", [" + args[1].safe + "].map(" + y + ", " + ok + " ? dyn(jmespath." + name + "(string(" + x + "), " + y + ")) : " + failure(name+"() of a value that is not a string, or a string or a number") + ")[0])[0]"
		wrong := "[" + args[0].safe + "].exists(" + x + ", [" + args[1].safe + "].exists(" + y + ", !(" + ok + ")))"
		return value{cel: v, safe: v, oe: joinOr(oe, guarded(oe, wrong))}, nil
	case "to_string", "to_number", "max":
		if known, ok := staticSafe(args[0]); ok && name == "to_string" {
			// Known when compiling: folded, as kyvap's engine would
			// compute it (a value JSON cannot write is left to it).
			if text, err := cellib.JMESPathToString(known); err == nil {
				if args[0].oe == "" {
					return literal(text), nil
				}
				lit := kyverno.CELString(text)
				wrapped := "(" + args[0].oe + " ? " + failure("a context variable failed to load") + " : " + lit + ")"
				return value{cel: wrapped, safe: wrapped, oe: args[0].oe, known: text, hasKnown: true}, nil
			}
		}
		// The fork's jpfToString (JSON of anything but a string),
		// jpfToNumber (null for what ParseFloat does not read) and jpfMax
		// (of a list of numbers or of strings), which kyvap's engine
		// evaluates; a value JSON cannot write (NaN) or max() of anything
		// else is an error.
		valid := map[string]string{"to_string": "jmespath.to_string_valid", "max": "jmespath.max_valid"}[name]
		call := "dyn(jmespath." + name + "(" + x + "))"
		v := "[" + args[0].safe + "].map(" + x + ", " + call + ")[0]"
		wrong := ""
		if valid != "" {
			v = "[" + args[0].safe + "].map(" + x + ", " + valid + "(" + x + ") ? " + call + " : " + failure(name+"() of a value it does not take") + ")[0]"
			wrong = guarded(args[0].oe, "["+args[0].safe+"].exists("+x+", !"+valid+"("+x+"))")
		}
		return value{cel: v, safe: v, oe: joinOr(oe, wrong)}, nil
	case "regex_replace_all":
		// Kyverno's jpRegexReplaceAll, which kyvap's engine evaluates: a
		// literal regular expression (checked here), a string or a number
		// source and replacement (ifaceToString), else an error.
		first := node.Children[0]
		lit, isString := first.Value.(string)
		if first.NodeType != parsing.ASTLiteral || !isString {
			return value{}, c.refuse("regex_replace_all() with a regular expression that is no string literal")
		}
		if _, err := regexp.Compile(lit); err != nil {
			return value{}, c.refuse("the invalid regular expression %q of regex_replace_all()", lit)
		}
		y, z := c.binder.fresh("g"), c.binder.fresh("h")
		ok := "type(" + x + ") == string && (type(" + y + ") == string || " + isNumber(y) + ") && (type(" + z + ") == string || " + isNumber(z) + ")"
		v := "[" + args[0].safe + "].map(" + x + ", [" + args[1].safe + "].map(" + y + ", [" + args[2].safe + "].map(" + z + ", " + ok + " ? dyn(jmespath.regex_replace_all(string(" + x + "), " + y + ", " + z + ")) : " + failure("regex_replace_all() of a value that is not a string or a number") + ")[0])[0])[0]"
		wrong := "[" + args[0].safe + "].exists(" + x + ", [" + args[1].safe + "].exists(" + y + ", [" + args[2].safe + "].exists(" + z + ", !(" + ok + "))))"
		return value{cel: v, safe: v, oe: joinOr(oe, guarded(oe, wrong))}, nil
	case "parse_json", "parse_yaml", "base64_decode", "path_canonicalize":
		// Kyverno's jpParseJson, jpParseYAML, jpBase64Decode and
		// jpPathCanonicalize, which kyvap's engine evaluates (kyverno/
		// cellib jmespathLib): of a string, else an error; a parse error
		// is an error.
		valid := map[string]string{"parse_json": "jmespath.parse_json_valid", "parse_yaml": "jmespath.parse_yaml_valid", "base64_decode": "jmespath.base64_valid"}[name]
		ok := "type(" + x + ") == string"
		if valid != "" {
			ok += " && " + valid + "(string(" + x + "))"
		}
		v := "[" + args[0].safe + "].map(" + x + ", " + ok + " ? dyn(jmespath." + name + "(string(" + x + "))) : " + failure(name+"() of a value that is not a string, or does not parse") + ")[0]"
		wrong := guarded(args[0].oe, "["+args[0].safe+"].exists("+x+", !("+ok+"))")
		return value{cel: v, safe: v, oe: joinOr(oe, wrong)}, nil
	case "starts_with", "ends_with":
		y := c.binder.fresh("g")
		method := map[string]string{"starts_with": "startsWith", "ends_with": "endsWith"}[name]
		v := "[" + args[0].safe + "].map(" + x + ", [" + args[1].safe + "].map(" + y + ", type(" + x + ") == string && type(" + y + ") == string ? dyn(string(" + x + ")." + method + "(string(" + y + "))) : " + failure(name+"() of a value that is not a string") + ")[0])[0]"
		wrong := guarded(oe, "["+args[0].safe+"].exists("+x+", ["+args[1].safe+"].exists("+y+", type("+x+") != string || type("+y+") != string))")
		return value{cel: v, safe: v, oe: joinOr(oe, wrong)}, nil
	}
	// contains(subject, search): a string subject holds a string search;
	// a list subject holds an element equal to it (Go's ==: the search
	// must be a literal scalar, as comparing two maps or two lists panics
	// in Kyverno); anything else is an error.
	search := args[1]
	if !search.isLiteral {
		return value{}, c.refuse("contains() with a search that is no literal")
	}
	var equal string
	switch typed := search.literal.(type) {
	case string:
		equal = "type(e) == string && e == " + kyverno.CELString(typed)
	case float64:
		equal = isNumber("e") + " && double(e) == " + celDouble(typed)
	case bool:
		equal = "type(e) == bool && e == " + strconv.FormatBool(typed)
	case nil:
		equal = "type(e) == null_type"
	default:
		return value{}, c.refuse("contains() with a map or a list to search for")
	}
	onString := "false"
	if s, ok := search.literal.(string); ok {
		onString = "string(" + x + ").contains(" + kyverno.CELString(s) + ")"
	}
	v := "[" + args[0].safe + "].map(" + x + ", type(" + x + ") == string ? dyn(" + onString + ") : type(" + x + ") == list ? dyn(dyn(" + x + ").exists(e, " + equal + ")) : " + failure("contains() of a value that is neither a string nor a list") + ")[0]"
	wrong := guarded(oe, "["+args[0].safe+"].exists("+x+", !(type("+x+") == string || type("+x+") == list))")
	return value{cel: v, safe: v, oe: joinOr(oe, wrong)}, nil
}

// guarded is the predicate p, evaluated only where the failure predicate
// unless does not hold (p reads values that fail there).
func guarded(unless, p string) string {
	if p == "" {
		return ""
	}
	if unless == "" || unless == "false" {
		return p
	}
	return "(!" + unless + " && " + p + ")"
}

// subexpression compiles left.right (and left[index]): the right side
// evaluated on the left side's value, whose failures, a missing key
// included, are the whole expression's (interpreter.go ASTSubexpression).
func (c *pathCompiler) subexpression(leftNode, rightNode parsing.ASTNode, cur string, depth int) (value, *model.Refusal) {
	left, fl := c.on(leftNode, cur, depth+1)
	if fl != nil {
		return value{}, fl
	}
	x := c.binder.fresh("s")
	right, fl := c.on(rightNode, x, depth+1)
	if fl != nil {
		return value{}, fl
	}
	strict := "[" + left.cel + "].map(" + x + ", " + right.cel + ")[0]"
	soft := "[" + left.safe + "].map(" + x + ", " + right.safe + ")[0]"
	if left.nf != "" {
		soft = "(" + left.nf + " ? null : dyn(" + soft + "))"
	}
	anyFailure := joinOr(left.nf, left.oe)
	nf := left.nf
	if right.nf != "" {
		nf = joinOr(nf, guarded(anyFailure, "["+left.safe+"].exists("+x+", "+right.nf+")"))
	}
	oe := left.oe
	if right.oe != "" {
		oe = joinOr(oe, guarded(anyFailure, "["+left.safe+"].exists("+x+", "+right.oe+")"))
	}
	return value{cel: strict, safe: soft, nf: nf, oe: oe, number: right.number}, nil
}

// fromVariable is context variable i, then the fields selected from its
// value.
func (c *pathCompiler) fromVariable(i int, fields []string) (value, *model.Refusal) {
	v, fl := c.variable(i)
	if fl != nil {
		return value{}, fl
	}
	// The fields of a value whose keys are known when compiling are
	// selected then: a literal, an entry of a map holding variables (which
	// loaded whole, or failed to: v.oe), or a key known to be missing.
	for len(fields) > 0 && (v.isLiteral || v.shape != nil) {
		var next value
		var found bool
		if v.isLiteral {
			m, isMap := v.literal.(map[string]any)
			if !isMap {
				break
			}
			var x any
			if x, found = m[fields[0]]; found {
				next = literal(x)
			}
		} else if next, found = v.shape[fields[0]]; found {
			next = value{cel: next.cel, safe: next.cel, literal: next.literal, isLiteral: next.isLiteral, shape: next.shape}
		}
		if !found {
			// Kyverno's fork: a missing key is a NotFoundError, null to
			// what reads a missing key as null.
			return value{cel: failure("a key missing from a context variable"), safe: "dyn(null)", nf: orTrue(guarded(v.oe, "true")), oe: v.oe, hasKnown: true}, nil
		}
		if v.oe != "" {
			next.oe = v.oe
			if next.isLiteral {
				next.known, next.hasKnown, next.isLiteral, next.literal = next.literal, true, false, nil
			}
		}
		v, fields = next, fields[1:]
	}
	if len(fields) == 0 {
		return v, nil
	}
	x := c.binder.fresh("c")
	right := path(x, fields)
	strict := "[" + v.cel + "].map(" + x + ", " + right.cel + ")[0]"
	soft := "[" + v.safe + "].map(" + x + ", " + right.safe + ")[0]"
	nf := guarded(v.oe, "["+v.safe+"].exists("+x+", "+right.nf+")")
	return value{cel: strict, safe: soft, nf: nf, oe: v.oe}, nil
}

// fieldChain flattens a chain of field selections; ok is false for any
// other node in it.
func fieldChain(node parsing.ASTNode) ([]string, bool) {
	switch node.NodeType {
	case parsing.ASTField:
		name, ok := node.Value.(string)
		return []string{name}, ok
	case parsing.ASTSubexpression:
		if len(node.Children) != 2 {
			return nil, false
		}
		left, ok := fieldChain(node.Children[0])
		if !ok {
			return nil, false
		}
		right, ok := fieldChain(node.Children[1])
		if !ok {
			return nil, false
		}
		return append(left, right...), true
	}
	return nil, false
}

// requestFields are the fields of an admission request (admission.k8s.io
// v1 AdmissionRequest) other than the objects and the operation, which
// Kyverno's context and a VAP's request variable hold alike. Kyverno's
// roles and clusterRoles are not among them.
var requestFields = map[string]bool{
	"uid": true, "kind": true, "resource": true, "subResource": true, "requestKind": true, "requestResource": true,
	"requestSubResource": true, "name": true, "namespace": true, "userInfo": true, "dryRun": true,
}

// requestPath compiles request.object.a.b..., request.oldObject... and
// request.operation, on Kyverno's JSON context.
func (c *pathCompiler) requestPath(fields []string) (value, *model.Refusal) {
	switch fields[0] {
	case "element", "element0":
		if c.scope.Element == "" {
			return value{}, c.refuse("%s outside a foreach", fields[0])
		}
		return path(c.scope.Element, fields[1:]), nil
	case "elementIndex", "elementIndex0":
		if c.scope.ElementIndex == "" {
			return value{}, c.refuse("%s outside a foreach", fields[0])
		}
		if len(fields) > 1 {
			return path("double("+c.scope.ElementIndex+")", fields[1:]), nil
		}
		return value{cel: "double(" + c.scope.ElementIndex + ")", safe: "double(" + c.scope.ElementIndex + ")", number: true}, nil
	}
	if fields[0] != "request" && !reservedNames[fields[0]] {
		// No entry of Kyverno's context has this name: the field is
		// missing (a NotFoundError), whatever follows it.
		missing := failure("no context entry " + fields[0])
		return value{cel: missing, safe: "null", nf: "true"}, nil
	}
	if len(fields) < 2 || fields[0] != "request" {
		return value{}, c.refuse("the variable %q (the request's fields and the rule's context variables are compiled)", strings.Join(fields, "."))
	}
	var root string
	switch fields[1] {
	case "object":
		if c.query && c.scope.QueryObject != "" && c.scope.QueryObject != c.scope.Object {
			root = c.binder.root("queryObj", c.scope.QueryObject)
		} else {
			root = c.binder.root("obj", c.scope.Object)
		}
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
		if !requestFields[fields[1]] {
			return value{}, c.refuse("the variable request.%s (Kyverno's request holds it, a VAP's does not)", fields[1])
		}
		// The admission request's other fields, the same JSON in
		// Kyverno's context and in a VAP's request (empty ones left out).
		return path(c.binder.root("req", "request"), fields[1:]), nil
	}
	return path(root, fields[2:]), nil
}

// path compiles the fields selected from root (a CEL variable that never
// fails to evaluate). Kyverno's fork reads a field of a map that lacks it
// as a failure (NotFoundError), and a field of anything else (null, a
// string, a list) as null.
func path(root string, steps []string) value {
	if len(steps) == 0 {
		return value{cel: root, safe: root}
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
	// dyn: the API server types the field by its schema, and a
	// conditional's branches must agree with the null ones.
	valueTerms.WriteString("dyn(" + prefixes[len(steps)] + ")")
	safeTerms.WriteString("dyn(" + prefixes[len(steps)] + ")")
	fails := failTerms.String() + strings.Repeat("))", len(steps))
	return value{cel: "(" + valueTerms.String() + ")", nf: fails, safe: "(" + safeTerms.String() + ")"}
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

// messageVariable is Kyverno's variable syntax in a string
// (variables/regex RegexVariables, without its escape prefix).
var messageVariable = regexp.MustCompile(`\{\{(?:\{[^{}]*\}|[^{}])*\}\}`)

// jsonNumber is encoding/json's text of the number x as Kyverno holds
// it, a float64: an int as it is up to 2^53; else the shortest digits
// (CEL's string of a double, Go's %g), written without an exponent from
// 1e-6 up to 1e21 and with %g's exponent (two digits at least)
// elsewhere, as Kyverno's message shows them.
func jsonNumber(x string, b *binder) string {
	d, g, m, e, digits := b.fresh("d"), b.fresh("g"), b.fresh("m"), b.fresh("e"), b.fresh("s")
	bind := func(value, name, body string) string { return "[" + value + "].map(" + name + ", " + body + ")[0]" }
	const zeros = "'000000000000000000000000'"
	// The mantissa's digits D (n of them) and the exponent E of
	// d.ddd×10^E, written out.
	n := "size(" + digits + ")"
	sign := "(" + m + ".startsWith('-') ? '-' : '')"
	fixed := bind(m+".replace('-', '').replace('.', '')", digits,
		e+" >= "+n+" - 1 ? "+sign+" + "+digits+" + "+zeros+".substring(0, "+e+" - ("+n+" - 1)) : "+
			e+" >= 0 ? "+sign+" + "+digits+".substring(0, "+e+" + 1) + '.' + "+digits+".substring("+e+" + 1) : "+
			sign+" + '0.' + "+zeros+".substring(0, -"+e+" - 1) + "+digits)
	exponent := bind(g+".split('e')[0]", m, bind("int("+g+".split('e')[1])", e, fixed))
	onDouble := bind("string("+d+")", g, "!"+g+".contains('e') ? "+g+" : ("+d+" >= 1e21 || "+d+" <= -1e21 || ("+d+" < 1e-6 && "+d+" > -1e-6)) ? "+g+" : "+exponent)
	return "(type(" + x + ") == int && " + x + " <= 9007199254740992 && " + x + " >= -9007199254740992 ? string(" + x + ") : " + bind("double("+x+")", d, onDouble) + ")"
}

// Message compiles a rule's message that holds variables into a CEL
// messageExpression: the text with each variable's value in its place, as
// Kyverno substitutes it (a string as it is, any other value as JSON; CEL
// formats a null as "null" and a bool as JSON does, a number as
// jsonNumber). A
// map or a list, and a variable that fails (a missing key), make the
// expression fail: the API server then shows the static message, the
// template. A variable of a form the compiler does not take is refused.
func Message(template string, scope Scope) (string, *model.Refusal) {
	if strings.Contains(template, "$(") || strings.Contains(template, `\{{`) {
		return "", model.Refuse(model.ReasonJMESPathNotExpressible, "a reference or an escaped brace in the message %q", template)
	}
	b := &binder{}
	// parts are CEL strings; text is the template's text (and the values
	// known when compiling) not yet written as one.
	var parts []string
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			parts = append(parts, kyverno.CELString(text.String()))
			text.Reset()
		}
	}
	offset := 0
	for _, loc := range messageVariable.FindAllStringIndex(template, -1) {
		text.WriteString(template[offset:loc[0]])
		inner := strings.TrimSpace(template[loc[0]+2 : loc[1]-2])
		if strings.HasPrefix(inner, "-") || strings.Contains(inner, "{{") {
			return "", model.Refuse(model.ReasonJMESPathNotExpressible, "the variable %q in the message", template[loc[0]:loc[1]])
		}
		v, fl := jmesPath(inner, scope, b, "the message")
		if fl != nil {
			return "", fl
		}
		if v.isLiteral {
			// Known when compiling: written as Kyverno writes it (a string
			// as it is, anything else as its JSON).
			known, err := cellib.JMESPathToString(v.literal)
			if err != nil {
				return "", model.Refuse(model.ReasonJMESPathNotExpressible, "the variable %q in the message: %v", template[loc[0]:loc[1]], err)
			}
			text.WriteString(known)
			offset = loc[1]
			continue
		}
		flush()
		x := b.fresh("m")
		parts = append(parts, "["+v.cel+"].map("+x+", type("+x+") == string ? string("+x+") : type("+x+") == null_type ? 'null' : "+isNumber(x)+" ? "+jsonNumber(x, b)+" : string("+x+"))[0]")
		offset = loc[1]
	}
	text.WriteString(template[offset:])
	flush()
	if len(parts) == 0 {
		return kyverno.CELString(""), nil
	}
	return b.wrapValue(strings.Join(parts, " + ")), nil
}
