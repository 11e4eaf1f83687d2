// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// ModelSyncReconciler is the FallbackSyncReconciler of one policies.kyverno.io
// kind: on every replica it lowers and translates each policy as the leader
// does and gives the local webhook's engine the rules that are not VAPs.
// It writes nothing to the API server.
type ModelSyncReconciler struct {
	client.Client
	Resolvers ResolverSource
	Sink      FallbackSink
	Kyverno   KyvernoPresence
	Options   translate.Options
	// Effective, when set, returns the leader's translation options.
	Effective func() translate.Options
	Config    func() *kyverno.Config
	Kind      model.Kind
	// Now is the clock exceptions expire by; nil is time.Now.
	Now func() time.Time

	loads   loadTracker
	requeue chan event.GenericEvent
	cache   interface {
		WaitForCacheSync(ctx context.Context) bool
	}
}

// Start implements manager.Runnable: once the cache has synced it records
// the policies to load before the replica is ready.
func (r *ModelSyncReconciler) Start(ctx context.Context) error {
	if !r.cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	reqs, err := listModelPolicies(ctx, r.Client, r.Kind)
	if err != nil {
		return err
	}
	names := make([]string, len(reqs))
	for i, req := range reqs {
		names[i] = req.String()
	}
	r.loads.expect(names)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica loads its own engine.
func (r *ModelSyncReconciler) NeedLeaderElection() bool { return false }

// Loaded reports whether every policy of the kind that existed when the
// reconciler started is loaded into the engine.
func (r *ModelSyncReconciler) Loaded() bool { return r.loads.Loaded() }

// Checker is a readiness check, as FallbackSyncReconciler.Checker.
func (r *ModelSyncReconciler) Checker(*http.Request) error {
	return r.loads.notLoaded(string(r.Kind) + " objects")
}

// Reconcile lowers and translates one policy and hands the sink its rules
// for the webhook.
func (r *ModelSyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	policy := newModelPolicy(r.Kind)
	if err := r.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.Sink.SetModelRules(model.Source{Kind: r.Kind, Namespace: req.Namespace, Name: req.Name}, nil)
			r.loads.done(req.String())
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	lowered, err := LowerModelPolicy(ctx, r.Client, policy, r.Now)
	if err != nil {
		return ctrl.Result{}, err
	}
	opts := r.Options
	if r.Effective != nil {
		opts = r.Effective()
	}
	opts = translationOptions(opts, r.Config)
	running := kyvernoRunning(r.Kyverno)
	opts.KyvernoGeneratesVAPs = running
	plan := translate.TranslatePolicy(lowered, r.Resolvers.Resolver(), opts)
	rules, holding := handOverModel(ctx, r.Client, r.Sink, lowered.Source, &plan, webhookModelRules(&lowered, &plan, running), bridgeModel(&lowered, running))
	r.Sink.SetModelRules(lowered.Source, rules)
	r.loads.done(req.String())
	return modelRequeue(&lowered, holding), nil
}

// SetupWithManager registers the reconciler; it runs on every replica.
func (r *ModelSyncReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.cache = mgr.GetCache()
	r.requeue = make(chan event.GenericEvent, 1)
	if err := mgr.Add(r); err != nil {
		return err
	}
	name := "validatingpolicysync"
	if r.Kind == model.KindNamespacedValidatingPolicy {
		name = "namespacedvalidatingpolicysync"
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		For(newModelPolicy(r.Kind), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&policiesv1.PolicyException{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
			return exceptionRequestsOf(ctx, r.Client, r.Kind, obj)
		})).
		WatchesRawSource(source.Channel(r.requeue, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			reqs, err := listModelPolicies(ctx, r.Client, r.Kind)
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "re-queueing policies")
			}
			return reqs
		}))).
		Complete(r)
}

// requeueAll re-queues every policy of the kind. It never blocks.
func (r *ModelSyncReconciler) requeueAll() {
	select {
	case r.requeue <- event.GenericEvent{Object: newModelPolicy(r.Kind)}:
	default:
	}
}

// listModelPolicies lists every policy of a policies.kyverno.io kind.
func listModelPolicies(ctx context.Context, c client.Reader, kind model.Kind) ([]reconcile.Request, error) {
	var keys []types.NamespacedName
	if kind == model.KindNamespacedValidatingPolicy {
		var list policiesv1.NamespacedValidatingPolicyList
		if err := c.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing NamespacedValidatingPolicies: %w", err)
		}
		for _, p := range list.Items {
			keys = append(keys, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	} else {
		var list policiesv1.ValidatingPolicyList
		if err := c.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing ValidatingPolicies: %w", err)
		}
		for _, p := range list.Items {
			keys = append(keys, types.NamespacedName{Name: p.Name})
		}
	}
	reqs := make([]reconcile.Request, len(keys))
	for i, k := range keys {
		reqs[i] = reconcile.Request{NamespacedName: k}
	}
	return reqs, nil
}
