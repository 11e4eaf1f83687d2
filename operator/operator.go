// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package operator wires kyvap's manager: discovery (the kind resolver and
// the single CRD watch that refreshes it), the fallback engine, the policy
// controllers and the fallback webhook. cmd/manager and the test control
// plane both build the operator with New, so tests run the real wiring.
package operator

import (
	"context"
	"fmt"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/reporter"
	"github.com/kyvap/kyvap/scan"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/vap"
	"github.com/kyvap/kyvap/webhook"
)

// Options configure the operator.
type Options struct {
	// Translate are the translation options. An empty CompatibilityVersion
	// is discovered from the API server's version.
	Translate translate.Options
	// Webhook, when set, serves the fallback webhook that enforces the rules
	// not expressed as VAPs; when nil such rules are reported NOT ENFORCED.
	Webhook *webhook.Options
	// BackgroundScanInterval rescans every resource kyvap reports on this
	// often (0: only when a policy or the resource changes).
	BackgroundScanInterval time.Duration
	// DisableBackgroundScan turns kyvap's PolicyReports off: no background
	// scan (and none of its caches of the scanned kinds, the manager's
	// largest memory use) and no admission results. Enforcement is not
	// affected.
	DisableBackgroundScan bool
	// BackgroundScanWorkers scan resources at once (0: reporter.Workers).
	BackgroundScanWorkers int
	// BackgroundScanMetadataOnly caches only the scanned resources'
	// metadata and reads each one when it is evaluated (reporter.Reporter's
	// MetadataOnly).
	BackgroundScanMetadataOnly bool
	// ShutdownDrain is how long the webhook keeps answering, with every
	// response closing its connection and readiness failing, after Start's
	// context ends and before the manager stops (0: stop at once).
	ShutdownDrain time.Duration
	// ResourceReads lets kyvap's engine evaluate Kyverno's resource library
	// (resource.Get, resource.List) by reading from the API server with
	// kyvap's own RBAC, which must then grant get and list on what the
	// policies read. Off, rules using it are NOT ENFORCED by kyvap.
	ResourceReads bool
	// KyvernoConfig says where Kyverno's global configuration is read; the
	// zero value reads Kyverno's ConfigMap kyverno/kyverno, else the chart's
	// defaults.
	KyvernoConfig KyvernoConfigOptions
}

// Operator is kyvap's manager with everything registered.
type Operator struct {
	// Manager runs the controllers; Start starts it.
	Manager ctrl.Manager
	// Controllers are the policy controllers.
	Controllers *controllers.Controllers
	// Engine is the fallback engine when the webhook serves, else nil.
	Engine *engine.Engine
	// Kinds is the discovery-backed kind resolver.
	Kinds *Kinds
	// Kyverno detects Kyverno's admission controller.
	Kyverno *Kyverno
	// KyvernoConfig is Kyverno's global configuration in force.
	KyvernoConfig *KyvernoConfig
	// Reports writes the PolicyReports (background scans and admission
	// results); nil with DisableBackgroundScan.
	Reports *reporter.Reporter

	webhook *webhook.Webhook
	// Options are the options in effect (with the discovered CEL
	// compatibility version).
	Options Options
}

