// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// maxBindingsPerRule bounds how many bindings overrides may expand into.
const maxBindingsPerRule = 16

// validationActions maps a Kyverno failure action to VAP binding actions.
func validationActions(a kyvernov1.ValidationFailureAction) []admissionregistrationv1.ValidationAction {
	if a.IsEnforce() {
		return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	}
	return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit, admissionregistrationv1.Warn}
}

// validOverrideAction mirrors Kyverno's IsValid: other actions are skipped.
func validOverrideAction(a kyvernov1.ValidationFailureAction) bool {
	return a == "Enforce" || a == "enforce" || a == "Audit" || a == "audit"
}

// actionStep is one entry of Kyverno's decision list for a rule's failure
// action: the first step whose override matches decides.
type actionStep struct {
	override *kyvernov1.ValidationFailureActionOverride // nil: always matches
	action   kyvernov1.ValidationFailureAction
}

// actionSteps lists the rule's failure-action decisions in the order
// Kyverno's engine (EngineResponse.failureActionForRule) evaluates them:
// the rule's overrides, the rule's action, then (only when the rule sets
// no action) the policy's overrides and the policy's action.
func actionSteps(spec *kyvernov1.Spec, rule *kyvernov1.Rule) []actionStep {
	var steps []actionStep
	for i := range rule.Validation.FailureActionOverrides {
		o := &rule.Validation.FailureActionOverrides[i]
		if validOverrideAction(o.Action) {
			steps = append(steps, actionStep{override: o, action: o.Action})
		}
	}
	if rule.Validation.FailureAction != nil {
		return append(steps, actionStep{action: *rule.Validation.FailureAction})
	}
	for i := range spec.ValidationFailureActionOverrides {
		o := &spec.ValidationFailureActionOverrides[i]
		if validOverrideAction(o.Action) {
			steps = append(steps, actionStep{override: o, action: o.Action})
		}
	}
	return append(steps, actionStep{action: spec.ValidationFailureAction})
}

// requirementSet is a conjunction of label requirements, kept normalised
// per key so that contradictions are detected.
type requirementSet struct {
	reqs []metav1.LabelSelectorRequirement
}

// and returns the conjunction with more requirements, and whether it can
// be satisfied at all.
func (s requirementSet) and(more ...metav1.LabelSelectorRequirement) (requirementSet, bool) {
	type state struct {
		in        []string // nil: unconstrained
		notIn     []string
		exists    bool
		notExists bool
	}
	byKey := map[string]*state{}
	var keys []string
	for _, r := range append(append([]metav1.LabelSelectorRequirement(nil), s.reqs...), more...) {
		st, ok := byKey[r.Key]
		if !ok {
			st = &state{}
			byKey[r.Key] = st
			keys = append(keys, r.Key)
		}
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			if st.in == nil {
				st.in = kyverno.UniqueSorted(r.Values)
			} else {
				st.in = intersect(st.in, r.Values)
			}
			if st.in == nil {
				st.in = []string{}
			}
		case metav1.LabelSelectorOpNotIn:
			st.notIn = kyverno.UniqueSorted(append(st.notIn, r.Values...))
		case metav1.LabelSelectorOpExists:
			st.exists = true
		case metav1.LabelSelectorOpDoesNotExist:
			st.notExists = true
		}
	}
	sort.Strings(keys)
	var out requirementSet
	for _, k := range keys {
		st := byKey[k]
		if st.in != nil {
			remaining := subtract(st.in, st.notIn)
			if len(remaining) == 0 || st.notExists {
				return requirementSet{}, false
			}
			out.reqs = append(out.reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: remaining})
			continue
		}
		if st.exists && st.notExists {
			return requirementSet{}, false
		}
		if st.notExists {
			out.reqs = append(out.reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpDoesNotExist})
			continue
		}
		if st.exists {
			out.reqs = append(out.reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpExists})
		}
		if len(st.notIn) > 0 {
			out.reqs = append(out.reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: st.notIn})
		}
	}
	return out, true
}

