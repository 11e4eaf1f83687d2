// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/translate"
)

// replacementPending reports whether a stale object must stay because the
// rule it was generated for still wants objects that are not all in place
// (existing and generated for this policy). When the name of a rule's
// objects changes (an upgrade that renames them, a rule renamed), the new
// objects are created first and the old ones deleted after; if a new one
// could not be created (a refused write, a foreign object holding the
// name), the old ones keep enforcing the rule until it is.
func (r *ClusterPolicyReconciler) replacementPending(ctx context.Context, policy *kyvernov1.ClusterPolicy, stale client.Object, desired []client.Object) bool {
	rule, ok := stale.GetAnnotations()[translate.AnnotationRule]
	if !ok {
		return false
	}
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader // the cache may not hold what was just created
	}
	for _, d := range desired {
		if d.GetAnnotations()[translate.AnnotationRule] != rule {
			continue
		}
		existing := newEmpty(d)
		if err := reader.Get(ctx, client.ObjectKeyFromObject(d), existing); err != nil || !isOwnedBy(existing, policy) {
			return true
		}
	}
	return false
}
