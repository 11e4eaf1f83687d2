// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

// RBAC of the webhook certificate Manager: the Secret lives in the operator's
// namespace ("system" here, which config/default renames), so a namespaced
// Role grants it rather than the ClusterRole, and only the Secret of that
// name (--webhook-secret-name, default kyvap-webhook-tls). RBAC cannot
// restrict create by name (the name is not known when create is
// authorized), so create is granted for the namespace; get, update and patch
// only for kyvap's own Secret. There is no list or watch: the Manager reads
// the Secret with an uncached GET (the manager's APIReader), which starts no
// informer on the namespace's Secrets. With another --webhook-secret-name,
// patch the Role's resourceNames (docs/install.md, "RBAC: least privilege").
//
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,resourceNames=kyvap-webhook-tls,verbs=get;update;patch
