// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook serves kyvap's own CEL admission webhook: the rules
// translate/ could not express as VAPs are judged by engine/, and this
// package is what connects the engine to the API server. It holds the HTTP
// handler (decode the AdmissionReview, look up namespaces, roles and
// parameters, ask the engine, answer), the reconciler of the
// ValidatingWebhookConfiguration that registers exactly the resources the
// engine's rules need, and, in certs/, the serving certificate and its CA.
package webhook

// RBAC of the webhook's look-ups: namespace labels for namespaceSelector and
// namespaceObject, RBAC bindings for roles/clusterRoles (read only when a
// policy matches on them), and SubjectAccessReviews for the CEL `authorizer`.
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// RBAC of the ValidatingWebhookConfiguration reconciler: it watches the
// configurations (get, list, watch, which Kyverno's detector in
// operator needs as well) and writes only kyvap's own, named by
// --webhook-configuration-name (default kyvap-fallback). RBAC cannot
// restrict create by name; update, patch and delete are granted for that
// name only. Markers cannot read a flag: with another name, patch the
// ClusterRole's resourceNames (docs/install.md, "RBAC: least privilege").
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=kyvap-fallback,verbs=update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,resourceNames=kyvap-manager-role,verbs=get