// selector renders the conjunction; nil when it has no requirement.
func (s requirementSet) selector() *metav1.LabelSelector {
	if len(s.reqs) == 0 {
		return nil
	}
	return &metav1.LabelSelector{MatchExpressions: append([]metav1.LabelSelectorRequirement(nil), s.reqs...)}
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range kyverno.UniqueSorted(a) {
		for _, y := range b {
			if x == y {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

func subtract(a, b []string) []string {
	var out []string
	for _, x := range a {
		keep := true
		for _, y := range b {
			if x == y {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, x)
		}
	}
	return out
}

// negate returns the complement of a requirement.
func negate(r metav1.LabelSelectorRequirement) metav1.LabelSelectorRequirement {
	n := r
	switch r.Operator {
	case metav1.LabelSelectorOpIn:
		n.Operator = metav1.LabelSelectorOpNotIn
	case metav1.LabelSelectorOpNotIn:
		n.Operator = metav1.LabelSelectorOpIn
	case metav1.LabelSelectorOpExists:
		n.Operator = metav1.LabelSelectorOpDoesNotExist
	case metav1.LabelSelectorOpDoesNotExist:
		n.Operator = metav1.LabelSelectorOpExists
	}
	return n
}

// overrideRequirements renders an override's namespaced scope as a
// conjunction of namespace-label requirements. matches is false when the
// override can never match a namespaced resource.
func overrideRequirements(o *kyvernov1.ValidationFailureActionOverride) (reqs []metav1.LabelSelectorRequirement, matches bool, fl *model.Refusal) {
	if o.Namespaces != nil {
		var names []string
		matchAll := false
		for _, ns := range o.Namespaces {
			switch {
			case ns == "*":
				matchAll = true
			case kyverno.ContainsWildcard(ns):
				return nil, false, model.Refuse(model.ReasonOverrideNotExpressible, "failure action override by wildcard namespace %q", ns)
			default:
				names = append(names, ns)
			}
		}
		if !matchAll {
			if len(names) == 0 {
				return nil, false, nil
			}
			reqs = append(reqs, metav1.LabelSelectorRequirement{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: kyverno.UniqueSorted(names)})
		}
	}
	if o.NamespaceSelector != nil {
		sel, err := kyverno.ParseSelector(o.NamespaceSelector)
		if err == nil && sel.HasWildcards() {
			err = fmt.Errorf("label selector %q uses Kyverno wildcards, which a binding's namespace selector cannot carry", metav1.FormatLabelSelector(o.NamespaceSelector))
		}
		if err != nil {
			return nil, false, model.Refuse(model.ReasonOverrideNotExpressible, "failure action override: %v", err)
		}
		keys := make([]string, 0, len(sel.Source.MatchLabels))
		for k := range sel.Source.MatchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			reqs = append(reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{sel.Source.MatchLabels[k]}})
		}
		reqs = append(reqs, sel.Source.MatchExpressions...)
	}
	return reqs, true, nil
}

// overrideMatchesClusterScoped evaluates an override the way Kyverno does
// for a cluster-scoped resource (and a Namespace): namespace "" and no
// namespace labels.
func overrideMatchesClusterScoped(o *kyvernov1.ValidationFailureActionOverride) bool {
	selectorOK := func() bool {
		if o.NamespaceSelector == nil {
			return true
		}
		sel, err := kyverno.ParseSelector(o.NamespaceSelector)
		return err == nil && sel.MatchesEmpty()
	}
	if o.Namespaces == nil {
		return selectorOK()
	}
	for _, ns := range o.Namespaces {
		if kyverno.WildcardMatch(ns, "") {
			return selectorOK()
		}
	}
	return false
}

// bindingPiece is one binding's scope and action.
type bindingPiece struct {
	// scope is nil for a binding without matchResources.
	scope  *admissionregistrationv1.MatchResources
	action kyvernov1.ValidationFailureAction
}

// everyResource is a binding resource rule covering everything in a scope.
func everyResource(scope admissionregistrationv1.ScopeType) []admissionregistrationv1.NamedRuleWithOperations {
	return []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Scope: &scope,
		},
	}}}
}

