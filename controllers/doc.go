// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controllers reconciles Kyverno ClusterPolicies, ValidatingPolicies
// and NamespacedValidatingPolicies into the ValidatingAdmissionPolicies and
// bindings that translate/ plans, and reports the outcome in the policies'
// status.
//
// The RBAC markers below are the operator's whole footprint: read policies and
// exceptions, write only the policies' status, and own VAPs and bindings.
//
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies;policies,verbs=get;list;watch
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies/status;policies/status,verbs=patch
// +kubebuilder:rbac:groups=kyverno.io,resources=policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies;namespacedvalidatingpolicies;policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies/status;namespacedvalidatingpolicies/status,verbs=update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package controllers
