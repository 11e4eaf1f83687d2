// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/classic"
	"github.com/kyvap/kyvap/model"
)

// Names of the preconditions a compiled pattern rule carries.
const (
	// conditionPatternNotDelete: Kyverno does not validate a pattern on a
	// DELETE request (validate_resource.go validateResourceWithRule).
	conditionPatternNotDelete = "kyvap-pattern-not-delete"
	// conditionPatternExisting: allowExistingViolations, Kyverno's default
	// for an Enforce rule, skips an UPDATE whose old object fails too.
	conditionPatternExisting = "kyvap-pattern-existing-violations"
)

// isPatternRule reports a classic rule whose whole validation is a
// validate.pattern or a validate.anyPattern (Kyverno reads the pattern
// when both are set: such a rule is left to it).
func isPatternRule(r *kyvernov1.Rule) bool {
	v := r.Validation
	return v != nil && (v.RawPattern != nil) != (v.RawAnyPattern != nil) && v.CEL == nil && v.Deny == nil &&
		v.PodSecurity == nil && len(v.ForEachValidation) == 0 && v.Manifests == nil && v.Assert == nil
}

// compileClassic compiles the rule's pattern or anyPattern on resource.
func compileClassic(v *kyvernov1.Validation, resource string) (string, *model.Refusal) {
	if v.RawAnyPattern != nil {
		return classic.AnyPattern(v.RawAnyPattern.Raw, resource)
	}
	return classic.Pattern(v.RawPattern.Raw, resource)
}

// patternAsCEL is a validate.pattern (or anyPattern) rule written as the
// validate.cel rule
// that gives Kyverno's verdicts (frontend/classic compiles the pattern):
// the same match, exclusions, preconditions and actions, the pattern (or
// the disjunction of the anyPattern) as one expression, and as CEL preconditions what Kyverno's validate handler
// does around a pattern (no DELETE; allowExistingViolations on UPDATE).
// action is the rule's failure action (its own, or the policy's). A
// construct without an exact form is refused, naming it.
func patternAsCEL(r *kyvernov1.Rule, action kyvernov1.ValidationFailureAction) (*kyvernov1.Rule, *model.Refusal) {
	v := r.Validation
	if strings.Contains(v.Message, "{{") || strings.Contains(v.Message, "$(") {
		return nil, model.Refuse(model.ReasonPatternNotExpressible, "a variable in the message %q", v.Message)
	}
	onObject, fl := compileClassic(v, "object")
	if fl != nil {
		return nil, fl
	}
	out := r.DeepCopy()
	message := ""
	if v.Message == "" {
		message = "validation error: rule " + r.Name + " failed" // Kyverno's text, without the path it adds
	}
	out.Validation = &kyvernov1.Validation{
		FailureAction:           v.FailureAction,
		FailureActionOverrides:  v.FailureActionOverrides,
		AllowExistingViolations: v.AllowExistingViolations,
		Message:                 v.Message,
		CEL:                     &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: onObject, Message: message}}},
	}
	out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{Name: conditionPatternNotDelete, Expression: "request.operation != 'DELETE'"})
	if action.IsEnforce() && (v.AllowExistingViolations == nil || *v.AllowExistingViolations) {
		if why := oldObjectMatchUnknown(r); why != "" {
			return nil, model.Refuse(model.ReasonPatternNotExpressible, "allowExistingViolations (on unless set to false) with %s: whether Kyverno judges the old object depends on it", why)
		}
		onOld, fl := compileClassic(v, "oldObject")
		if fl != nil {
			return nil, fl
		}
		out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{
			Name:       conditionPatternExisting,
			Expression: "!(request.operation == 'UPDATE' && !" + onObject + " && !" + onOld + ")",
		})
	}
	return out, nil
}

// oldObjectMatchUnknown says what of the rule's match or exclude blocks can
// select the old object of an UPDATE differently from the new one, which
// Kyverno matches as a CREATE before it validates it (validateOldObject):
// labels, annotations, operations; "" when nothing can.
func oldObjectMatchUnknown(r *kyvernov1.Rule) string {
	blocks := []kyvernov1.MatchResources{r.MatchResources}
	if r.ExcludeResources != nil {
		blocks = append(blocks, *r.ExcludeResources)
	}
	for _, b := range blocks {
		for _, d := range descriptionsOf(&b) {
			switch {
			case d.Selector != nil:
				return "a match on labels (selector)"
			case len(d.Annotations) > 0:
				return "a match on annotations"
			case len(d.Operations) > 0:
				return "a match on operations"
			}
		}
	}
	return ""
}
