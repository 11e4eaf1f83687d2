// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// MaxConditions bounds the conditions of one block compiled.
const MaxConditions = 64

// Predicate is a compiled condition block.
type Predicate struct {
	// Holds is a CEL predicate that holds exactly where Kyverno's
	// evaluation of the conditions is true, and fails to evaluate exactly
	// where Kyverno's fails (a variable reads a key that is missing).
	Holds string
	// Fails is a CEL predicate, which never fails to evaluate, that holds
	// exactly where Kyverno's evaluation fails: "false" when it never does.
	Fails string
}

// condition is one of Kyverno's conditions (kyvernov1.Condition).
type condition struct {
	Key      any    `json:"key"`
	Operator string `json:"operator"`
	Value    any    `json:"value"`
}

// UnmarshalJSON reads a condition as Kyverno's Condition.GetKey and
// GetValue do (apiextensions' JSON conversion, k8s.io/apimachinery's
// util/json): a number written as an integer is an int64, any other a
// float64. Kyverno's operators read the two apart (fmt.Sprint, and
// reflect.DeepEqual in a map or a list).
func (c *condition) UnmarshalJSON(data []byte) error {
	var raw struct {
		Key      json.RawMessage `json:"key"`
		Operator string          `json:"operator"`
		Value    json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	c.Operator = raw.Operator
	var err error
	if c.Key, err = decodeTyped(raw.Key); err != nil {
		return err
	}
	c.Value, err = decodeTyped(raw.Value)
	return err
}

// decodeTyped decodes JSON with integers as int64 and other numbers as
// float64 (util/json's convertNumber); empty is nil.
func decodeTyped(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return convertNumbers(v)
}

func convertNumbers(v any) (any, error) {
	switch typed := v.(type) {
	case json.Number:
		if i, err := typed.Int64(); err == nil {
			return i, nil
		}
		return typed.Float64()
	case []any:
		for i, x := range typed {
			c, err := convertNumbers(x)
			if err != nil {
				return nil, err
			}
			typed[i] = c
		}
	case map[string]any:
		for k, x := range typed {
			c, err := convertNumbers(x)
			if err != nil {
				return nil, err
			}
			typed[k] = c
		}
	}
	return v, nil
}

// asFloats is v with every int64 a float64.
func asFloats(v any) any {
	switch typed := v.(type) {
	case int64:
		return float64(typed)
	case []any:
		for i, x := range typed {
			typed[i] = asFloats(x)
		}
	case map[string]any:
		for k, x := range typed {
			typed[k] = asFloats(x)
		}
	}
	return v
}

// holdsInteger says whether a literal holds an int64 (decodeTyped).
func holdsInteger(v any) bool {
	switch typed := v.(type) {
	case int64:
		return true
	case []any:
		for _, x := range typed {
			if holdsInteger(x) {
				return true
			}
		}
	case map[string]any:
		for _, x := range typed {
			if holdsInteger(x) {
				return true
			}
		}
	}
	return false
}

// HasConditionMessages reports conditions (as their JSON) of which one
// has a message.
func HasConditionMessages(raw []byte) bool {
	var list []struct{ Message string }
	if json.Unmarshal(raw, &list) == nil {
		for _, c := range list {
			if c.Message != "" {
				return true
			}
		}
		return false
	}
	var block struct{ Any, All []struct{ Message string } }
	if json.Unmarshal(raw, &block) != nil {
		return false
	}
	for _, c := range append(block.Any, block.All...) {
		if c.Message != "" {
			return true
		}
	}
	return false
}

// anyAll is Kyverno's AnyAllConditions.
type anyAll struct {
	Any *[]condition `json:"any"`
	All *[]condition `json:"all"`
}

// Conditions compiles Kyverno conditions, as their JSON (a deny's
// conditions or a rule's preconditions: {any, all}, or the older list),
// into a Predicate that gives Kyverno v1.19.1's verdicts
// (pkg/engine/variables/evaluate.go): the any block first, then the all
// block, each condition in order, stopping at the first that decides and
// failing at the first variable that fails. A condition compiles when its
// key is one variable of the forms frontend/classic compiles and its
// value has no variable; any other condition is refused, named.
func Conditions(raw []byte, scope Scope) (Predicate, *model.Refusal) {
	if len(raw) == 0 || string(raw) == "null" {
		return Predicate{Holds: "true", Fails: "false"}, nil // no conditions hold (utils.TransformConditions)
	}
	b := &binder{}
	p, fl := conditionBlock(raw, scope, b)
	if fl != nil {
		return Predicate{}, fl
	}
	return Predicate{Holds: b.wrap(p.Holds), Fails: b.wrap(p.Fails)}, nil
}

// ExceptionConditions compiles a PolicyException's conditions, as their
// JSON ({any, all}), into a CEL predicate that never fails to evaluate and
// holds exactly where Kyverno v1.19.1 applies the exception
// (pkg/utils/conditions CheckAnyAllConditions): unlike a rule's
// conditions, the all block runs first, an any block that is empty holds,
// and a failing variable means the exception does not apply (Kyverno
// logs the error and goes on to the next exception).
func ExceptionConditions(raw []byte, scope Scope) (string, *model.Refusal) {
	var block anyAll
	if err := json.Unmarshal(raw, &block); err != nil {
		return "", model.Refuse(model.ReasonJMESPathNotExpressible, "the exception's conditions are not {any, all}: %v", err)
	}
	// A PolicyException's conditions (kyverno/v2 Condition, kyverno.Any)
	// decode with encoding/json: every number is a float64.
	for _, list := range []*[]condition{block.All, block.Any} {
		if list != nil {
			for i := range *list {
				(*list)[i].Key, (*list)[i].Value = asFloats((*list)[i].Key), asFloats((*list)[i].Value)
			}
		}
	}
	b := &binder{}
	allOf, anyOf := Predicate{Holds: "true", Fails: "false"}, Predicate{Holds: "true", Fails: "false"}
	var fl *model.Refusal
	if block.All != nil {
		if allOf, fl = all(*block.All, scope, b, "all"); fl != nil {
			return "", fl
		}
	}
	if block.Any != nil && len(*block.Any) > 0 {
		if anyOf, fl = anyConditions(*block.Any, scope, b); fl != nil {
			return "", fl
		}
	}
	holds := anyOf.Holds
	if allOf.Holds != "true" {
		holds = "(" + allOf.Holds + " ? " + anyOf.Holds + " : false)"
	}
	// The any block runs where the all block holds: its failures count
	// there only (an erring all block makes the && below false, and
	// where it is false the || needs no right side).
	fails := anyOf.Fails
	if allOf.Holds != "true" {
		fails = or(allOf.Fails, and(allOf.Holds, anyOf.Fails))
	}
	if fails == "false" {
		return b.wrap(holds), nil
	}
	// !fails first: where it is false, && ignores that holds fails.
	return b.wrap("(!" + fails + " && " + holds + ")"), nil
}

func conditionBlock(raw []byte, scope Scope, b *binder) (Predicate, *model.Refusal) {
	var list []condition
	if err := json.Unmarshal(raw, &list); err == nil {
		return all(list, scope, b, "conditions")
	}
	var block anyAll
	if err := json.Unmarshal(raw, &block); err != nil {
		return Predicate{}, model.Refuse(model.ReasonJMESPathNotExpressible, "the conditions are neither a list nor {any, all}: %v", err)
	}
	var anyOf, allOf *Predicate
	if block.Any != nil {
		p, fl := anyConditions(*block.Any, scope, b)
		if fl != nil {
			return Predicate{}, fl
		}
		anyOf = &p
	}
	if block.All != nil {
		p, fl := all(*block.All, scope, b, "all")
		if fl != nil {
			return Predicate{}, fl
		}
		allOf = &p
	}
	switch {
	case anyOf == nil && allOf == nil:
		return Predicate{Holds: "true", Fails: "false"}, nil
	case allOf == nil:
		return *anyOf, nil
	case anyOf == nil:
		return *allOf, nil
	}
	// Kyverno evaluates the all block even when the any block is false:
	// its failures count. A conditional keeps them (&& would absorb them).
	return Predicate{
		Holds: "(" + anyOf.Holds + " ? " + allOf.Holds + " : (" + allOf.Holds + " ? false : false))",
		Fails: or(anyOf.Fails, allOf.Fails),
	}, nil
}

// anyConditions is an any block: the first condition that holds decides
// (true); none holding is false.
func anyConditions(conditions []condition, scope Scope, b *binder) (Predicate, *model.Refusal) {
	return sequence(conditions, scope, b, "any", true)
}

// all is an all block (or the older list): the first condition that does
// not hold decides (false); all holding is true.
func all(conditions []condition, scope Scope, b *binder, block string) (Predicate, *model.Refusal) {
	return sequence(conditions, scope, b, block, false)
}

// sequence evaluates conditions in order, as Kyverno does, stopping at
// the first whose result is decides: the block's value is then decides,
// and !decides when none is; a failure stops everything, and is the
// block's failure.
func sequence(conditions []condition, scope Scope, b *binder, block string, decides bool) (Predicate, *model.Refusal) {
	compiled, fl := compileEach(conditions, scope, b, block)
	if fl != nil {
		return Predicate{}, fl
	}
	holds, fails := strconv.FormatBool(!decides), "false"
	for i := len(compiled) - 1; i >= 0; i-- {
		c := compiled[i]
		if i == len(compiled)-1 {
			holds, fails = c.Holds, c.Fails
			continue
		}
		continues := c.Holds // the next condition runs where this one holds (all)
		if decides {
			holds = "(" + c.Holds + " ? true : " + holds + ")"
			continues = "!" + c.Holds
		} else {
			holds = "(" + c.Holds + " ? " + holds + " : false)"
		}
		fails = or(c.Fails, and(continues, fails))
	}
	return Predicate{Holds: holds, Fails: fails}, nil
}

func compileEach(conditions []condition, scope Scope, b *binder, block string) ([]Predicate, *model.Refusal) {
	if len(conditions) > MaxConditions {
		return nil, model.Refuse(model.ReasonJMESPathNotExpressible, "more than %d conditions in %s", MaxConditions, block)
	}
	out := make([]Predicate, len(conditions))
	for i, c := range conditions {
		p, fl := compileCondition(c, scope, b, fmt.Sprintf("%s[%d]", block, i))
		if fl != nil {
			return nil, fl
		}
		out[i] = p
	}
	return out, nil
}

// or and and join never-failing predicates, dropping the constant ones.
func or(a, b string) string {
	switch {
	case a == "false":
		return b
	case b == "false":
		return a
	}
	return "(" + a + " || " + b + ")"
}

func and(a, b string) string {
	if a == "false" || b == "false" {
		return "false"
	}
	return "(" + a + " && " + b + ")"
}

// compileCondition is Kyverno's variables.Evaluate of one condition.
func compileCondition(c condition, scope Scope, b *binder, at string) (Predicate, *model.Refusal) {
	key, fl := operand(c.Key, scope, b, at+".key")
	if fl != nil {
		return Predicate{}, fl
	}
	val, fl := operand(c.Value, scope, b, at+".value")
	if fl != nil {
		return Predicate{}, fl
	}
	fresh := func() string { return b.fresh("n") }
	op := strings.ToLower(c.Operator)
	// An integer in the key is an int64 to Kyverno, which its operators
	// read as no float64 is read (ParseInt, reflect.DeepEqual).
	if holdsInteger(c.Key) {
		return Predicate{}, model.Refuse(model.ReasonJMESPathNotExpressible, "an integer in a literal key (%s) at %s", celLiteral(c.Key), at)
	}
	if !val.isLiteral && holdsInteger(c.Value) {
		return Predicate{}, model.Refuse(model.ReasonJMESPathNotExpressible, "an integer inside a map or a list holding variables at %s", at)
	}
	v := val.literal
	if i, ok := v.(int64); ok && op != "anyin" && op != "allin" && op != "anynotin" && op != "allnotin" && op != "in" && op != "notin" {
		// Up to 2^53, Kyverno's handlers read an int64 value as the
		// float64 of it.
		if i > 1<<53 || i < -(1<<53) {
			return Predicate{}, model.Refuse(model.ReasonJMESPathNotExpressible, "the integer %d past 2^53 at %s", i, at)
		}
		v = float64(i)
	}
	// The key is bound once; binding it fails where it fails.
	k := b.fresh("k")
	if !val.isLiteral {
		// Kyverno substitutes the key, then the value.
		ks, isString := key.literal.(string)
		if b, isBool := key.literal.(bool); isBool {
			// The handlers read a scalar key as its string form.
			ks, isString = strconv.FormatBool(b), true
		}
		if key.isLiteral && isString && (op == "anyin" || op == "allin" || op == "in" || op == "notin") {
			v := b.fresh("v")
			holds, fl := runtimeMembership(op, ks, v, at)
			if fl != nil {
				return Predicate{}, fl
			}
			return Predicate{Holds: "[" + val.cel + "].all(" + v + ", " + holds + ")", Fails: val.fails()}, nil
		}
		if op != "equal" && op != "equals" && op != "notequal" && op != "notequals" {
			return Predicate{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a variable in the value of the operator %s at %s", c.Operator, at)
		}
		v := b.fresh("v")
		eq := equalsAny(fresh, "dyn("+k+")", "dyn("+v+")")
		if op == "notequal" || op == "notequals" {
			eq = "!" + eq
		}
		holds := "[" + key.cel + "].all(" + k + ", [" + val.cel + "].all(" + v + ", type(" + k + ") == null_type ? false : " + eq + "))"
		fails := key.fails()
		if vf := val.fails(); vf != "false" {
			fails = or(fails, guarded(fails, vf))
		}
		return Predicate{Holds: holds, Fails: fails}, nil
	}
	holds, fl := compileOperator(fresh, op, k, key.number, v, at)
	if fl != nil {
		return Predicate{}, fl
	}
	holds = "[" + key.cel + "].all(" + k + ", " + holds + ")"
	return Predicate{Holds: holds, Fails: key.fails()}, nil
}

// compileOperator is Kyverno's operator handler (pkg/engine/variables/
// operator) applied to a key known at run time, bound to the variable
// key, and a literal value.
func compileOperator(fresh func() string, op string, key string, number bool, v any, at string) (string, *model.Refusal) {
	k := "dyn(" + key + ")"
	switch op {
	case "greaterthan", "greaterthanorequals", "lessthan", "lessthanorequals":
		if !number {
			return numericOnAnyKey(fresh, op, k, v, at)
		}
		return numeric(op, k, v), nil
	case "equal", "equals", "notequal", "notequals":
		switch v.(type) {
		case map[string]any, []any:
			if holdsInteger(v) {
				// reflect.DeepEqual of an int64 and any float64 (every
				// number a key reads) is false: no key equals it.
				if op == "equal" || op == "equals" {
					return "false", nil
				}
				return "(type(" + k + ") != null_type)", nil
			}
			// A map or a list: equal to a key of its type that is equal
			// (bound, so that no planner folds a conversion of it).
			x := fresh()
			eq := "[" + literal(v).cel + "].all(" + x + ", " + equalsAny(fresh, k, x) + ")"
			if op == "equal" || op == "equals" {
				return "(type(" + k + ") == null_type ? false : " + eq + ")", nil
			}
			return "(type(" + k + ") == null_type ? false : !" + eq + ")", nil
		}
		eq, fl := equals(fresh, k, number, v, at)
		if fl != nil {
			return "", fl
		}
		if op == "equal" || op == "equals" {
			if strings.HasPrefix(eq, "(type("+k+") == string && ") {
				// Only a string key can hold: a null one is false anyway.
				return eq, nil
			}
			return "(type(" + k + ") == null_type ? false : " + eq + ")", nil
		}
		// NotEqualHandler is the negation of EqualHandler for every key
		// JSON has but null, which both judge false.
		return "(type(" + k + ") == null_type ? false : !" + eq + ")", nil
	case "anyin", "allin", "anynotin", "allnotin":
		return membership(op, k, v, at)
	case "in", "notin":
		return deprecatedIn(op == "notin", k, v, at)
	}
	return "", model.Refuse(model.ReasonJMESPathNotExpressible, "the operator %q at %s", op, at)
}

// quantityAlphabet holds every character of a string
// resource.ParseQuantity accepts (a signed decimal, an exponent, a
// suffix).
const quantityAlphabet = "0123456789+-.eEkKMGTPimunI"

// mayMatchQuantity says whether the wildcard pattern could match a
// quantity: not when its literal characters hold one no quantity has.
func mayMatchQuantity(pattern string) bool {
	for _, r := range pattern {
		if r != '*' && r != '?' && !strings.ContainsRune(quantityAlphabet, r) {
			return false
		}
	}
	return true
}

// numeric is NumericOperatorHandler.Evaluate of a key that is always a
// number with an integral value (length()) and the literal v: a number
// compared as it is; a string compared as a duration (the key read as
// seconds), else as a float; anything else false.
func numeric(op, k string, v any) string {
	cmp := map[string]string{"greaterthan": ">", "greaterthanorequals": ">=", "lessthan": "<", "lessthanorequals": "<="}[op]
	var against string
	switch typed := v.(type) {
	case float64:
		against = celDouble(typed)
	case string:
		if isDuration(typed) {
			d, _ := time.ParseDuration(typed)
			against = celDouble(d.Seconds())
		} else if f, err := strconv.ParseFloat(typed, 64); err == nil {
			against = celDouble(f)
		}
	}
	if against == "" {
		return "(type(" + k + ") == null_type ? false : false)"
	}
	return "(double(" + k + ") " + cmp + " " + against + ")"
}

// isDuration is Kyverno's test of a duration operand (operator.go
// parseDuration).
func isDuration(s string) bool {
	_, err := time.ParseDuration(s)
	return err == nil && s != "0"
}

// equals is EqualHandler.Evaluate of the key k (dyn, not null) and the
// literal v, by the key's type.
func equals(fresh func() string, k string, number bool, v any, at string) (string, *model.Refusal) {
	onString, onNumber, onBool := "false", "false", "false"
	switch typed := v.(type) {
	case string:
		// validateValueWithStringPattern: a quantity key is compared as a
		// quantity, any other string as a wildcard match of the value.
		if _, err := resource.ParseQuantity(typed); err == nil {
			onString = "(isQuantity(" + k + ") && quantity(" + k + ").compareTo(quantity(" + kyverno.CELString(typed) + ")) == 0)"
		} else if kyverno.ContainsWildcard(typed) {
			onString = kyverno.CELPatternMatch(k, []string{typed})
			if mayMatchQuantity(typed) {
				onString = "(!isQuantity(" + k + ") && " + onString + ")"
			}
		} else {
			onString = k + " == " + kyverno.CELString(typed)
		}
		if isDuration(typed) {
			// parseDuration first: a key that is a duration (but "0") is
			// compared with it in seconds.
			d, _ := time.ParseDuration(typed)
			s := fresh()
			onString = "[string(" + k + ")].all(" + s + ", " + kyvernoDuration(fresh, s, func(ns string) string {
				return celSeconds(ns) + " == " + celDouble(d.Seconds())
			}, onString) + ")"
		}
		// validateValueWithFloatPattern: a number key against the value
		// read as a float.
		if f, err := strconv.ParseFloat(typed, 64); err == nil {
			onNumber = "double(" + k + ") == " + celDouble(f)
		}
	case bool:
		onBool = k + " == " + strconv.FormatBool(typed)
	case nil:
	case float64:
		// validateValueWithFloatPattern: a number key against a number.
		onNumber = "double(" + k + ") == " + celDouble(typed)
		if !number {
			// A string key that is a duration (but "0") against the number
			// of seconds (parseDuration); no other string equals a number.
			seconds, _, fl := literalDurationSeconds(typed, at)
			if fl != nil {
				return "", fl
			}
			s := fresh()
			onString = "[string(" + k + ")].all(" + s + ", " + s + " != '0' && " + goDuration(fresh, s, func(ns string) string {
				return celSeconds(ns) + " == " + celDouble(seconds)
			}, "false") + ")"
		}
	default:
		return "", model.Refuse(model.ReasonJMESPathNotExpressible, "a map or a list compared with Equals at %s", at)
	}
	switch {
	case onNumber == "false" && onBool == "false":
		return "(type(" + k + ") == string && " + onString + ")", nil
	case onString == "false" && onNumber == "false":
		return "(type(" + k + ") == bool && " + onBool + ")", nil
	}
	return "(type(" + k + ") == string ? " + onString + " : " + isNumber(k) + " ? " + onNumber + " : type(" + k + ") == bool ? " + onBool + " : false)", nil
}

// membership is the AnyIn, AllIn, AnyNotIn and AllNotIn handlers of the
// key k and the literal v: a scalar key is compared as its string form,
// a list key element by element; a wildcard on either side matches.
func membership(op, k string, v any, at string) (string, *model.Refusal) {
	negated := op == "anynotin" || op == "allnotin"
	every := op == "allin" || op == "allnotin"
	// The scalar key (anyKeyExistsInArray, allKeyExistsInArray: the
	// same) as its string form s, and the list key (anySetExistsInArray,
	// allSetExistsInArray).
	values, arrayOK, fl := membershipValues(v, at)
	if fl != nil {
		return "", fl
	}
	var onList string
	onScalar := func(string) string { return "false" }
	elements := k + ".map(e, " + stringForm("e") + ")"
	switch typed := v.(type) {
	case []any:
		onScalar = func(s string) string {
			if negated {
				return "!" + matchesAny(s, values)
			}
			return matchesAny(s, values)
		}
		onList = setCheck(elements, values, negated, every)
	case string:
		// A wildcard match of the value first, then the value read as a
		// JSON array of strings (false when it is JSON but not that), or
		// as itself.
		onScalar = func(s string) string {
			direct := kyverno.CELPatternMatch(s, []string{typed})
			switch {
			case !arrayOK && negated:
				return "false"
			case !arrayOK:
				return direct
			case negated:
				return "!(" + direct + " || " + matchesExactly(s, values) + ")"
			}
			return "(" + direct + " || " + matchesExactly(s, values) + ")"
		}
		single := "(size(" + elements + ") == 1 && " + elements + "[0] == " + kyverno.CELString(typed) + ")"
		rest := "false"
		if arrayOK {
			rest = setCheck(elements, values, negated, every)
		}
		if negated {
			onList = "(!" + single + " && " + rest + ")"
		} else {
			onList = "(" + single + " || " + rest + ")"
		}
	case float64, int64, bool:
		// Invalid for a scalar key; a list key is compared with the
		// value's string form by AnyIn and AnyNotIn only.
		onList = "false"
		if !every {
			onList = setCheck(elements, values, negated, every)
		}
	default:
		onList = "false"
	}
	// A string key is its own string form (read in place: cheaper than
	// binding it).
	other := "[" + stringForm(k) + "].all(s, " + onScalar("s") + ")"
	return "(type(" + k + ") == string ? " + onScalar("string("+k+")") + " : " + isNumber(k) + " || type(" + k + ") == bool ? " + other + " : type(" + k + ") == list ? " + onList + " : false)", nil
}

// runtimeMembership is the AnyIn, AllIn, In or NotIn handler of the
// literal string key ks and the value v known at run time (a bound CEL
// variable): a list value holds ks when one element's string form
// matches it either way (wildcards); a string value holds it when it
// matches ks as a pattern, or is a JSON array of strings holding it (a
// string that is no JSON is itself for AnyIn and AllIn; for In and NotIn
// it and any other JSON are of the wrong type, as any other value is:
// false). Refused: a key that is a range's, a quantity's or a duration's
// (handleRange would compare it), and a key a Go map's or list's form
// could match. AnyNotIn and AllNotIn are refused before: the negation of
// a string value that is JSON but no array of strings (false) differs
// from that of one that is no JSON (true), which no RE2 expression tells.
func runtimeMembership(op, ks, v, at string) (string, *model.Refusal) {
	if ks == "" || strings.ContainsAny(ks[:1], "0123456789+-.|") {
		return "", model.Refuse(model.ReasonJMESPathNotExpressible, "the key %q, which a range value would compare, against a value known at run time at %s", ks, at)
	}
	if _, _, fl := membershipValues([]any{ks}, at); fl != nil {
		return "", fl
	}
	holding, ok := jsonStringArrayHolding(ks)
	if !ok {
		return "", model.Refuse(model.ReasonJMESPathNotExpressible, "the key %q (a replacement character) against a value known at run time at %s", ks, at)
	}
	s := "string(" + v + ")"
	matched := "(" + s + " == " + kyverno.CELString(ks) + " || " + runtimePatternMatches(s, []string{ks}) + ")"
	inArray := s + ".matches(" + kyverno.CELString(holding) + ")"
	onList := "dyn(" + v + ").exists(e, " + matchesAny(stringForm("e"), []string{ks}) + ")"
	onString := "(" + matched + " || " + inArray + ")"
	if op == "notin" {
		onList = "!" + onList
		onString = "(!" + matched + " && " + s + ".matches(" + kyverno.CELString(jsonStringArrayRegex) + ") && !" + inArray + ")"
	}
	return "(type(" + v + ") == list ? " + onList + " : type(" + v + ") == string ? " + onString + " : false)", nil
}

// KyvernoPanics is the failure of a compiled condition where Kyverno's
// engine panics (In and NotIn assert that every element of a list key is
// a string; the fork's merge() that every argument is a map): Kyverno
// has no verdict there.
var KyvernoPanics = failure("a value on which Kyverno's engine panics (In or NotIn of a list key holding an element that is no string, merge() of a value that is no map)")

// deprecatedIn is the deprecated In and NotIn handlers (operator/in.go,
// notin.go) of the key k and the literal v: a scalar key's string form
// (fmt.Sprint) found in a list value by a wildcard match either way, or
// matched by a string value as a pattern, or found in the JSON array of
// strings the string holds; a list key of strings compared as a set
// with a list or JSON array of strings (all in, or one not in), and
// equal to a string value as its one element.
func deprecatedIn(notIn bool, k string, v any, at string) (string, *model.Refusal) {
	s := "s"
	var onScalar, onList string
	switch typed := v.(type) {
	case []any:
		values, _, fl := membershipValues(v, at)
		if fl != nil {
			return "", fl
		}
		onScalar = matchesAny(s, values)
		if notIn {
			onScalar = "!" + onScalar
		}
		// setExistsInArray: every value must be a string.
		strs := make([]string, 0, len(typed))
		for _, item := range typed {
			str, ok := item.(string)
			if !ok {
				strs = nil
				break
			}
			strs = append(strs, str)
		}
		switch {
		case strs == nil && len(typed) > 0:
			onList = "false"
		case notIn:
			onList = k + ".exists(e, !(e in " + kyverno.CELStringList(strs) + "))"
		default:
			onList = k + ".all(e, e in " + kyverno.CELStringList(strs) + ")"
		}
	case string:
		direct := kyverno.CELPatternMatch(s, []string{typed})
		var arr []string
		isArray := json.Unmarshal([]byte(typed), &arr) == nil
		switch {
		case !isArray && notIn:
			onScalar = "false"
		case !isArray:
			onScalar = direct
		case notIn:
			onScalar = "(!(" + direct + ") && !(" + s + " in " + kyverno.CELStringList(arr) + "))"
		default:
			onScalar = "(" + direct + " || " + s + " in " + kyverno.CELStringList(arr) + ")"
		}
		single := "(size(" + k + ") == 1 && " + k + "[0] == " + kyverno.CELString(typed) + ")"
		rest := "false"
		if isArray && notIn {
			rest = k + ".exists(e, !(e in " + kyverno.CELStringList(arr) + "))"
		} else if isArray {
			rest = k + ".all(e, e in " + kyverno.CELStringList(arr) + ")"
		}
		onList = "(" + single + " || " + rest + ")"
	default:
		onScalar, onList = "false", "false"
	}
	scalar := "[" + stringForm(k) + "].all(s, " + onScalar + ")"
	list := "(" + k + ".all(e, type(e) == string) ? " + onList + " : " + KyvernoPanics + ")"
	return "(type(" + k + ") == string || " + isNumber(k) + " || type(" + k + ") == bool ? " + scalar + " : type(" + k + ") == list ? " + list + " : false)", nil
}

// membershipValues are the string forms of the literal's values, as
// Kyverno formats them (fmt.Sprint); for a string literal, the JSON
// array it holds (arrayOK false when it is JSON but no array of strings)
// or the string itself.
func membershipValues(v any, at string) (values []string, arrayOK bool, fl *model.Refusal) {
	switch typed := v.(type) {
	case []any:
		for _, item := range typed {
			values = append(values, fmt.Sprint(item))
		}
	case string:
		if inRange.MatchString(typed) || notInRange.MatchString(typed) {
			return nil, false, model.Refuse(model.ReasonJMESPathNotExpressible, "the range %q at %s", typed, at)
		}
		if json.Valid([]byte(typed)) {
			var arr []string
			if err := json.Unmarshal([]byte(typed), &arr); err != nil {
				return nil, false, nil
			}
			return arr, true, nil
		}
		return []string{typed}, true, nil
	case float64, int64, bool:
		values = []string{fmt.Sprint(typed)}
	}
	// A map or a list element of a list key has a Go string form
	// (map[...], [...]) that only such values could match.
	for _, value := range values {
		wild := strings.IndexAny(value, "*?")
		for _, form := range []string{"map[", "["} {
			if strings.HasPrefix(value, form) || wild >= 0 && strings.HasPrefix(form, value[:wild]) {
				return nil, false, model.Refuse(model.ReasonJMESPathNotExpressible, "the value %q at %s, which could match the Go form of a map or a list", value, at)
			}
		}
	}
	return values, true, nil
}

// stringForm is Kyverno's fmt.Sprint of a JSON value x, for the values a
// comparison can match: a number as a float64 (%v is %g, as CEL's string
// of a double), a bool, null as "<nil>"; a map or a list as a form that
// starts as Go's does, which membershipValues has checked no value can
// match.
func stringForm(x string) string {
	return "(type(" + x + ") == string ? string(" + x + ") : type(" + x + ") == int || type(" + x + ") == uint ? string(double(" + x + ")) : type(" + x + ") == double || type(" + x + ") == bool ? string(" + x + ") : type(" + x + ") == null_type ? '<nil>' : type(" + x + ") == map ? 'map[]' : '[]')"
}

// isNumber is "x is a number".
func isNumber(x string) string {
	return "(type(" + x + ") == int || type(" + x + ") == uint || type(" + x + ") == double)"
}

// matchesAny is "the runtime string s matches one of the values, or one
// of the values matches s as a wildcard pattern".
func matchesAny(s string, values []string) string {
	if len(values) == 0 {
		return "false"
	}
	return "(" + kyverno.CELPatternMatch(s, values) + " || " + runtimePatternMatches(s, values) + ")"
}

// matchesExactly is "s is one of the values".
func matchesExactly(s string, values []string) string {
	if len(values) == 0 {
		return "false"
	}
	return s + " in " + kyverno.CELStringList(values)
}

// runtimePatternMatches is "the runtime string s, read as a Kyverno
// wildcard pattern, matches one of the values": s quoted as an RE2
// expression with * and ? made wildcards (as kyverno's wildcardRegex does
// at compile time).
func runtimePatternMatches(s string, values []string) string {
	return "((" + s + ".contains('*') || " + s + ".contains('?')) && " + kyverno.CELStringList(values) + ".exists(v, v.matches(" + runtimeWildcardRegex(s) + ")))"
}

// runtimeWildcardRegex is the RE2 expression of the runtime string s read
// as a Kyverno wildcard pattern: s quoted, with * and ? made wildcards
// (as kyverno's wildcardRegex does at compile time).
func runtimeWildcardRegex(s string) string {
	quoted := s
	for _, meta := range []string{`\`, `.`, `+`, `(`, `)`, `|`, `[`, `]`, `{`, `}`, `^`, `$`} {
		quoted += ".replace(" + kyverno.CELString(meta) + ", " + kyverno.CELString(`\`+meta) + ")"
	}
	quoted += `.replace('*', '.*').replace('?', '.')`
	return "'^(?s:' + " + quoted + " + ')$'"
}

// setCheck is isAnyIn, isAllIn, isAnyNotIn or isAllNotIn of the string
// forms of a list key's elements and the values.
func setCheck(elements string, values []string, negated, every bool) string {
	match := matchesAny("s", values)
	switch {
	case !negated && !every:
		return elements + ".exists(s, " + match + ")"
	case !negated && every:
		return elements + ".all(s, " + match + ")"
	case negated && !every:
		return elements + ".exists(s, !" + match + ")"
	}
	return elements + ".all(s, !" + match + ")"
}
