// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v2 holds minimal Go types for kyverno.io/v2 PolicyException.
//
// +kubebuilder:object:generate=true
// +groupName=kyverno.io
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the objects in this package.
var GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v2"}

var (
	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &PolicyException{}, &PolicyExceptionList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
