package vapsim

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The API server stores ValidatingAdmissionPolicies and bindings defaulted
// (k8s.io/kubernetes/pkg/apis/admissionregistration/v1/defaults.go, which is
// not importable). The admission plugin relies on it: a nil selector is a
// configuration error, so an undefaulted VAP without selectors would never
// match. These functions apply the same defaults to the simulator's copies.

// defaultPolicy applies SetDefaults_ValidatingAdmissionPolicySpec and the
// nested MatchResources / Rule defaults.
func defaultPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	if p.Spec.MatchConstraints != nil {
		defaultMatchResources(p.Spec.MatchConstraints)
	}
}

// defaultBinding applies the nested MatchResources / Rule defaults of a
// binding (bindings have no spec-level defaults).
func defaultBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	if b.Spec.MatchResources != nil {
		defaultMatchResources(b.Spec.MatchResources)
	}
}

// defaultMatchResources is SetDefaults_MatchResources plus SetDefaults_Rule
// on every (exclude) resource rule.
func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m.MatchPolicy == nil {
		equivalent := admissionregistrationv1.Equivalent
		m.MatchPolicy = &equivalent
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for i := range m.ResourceRules {
		defaultRule(&m.ResourceRules[i].Rule)
	}
	for i := range m.ExcludeResourceRules {
		defaultRule(&m.ExcludeResourceRules[i].Rule)
	}
}

// defaultRule is SetDefaults_Rule.
func defaultRule(r *admissionregistrationv1.Rule) {
	if r.Scope == nil {
		all := admissionregistrationv1.AllScopes
		r.Scope = &all
	}
}
