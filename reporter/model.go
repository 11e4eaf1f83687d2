// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package reporter

import (
	"context"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/scan"
)

// setupModel registers the scans of ValidatingPolicies and
// NamespacedValidatingPolicies, once, when their CRDs are served and
// LowerModel is set (the caller holds setupMu).
func (r *Reporter) setupModel() error {
	if r.modelStarted || r.LowerModel == nil {
		return nil
	}
	for _, kind := range []model.Kind{model.KindValidatingPolicy, model.KindNamespacedValidatingPolicy} {
		if _, err := r.mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: policiesv1.GroupName, Kind: string(kind)}, policiesv1.GroupVersion.Version); err != nil {
			return nil // not served yet: CRDsChanged tries again
		}
	}
	r.modelStarted = true
	for _, kind := range []model.Kind{model.KindValidatingPolicy, model.KindNamespacedValidatingPolicy} {
		kind := kind
		var obj client.Object = &policiesv1.ValidatingPolicy{}
		name := "background-scan-validatingpolicies"
		if kind == model.KindNamespacedValidatingPolicy {
			obj, name = &policiesv1.NamespacedValidatingPolicy{}, "background-scan-namespacedvalidatingpolicies"
		}
		changed := make(chan event.GenericEvent, 1)
		r.modelChanged = append(r.modelChanged, changed)
		err := ctrl.NewControllerManagedBy(r.mgr).Named(name).For(obj).
			WatchesRawSource(source.Channel(changed, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
				return r.listModel(ctx, kind)
			}))).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				return r.reconcileModelPolicy(ctx, kind, req)
			}))
		if err != nil {
			return err
		}
	}
	return nil
}

// listModel lists the policies of kind to rescan them.
func (r *Reporter) listModel(ctx context.Context, kind model.Kind) []reconcile.Request {
	var keys []types.NamespacedName
	if kind == model.KindNamespacedValidatingPolicy {
		var list policiesv1.NamespacedValidatingPolicyList
		if err := r.Client.List(ctx, &list); err != nil {
			log.FromContext(ctx).Error(err, "listing NamespacedValidatingPolicies to rescan them")
			return nil
		}
		for i := range list.Items {
			keys = append(keys, types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name})
		}
	} else {
		var list policiesv1.ValidatingPolicyList
		if err := r.Client.List(ctx, &list); err != nil {
			log.FromContext(ctx).Error(err, "listing ValidatingPolicies to rescan them")
			return nil
		}
		for i := range list.Items {
			keys = append(keys, types.NamespacedName{Name: list.Items[i].Name})
		}
	}
	out := make([]reconcile.Request, len(keys))
	for i, k := range keys {
		out[i] = reconcile.Request{NamespacedName: k}
	}
	return out
}

// reconcileModelPolicy is reconcilePolicy for a policy of the policy model.
func (r *Reporter) reconcileModelPolicy(ctx context.Context, kind model.Kind, req reconcile.Request) (reconcile.Result, error) {
	var policy client.Object = &policiesv1.ValidatingPolicy{}
	if kind == model.KindNamespacedValidatingPolicy {
		policy = &policiesv1.NamespacedValidatingPolicy{}
	}
	source := model.Source{Kind: kind, Namespace: req.Namespace, Name: req.Name}
	var kinds []schema.GroupVersionKind
	err := r.Client.Get(ctx, req.NamespacedName, policy)
	switch {
	case apierrors.IsNotFound(err):
		if r.Scanner.SetModelPolicy(source, &metav1.ObjectMeta{}, nil) {
			kinds = r.allWatched()
		}
	case err != nil:
		return reconcile.Result{}, err
	default:
		lowered, err := r.LowerModel(ctx, policy)
		if err != nil {
			return reconcile.Result{}, err
		}
		generated := false
		switch p := policy.(type) {
		case *policiesv1.ValidatingPolicy:
			generated = p.Status.Generated
		case *policiesv1.NamespacedValidatingPolicy:
			generated = p.Status.Generated
		}
		rules := scan.ModelRulesToScan(&lowered, generated, r.Kyverno != nil && r.Kyverno.Running(), r.Scanner.Capabilities())
		meta := &metav1.ObjectMeta{Name: policy.GetName(), Namespace: policy.GetNamespace(), Annotations: policy.GetAnnotations()}
		changed := r.Scanner.SetModelPolicy(lowered.Source, meta, rules)
		var resourceRules []admissionregistrationv1.RuleWithOperations
		for i := range rules {
			for _, nr := range rules[i].MatchConstraints.ResourceRules {
				resourceRules = append(resourceRules, nr.RuleWithOperations)
			}
		}
		if _, err := r.watchResources(ctx, resourceRules); err != nil {
			return reconcile.Result{}, err
		}
		if changed {
			kinds = r.allWatched()
		}
	}
	if len(kinds) > 0 {
		go r.enqueueAll(ctx, kinds)
	}
	return reconcile.Result{}, nil
}