// bindingPieces splits the namespace space into disjoint regions, each
// with exactly the action Kyverno's engine would pick for a request there.
// Cluster-scoped resources (and Namespaces) get the action Kyverno computes
// for them statically. mayBeClusterScoped says whether the rule can match
// cluster-scoped requests at all.
func bindingPieces(steps []actionStep, mayBeClusterScoped bool) ([]bindingPiece, *model.Refusal) {
	type region struct {
		reqs   requirementSet
		action kyvernov1.ValidationFailureAction
	}
	var assigned []region
	remaining := []requirementSet{{}}
	var clusterAction *kyvernov1.ValidationFailureAction
	for _, step := range steps {
		if step.override == nil {
			for _, r := range remaining {
				assigned = append(assigned, region{r, step.action})
			}
			if clusterAction == nil {
				a := step.action
				clusterAction = &a
			}
			break
		}
		if clusterAction == nil && overrideMatchesClusterScoped(step.override) {
			a := step.action
			clusterAction = &a
		}
		reqs, matches, fl := overrideRequirements(step.override)
		if fl != nil {
			return nil, fl
		}
		if !matches {
			continue
		}
		var next []requirementSet
		for _, r := range remaining {
			if in, ok := r.and(reqs...); ok {
				assigned = append(assigned, region{in, step.action})
			}
			// r ∧ ¬(c1 ∧ … ∧ cn) = ⋃_j r ∧ c1 ∧ … ∧ c(j-1) ∧ ¬cj, disjoint.
			for j := range reqs {
				piece := append(append([]metav1.LabelSelectorRequirement(nil), reqs[:j]...), negate(reqs[j]))
				if out, ok := r.and(piece...); ok {
					next = append(next, out)
				}
			}
		}
		remaining = next
		if len(assigned)+len(remaining) > maxBindingsPerRule {
			return nil, model.Refuse(model.ReasonOverrideNotExpressible, "failure action overrides need more than %d bindings", maxBindingsPerRule)
		}
	}

	uniform := true
	for _, r := range assigned {
		if r.action.IsEnforce() != assigned[0].action.IsEnforce() {
			uniform = false
		}
	}
	if mayBeClusterScoped && clusterAction != nil && len(assigned) > 0 && clusterAction.IsEnforce() != assigned[0].action.IsEnforce() {
		uniform = false
	}
	if uniform {
		return []bindingPiece{{action: assigned[0].action}}, nil
	}
	var pieces []bindingPiece
	for _, r := range assigned {
		pieces = append(pieces, bindingPiece{
			scope:  &admissionregistrationv1.MatchResources{NamespaceSelector: orEmpty(r.reqs.selector()), ResourceRules: everyResource(admissionregistrationv1.NamespacedScope)},
			action: r.action,
		})
	}
	if mayBeClusterScoped && clusterAction != nil {
		pieces = append(pieces, bindingPiece{
			scope:  &admissionregistrationv1.MatchResources{ResourceRules: everyResource(admissionregistrationv1.ClusterScope)},
			action: *clusterAction,
		})
	}
	return pieces, nil
}

// orEmpty returns an empty (match-everything) selector for nil.
func orEmpty(s *metav1.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return &metav1.LabelSelector{}
	}
	return s
}

// paramRefFor returns the binding's paramRef with the explicit
// parameterNotFoundAction that reproduces Kyverno: a named parameter that is
// missing is an error in Kyverno (failurePolicy decides), which is what
// Deny does in a VAP; for a selector Kyverno errors only when the rule asks
// for Deny and otherwise passes, which is Allow.
func paramRefFor(cel *kyvernov1.CEL) (*admissionregistrationv1.ParamRef, *model.Refusal) {
	if cel.ParamKind == nil {
		return nil, nil
	}
	if cel.ParamRef == nil {
		return nil, model.Refuse(model.ReasonParamsNotExpressible, "paramKind without paramRef")
	}
	ref := cel.ParamRef.DeepCopy()
	switch {
	case ref.Name != "" && ref.Selector != nil:
		return nil, model.Refuse(model.ReasonParamsNotExpressible, "paramRef sets both name and selector")
	case ref.Name != "":
		deny := admissionregistrationv1.DenyAction
		ref.ParameterNotFoundAction = &deny
	case ref.Selector != nil:
		action := admissionregistrationv1.AllowAction
		if ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction {
			action = admissionregistrationv1.DenyAction
		}
		ref.ParameterNotFoundAction = &action
	default:
		return nil, model.Refuse(model.ReasonParamsNotExpressible, "paramRef sets neither name nor selector")
	}
	return ref, nil
}

// actionSuffix names a binding piece's action for messages.
func actionSuffix(a kyvernov1.ValidationFailureAction) string {
	if a.IsEnforce() {
		return "enforce"
	}
	return strings.ToLower(string(kyvernov1.Audit))
}
