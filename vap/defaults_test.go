// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	fail       = admissionregistrationv1.Fail
	ignore     = admissionregistrationv1.Ignore
	equivalent = admissionregistrationv1.Equivalent
	exact      = admissionregistrationv1.Exact
	allScopes  = admissionregistrationv1.AllScopes
	namespaced = admissionregistrationv1.NamespacedScope
)

func namedRule(scope *admissionregistrationv1.ScopeType) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}, Scope: scope},
	}}
}

// newMatchResources is a MatchResources with the given fields and one resource
// rule and one exclude rule of the given scope.
func newMatchResources(policy *admissionregistrationv1.MatchPolicyType, ns, obj *metav1.LabelSelector, scope *admissionregistrationv1.ScopeType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		MatchPolicy: policy, NamespaceSelector: ns, ObjectSelector: obj,
		ResourceRules:        []admissionregistrationv1.NamedRuleWithOperations{namedRule(scope)},
		ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{namedRule(scope)},
	}
}

// TestPolicyAndBinding runs both helpers on each row: a policy's
// matchConstraints and a binding's matchResources are defaulted alike.
func TestPolicyAndBinding(t *testing.T) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	tests := []struct {
		name                   string
		failurePolicy, wantFP  *admissionregistrationv1.FailurePolicyType
		matchResources, wantMR *admissionregistrationv1.MatchResources
	}{{
		name:   "nil matchResources stay nil",
		wantFP: &fail,
	}, {
		name:           "everything defaulted",
		matchResources: newMatchResources(nil, nil, nil, nil),
		wantFP:         &fail,
		wantMR:         newMatchResources(&equivalent, &metav1.LabelSelector{}, &metav1.LabelSelector{}, &allScopes),
	}, {
		name:          "set fields are kept",
		failurePolicy: &ignore, matchResources: newMatchResources(&exact, selector, selector, &namespaced),
		wantFP: &ignore, wantMR: newMatchResources(&exact, selector, selector, &namespaced),
	}}
	for _, tt := range tests {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: tt.failurePolicy, MatchConstraints: tt.matchResources.DeepCopy(),
		}}
		DefaultPolicy(p)
		wantPolicy := admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: tt.wantFP, MatchConstraints: tt.wantMR}
		if diff := cmp.Diff(wantPolicy, p.Spec); diff != "" {
			t.Errorf("%s: Policy (-want +got):\n%s", tt.name, diff)
		}
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "p", MatchResources: tt.matchResources.DeepCopy(),
		}}
		DefaultBinding(b)
		wantBinding := admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", MatchResources: tt.wantMR}
		if diff := cmp.Diff(wantBinding, b.Spec); diff != "" {
			t.Errorf("%s: Binding (-want +got):\n%s", tt.name, diff)
		}
	}
}
