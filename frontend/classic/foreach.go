// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/kyvap/kyvap/model"
)

// MaxForEach bounds the foreach entries of a rule compiled.
const MaxForEach = 16

// Judgement is a classic validation compiled to CEL predicates.
type Judgement struct {
	// Passes holds where Kyverno's result is pass, is false where it is
	// fail, and fails to evaluate where it is error.
	Passes string
	// Violates, Fails and Applies never fail to evaluate: Kyverno's result
	// is fail; it is error; it has a result at all (a foreach whose
	// elements were all skipped has none).
	Violates, Fails, Applies string
}

// forEachEntry is one of Kyverno's ForEachValidation, for the forms
// compiled.
type forEachEntry struct {
	List          string            `json:"list"`
	ElementScope  *bool             `json:"elementScope"`
	Preconditions json.RawMessage   `json:"preconditions"`
	Deny          *json.RawMessage  `json:"deny"`
	Pattern       json.RawMessage   `json:"pattern"`
	AnyPattern    json.RawMessage   `json:"anyPattern"`
	Context       []json.RawMessage `json:"context"`
	ForEach       json.RawMessage   `json:"foreach"`
}

// Element statuses of a compiled foreach, as Kyverno's validateElements
// reads each element's response.
const (
	elementPass  = "0"
	elementFail  = "1"
	elementError = "2"
	elementSkip  = "3"
)