// New builds the manager from cfg and managerOptions (kyvap sets its Cache
// and WebhookServer) and registers every kyvap component with it.
func New(ctx context.Context, cfg *rest.Config, managerOptions ctrl.Options, opts Options) (*Operator, error) {
	var fallbackWebhook *webhook.Webhook
	if opts.Webhook != nil {
		var err error
		if fallbackWebhook, err = webhook.New(*opts.Webhook); err != nil {
			return nil, err
		}
		managerOptions.WebhookServer = fallbackWebhook.Server()
	}
	managerOptions.Cache = controllers.CacheOptions()
	mgr, err := ctrl.NewManager(cfg, managerOptions)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kinds, err := NewKinds(dc)
	if err != nil {
		return nil, err
	}
	if opts.Translate.CompatibilityVersion, err = compatibilityVersion(dc, opts.Translate.CompatibilityVersion); err != nil {
		return nil, err
	}
	op := &Operator{Manager: mgr, Kinds: kinds, Kyverno: &Kyverno{}, Options: opts, webhook: fallbackWebhook}
	var sink controllers.FallbackSink // nil: no webhook, fallback rules are reported not enforced
	var resources cellib.ResourceReader
	if opts.ResourceReads {
		resources = apiResources{reader: mgr.GetAPIReader(), mapper: mgr.GetRESTMapper()}
	}
	if fallbackWebhook != nil {
		op.Engine = engine.New()
		sink = op.Engine
		if resources != nil {
			op.Engine.SetResourceReader(resources)
			opts.Translate.Engine.Resources = true
		}
	}
	if opts.KyvernoConfig.Kyverno.Name == "" && opts.KyvernoConfig.Own.Name == "" {
		opts.KyvernoConfig.Kyverno = types.NamespacedName{Namespace: DefaultKyvernoConfigNamespace, Name: DefaultKyvernoConfigName}
	}
	if op.KyvernoConfig, err = setupKyvernoConfig(ctx, mgr, cfg, opts.KyvernoConfig); err != nil {
		return nil, err
	}
	if op.Engine != nil {
		op.Engine.SetKyvernoConfig(op.KyvernoConfig.Get())
	}
	var coverage controllers.WebhookCoverage // nil: no webhook, stale VAPs go at once
	var leaderOptions *LeaderOptions
	var syncOptions func() translate.Options
	if fallbackWebhook != nil {
		coverage = fallbackWebhook
		if opts.Webhook.Namespace != "" {
			if leaderOptions, err = setupLeaderOptions(mgr, cfg, opts.Webhook.Namespace, opts.Translate); err != nil {
				return nil, err
			}
			syncOptions = leaderOptions.Effective
		}
	}
	if op.Controllers, err = controllers.Setup(ctx, mgr, controllers.Config{Resolvers: kinds, Fallback: sink, Kyverno: op.Kyverno, Coverage: coverage, Options: opts.Translate, SyncOptions: syncOptions, KyvernoConfig: op.KyvernoConfig.Get}); err != nil {
		return nil, err
	}
	if leaderOptions != nil {
		leaderOptions.listeners = []func(){op.Controllers.RequeueAll}
	}
	// A new configuration changes every VAP and what the webhook skips.
	if op.Engine != nil {
		op.KyvernoConfig.listeners = append(op.KyvernoConfig.listeners, op.Engine.SetKyvernoConfig)
	}
	op.KyvernoConfig.listeners = append(op.KyvernoConfig.listeners, func(*kyverno.Config) { op.Controllers.RequeueAll() })
	listeners := []func(){op.Controllers.RequeueAll}
	// The webhook's results go into the reports (once their CRDs are found).
	admissionResults := &reporter.AdmissionRecorder{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
	if fallbackWebhook != nil {
		fallbackWebhook.EngineLoaded = op.Controllers.Loaded
		if !opts.DisableBackgroundScan {
			fallbackWebhook.RecordAdmission = admissionResults.Record
		}
		if err := fallbackWebhook.Setup(mgr, op.Engine, kinds); err != nil {
			return nil, err
		}
		listeners = append(listeners, fallbackWebhook.KindsChanged)
	}
	// Background scans and PolicyReports (leader only; nothing without the
	// wgpolicyk8s.io CRDs).
	translateOpts := opts.Translate
	scanner := scan.New()
	if resources != nil {
		scanner.SetResourceReader(resources)
	}
	reports := &reporter.Reporter{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Resolvers: kinds, Kyverno: op.Kyverno,
		Options: func() translate.Options { return translateOpts }, Scanner: scanner,
		Config: op.KyvernoConfig.Get, Interval: opts.BackgroundScanInterval, Workers: opts.BackgroundScanWorkers, Admission: admissionResults,
		MetadataOnly: opts.BackgroundScanMetadataOnly,
		LowerModel: func(ctx context.Context, policy client.Object) (model.Policy, error) {
			return controllers.LowerModelPolicy(ctx, mgr.GetClient(), policy, nil)
		},
	}
	kyvernoListeners := []func(){op.Controllers.RequeueAll}
	if !opts.DisableBackgroundScan {
		if err := reports.SetupWithManager(mgr); err != nil {
			return nil, err
		}
		op.Reports = reports
		// CRDs installed later start the reports then.
		listeners = append(listeners, reports.CRDsChanged)
		kyvernoListeners = append(kyvernoListeners, reports.KyvernoChanged)
	}
	// CRDs installed later start the ValidatingPolicy controllers then.
	listeners = append(listeners, op.Controllers.Validating.CRDsChanged)
	watch := &crdWatch{kinds: kinds, listeners: listeners}
	if err := watch.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	// Whether Kyverno runs changes who enforces the fallback rules.
	op.Kyverno.listeners = kyvernoListeners
	if err := op.Kyverno.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	return op, mgr.AddReadyzCheck("readyz", healthz.Ping)
}

// NewScheme returns the scheme the operator's clients need: the built-in
// Kubernetes kinds, kyvap's Kyverno types, Kyverno's policies.kyverno.io/v1
// types (ValidatingPolicy, ...) and CustomResourceDefinitions.
func NewScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kyvernov1.AddToScheme(scheme))
	utilruntime.Must(kyvernov2.AddToScheme(scheme))
	utilruntime.Must(policiesv1.Install(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	return scheme
}

// Start runs the manager until ctx ends.
//
// When ctx ends, the webhook first drains for Options.ShutdownDrain (it
// keeps answering, closing every connection after its response, and
// reports not ready), so that no request the API server has already sent,
// or sends on a kept-alive connection, fails; then the manager stops.
func (op *Operator) Start(ctx context.Context) error {
	if op.webhook == nil || op.Options.ShutdownDrain <= 0 {
		return op.Manager.Start(ctx)
	}
	managerCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-managerCtx.Done():
			return
		}
		op.webhook.Drain()
		ctrl.Log.WithName("shutdown").Info("draining the webhook before stopping", "drain", op.Options.ShutdownDrain)
		drained := time.NewTimer(op.Options.ShutdownDrain)
		defer drained.Stop()
		select {
		case <-drained.C:
		case <-managerCtx.Done():
		}
		stop()
	}()
	return op.Manager.Start(managerCtx)
}

