// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// The defaults here apply to ValidatingAdmissionPolicies and their
// bindings the defaults the API server applies when it stores them
// (k8s.io/kubernetes pkg/apis/admissionregistration/v1/defaults.go, which is
// not importable): SetDefaults_ValidatingAdmissionPolicySpec,
// SetDefaults_MatchResources and SetDefaults_Rule.
//
// Two places need exactly the API server's result: the operator compares
// the stored objects with the desired ones defaulted the same way, to tell
// "unchanged" from "drifted" without writing (test/operator checks these
// defaults against a real API server), and the VAP simulator evaluates
// defaulted copies, as the admission plugin does (an undefaulted nil
// selector is a configuration error there). One copy keeps them equal.
//
// They depend only on k8s.io/api and k8s.io/apimachinery types.

package vap

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultPolicy applies the API server's defaults to a
// ValidatingAdmissionPolicy in place: failurePolicy Fail, and the MatchResources defaults on
// matchConstraints when it is set.
func DefaultPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	matchResources(p.Spec.MatchConstraints)
}

// DefaultBinding applies the API server's defaults to a
// ValidatingAdmissionPolicyBinding in place: the MatchResources defaults on
// matchResources when it is set (a binding has no spec-level defaults).
func DefaultBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	matchResources(b.Spec.MatchResources)
}

// matchResources is SetDefaults_MatchResources (matchPolicy Equivalent,
// empty namespace and object selectors) plus SetDefaults_Rule (scope "*")
// on every resource and exclude rule. A nil MatchResources stays nil: the
// API server defaults only what is there.
func matchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
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
		rule(&m.ResourceRules[i].Rule)
	}
	for i := range m.ExcludeResourceRules {
		rule(&m.ExcludeResourceRules[i].Rule)
	}
}

// rule is SetDefaults_Rule.
func rule(r *admissionregistrationv1.Rule) {
	if r.Scope == nil {
		all := admissionregistrationv1.AllScopes
		r.Scope = &all
	}
}