// ForEach compiles a rule's validate.foreach (its entries as JSON) in
// scope: Kyverno's validateForEach (handlers/validation/validate_resource.go).
// Each entry's list is queried (a missing key skips the entry, another
// failure is an error unless some element applied); each element, null
// ones left out, is judged by the entry's preconditions (false or
// failing: skipped) and its deny or pattern (a map element is the
// pattern's resource, anything else the request's object); the first
// element that fails or errs decides, in order; a rule none of whose
// elements applied has no result.
func ForEach(entries [][]byte, scope Scope) (Judgement, *model.Refusal) {
	if len(entries) == 0 || len(entries) > MaxForEach {
		return Judgement{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a foreach with %d entries (1 to %d are compiled)", len(entries), MaxForEach)
	}
	b := &binder{}
	var statuses, appliedTerms, settled, erring []string
	listFails := ""
	for i, raw := range entries {
		at := fmt.Sprintf("foreach[%d]", i)
		var e forEachEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return Judgement{}, model.Refuse(model.ReasonJMESPathNotExpressible, "%s: %v", at, err)
		}
		switch {
		case len(e.ForEach) > 0 && string(e.ForEach) != "null":
			return Judgement{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a nested foreach at %s", at)
		case len(e.Context) > 0:
			return Judgement{}, model.Refuse(model.ReasonJMESPathNotExpressible, "context entries in %s", at)
		case e.List == "":
			return Judgement{}, model.Refuse(model.ReasonJMESPathNotExpressible, "no list at %s", at)
		case strings.Contains(e.List, "{{") || strings.Contains(e.List, "$("):
			return Judgement{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a variable in the list of %s", at)
		}
		list, fl := jmesQuery(e.List, scope, b, at+".list")
		if fl != nil {
			return Judgement{}, fl
		}
		el, ix := b.fresh("el"), b.fresh("ix")
		elementScope := scope
		elementScope.Element, elementScope.ElementIndex = el, ix
		status, applied, usesIndex, fl := elementStatus(e, elementScope, b, el, at)
		if fl != nil {
			return Judgement{}, fl
		}
		// EvaluateList: a list as it is, anything else one element.
		l := b.fresh("list")
		elements := "[" + list.safe + "].map(" + l + ", type(" + l + ") == list ? dyn(" + l + ") : dyn([" + l + "]))[0]"
		each := elements + ".map(" + el + ", " + status + ")"
		anyApplied := elements + ".exists(" + el + ", " + applied + ")"
		// Every element passes or is skipped: nothing decides the entry.
		undecided := elements + ".all(" + el + ", " + status + " in [" + elementPass + ", " + elementSkip + "])"
		// An element's status is an error.
		errs := elements + ".exists(" + el + ", " + status + " == " + elementError + ")"
		if usesIndex {
			each = elements + ".transformList(" + ix + ", " + el + ", " + status + ")"
			anyApplied = "size(" + elements + ".transformList(" + ix + ", " + el + ", " + applied + ").filter(a, a)) > 0"
			undecided = elements + ".all(" + ix + ", " + el + ", " + status + " in [" + elementPass + ", " + elementSkip + "])"
			errs = elements + ".exists(" + ix + ", " + el + ", " + status + " == " + elementError + ")"
		}
		switch {
		case list.nf == "" && list.oe == "":
		case list.oe == "":
			each = "(" + list.nf + " ? [] : " + each + ")"
			anyApplied = "(!" + list.nf + " && " + anyApplied + ")"
			undecided = "(" + list.nf + " || " + undecided + ")"
			// A ternary, not a conjunction: where the guard fails to
			// evaluate, so does this (see passes).
			errs = "(" + list.nf + " ? false : " + errs + ")"
		default:
			each = "(" + joinOr(list.nf, list.oe) + " ? [] : " + each + ")"
			anyApplied = "(!" + joinOr(list.nf, list.oe) + " && " + anyApplied + ")"
			undecided = "(" + joinOr(list.nf, list.oe) + " || " + undecided + ")"
			listFails = joinOr(listFails, "(!"+orFalse(list.nf)+" && "+list.oe+")")
		}
		statuses = append(statuses, each)
		appliedTerms = append(appliedTerms, anyApplied)
		settled = append(settled, undecided)
		erring = append(erring, errs)
	}
	all := "dyn(" + strings.Join(statuses, " + ") + ")"
	decided := "st.exists(s, s == " + elementFail + " || s == " + elementError + ")"
	first := "st.filter(s, s == " + elementFail + " || s == " + elementError + ")[0]"
	applied := "st.exists(s, s != " + elementSkip + ")"
	listFailed := orFalse(listFails)
	bind := func(p string) string { return b.wrap("[" + all + "].all(st, " + p + ")") }
	otherwise := "(!" + applied + " && " + listFailed + " ? " + failure("a foreach list failed to evaluate") + " == true : true)"
	if listFailed == "false" {
		otherwise = "true"
	}
	passes := bind("(" + decided + " ? (" + first + " == " + elementError + " ? " + failure("a foreach element failed to evaluate") + " == true : false) : " + otherwise + ")")
	if listFailed == "false" {
		// Where no element fails or errs, the rule passes: that is read
		// first, in one pass over the elements, without the statuses'
		// list (the common case at admission). The disjunction is the full
		// form's value: where the first part fails to evaluate, a status
		// failed, which fails the full form too.
		//
		// Where it is false, the full form is read only where a status is
		// an error: otherwise a status is a failure and the full form is
		// false. Where the statuses cannot be errors (a VAP's typed
		// objects: translate/specialize folds the test), the rule is the
		// first part alone. Exact under CEL's errors too: where the full
		// form fails to evaluate, a status is an error, or a guard or a
		// status fails to evaluate and so does the test (it is never false
		// then); where the first part is false and the test is false, every
		// status evaluated, none an error, one a failure.
		passes = b.wrap("("+strings.Join(settled, " && ")+")") + " || " + b.wrap("("+strings.Join(erring, " || ")+")") + " && " + passes
	}
	return Judgement{
		Passes:   passes,
		Violates: bind("(" + decided + " && " + first + " == " + elementFail + ")"),
		Fails:    bind("(" + decided + " ? " + first + " == " + elementError + " : !" + applied + " && " + listFailed + ")"),
		// Whether an element applied needs no element's judgement.
		Applies: b.wrap(or(strings.Join(appliedTerms, " || "), listFailed)),
	}, nil
}

// elementStatus is Kyverno's response for one element el (a foreach
// validator's validate), as an element status.
func elementStatus(e forEachEntry, scope Scope, b *binder, el, at string) (status, applied string, usesIndex bool, fl *model.Refusal) {
	usesIndex = strings.Contains(string(e.Preconditions), "elementIndex") || (e.Deny != nil && strings.Contains(string(*e.Deny), "elementIndex"))
	// AddElementToContext: elementScope true on anything but a map is an
	// error; a map element is the resource patterns are judged on (an
	// empty one is not, IsEmptyUnstructured).
	scoped := "type(" + el + ") == map"
	if e.ElementScope != nil {
		scoped = strconv.FormatBool(*e.ElementScope)
	}
	var judge string
	switch {
	case e.Deny != nil:
		var deny struct {
			Conditions json.RawMessage `json:"conditions"`
		}
		if err := json.Unmarshal(*e.Deny, &deny); err != nil {
			return "", "", false, model.Refuse(model.ReasonJMESPathNotExpressible, "%s.deny: %v", at, err)
		}
		if HasConditionMessages(deny.Conditions) {
			return "", "", false, model.Refuse(model.ReasonJMESPathNotExpressible, "a message on a deny condition at %s", at)
		}
		d, fl := conditionBlock(deny.Conditions, scope, b)
		if fl != nil {
			return "", "", false, fl
		}
		judge = "(" + d.Fails + " ? " + elementError + " : " + d.Holds + " ? " + elementFail + " : " + elementPass + ")"
		applied = "true"
	case len(e.Pattern) > 0 || len(e.AnyPattern) > 0:
		if len(e.Pattern) > 0 && len(e.AnyPattern) > 0 {
			return "", "", false, model.Refuse(model.ReasonJMESPathNotExpressible, "both pattern and anyPattern at %s", at)
		}
		raw := e.Pattern
		if len(raw) == 0 {
			raw = e.AnyPattern
		}
		raw, fl := SubstituteConstants(raw, scope.Variables)
		if fl != nil {
			return "", "", false, fl
		}
		// Pattern values that are one variable (the element's, the
		// request's): substituted before the pattern is matched, an error
		// where a substitution fails (runtime.go).
		bound, substitutionFails, fl := bindPatternVariables(raw, scope, b, at)
		if fl != nil {
			return "", "", false, fl
		}
		// A pattern's verdict as an element's status: its error, its skip
		// (a conditional or global anchor that does not hold: Kyverno
		// leaves the element out), pass or fail.
		compile := func(resource string) (string, string, *model.Refusal) {
			var v Verdict
			var fl *model.Refusal
			if len(e.Pattern) > 0 {
				v, fl = patternVerdict(raw, resource, bound.names)
			} else {
				v, fl = anyPatternVerdict(raw, resource, bound.names)
			}
			if fl != nil {
				return "", "", fl
			}
			if v.code != "" {
				// The outcome code read once (MatchPattern at the root: a
				// skip of either kind skips, codeError is an error).
				k := b.fresh("k")
				status := "[" + v.code + "].map(" + k + ", " + k + " == " + codePass + " ? " + elementPass + " : " + k + " >= " + codeAnchorSkip + " ? " + elementSkip +
					" : " + k + " == " + codeError + " ? " + elementError + " : " + elementFail + ")[0]"
				return status, v.Skips, nil
			}
			status := "(" + v.Passes + " ? " + elementPass + " : " + elementFail + ")"
			if v.Skips != "false" {
				status = "(" + v.Skips + " ? " + elementSkip + " : " + status + ")"
			}
			if v.Fails != "false" {
				status = "(" + v.Fails + " ? " + elementError + " : " + status + ")"
			}
			return status, v.Skips, nil
		}
		// With elementScope false the element is never the resource: its
		// compilation is not written.
		onElement, elementSkips := elementSkip, "false"
		if e.ElementScope == nil || *e.ElementScope {
			if onElement, elementSkips, fl = compile(el); fl != nil {
				return "", "", false, fl
			}
		}
		// The request's object: the old one when Kyverno judges the old
		// object of an UPDATE.
		object := scope.QueryObject
		if object == "" {
			object = scope.Object
		}
		onObject, objectSkips, fl := compile(object)
		if fl != nil {
			return "", "", false, fl
		}
		// validateResourceWithRule: the element when it is a non-empty
		// map in scope; else the request's object, and nothing on a
		// DELETE (no result: the element is skipped).
		onElementScope := "(" + scoped + " && type(" + el + ") == map && size(dyn(" + el + ")) > 0)"
		judge = "(" + onElementScope + " ? " + onElement + " : " + scope.Operation + " == 'DELETE' ? " + elementSkip + " : " + onObject + ")"
		// An element whose pattern skips is no applied one.
		applied = "(" + onElementScope + " ? !" + elementSkips + " : " + scope.Operation + " != 'DELETE' && !" + objectSkips + ")"
		switch {
		case elementSkips == "false" && objectSkips == "false":
			applied = "(" + onElementScope + " || " + scope.Operation + " != 'DELETE')"
		case len(applied) > maxInlinedCheck:
			// Where the skips are long (a pattern with anchors), an element
			// applied is one whose status is no skip: the judgement is
			// written once more, not each skip predicate beside it.
			applied = "(" + judge + " != " + elementSkip + ")"
		}
		// A substitution that fails is the element's error, before its
		// scope or the operation is looked at.
		judge, applied = bound.wrap(judge), bound.wrap(applied)
		if substitutionFails != "" {
			judge = "(" + substitutionFails + " ? " + elementError + " : " + judge + ")"
			applied = "(" + substitutionFails + " || " + applied + ")"
		}
	default:
		return "", "", false, model.Refuse(model.ReasonJMESPathNotExpressible, "%s has no deny, pattern or anyPattern", at)
	}
	if strings.Contains(judge, "{{") {
		return "", "", false, model.Refuse(model.ReasonJMESPathNotExpressible, "a variable in the pattern at %s", at)
	}
	if len(e.Preconditions) > 0 && string(e.Preconditions) != "null" {
		pre, fl := conditionBlock(e.Preconditions, scope, b)
		if fl != nil {
			return "", "", false, fl
		}
		// A precondition that fails to evaluate skips the element, as one
		// that is false.
		judge = "(" + pre.Fails + " ? " + elementSkip + " : !" + pre.Holds + " ? " + elementSkip + " : " + judge + ")"
		applied = "(!" + pre.Fails + " && " + pre.Holds + " && " + applied + ")"
	}
	status = "(" + el + " == null ? " + elementSkip + " : " + judgeScope(e, el) + judge + ")"
	if scopeError := judgeScope(e, el); scopeError != "" {
		// elementScope on a value that is no map: an error, applied.
		applied = "(type(" + el + ") != map || " + applied + ")"
	}
	applied = "(" + el + " != null && " + applied + ")"
	return status, applied, usesIndex, nil
}

// patternVariables are the pattern values that are one variable, each
// bound to a CEL variable holding its substituted value.
type patternVariables struct {
	// names maps a pattern value to its CEL variable.
	names map[string]string
	// order lists the CEL variables and their values, in binding order.
	order, values []string
}

// bindPatternVariables compiles the values of the pattern (its JSON)
// that are one variable, in scope: their bindings, and the predicate
// (never failing; "" for none) where a substitution fails.
func bindPatternVariables(raw []byte, scope Scope, b *binder, at string) (patternVariables, string, *model.Refusal) {
	decoded, err := decodeTyped(raw)
	if err != nil {
		return patternVariables{}, "", model.Refuse(model.ReasonPatternNotExpressible, "the pattern is not JSON: %v", err)
	}
	var out patternVariables
	fails := ""
	for _, leaf := range runtimeLeaves(decoded) {
		v, fl := operand(leaf, scope, b, at+".pattern")
		if fl != nil {
			return patternVariables{}, "", fl
		}
		if out.names == nil {
			out.names = map[string]string{}
		}
		name := b.fresh("pv")
		out.names[leaf] = name
		// The value, and beside it a string value read as a value string
		// once (runtimeParse), not once per value it is checked against.
		parsed := runtimeParse(func() string { return b.fresh("pp") }, name)
		out.order = append(out.order, name, parsedValueString(name))
		out.values = append(out.values, "dyn("+v.cel+")", "(type("+name+") == string ? "+parsed+" : [])")
		if f := v.fails(); f != "false" {
			fails = joinOr(fails, f)
		}
	}
	return out, fails, nil
}

// wrap binds the variables around expression (of any type), where none
// of their substitutions fails.
func (p patternVariables) wrap(expression string) string {
	for i := len(p.order) - 1; i >= 0; i-- {
		if strings.Contains(expression, p.order[i]) {
			expression = "[" + p.values[i] + "].map(" + p.order[i] + ", " + expression + ")[0]"
		}
	}
	return expression
}

// judgeScope is the error of elementScope: true on an element that is not
// a map (AddElementToContext fails: the rule's result is error), as a
// prefix of the element's judgement.
func judgeScope(e forEachEntry, el string) string {
	if e.ElementScope == nil || !*e.ElementScope {
		return ""
	}
	return "type(" + el + ") != map ? " + elementError + " : "
}
