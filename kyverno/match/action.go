// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
)

// FailureAction resolves "Enforce" or "Audit" for the rule and the request's
// namespace, applying rule-level failureAction/overrides and spec-level
// validationFailureAction/overrides the way Kyverno v1.19 does.
//
// Kyverno v1.19 decides twice, with two different algorithms, and a failing
// rule denies only when both say Enforce:
//
//   - the policy cache (pkg/policycache/cache.go) hands the rule to the
//     enforcing handler only if, for the request's namespace, it resolves to
//     Enforce: the rule's overrides if it has any, else the spec's; the
//     first override that applies to all namespaces, names the namespace, or
//     selects its labels (plain selector, no wildcards) wins; otherwise the
//     rule's failureAction, else the spec's validationFailureAction;
//   - the engine response (pkg/engine/api/engineresponse.go) blocks only if
//     the failing rule resolves to Enforce: the rule's first valid matching
//     override, then its failureAction, then the spec's first valid matching
//     override, then validationFailureAction. There an override with
//     namespaces must match both the resource's namespace and its selector,
//     and `namespaces: []` matches nothing.
//
// The two disagree for, e.g., a rule failureAction of Enforce under a
// spec-level Audit override: the cache sends the rule to audit, so it audits.
//
// Deviation: Kyverno 1.19.1 hands the engine response the namespace's labels
// only when some policy of the request has a namespaceSelector in a rule's
// match, exclude or failureActionOverrides, so a namespaceSelector in a
// spec-level override alone never enforces there. We treat that as a bug and
// always check override selectors against NamespaceLabels.
func FailureAction(spec *kyvernov1.Spec, rule *kyvernov1.Rule, req *Request) string {
	if spec == nil {
		spec = &kyvernov1.Spec{}
	}
	if req == nil {
		req = &Request{}
	}
	var ruleAction *kyvernov1.ValidationFailureAction
	var ruleOverrides []kyvernov1.ValidationFailureActionOverride
	hasValidate := rule != nil && rule.Validation != nil
	if hasValidate {
		ruleAction = rule.Validation.FailureAction
		ruleOverrides = rule.Validation.FailureActionOverrides
	}
	if cacheAction(spec, ruleAction, ruleOverrides, req).IsEnforce() &&
		responseAction(spec, hasValidate, ruleAction, ruleOverrides, newView(req)).IsEnforce() {
		return string(kyvernov1.Enforce)
	}
	return string(kyvernov1.Audit)
}

// cacheAction is the policy cache's per-namespace rule partition
// (checkValidationFailureActionOverrides). The cache looks the namespace up
// by the request's namespace, so for a Namespace's own UPDATE or DELETE it
// is that Namespace, and for a cluster-scoped request there is none: only
// overrides for all namespaces apply. We assume a named namespace exists.
func cacheAction(spec *kyvernov1.Spec, ruleAction *kyvernov1.ValidationFailureAction,
	ruleOverrides []kyvernov1.ValidationFailureActionOverride, req *Request,
) kyvernov1.ValidationFailureAction {
	action := spec.ValidationFailureAction
	if ruleAction != nil {
		action = *ruleAction
	}
	overrides := spec.ValidationFailureActionOverrides
	if len(ruleOverrides) > 0 {
		overrides = ruleOverrides
	}
	inNamespace := req.Namespace != ""
	for _, o := range overrides {
		if len(o.Namespaces) == 0 && o.NamespaceSelector == nil {
			return o.Action
		}
		if inNamespace && kyverno.CheckPatterns(o.Namespaces, req.Namespace) {
			return o.Action
		}
		if inNamespace && o.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(o.NamespaceSelector)
			if err != nil {
				continue
			}
			if sel.Matches(labels.Set(req.NamespaceLabels)) {
				return o.Action
			}
		}
	}
	return action
}

// responseAction is the engine response's per-rule resolution
// (failureActionForRule). Its namespace is the matched object's, which is
// empty for a Namespace and for cluster-scoped resources.
func responseAction(spec *kyvernov1.Spec, hasValidate bool, ruleAction *kyvernov1.ValidationFailureAction,
	ruleOverrides []kyvernov1.ValidationFailureActionOverride, v view,
) kyvernov1.ValidationFailureAction {
	if hasValidate {
		if a, ok := matchOverride(ruleOverrides, v); ok {
			return a
		}
		if ruleAction != nil {
			return *ruleAction
		}
	}
	if a, ok := matchOverride(spec.ValidationFailureActionOverrides, v); ok {
		return a
	}
	return spec.ValidationFailureAction
}

// matchOverride is the engine response's matchOverride: the first override
// with a valid action that applies, where nil namespaces mean every
// namespace and a selector (with Kyverno's wildcards) must match as well.
func matchOverride(overrides []kyvernov1.ValidationFailureActionOverride, v view) (kyvernov1.ValidationFailureAction, bool) {
	selected := func(sel *metav1.LabelSelector) bool {
		if sel == nil {
			return true
		}
		ok, err := selectorMatches(sel, v.nsLabels)
		return err == nil && ok
	}
	for _, o := range overrides {
		if !validAction(o.Action) {
			continue
		}
		if o.Namespaces == nil && selected(o.NamespaceSelector) {
			return o.Action, true
		}
		for _, ns := range o.Namespaces {
			if kyverno.WildcardMatch(ns, v.namespace) && selected(o.NamespaceSelector) {
				return o.Action, true
			}
		}
	}
	return "", false
}

// validAction is Kyverno's ValidationFailureAction.IsValid.
func validAction(a kyvernov1.ValidationFailureAction) bool {
	switch a {
	case kyvernov1.Enforce, kyvernov1.Audit, "enforce", "audit":
		return true
	}
	return false
}
