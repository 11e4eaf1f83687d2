// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

// FallbackSyncReconciler feeds the fallback rules of every policy to the
// local webhook on every replica. Admission needs no leader: each replica
// serves the webhook, so each one translates the policies itself (the
// translation is deterministic, so all replicas enforce the same rules).
// It writes nothing to the API server.
type FallbackSyncReconciler struct {
	client.Client
	Resolvers ResolverSource
	Sink      FallbackSink
	// Kyverno says whether Kyverno's admission controller runs; nil: no.
	Kyverno KyvernoPresence
	Options translate.Options
	// Effective, when set, returns the options to translate with instead
	// of Options: the leader's, so that this replica's engine enforces what
	// the leader did not turn into VAPs.
	Effective func() translate.Options
	// Config returns Kyverno's global configuration in force; nil keeps
	// Options.KyvernoConfig.
	Config func() *kyverno.Config

	// plans is shared with the ClusterPolicyReconciler of the same manager
	// (Setup does it): on the leader both translate the same inputs, and a
	// shared cache makes the second translation free.
	plans *planCache
	// kindsChanged re-queues every policy (requeueAll).
	kindsChanged chan event.TypedGenericEvent[*kyvernov1.ClusterPolicy]

	loads loadTracker
	// namespaced: the cluster serves kyverno.io/v1 Policy, whose fallback
	// rules are loaded too.
	namespaced bool
	cache      interface {
		WaitForCacheSync(ctx context.Context) bool
	}
}

// loadTracker tracks the policies that existed when the cache synced and
// are not loaded into the engine yet: the replica is not ready until there
// are none.
type loadTracker struct {
	mu      sync.Mutex
	pending map[string]bool
	// loaded are policies loaded before Start listed them.
	loaded map[string]bool
	synced atomic.Bool
}

// expect records the policies to load before the replica is ready, minus
// those already loaded.
func (t *loadTracker) expect(names []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = map[string]bool{}
	for _, n := range names {
		if !t.loaded[n] {
			t.pending[n] = true
		}
	}
	t.loaded = nil
	t.synced.Store(len(t.pending) == 0)
}

// done records that a policy is loaded (or gone).
func (t *loadTracker) done(name string) {
	if t.synced.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		// Start has not listed yet: remember, so it does not wait for it.
		if t.loaded == nil {
			t.loaded = map[string]bool{}
		}
		t.loaded[name] = true
		return
	}
	delete(t.pending, name)
	if len(t.pending) == 0 {
		t.synced.Store(true)
	}
}

// Loaded reports whether every expected policy is loaded.
func (t *loadTracker) Loaded() bool { return t.synced.Load() }

// notLoaded says what the replica still waits for, or nil.
func (t *loadTracker) notLoaded(what string) error {
	if t.synced.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		return errors.New("waiting for the policy cache to sync")
	}
	return fmt.Errorf("%d %s not loaded into the fallback engine yet", len(t.pending), what)
}

