// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/kyvap/kyvap/model"
)

// Variable is a rule's context entry of type variable, the one kind of
// context entry that reads nothing outside the request (an API call, a
// ConfigMap, an image registry or a global context entry reads the
// cluster or the network, and is refused).
type Variable struct {
	Name string
	// Value, when HasValue, is the entry's value (JSON, possibly one
	// variable); JMESPath is applied to it, or to the context without it.
	Value    any
	HasValue bool
	JMESPath string
	// Default, when HasDefault, replaces a failing or null result.
	Default    any
	HasDefault bool
	// loads is Kyverno's deferred loader's match of a query that loads
	// the variable (context/deferred.go NewDeferredLoader).
	loads *regexp.Regexp
}

// reservedNames are the context's own entries, which a variable would
// replace (Kyverno's JSON context: the request, the service account,
// images, foreach's elements).
var reservedNames = map[string]bool{
	"request": true, "serviceAccountName": true, "serviceAccountNamespace": true, "images": true,
	"element": true, "elementIndex": true, "target": true,
}

// variableName are the names compiled: a JMESPath identifier.
var variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseContext reads a rule's context entries (as their JSON): every one
// must be a variable whose name is a plain identifier, whose jmesPath has
// no variable, and whose default has none. Anything else is refused,
// named.
func ParseContext(entries [][]byte) ([]Variable, *model.Refusal) {
	var out []Variable
	for i, raw := range entries {
		var entry struct {
			Name     string                      `json:"name"`
			Variable *map[string]json.RawMessage `json:"variable"`
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal(raw, &all); err != nil {
			return nil, model.Refuse(model.ReasonContextEntries, "context[%d] is not an object: %v", i, err)
		}
		if err := json.Unmarshal(raw, &entry); err != nil {
			return nil, model.Refuse(model.ReasonContextEntries, "context[%d]: %v", i, err)
		}
		for k := range all {
			if k != "name" && k != "variable" {
				return nil, model.Refuse(model.ReasonContextEntries, "the context entry %q reads %s, outside the request", entry.Name, k)
			}
		}
		if entry.Variable == nil {
			return nil, model.Refuse(model.ReasonContextEntries, "the context entry %q has no variable", entry.Name)
		}
		if !variableName.MatchString(entry.Name) || reservedNames[entry.Name] {
			return nil, model.Refuse(model.ReasonJMESPathNotExpressible, "the context variable name %q (a plain name that is not one of the context's own)", entry.Name)
		}
		v := Variable{Name: entry.Name, loads: regexp.MustCompile(`(?:\A|\z|\s|[^.0-9A-Za-z])` + regexp.QuoteMeta(entry.Name) + `\b`)}
		for k, data := range *entry.Variable {
			var decoded any
			if err := json.Unmarshal(data, &decoded); err != nil {
				return nil, model.Refuse(model.ReasonContextEntries, "the context variable %q: %s: %v", entry.Name, k, err)
			}
			switch k {
			case "value":
				v.Value, v.HasValue = decoded, decoded != nil
			case "jmesPath":
				s, ok := decoded.(string)
				if !ok {
					return nil, model.Refuse(model.ReasonJMESPathNotExpressible, "the context variable %q: jmesPath is not a string", entry.Name)
				}
				if strings.Contains(s, "$(") {
					return nil, model.Refuse(model.ReasonJMESPathNotExpressible, "the context variable %q: a reference in its jmesPath", entry.Name)
				}
				v.JMESPath = s
			case "default":
				if decoded == nil {
					continue
				}
				if strings.Contains(string(data), "$(") {
					return nil, model.Refuse(model.ReasonJMESPathNotExpressible, "the context variable %q: a reference in its default", entry.Name)
				}
				v.Default, v.HasDefault = decoded, true
			default:
				return nil, model.Refuse(model.ReasonJMESPathNotExpressible, "the context variable %q: the field %s", entry.Name, k)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// Reads reports whether text (a rule's conditions, as JSON) names one of
// the variables the way Kyverno's deferred loading reads a query: a word
// that is the variable's name.
func Reads(variables []Variable, text string) bool {
	for i := range variables {
		if variables[i].loads.MatchString(text) {
			return true
		}
	}
	return false
}

// ReadsVarying is Reads of the variables whose value may depend on the
// request: all but those whose value holds no variable (and that have no
// jmesPath), which load to the same value for any object.
func ReadsVarying(variables []Variable, text string) bool {
	for i := range variables {
		if !variables[i].constant() && variables[i].loads.MatchString(text) {
			return true
		}
	}
	return false
}

// constant says the variable's value is the same for every request.
func (v *Variable) constant() bool {
	if !v.HasValue || v.JMESPath != "" {
		return false
	}
	data, _ := json.Marshal(v.Value)
	return !strings.Contains(string(data), "{{") && !strings.Contains(string(data), "$(")
}

// loaded is the failure predicate of the variables (visible to a query)
// that Kyverno's deferred loading loads for the query text: each one
// whose name the text holds as a word, whether or not the query's value
// reads it; a variable that fails to load fails the query.
func (c *pathCompiler) loaded(text string) (string, *model.Refusal) {
	fails := ""
	for i := range c.vars {
		if !c.vars[i].loads.MatchString(text) {
			continue
		}
		v, fl := c.variable(i)
		if fl != nil {
			return "", fl
		}
		fails = joinOr(fails, v.oe)
	}
	return fails, nil
}

// variable compiles context variable i (context/loaders/variable.go
// loadVariable), seeing the variables before it only: its value, failing
// where Kyverno fails to load it (oe).
func (c *pathCompiler) variable(i int) (value, *model.Refusal) {
	v := c.vars[i]
	scope := c.scope
	scope.Variables = c.vars[:i]
	inner := &pathCompiler{scope: scope, binder: c.binder, vars: scope.Variables, at: c.at + " (context variable " + v.Name + ")"}
	// The jmesPath, after Kyverno substitutes its variables: one
	// variable naming an earlier context variable whose value is a
	// string known when compiling.
	path, fl := c.constantPath(i)
	if fl != nil {
		return value{}, fl
	}
	v.JMESPath = path
	// The default, substituted (before the value): where that fails the
	// variable fails to load; where it is null there is no default
	// (defNull, a CEL predicate).
	def, failing := "null", failure("the context variable "+v.Name+" failed to load")
	defNull, defFails, dynamicDefault := "true", "false", false
	if v.HasDefault {
		def, defNull = celLiteral(v.Default), "false"
		failing = "dyn(" + def + ")"
		if data, _ := json.Marshal(v.Default); strings.Contains(string(data), "{{") {
			d, fl := operand(v.Default, scope, c.binder, inner.at+" default")
			if fl != nil {
				return value{}, fl
			}
			y := c.binder.fresh("d")
			dynamicDefault, def, defFails = true, d.safe, d.fails()
			defNull = "[" + d.safe + "].exists(" + y + ", " + y + " == null)"
			failing = "(" + defNull + " ? " + failure("the context variable "+v.Name+" failed to load") + " : dyn(" + def + "))"
		}
	}
	var out, fails string
	var shape map[string]value
	switch {
	case v.HasValue:
		val, fl := operand(v.Value, scope, c.binder, inner.at)
		if fl != nil {
			return value{}, fl
		}
		if val.isLiteral && val.literal != nil && v.JMESPath == "" {
			// A value without variables, stored as JSON (numbers are
			// float64, as the literal's): known when compiling, so that
			// the operators that need a literal operand take it.
			return literal(val.literal), nil
		}
		out, fails = val.cel, val.fails()
		if v.JMESPath == "" {
			// A map holding variables: its keys are known (fromVariable).
			shape = val.shape
		}
		if v.JMESPath != "" {
			node, err := parseJMESPath(v.JMESPath)
			if err != nil {
				return value{}, c.refuse("the context variable %q's jmesPath %q does not parse: %v", v.Name, v.JMESPath, err)
			}
			// applyJMESPath: the path on the value alone (no context);
			// a failure falls back to the default, a null result stays.
			x := c.binder.fresh("v")
			onValue := &pathCompiler{scope: scope, binder: c.binder, expression: v.JMESPath, at: inner.at, stored: true}
			applied, fl := onValue.on(node, x, 0)
			if fl != nil {
				return value{}, fl
			}
			body := applied.cel
			if f := applied.fails(); f != "false" {
				body = "(" + f + " ? " + failing + " : " + applied.cel + ")"
			}
			out = "[" + val.safe + "].map(" + x + ", " + body + ")[0]"
			if f := applied.fails(); f != "false" && defNull != "false" {
				fails = or(fails, and(defNull, guarded(val.fails(), "["+val.safe+"].exists("+x+", "+f+")")))
			}
		}
	case v.JMESPath != "":
		node, err := parseJMESPath(v.JMESPath)
		if err != nil {
			return value{}, c.refuse("the context variable %q's jmesPath %q does not parse: %v", v.Name, v.JMESPath, err)
		}
		inner.expression, inner.query, inner.stored = v.JMESPath, true, true
		query, fl := inner.on(node, "", 0)
		if fl != nil {
			return value{}, fl
		}
		loads, fl := inner.loaded(v.JMESPath)
		if fl != nil {
			return value{}, fl
		}
		// ctx.Query: a failure (loading included) falls back to the
		// default; a null result is the default.
		qf := or(query.fails(), orFalse(loads))
		x := c.binder.fresh("v")
		out = "[" + query.safe + "].map(" + x + ", " + x + " == null ? " + def + " : " + x + ")[0]"
		if qf != "false" {
			out = "(" + qf + " ? " + failing + " : " + out + ")"
			if defNull != "false" {
				fails = and(defNull, qf)
			}
		}
	default:
		out = def
	}
	// A null output fails to load.
	if !v.HasDefault || v.HasValue || dynamicDefault {
		y := c.binder.fresh("o")
		nullFails := "[" + out + "].exists(" + y + ", " + y + " == null)"
		fails = or(orFalse(fails), guarded(nilIfFalse(fails), nullFails))
		out = "[" + out + "].map(" + y + ", " + y + " == null ? " + failure("the context variable "+v.Name+" is null") + " : " + y + ")[0]"
	}
	if defFails != "false" {
		if f := orFalse(fails); f != "false" {
			fails = or(defFails, guarded(defFails, f))
		} else {
			fails = defFails
		}
		out = "(" + defFails + " ? " + failure("the context variable "+v.Name+"'s default failed") + " : " + out + ")"
	}
	return value{cel: out, safe: out, oe: nilIfFalse(fails), shape: shape}, nil
}

// onlyVariable matches a string that is one variable naming a context
// variable.
var onlyVariable = regexp.MustCompile(`^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$`)

// constantPath is variable i's jmesPath as Kyverno substitutes it
// (loadVariable: variables.SubstituteAll, then a string): without
// variables, itself; one variable naming the only earlier context
// variable of that name whose value is a string literal (no jmesPath),
// that string. Any other variable in a jmesPath is known at run time
// only, and Kyverno parses the result there: refused.
func (c *pathCompiler) constantPath(i int) (string, *model.Refusal) {
	path := c.vars[i].JMESPath
	if !strings.Contains(path, "{{") {
		return path, nil
	}
	refuse := func() (string, *model.Refusal) {
		return "", c.refuse("the context variable %q's jmesPath %q (a variable that is no string literal of an earlier context variable)", c.vars[i].Name, path)
	}
	m := onlyVariable.FindStringSubmatch(path)
	if m == nil {
		return refuse()
	}
	found := -1
	for j := 0; j < i; j++ {
		if c.vars[j].Name == m[1] {
			if found >= 0 {
				return refuse()
			}
			found = j
		}
	}
	if found < 0 {
		return refuse()
	}
	source := c.vars[found]
	text, ok := source.Value.(string)
	if !ok || !source.HasValue || source.JMESPath != "" || strings.Contains(text, "{{") || strings.Contains(text, "$(") {
		return refuse()
	}
	return text, nil
}

// failure is a CEL expression that fails to evaluate, saying why in its
// text. It reads the request, so that no compiler folds it into a
// constant (an API server would refuse the expression then).
func failure(why string) string {
	return "dyn(int(request.operation + " + celLiteral(": kyvap: "+why) + "))"
}

func nilIfFalse(p string) string {
	if p == "false" {
		return ""
	}
	return p
}

// SubstituteConstants replaces, in a pattern (its JSON), each value that
// is one variable naming a context variable whose value is a string known
// when compiling (no jmesPath, no variable in it) with that string, as
// Kyverno substitutes it (a value that is one variable becomes the
// variable's value; the later of two entries of a name is the one read).
// Any other variable is left for the pattern compiler, which refuses it.
func SubstituteConstants(raw []byte, variables []Variable) ([]byte, *model.Refusal) {
	if len(variables) == 0 || !strings.Contains(string(raw), "{{") {
		return raw, nil
	}
	constants := map[string]string{}
	for _, v := range variables {
		text, isString := v.Value.(string)
		if v.HasValue && isString && v.JMESPath == "" && !v.HasDefault && !strings.Contains(text, "{{") && !strings.Contains(text, "$(") {
			constants[v.Name] = text
		} else {
			delete(constants, v.Name)
		}
	}
	substituted := false
	var walk func(x any) any
	walk = func(x any) any {
		switch typed := x.(type) {
		case map[string]any:
			for k, v := range typed {
				typed[k] = walk(v)
			}
		case []any:
			for i, v := range typed {
				typed[i] = walk(v)
			}
		case string:
			if m := onlyVariable.FindStringSubmatch(typed); m != nil {
				if text, ok := constants[m[1]]; ok {
					substituted = true
					return text
				}
			}
		}
		return x
	}
	// Integers stay int64, as the pattern compiler reads them.
	decoded, err := decodeTyped(raw)
	if err != nil {
		return nil, model.Refuse(model.ReasonPatternNotExpressible, "the pattern is no JSON: %v", err)
	}
	walked := walk(decoded)
	if !substituted {
		return raw, nil
	}
	out, err := json.Marshal(walked)
	if err != nil {
		return nil, model.Refuse(model.ReasonPatternNotExpressible, "the pattern: %v", err)
	}
	return out, nil
}
