package controllers

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// Setup registers the ClusterPolicy reconciler with the manager, backed by
// discovery for kinds, and returns it. The manager must use CacheOptions.
// Fallback rules go to sink; a nil sink keeps them in a FallbackStore (no
// webhook: they are reported not enforced). A sink other than the store is
// also kept fed on every replica by a FallbackSyncReconciler, because every
// replica serves admission.
// Reconciles run concurrently (per policy) as set by the manager's
// controller options (MaxConcurrentReconciles).
func Setup(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts translate.Options, sink FallbackSink) (*ClusterPolicyReconciler, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	resolvers, err := NewDiscoveryResolvers(dc)
	if err != nil {
		return nil, err
	}
	if opts.CompatibilityVersion == "" {
		// The cluster's API server compiles the VAPs: translate for its CEL
		// environment, not for the newest this build knows.
		info, err := dc.ServerVersion()
		if err != nil {
			return nil, fmt.Errorf("discovering the API server's version for its CEL compatibility version (set it with --cel-compatibility-version): %w", err)
		}
		if opts.CompatibilityVersion, err = translate.CompatibilityVersionOfServer(info.GitVersion); err != nil {
			return nil, fmt.Errorf("%w (set the CEL compatibility version with --cel-compatibility-version)", err)
		}
		ctrl.Log.WithName("setup").Info("translating for the API server's CEL compatibility version", "serverVersion", info.GitVersion, "celCompatibilityVersion", opts.CompatibilityVersion)
	}
	r := &ClusterPolicyReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kyvap"),
		Resolvers: resolvers,
		Fallback:  sink,
		Options:   opts,
	}
	if sink == nil {
		r.Fallback = NewFallbackStore()
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	if sink == nil {
		return r, nil
	}
	sync := &FallbackSyncReconciler{Client: mgr.GetClient(), Resolvers: resolvers, Sink: sink, Options: opts, plans: &r.plans}
	if err := sync.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return r, mgr.AddReadyzCheck("fallback-rules-loaded", sync.Checker)
}