// Draining reports whether the webhook is shutting down (and reports not
// ready): a load balancer sends it no new connection.
func (op *Operator) Draining() bool { return op.webhook != nil && op.webhook.Draining() }

// compatibilityVersion is the configured CEL compatibility version, or the
// one of the API server, which compiles the VAPs: translate for its CEL
// environment, not for the newest this build knows.
func compatibilityVersion(dc discovery.ServerVersionInterface, configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("discovering the API server's version for its CEL compatibility version (set it with --cel-compatibility-version): %w", err)
	}
	v, err := vap.CompatibilityVersionOfServer(info.GitVersion)
	if err != nil {
		return "", fmt.Errorf("%w (set the CEL compatibility version with --cel-compatibility-version)", err)
	}
	ctrl.Log.WithName("setup").Info("translating for the API server's CEL compatibility version", "serverVersion", info.GitVersion, "celCompatibilityVersion", v)
	return v, nil
}

// crdWatch is the one watch on CustomResourceDefinitions: when one appears,
// changes (a CRD is served only once Established) or goes, it refreshes
// discovery once and tells every component whose result depends on kinds.
// It runs on every replica: each one translates for its own engine.
type crdWatch struct {
	kinds     *Kinds
	listeners []func()
}

// crdWatchKey is the single work item every CRD event maps to, so that a
// burst of CRD changes costs one discovery refresh.
var crdWatchKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "customresourcedefinitions"}}

func (w *crdWatch) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("kinds").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		// Metadata only: CRD schemas can be large and kyvap needs discovery, not them.
		Watches(&apiextensionsv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{crdWatchKey}
		}), builder.OnlyMetadata).
		Complete(w)
}

// Reconcile refreshes discovery and notifies the listeners.
func (w *crdWatch) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if err := w.kinds.Refresh(ctx); err != nil {
		log.FromContext(ctx).Error(err, "refreshing discovery after a CRD change")
		return reconcile.Result{}, err
	}
	for _, notify := range w.listeners {
		notify()
	}
	return reconcile.Result{}, nil
}
