// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ParamsReaderLabel is the label of the ClusterRoles that Kubernetes
// aggregates into kyvap's params-reader ClusterRole
// (config/rbac/params_reader_role.yaml): a ClusterRole carrying it grants
// kyvap the parameter kinds it lists.
const ParamsReaderLabel = "kyvap.io/aggregate-to-params-reader"

// deniedRecheck is how long a denied access is remembered before the next
// request asks again (a grant takes effect within it).
const deniedRecheck = 10 * time.Second

// paramAccess checks, once per parameter resource, that kyvap may list and
// watch it before the first read: parameters are read through the
// manager's cache, whose first read of a kind starts a cluster-wide
// informer and waits for it to sync, which without the permission never
// happens and holds every request until it times out. Allowed answers are
// kept; denied ones are asked again after deniedRecheck.
type paramAccess struct {
	mu      sync.Mutex
	allowed map[schema.GroupVersionResource]bool
	denied  map[schema.GroupVersionResource]time.Time
}

// check returns a clear error when kyvap may not list and watch the
// resource of gvk.
func (a *paramAccess) check(ctx context.Context, c client.Client, gvk schema.GroupVersionKind) error {
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("paramKind %s: %w", gvk, err)
	}
	gvr := mapping.Resource
	a.mu.Lock()
	if a.allowed[gvr] {
		a.mu.Unlock()
		return nil
	}
	deniedAt, denied := a.denied[gvr]
	a.mu.Unlock()
	if denied && time.Since(deniedAt) < deniedRecheck {
		return missingParamAccess(gvk, gvr)
	}
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
		}}
		if err := c.Create(ctx, review); err != nil {
			return fmt.Errorf("checking kyvap's access to the parameters %s: %w", gvr.GroupResource(), err)
		}
		if !review.Status.Allowed {
			a.mu.Lock()
			if a.denied == nil {
				a.denied = map[schema.GroupVersionResource]time.Time{}
			}
			a.denied[gvr] = time.Now()
			a.mu.Unlock()
			return missingParamAccess(gvk, gvr)
		}
	}
	a.mu.Lock()
	if a.allowed == nil {
		a.allowed = map[schema.GroupVersionResource]bool{}
	}
	a.allowed[gvr] = true
	delete(a.denied, gvr)
	a.mu.Unlock()
	return nil
}

func missingParamAccess(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) error {
	return fmt.Errorf("kyvap may not list and watch %s, the resource of paramKind %s: grant it with a ClusterRole labelled %s: \"true\" allowing get, list and watch on it (docs/install.md#parameter-kinds)",
		gvr.GroupResource(), gvk.Kind, ParamsReaderLabel)
}
