// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// CacheOptions keeps only kyvap's own VAPs and bindings in the manager's
// cache: a cluster may hold many others, and kyvap needs to see a foreign
// one only to refuse to overwrite it (it reads those from the API server).
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{translate.LabelManagedBy: translate.ManagedByValue})
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&admissionregistrationv1.ValidatingAdmissionPolicy{}:        {Label: managed},
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}: {Label: managed},
		},
		// kyvap never reads managedFields; server-side applied objects carry
		// large ones, which would otherwise dominate the cache's memory.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// Config is what the policy controllers take from the operator's wiring.
type Config struct {
	// Resolvers gives the current kind resolver (discovery).
	Resolvers ResolverSource
	// Fallback receives the rules kyvap's webhook enforces. Nil means no
	// webhook serves: the rules are kept in a FallbackStore and reported not
	// enforced. A real sink is also fed on every replica (each one serves
	// admission) by a FallbackSyncReconciler.
	Fallback FallbackSink
	// Kyverno says whether Kyverno's admission controller runs; nil: never.
	Kyverno KyvernoPresence
	// Coverage says when the webhook configuration covers a rule, so that a
	// rule's VAPs go only after (nil without a webhook).
	Coverage WebhookCoverage
	// Options are the translation options.
	Options translate.Options
	// SyncOptions, when set, returns the translation options every
	// replica's engine follows (the leader's), instead of Options.
	SyncOptions func() translate.Options
	// KyvernoConfig returns Kyverno's global configuration in force, which
	// replaces Options.KyvernoConfig on every translation; nil keeps it.
	KyvernoConfig func() *kyverno.Config
}

// Controllers are the policy controllers of one manager.
type Controllers struct {
	// Policies translates, applies and reports on the leader.
	Policies *ClusterPolicyReconciler
	// Sync loads fallback rules on every replica; nil without a webhook.
	Sync *FallbackSyncReconciler
	// Namespaced translates Kyverno's namespaced kyverno.io/v1 Policies;
	// nil when the cluster does not serve them at start-up.
	Namespaced *NamespacedPolicyReconciler
	// Validating translates ValidatingPolicies and
	// NamespacedValidatingPolicies (policies.kyverno.io) once their CRDs are
	// served; the CRD watch calls its CRDsChanged.
	Validating *ValidatingPolicies
}

// RequeueAll re-queues every policy on both controllers: discovery changed
// (a kind that did not resolve may resolve now, or the other way round),
// Kyverno's admission controller appeared or went away, or Kyverno's global
// configuration changed. It never blocks.
func (c *Controllers) RequeueAll() {
	c.Policies.requeueAll()
	c.Validating.requeueAll()
	if c.Namespaced != nil {
		c.Namespaced.requeueAll()
	}
	if c.Sync != nil {
		c.Sync.requeueAll()
	}
}

// Setup registers the policy controllers, and the indexes they share, with a
// manager that uses CacheOptions. Reconciles run concurrently (per policy)
// as set by the manager's controller options (MaxConcurrentReconciles).
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) (*Controllers, error) {
	if err := registerIndexes(ctx, mgr); err != nil {
		return nil, err
	}
	enforcing := cfg.Fallback != nil
	if !enforcing {
		cfg.Fallback = NewFallbackStore()
	}
	plans := &planCache{}
	c := &Controllers{Policies: &ClusterPolicyReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kyvap"),
		Resolvers: cfg.Resolvers,
		Fallback:  cfg.Fallback,
		Kyverno:   cfg.Kyverno,
		Coverage:  cfg.Coverage,
		Options:   cfg.Options,
		Config:    cfg.KyvernoConfig,
		plans:     plans,
	}}
	if err := c.Policies.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if servesNamespacedPolicies(mgr) {
		c.Namespaced = &NamespacedPolicyReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kyvap"),
			Resolvers: cfg.Resolvers, Fallback: cfg.Fallback, Kyverno: cfg.Kyverno, Coverage: cfg.Coverage,
			Options: cfg.Options, Config: cfg.KyvernoConfig, plans: plans,
		}
		if err := c.Namespaced.SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}
	c.Validating = &ValidatingPolicies{mgr: mgr, template: ValidatingPolicyReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kyvap"),
		Resolvers: cfg.Resolvers,
		Kyverno:   cfg.Kyverno,
		Options:   cfg.Options,
		Config:    cfg.KyvernoConfig,
		Sink:      cfg.Fallback,
		Coverage:  cfg.Coverage,
	}}
	if enforcing {
		c.Validating.newSync = func(kind model.Kind) *ModelSyncReconciler {
			return &ModelSyncReconciler{Client: mgr.GetClient(), Resolvers: cfg.Resolvers, Sink: cfg.Fallback, Kyverno: cfg.Kyverno, Options: cfg.Options, Effective: cfg.SyncOptions, Config: cfg.KyvernoConfig, Kind: kind}
		}
	}
	if err := c.Validating.start(); err != nil {
		return nil, err
	}
	if !enforcing {
		return c, nil
	}
	c.Sync = &FallbackSyncReconciler{Client: mgr.GetClient(), Resolvers: cfg.Resolvers, Sink: cfg.Fallback, Kyverno: cfg.Kyverno, Options: cfg.Options, Effective: cfg.SyncOptions, Config: cfg.KyvernoConfig, plans: plans}
	if err := c.Sync.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("validatingpolicies-loaded", c.Validating.Checker); err != nil {
		return nil, err
	}
	return c, mgr.AddReadyzCheck("fallback-rules-loaded", c.Sync.Checker)
}

// Loaded reports whether this replica's engine holds every policy that
// existed when its loaders started (ClusterPolicies and policies.kyverno.io
// kinds).
func (c *Controllers) Loaded() bool {
	return (c.Sync == nil || c.Sync.Loaded()) && c.Validating.Loaded()
}

// registerIndexes adds the cache indexes the controllers look up: generated
// objects by owner, PolicyExceptions by the policies they name.
func registerIndexes(ctx context.Context, mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}} {
		if err := indexer.IndexField(ctx, obj, ownerIndex, controllerUID); err != nil {
			return err
		}
	}
	return indexer.IndexField(ctx, &kyvernov2.PolicyException{}, exceptionPolicyIndex, exceptionPolicies)
}
