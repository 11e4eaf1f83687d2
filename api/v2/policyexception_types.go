// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package v2

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

// PolicyException exempts the requests it matches from named rules of named
// policies (kyverno.io/v2).
//
// +kubebuilder:object:root=true
type PolicyException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PolicyExceptionSpec `json:"spec"`
}

// PolicyExceptionList is a list of PolicyExceptions.
//
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}

// PolicyExceptionSpec is the body of a PolicyException.
type PolicyExceptionSpec struct {
	Background *bool `json:"background,omitempty"`
	// Match selects the requests the exception covers (any/all only).
	Match MatchResources `json:"match"`
	// Conditions are JMESPath conditions; only their presence matters to kyvap.
	Conditions  *AnyAllConditions               `json:"conditions,omitempty"`
	Exceptions  []Exception                     `json:"exceptions"`
	PodSecurity []kyvernov1.PodSecurityStandard `json:"podSecurity,omitempty"`
}

// MatchResources is the v2 match block: any or all resource filters.
type MatchResources struct {
	Any kyvernov1.ResourceFilters `json:"any,omitempty"`
	All kyvernov1.ResourceFilters `json:"all,omitempty"`
}

// AnyAllConditions are JMESPath conditions, kept raw.
type AnyAllConditions struct {
	AnyConditions []apiextensionsv1.JSON `json:"any,omitempty"`
	AllConditions []apiextensionsv1.JSON `json:"all,omitempty"`
}

// Exception names a policy and the rules of it that are exempted.
type Exception struct {
	// PolicyName is "<name>" for a ClusterPolicy or "<namespace>/<name>" for a Policy.
	PolicyName string   `json:"policyName"`
	RuleNames  []string `json:"ruleNames"`
}

// HasConditions reports whether an exception carries JMESPath conditions;
// an empty conditions block has none (Kyverno passes it).
func (s *PolicyExceptionSpec) HasConditions() bool {
	return s.Conditions != nil && (len(s.Conditions.AnyConditions) > 0 || len(s.Conditions.AllConditions) > 0)
}
