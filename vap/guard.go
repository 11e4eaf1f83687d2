// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kyvap/kyvap/model"
)

// GuardVariable is the VAP variable that carries the part of a rule's
// matching the API server cannot evaluate in matchConditions: predicates
// over the namespace's labels (namespaceSelector next to other attributes),
// together with the rule's celPreconditions. Every validation is guarded by
// it: `variables.kyvap_applies ? (expression) : true`.
//
// Why: the API server evaluates matchConditions without namespaceObject
// (k8s.io/apiserver webhook/matchconditions passes none), so a namespace
// label predicate there sees no labels. Validations and variables do get
// namespaceObject. The celPreconditions move with the predicate because
// Kyverno never evaluates a rule's preconditions when its match fails: a
// precondition that errors on a resource outside the selected namespaces
// must not deny it. CEL's && is commutative for errors (false && error is
// false), which gives exactly that.
const GuardVariable = "kyvap_applies"

// NamespaceObjectIdent is the CEL variable the guard exists for.
const NamespaceObjectIdent = "namespaceObject"

// GuardNamespacePredicates moves the match conditions kyvap generated that
// read namespaceObject, and the rule's celPreconditions with them, into
// GuardVariable, and guards every validation with it. ours names the
// conditions kyvap generated. Nothing changes when no generated condition
// reads the namespace.
func GuardNamespacePredicates(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, ours map[string]bool) *model.Refusal {
	needed := false
	for _, mc := range spec.MatchConditions {
		if ours[mc.Name] && strings.Contains(mc.Expression, NamespaceObjectIdent) {
			needed = true
		}
	}
	if !needed {
		return nil
	}
	var keep []admissionregistrationv1.MatchCondition
	var guard []string
	for _, mc := range spec.MatchConditions {
		switch {
		case ours[mc.Name] && !strings.Contains(mc.Expression, NamespaceObjectIdent):
			keep = append(keep, mc)
		case !ours[mc.Name] && strings.Contains(mc.Expression, NamespaceObjectIdent):
			// Kyverno evaluates celPreconditions as match conditions, where
			// namespaceObject is null; in a variable it would not be.
			return model.Refuse(model.ReasonMatchNotExpressible, "celPrecondition %q reads namespaceObject, which Kyverno evaluates as null; the rule's namespace selection can only be checked where the API server provides the namespace, so the precondition cannot stay a match condition", mc.Name)
		default:
			guard = append(guard, "("+mc.Expression+"\n)")
		}
	}
	for _, v := range spec.Variables {
		if v.Name == GuardVariable {
			return model.Refuse(model.ReasonVAPFieldInvalid, "variable name %q is reserved by kyvap for the rule's namespace selection", GuardVariable)
		}
	}
	spec.MatchConditions = keep
	spec.Variables = append([]admissionregistrationv1.Variable{{Name: GuardVariable, Expression: strings.Join(guard, " && ")}}, spec.Variables...)
	for i := range spec.Validations {
		spec.Validations[i].Expression = guarded(spec.Validations[i].Expression)
	}
	return nil
}

// The guard around a validation. A line break before the closing
// parenthesis: the expression may end with a // comment.
const (
	guardPrefix = "variables." + GuardVariable + " ? ("
	guardSuffix = "\n) : true"
)

// guarded is a validation guarded by GuardVariable.
func guarded(expression string) string { return guardPrefix + expression + guardSuffix }

// unguarded is the validation inside a guarded one.
func unguarded(expression string) (string, bool) {
	inner, ok := strings.CutPrefix(expression, guardPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(inner, guardSuffix)
}

// IsGuarded reports whether a generated VAP checks part of its matching in
// GuardVariable (see there), so that a request it admits may be one the
// rule does not apply to.
func IsGuarded(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec) bool {
	return len(spec.Variables) > 0 && spec.Variables[0].Name == GuardVariable
}

// Unguard undoes GuardNamespacePredicates for an engine that evaluates
// match conditions with namespaceObject (Kyverno's ValidatingPolicy
// engine): the guard becomes the last match condition, named conditionName,
// and every validation loses its guard. It reports whether the spec was
// guarded.
func Unguard(conditions *[]admissionregistrationv1.MatchCondition, variables *[]admissionregistrationv1.Variable, validations []admissionregistrationv1.Validation, conditionName string) bool {
	if len(*variables) == 0 || (*variables)[0].Name != GuardVariable {
		return false
	}
	for i := range validations {
		if inner, ok := unguarded(validations[i].Expression); ok {
			validations[i].Expression = inner
		}
	}
	*conditions = append(*conditions, admissionregistrationv1.MatchCondition{Name: conditionName, Expression: (*variables)[0].Expression})
	*variables = (*variables)[1:]
	if len(*variables) == 0 {
		*variables = nil
	}
	return true
}