// Start implements manager.Runnable: once the cache has synced it records
// the policies to load before the replica may receive admission traffic.
func (r *FallbackSyncReconciler) Start(ctx context.Context) error {
	if !r.cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	var policies kyvernov1.ClusterPolicyList
	if err := r.List(ctx, &policies); err != nil {
		return fmt.Errorf("listing ClusterPolicies: %w", err)
	}
	names := make([]string, len(policies.Items))
	for i, p := range policies.Items {
		names[i] = p.Name
	}
	if r.namespaced {
		var namespaced kyvernov1.PolicyList
		if err := r.List(ctx, &namespaced); err != nil {
			return fmt.Errorf("listing Policies: %w", err)
		}
		for _, p := range namespaced.Items {
			names = append(names, clusterpolicy.PolicyKey(p.Namespace, p.Name))
		}
	}
	r.loads.expect(names)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica loads its own engine.
func (r *FallbackSyncReconciler) NeedLeaderElection() bool { return false }

// Loaded reports whether every policy that existed at start-up is loaded
// into the engine: until then the engine's rules are a subset of what it
// will enforce.
func (r *FallbackSyncReconciler) Loaded() bool { return r.loads.Loaded() }

// Checker is a readiness check: a replica is ready to judge admission
// requests once every policy that existed at start-up is loaded into its
// engine, so that a new replica never admits unchecked during a rollout.
func (r *FallbackSyncReconciler) Checker(*http.Request) error {
	return r.loads.notLoaded("ClusterPolicies")
}

// Reconcile translates one policy and hands its fallback rules to the sink.
func (r *FallbackSyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != "" {
		return r.reconcileNamespaced(ctx, req)
	}
	policy := &kyvernov1.ClusterPolicy{}
	if err := r.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.Sink.SetFallbackRules(req.Name, nil)
			r.plans.forget(req.Name)
			r.loads.done(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	var exceptions kyvernov2.PolicyExceptionList
	if err := r.List(ctx, &exceptions, client.MatchingFields{exceptionPolicyIndex: policy.Name}); err != nil {
		return ctrl.Result{}, err
	}
	opts := r.Options
	if r.Effective != nil {
		opts = r.Effective()
	}
	input, resolver, opts := clusterpolicy.Input{Policy: policy, Exceptions: exceptions.Items}, r.Resolvers.Resolver(), translationOptions(opts, r.Config)
	plan, err := r.plans.translate(ctx, input, resolver, opts)
	if err != nil {
		return ctrl.Result{}, err
	}
	running := kyvernoRunning(r.Kyverno)
	rules, holding := handOver(ctx, r.Client, r.Sink, policy.Name, &plan, fallbackRules(&plan, running), bridgeFor(ctx, r.plans, input, resolver, opts, running))
	r.Sink.SetFallbackRules(policy.Name, rules)
	r.loads.done(policy.Name)
	r.plans.hold(holderSync, policy.Name, holding)
	if holding {
		// The rule stays in this replica's engine until its VAPs exist.
		return ctrl.Result{RequeueAfter: handoverPoll}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileNamespaced is Reconcile for a namespaced Policy.
func (r *FallbackSyncReconciler) reconcileNamespaced(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := clusterpolicy.PolicyKey(req.Namespace, req.Name)
	policy := &kyvernov1.Policy{}
	if err := r.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.Sink.SetFallbackRules(key, nil)
			r.plans.forget(key)
			r.loads.done(key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	var exceptions kyvernov2.PolicyExceptionList
	if err := r.List(ctx, &exceptions, client.MatchingFields{exceptionPolicyIndex: key}); err != nil {
		return ctrl.Result{}, err
	}
	opts := r.Options
	if r.Effective != nil {
		opts = r.Effective()
	}
	input, resolver, opts := clusterpolicy.PolicyInput(policy, exceptions.Items), r.Resolvers.Resolver(), translationOptions(opts, r.Config)
	plan, err := r.plans.translate(ctx, input, resolver, opts)
	if err != nil {
		return ctrl.Result{}, err
	}
	running := kyvernoRunning(r.Kyverno)
	rules, holding := handOver(ctx, r.Client, r.Sink, key, &plan, fallbackRules(&plan, running), bridgeFor(ctx, r.plans, input, resolver, opts, running))
	r.Sink.SetFallbackRules(key, rules)
	r.loads.done(key)
	r.plans.hold(holderSync, key, holding)
	if holding {
		return ctrl.Result{RequeueAfter: handoverPoll}, nil
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler; it runs on every replica. It
// reads the PolicyException index that Setup registers.
func (r *FallbackSyncReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.plans == nil {
		r.plans = &planCache{}
	}
	r.cache = mgr.GetCache()
	r.kindsChanged = make(chan event.TypedGenericEvent[*kyvernov1.ClusterPolicy], 1)
	if err := mgr.Add(r); err != nil {
		return err
	}
	if r.namespaced = servesNamespacedPolicies(mgr); r.namespaced {
		err := ctrl.NewControllerManagedBy(mgr).
			Named("fallbacksync-policies").
			WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
			For(&kyvernov1.Policy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
			Watches(&kyvernov2.PolicyException{}, handler.EnqueueRequestsFromMapFunc(namespacedExceptionRequests)).
			Complete(r)
		if err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("fallbacksync").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		For(&kyvernov1.ClusterPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&kyvernov2.PolicyException{}, handler.EnqueueRequestsFromMapFunc(exceptionRequests)).
		WatchesRawSource(source.Channel(r.kindsChanged, handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *kyvernov1.ClusterPolicy) []reconcile.Request {
			return append(allPolicies(ctx, r.Client), r.namespacedPolicies(ctx)...)
		}))).
		Complete(r)
}

// requeueAll re-queues every policy (discovery changed). It never blocks.
func (r *FallbackSyncReconciler) requeueAll() { signal(r.kindsChanged) }

// servesNamespacedPolicies reports whether the cluster serves Kyverno's
// namespaced kyverno.io/v1 Policy (it comes with the ClusterPolicy CRD in
// Kyverno's CRDs; checked once at start-up).
func servesNamespacedPolicies(mgr ctrl.Manager) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "kyverno.io", Kind: "Policy"}, "v1")
	return err == nil
}

// namespacedPolicies lists the namespaced Policies for a re-queue (none
// when the cluster does not serve them).
func (r *FallbackSyncReconciler) namespacedPolicies(ctx context.Context) []reconcile.Request {
	if !r.namespaced {
		return nil
	}
	return allNamespacedPolicies(ctx, r.Client)
}
