// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1 holds minimal Go types for the kyverno.io/v1 objects kyvap reads:
// ClusterPolicy and Policy.
//
// Only the fields the translator and the fallback engine need are typed; the
// sub-rules kyvap never evaluates (mutate, generate, verifyImages, patterns...)
// are kept as raw JSON so their presence is visible and nothing is lost when a
// policy is decoded and re-encoded. The types are checked against Kyverno's own
// CRD schemas by test (see types_schema_test.go).
//
// +kubebuilder:object:generate=true
// +groupName=kyverno.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the objects in this package.
var GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v1"}

var (
	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&ClusterPolicy{}, &ClusterPolicyList{},
		&Policy{}, &PolicyList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
