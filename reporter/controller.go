// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package reporter

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/scan"
	"github.com/kyvap/kyvap/translate"
)

// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports;clusterpolicyreports,verbs=get;list;watch;create;update;patch;delete

// resourceKey names one resource to scan.
type resourceKey struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

// Reporter keeps a PolicyReport per existing resource of the kinds the
// scanned rules match: it rescans a kind's resources when a policy
// changes, and a resource when it changes. It runs on the leader.
type Reporter struct {
	Client    client.Client
	Reader    client.Reader // direct reads of reports
	Resolvers interface{ Resolver() kyverno.KindResolver }
	Kyverno   interface{ Running() bool }
	Options   func() translate.Options
	Scanner   *scan.Scanner
	// Config returns Kyverno's global configuration: resources its
	// resource filters name are not scanned, as in Kyverno's background
	// scans (nil: none).
	Config func() *kyverno.Config
	// Interval rescans every watched resource this often (0: only on
	// changes), as Kyverno's background scan interval.
	Interval time.Duration
	// Workers scan resources at once (0: Workers).
	Workers int
	// MetadataOnly caches only the metadata of the scanned kinds (no
	// managedFields: a few hundred bytes a resource, whatever its size) and
	// reads each resource from the API server (Reader) when it is
	// evaluated: the manager's memory no longer grows with the size of the
	// scanned objects, for one GET per evaluation.
	MetadataOnly bool
	// Admission, when set, writes the webhook's results into the same
	// reports once the CRDs are found.
	Admission *AdmissionRecorder
	// LowerModel lowers a ValidatingPolicy or NamespacedValidatingPolicy
	// with its CEL PolicyExceptions; nil scans none.
	LowerModel func(ctx context.Context, policy client.Object) (model.Policy, error)

	setupMu     sync.Mutex
	mgr         ctrl.Manager
	started     bool
	saidMissing bool
	// modelStarted: the ValidatingPolicy scans are registered;
	// modelChanged re-evaluates their policies (KyvernoChanged).
	modelStarted bool
	modelChanged []chan event.GenericEvent

	mu        sync.Mutex
	watched   map[schema.GroupVersionKind]schema.GroupVersionResource
	forbidden map[schema.GroupVersionResource]bool
	resources controller.TypedController[resourceKey]
	rescan    chan event.TypedGenericEvent[resourceKey]
	// kyvernoChanged re-evaluates every policy: whether Kyverno runs
	// decides which policies are kyvap's to scan.
	kyvernoChanged chan event.GenericEvent
	// objects caches the scanned kinds, without managedFields (rules
	// judge what a resource is, not who wrote which field): a cache of its
	// own, which informers for kinds no rule needs never enter.
	objects cache.Cache
	// reports caches the metadata of kyvap's reports (not their results):
	// a rescan that finds nothing new compares fingerprints and reads
	// nothing.
	reports cache.Cache
	// last counts the results last written per resource, for the metrics
	// (counts, not results: 10,000 resources × 50 rules stay small).
	last map[resourceKey][]resultCount

	// scannedMu guards scannedFrom: by policy key, what the scanner's
	// rules of the policy were translated from (scanInputs). A policy's
	// events are mostly its status being written, and translating it again
	// (twice: its VAP and engine forms) would compile every CEL expression
	// again for rules that cannot have changed.
	scannedMu   sync.Mutex
	scannedFrom map[string]string
}

// resultCount is how many results of a policy had one outcome.
type resultCount struct {
	policy string
	result reports.Status
	n      int
}

// countResults aggregates results by policy and outcome.
func countResults(results []reports.Result) []resultCount {
	var out []resultCount
next:
	for _, r := range results {
		for i := range out {
			if out[i].policy == r.Policy && out[i].result == r.Result {
				out[i].n++
				continue next
			}
		}
		out = append(out, resultCount{policy: r.Policy, result: r.Result, n: 1})
	}
	return out
}

// Workers is how many resources are scanned at once by default: report
// writes, not evaluation, bound a full scan.
const Workers = 8

// rescanDelay gathers the rescans of policies created or changed together
// (a kubectl apply of many policies) into one scan of each resource.
const rescanDelay = time.Second

var policyResults = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kyvap_policy_results",
	Help: "Results of kyvap's background scans in its PolicyReports, per policy and result (pass, fail, error, skip).",
}, []string{"policy", "result"})

var (
	scans = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kyvap_background_scans_total",
		Help: "Resources evaluated by kyvap's background scans.",
	})
	reportWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kyvap_report_writes_total",
		Help: "Writes of kyvap's PolicyReports, per process (background scan, admission review) and action (create, update, delete).",
	}, []string{"process", "action"})
	forbiddenKinds = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kyvap_background_scan_forbidden_kinds",
		Help: "Kinds scanned rules match that kyvap may not list and watch: they are not scanned.",
	})
)

func init() {
	metrics.Registry.MustRegister(policyResults, scans, reportWrites, forbiddenKinds)
	// Every series exists from the start at 0 (dashboards, alerts).
	for _, process := range []string{reports.ProcessBackground, reports.ProcessAdmission} {
		for _, a := range []string{"create", "update", "delete"} {
			reportWrites.WithLabelValues(process, a)
		}
	}
}

// count moves the metrics from a resource's previous results to its new ones.
func (r *Reporter) count(key resourceKey, results []reports.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := countResults(results)
	if slices.Equal(r.last[key], counts) {
		return
	}
	for _, old := range r.last[key] {
		policyResults.WithLabelValues(old.policy, string(old.result)).Sub(float64(old.n))
	}
	for _, c := range counts {
		policyResults.WithLabelValues(c.policy, string(c.result)).Add(float64(c.n))
	}
	if len(counts) == 0 {
		delete(r.last, key)
	} else {
		r.last[key] = counts
	}
}

// periodic rescans every watched resource every Interval.
type periodic struct{ r *Reporter }

func (p periodic) NeedLeaderElection() bool { return true }

func (p periodic) Start(ctx context.Context) error {
	ticker := time.NewTicker(p.r.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			p.r.enqueueAll(ctx, p.r.allWatched())
		}
	}
}

// SetupWithManager registers the policy and resource controllers, when the
// cluster serves the wgpolicyk8s.io CRDs; without them it logs once and
// scans nothing (enforcement is not affected).
func (r *Reporter) SetupWithManager(mgr ctrl.Manager) error {
	r.setupMu.Lock()
	defer r.setupMu.Unlock()
	r.mgr = mgr
	return r.setup()
}

// CRDsChanged starts the reports when their CRDs appear after kyvap
// started (a CRD watch calls it on every CRD change).
func (r *Reporter) CRDsChanged() {
	r.setupMu.Lock()
	defer r.setupMu.Unlock()
	if r.mgr == nil {
		return
	}
	if r.started {
		if err := r.setupModel(); err != nil {
			ctrl.Log.WithName("reports").Error(err, "scanning ValidatingPolicies after their CRDs appeared")
		}
		return
	}
	if err := r.setup(); err != nil {
		ctrl.Log.WithName("reports").Error(err, "starting the PolicyReports after their CRDs appeared")
	}
}

// KyvernoChanged re-evaluates which policies kyvap scans when Kyverno's
// admission controller appears or goes (it scans the policies Kyverno does
// not). It never blocks.
func (r *Reporter) KyvernoChanged() {
	r.setupMu.Lock()
	channels := append([]chan event.GenericEvent{r.kyvernoChanged}, r.modelChanged...)
	r.setupMu.Unlock()
	for _, ch := range channels {
		if ch == nil {
			continue
		}
		select {
		case ch <- event.GenericEvent{Object: &kyvernov1.ClusterPolicy{}}:
		default: // one pending already stands for it
		}
	}
}

// setup registers everything once the CRDs are served.
func (r *Reporter) setup() error {
	mgr := r.mgr
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "wgpolicyk8s.io", Kind: reports.KindPolicyReport}, "v1alpha2"); err != nil {
		if !r.saidMissing {
			r.saidMissing = true
			ctrl.Log.WithName("reports").Info("the wgpolicyk8s.io PolicyReport CRDs are not installed: kyvap writes no PolicyReports until they are (enforcement is not affected)", "error", err.Error())
		}
		return nil
	}
	// Once: a failure below is returned (at start-up, the manager stops),
	// never half-registered twice.
	r.started = true
	if r.saidMissing {
		ctrl.Log.WithName("reports").Info("the wgpolicyk8s.io PolicyReport CRDs are installed: kyvap writes PolicyReports")
	}
	if r.Admission != nil {
		r.Admission.enable()
		if err := mgr.Add(r.Admission); err != nil {
			return err
		}
	}
	r.watched = map[schema.GroupVersionKind]schema.GroupVersionResource{}
	r.forbidden = map[schema.GroupVersionResource]bool{}
	r.last = map[resourceKey][]resultCount{}
	var err error
	// Both caches are read only (scans marshal objects, writes build new
	// ones): no deep copy per read.
	r.objects, err = cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform:             cache.TransformStripManagedFields(),
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(r.objects); err != nil {
		return err
	}
	r.reports, err = cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultLabelSelector:         labels.SelectorFromSet(labels.Set{reports.LabelManagedBy: reports.ManagedByValue}),
		DefaultTransform:             cache.TransformStripManagedFields(),
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(r.reports); err != nil {
		return err
	}
	if r.Interval > 0 {
		if err := mgr.Add(periodic{r}); err != nil {
			return err
		}
	}
	r.rescan = make(chan event.TypedGenericEvent[resourceKey], 1024)
	r.kyvernoChanged = make(chan event.GenericEvent, 1)
	r.resources, err = controller.NewTyped[resourceKey]("background-scan", mgr, controller.TypedOptions[resourceKey]{
		Reconciler:              reconcile.TypedFunc[resourceKey](r.reconcileResource),
		MaxConcurrentReconciles: cmp.Or(r.Workers, Workers),
	})
	if err != nil {
		return err
	}
	if err := r.resources.Watch(source.TypedChannel[resourceKey, resourceKey](r.rescan, handler.TypedFuncs[resourceKey, resourceKey]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[resourceKey], q workqueue.TypedRateLimitingInterface[resourceKey]) {
			q.AddAfter(e.Object, rescanDelay)
		},
	})); err != nil {
		return err
	}
	if err := r.setupModel(); err != nil {
		return err
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "kyverno.io", Kind: "Policy"}, "v1"); err == nil {
		changed := make(chan event.GenericEvent, 1)
		r.modelChanged = append(r.modelChanged, changed)
		err := ctrl.NewControllerManagedBy(mgr).Named("background-scan-namespaced-policies").For(&kyvernov1.Policy{}).
			WatchesRawSource(source.Channel(changed, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
				var policies kyvernov1.PolicyList
				if err := r.Client.List(ctx, &policies); err != nil {
					log.FromContext(ctx).Error(err, "listing Policies to rescan them")
					return nil
				}
				requests := make([]reconcile.Request, 0, len(policies.Items))
				for i := range policies.Items {
					requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: policies.Items[i].Namespace, Name: policies.Items[i].Name}})
				}
				return requests
			}))).
			Complete(reconcile.Func(r.reconcilePolicy))
		if err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).Named("background-scan-policies").For(&kyvernov1.ClusterPolicy{}).
		WatchesRawSource(source.Channel(r.kyvernoChanged, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			var policies kyvernov1.ClusterPolicyList
			if err := r.Client.List(ctx, &policies); err != nil {
				log.FromContext(ctx).Error(err, "listing ClusterPolicies to rescan them")
				return nil
			}
			requests := make([]reconcile.Request, 0, len(policies.Items))
			for i := range policies.Items {
				requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Name: policies.Items[i].Name}})
			}
			return requests
		}))).
		Complete(reconcile.Func(r.reconcilePolicy))
}

// reconcilePolicy hands the policy's scanned rules to the scanner and
// rescans the resources of their kinds.
// A namespaced kyverno.io/v1 Policy (a request with a namespace) is
// scanned like a ClusterPolicy, confined to its namespace and reported as
// namespace/name, as Kyverno names it in reports.
func (r *Reporter) reconcilePolicy(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := clusterpolicy.PolicyKey(req.Namespace, req.Name)
	policy := &kyvernov1.ClusterPolicy{}
	var err error
	if req.Namespace != "" {
		namespaced := &kyvernov1.Policy{}
		if err = r.Client.Get(ctx, req.NamespacedName, namespaced); err == nil {
			policy = namespaced.AsClusterPolicy()
		}
	} else {
		err = r.Client.Get(ctx, req.NamespacedName, policy)
	}
	var kinds []schema.GroupVersionKind
	switch {
	case apierrors.IsNotFound(err):
		r.rememberScanned(key, "")
		gone := &kyvernov1.ClusterPolicy{}
		gone.Name = key
		if r.Scanner.SetPolicy(gone, nil) {
			kinds = r.allWatched()
		}
		if err := r.pruneAdmissionResults(ctx, key); err != nil {
			return reconcile.Result{}, err
		}
	case err != nil:
		return reconcile.Result{}, err
	default:
		opts, resolver, running := r.Options(), r.Resolvers.Resolver(), r.Kyverno != nil && r.Kyverno.Running()
		inputs := scanInputs(policy, opts, resolver, running)
		if r.scannedFromInputs(key, inputs) {
			return reconcile.Result{}, nil // the scanner holds these rules
		}
		rules, err := r.rulesOf(policy, opts, resolver, running)
		if err != nil {
			return reconcile.Result{}, err
		}
		// The scanner keys policies by the name results carry.
		scanned := policy.DeepCopy()
		scanned.Name, scanned.Namespace = key, ""
		changed := r.Scanner.SetPolicy(scanned, rules)
		if _, err = r.watch(ctx, rules); err != nil {
			return reconcile.Result{}, err
		}
		r.rememberScanned(key, inputs)
		if changed {
			// Results of rules no longer scanned must go too: every
			// watched kind, the new ones included.
			kinds = r.allWatched()
		}
	}
	if len(kinds) > 0 {
		go r.enqueueAll(ctx, kinds)
	}
	return reconcile.Result{}, nil
}

// rulesOf returns the rules kyvap scans the policy with. A background-only
// policy (spec.admission: false) is scanned as Kyverno scans it, its rules
// evaluated as at admission (kyverno.AsScanned).
func (r *Reporter) rulesOf(policy *kyvernov1.ClusterPolicy, opts translate.Options, resolver kyverno.KindResolver, running bool) ([]translate.FallbackRule, error) {
	scanned := kyverno.AsScanned(policy)
	plan, err := translate.Translate(clusterpolicy.InputFor(scanned, nil), resolver, opts)
	if err != nil {
		return nil, err
	}
	opts.GenerateValidatingAdmissionPolicy = false
	engineForm, err := translate.Translate(clusterpolicy.InputFor(scanned, nil), resolver, opts)
	if err != nil {
		return nil, err
	}
	return scan.RulesToScan(policy, &plan, &engineForm, running), nil
}

// scanInputs identifies what rulesOf computes a policy's scanned rules
// from: the policy's identity, generation (its spec) and annotations, the
// translation options (Kyverno's configuration by its pointer: a new
// configuration is a new value), the resolver (discovery), whether
// Kyverno runs and whether the policy is marked generated. The rest of the
// status, which changes on every report, is not one.
func scanInputs(policy *kyvernov1.ClusterPolicy, opts translate.Options, resolver kyverno.KindResolver, running bool) string {
	var b strings.Builder
	// Whether the policy is marked generated decides, while Kyverno runs,
	// whether Kyverno or kyvap scans it (scan.RulesToScan).
	fmt.Fprintf(&b, "%s/%s/%s/%d/%+v/%p/%t/%t", policy.Kind, policy.Namespace, policy.UID, policy.Generation, opts, resolver, running, policy.Status.ValidatingAdmissionPolicy.Generated)
	keys := make([]string, 0, len(policy.Annotations))
	for k := range policy.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, policy.Annotations[k])
	}
	return b.String()
}

// scannedFromInputs reports whether the scanner's rules of the policy
// were translated from these inputs.
func (r *Reporter) scannedFromInputs(key, inputs string) bool {
	r.scannedMu.Lock()
	defer r.scannedMu.Unlock()
	return r.scannedFrom[key] == inputs
}

// rememberScanned records what the scanner's rules of the policy were
// translated from ("": it has none).
func (r *Reporter) rememberScanned(key, inputs string) {
	r.scannedMu.Lock()
	defer r.scannedMu.Unlock()
	if inputs == "" {
		delete(r.scannedFrom, key)
		return
	}
	if r.scannedFrom == nil {
		r.scannedFrom = map[string]string{}
	}
	r.scannedFrom[key] = inputs
}

// watch starts an informer (full objects: the rules read them) for every
// kind the rules match and not watched yet, and returns the kinds.
func (r *Reporter) watch(ctx context.Context, rules []translate.FallbackRule) ([]schema.GroupVersionKind, error) {
	var all []admissionregistrationv1.RuleWithOperations
	resolver := r.Resolvers.Resolver()
	for i := range rules {
		webhookRules, err := clusterpolicy.WebhookRules(resolver, append([]kyvernov1.Rule{rules[i].Rule}, rules[i].AdditionalRules...)...)
		if err != nil {
			continue // the status reports unresolvable kinds
		}
		all = append(all, webhookRules...)
	}
	return r.watchResources(ctx, all)
}

// watchResources starts an informer for every resource the rules name
// explicitly (wildcards and subresources are not scanned) and returns
// their kinds.
func (r *Reporter) watchResources(ctx context.Context, webhookRules []admissionregistrationv1.RuleWithOperations) ([]schema.GroupVersionKind, error) {
	var kinds []schema.GroupVersionKind
	for _, wr := range webhookRules {
		for _, g := range wr.APIGroups {
			for _, v := range wr.APIVersions {
				for _, res := range wr.Resources {
					gvr := schema.GroupVersionResource{Group: g, Version: v, Resource: res}
					if g == "*" || v == "*" || res == "*" || containsSlash(res) {
						continue // wildcard resources and subresources are not scanned
					}
					gvk, err := r.Client.RESTMapper().KindFor(gvr)
					if err != nil {
						continue
					}
					if ok, err := r.mayWatch(ctx, gvr); err != nil || !ok {
						if err != nil {
							return nil, err
						}
						continue
					}
					if err := r.ensureInformer(ctx, gvk, gvr); err != nil {
						return nil, err
					}
					kinds = append(kinds, gvk)
				}
			}
		}
	}
	return kinds, nil
}

func containsSlash(s string) bool {
	for _, c := range s {
		if c == '/' {
			return true
		}
	}
	return false
}

// mayWatch reports whether kyvap may list and watch every object of the
// resource: a cache cannot sync without, and would block the scans of
// every kind. A forbidden kind is said once in the log (with the grant
// that fixes it) and checked again at the next policy change.
func (r *Reporter) mayWatch(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	if r.isWatched(gvr) {
		return true, nil
	}
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Verb: verb},
		}}
		if err := r.Client.Create(ctx, review); err != nil {
			return false, fmt.Errorf("checking access to %s: %w", gvr, err)
		}
		if !review.Status.Allowed {
			r.mu.Lock()
			defer r.mu.Unlock()
			if !r.forbidden[gvr] {
				r.forbidden[gvr] = true
				forbiddenKinds.Set(float64(len(r.forbidden)))
				log.FromContext(ctx).Info("kyvap may not list and watch this resource: its objects are not scanned and get no PolicyReport; grant get, list and watch with a ClusterRole labelled kyvap.io/aggregate-to-params-reader: \"true\" (docs/install.md#parameter-kinds)", "resource", gvr.String())
			}
			return false, nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forbidden[gvr] {
		delete(r.forbidden, gvr)
		forbiddenKinds.Set(float64(len(r.forbidden)))
	}
	return true, nil
}

func (r *Reporter) isWatched(gvr schema.GroupVersionResource) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, watched := range r.watched {
		if watched == gvr {
			return true
		}
	}
	return false
}

func (r *Reporter) ensureInformer(ctx context.Context, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.watched[gvk]; ok {
		return nil
	}
	obj := r.cached(gvk)
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[resourceKey]) {
		q.Add(resourceKey{GVK: gvk, Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	err := r.resources.Watch(source.TypedKind[client.Object, resourceKey](r.objects, obj, handler.TypedFuncs[client.Object, resourceKey]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[resourceKey]) {
			// Delayed as policy rescans are: a new informer lists every
			// resource while the other policies applied together load.
			q.AddAfter(resourceKey{GVK: gvk, Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}, rescanDelay)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[resourceKey]) {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || e.ObjectOld.GetGeneration() == 0 {
				enqueue(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[resourceKey]) {
			enqueue(e.Object, q)
		},
	}))
	if err != nil {
		return fmt.Errorf("watching %s for background scans: %w", gvk, err)
	}
	r.watched[gvk] = gvr
	_ = ctx
	return nil
}

// cached is the object the scan's cache holds for a kind: the whole
// object, or its metadata (MetadataOnly).
func (r *Reporter) cached(gvk schema.GroupVersionKind) client.Object {
	if r.MetadataOnly {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// cachedKeys are the cached resources of a kind.
func (r *Reporter) cachedKeys(ctx context.Context, gvk schema.GroupVersionKind) ([]resourceKey, error) {
	listKind := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	var items []metav1.Object
	if r.MetadataOnly {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(listKind)
		if err := r.objects.List(ctx, list); err != nil {
			return nil, err
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	} else {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(listKind)
		if err := r.objects.List(ctx, list); err != nil {
			return nil, err
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	}
	keys := make([]resourceKey, len(items))
	for i, o := range items {
		keys[i] = resourceKey{GVK: gvk, Namespace: o.GetNamespace(), Name: o.GetName()}
	}
	return keys, nil
}

func (r *Reporter) allWatched() []schema.GroupVersionKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]schema.GroupVersionKind, 0, len(r.watched))
	for gvk := range r.watched {
		out = append(out, gvk)
	}
	return out
}

// enqueueAll queues every cached resource of the kinds.
func (r *Reporter) enqueueAll(ctx context.Context, kinds []schema.GroupVersionKind) {
	seen := map[schema.GroupVersionKind]bool{}
	for _, gvk := range kinds {
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		keys, err := r.cachedKeys(ctx, gvk)
		if err != nil {
			log.FromContext(ctx).Error(err, "listing resources to scan", "kind", gvk.String())
			continue
		}
		for _, key := range keys {
			select {
			case r.rescan <- event.TypedGenericEvent[resourceKey]{Object: key}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// reconcileResource scans one resource and writes its report when the
// results changed.
func (r *Reporter) reconcileResource(ctx context.Context, key resourceKey) (reconcile.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(key.GVK)
	var from client.Reader = r.objects
	if r.MetadataOnly {
		from = r.Reader
	}
	if err := from.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			// A deleted resource's report goes with it (owner reference).
			r.count(key, nil)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.MetadataOnly {
		// Read from the API server, so ours to change (cached objects are
		// shared: never written to): without managedFields, as the cache
		// strips them.
		obj.SetManagedFields(nil)
	}
	resource := reports.Resource{APIVersion: key.GVK.GroupVersion().String(), Kind: key.GVK.Kind, Namespace: key.Namespace, Name: key.Name, UID: obj.GetUID()}
	if r.Config != nil {
		if cfg := r.Config(); cfg != nil && cfg.IsFiltered(key.GVK.Group, key.GVK.Version, key.GVK.Kind, "", key.Namespace, key.Name) {
			r.count(key, nil)
			return reconcile.Result{}, r.write(ctx, resource, nil)
		}
	}
	r.mu.Lock()
	gvr := r.watched[key.GVK]
	r.mu.Unlock()
	target := scan.Object{Resource: obj, GVR: gvr}
	if key.Namespace != "" {
		ns := &corev1.Namespace{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		target.Namespace = ns
	}
	scans.Inc()
	results, err := r.Scanner.Scan(ctx, target, time.Now())
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.write(ctx, resource, results); err != nil {
		return reconcile.Result{}, err
	}
	r.count(key, results)
	return reconcile.Result{}, nil
}

// write makes the resource's report hold these background results besides
// its admission-time results. It reads nothing when the cached fingerprint
// says the background results are unchanged, and writes only on a change.
func (r *Reporter) write(ctx context.Context, resource reports.Resource, results []reports.Result) error {
	desired := reports.For(resource, results)
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(desired.GroupVersionKind())
	key := types.NamespacedName{Namespace: desired.Namespace, Name: desired.Name}
	err := r.reports.Get(ctx, key, cached)
	switch {
	case apierrors.IsNotFound(err):
		if len(results) == 0 {
			return nil
		}
		err := r.Client.Create(ctx, toUnstructured(desired))
		if err == nil {
			reportWrites.WithLabelValues(reports.ProcessBackground, "create").Inc()
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Created since the cache looked: compare with what is stored.
	case err != nil:
		return err
	case cached.Annotations[reports.AnnotationBackgroundResults] == reports.Fingerprint(results):
		return nil // nothing new: no read, no write
	}
	return updateReport(ctx, r.Reader, r.Client, resource, reports.ProcessBackground, func(existing []reports.Result) []reports.Result {
		_, admission := reports.Split(existing)
		// A policy scanned now reports through the scan alone.
		admission = slices.DeleteFunc(admission, func(res reports.Result) bool { return r.Scanner.Scans(res.Policy) })
		return append(slices.Clone(results), admission...)
	})
}

// updateReport reads the resource's report, replaces its results with
// what merge returns (unchanged results keep their timestamps) and writes
// it when it changed: an update, a creation, or a deletion when no result
// is left. A conflict is returned for a retry.
func updateReport(ctx context.Context, reader client.Reader, writer client.Writer, resource reports.Resource, process string, merge func(existing []reports.Result) []reports.Result) error {
	desired := reports.For(resource, nil)
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(desired.GroupVersionKind())
	err := reader.Get(ctx, types.NamespacedName{Namespace: desired.Namespace, Name: desired.Name}, current)
	if apierrors.IsNotFound(err) {
		results := merge(nil)
		if len(results) == 0 {
			return nil
		}
		if err := writer.Create(ctx, toUnstructured(reports.For(resource, results))); err != nil {
			return err
		}
		reportWrites.WithLabelValues(process, "create").Inc()
		return nil
	}
	if err != nil {
		return err
	}
	var existing reports.PolicyReport
	data, _ := current.MarshalJSON()
	if err := json.Unmarshal(data, &existing); err != nil {
		return err
	}
	results := merge(existing.Results)
	if len(results) == 0 {
		err := writer.Delete(ctx, current, client.Preconditions{ResourceVersion: ptr.To(current.GetResourceVersion())})
		if err == nil {
			reportWrites.WithLabelValues(process, "delete").Inc()
		}
		return client.IgnoreNotFound(err)
	}
	desired = reports.For(resource, reports.Stable(existing.Results, results))
	if equality.Semantic.DeepEqual(existing.Results, desired.Results) && existing.Summary == desired.Summary &&
		equality.Semantic.DeepEqual(existing.Labels, desired.Labels) && equality.Semantic.DeepEqual(existing.Annotations, desired.Annotations) {
		return nil // nothing new: no write
	}
	update := toUnstructured(desired)
	update.SetResourceVersion(current.GetResourceVersion())
	if err := writer.Update(ctx, update); err != nil {
		return err
	}
	reportWrites.WithLabelValues(process, "update").Inc()
	return nil
}

// pruneAdmissionResults removes a deleted policy's admission-time results
// from kyvap's reports (background results go with the rescan).
func (r *Reporter) pruneAdmissionResults(ctx context.Context, policy string) error {
	for _, kind := range []string{reports.KindPolicyReport, reports.KindClusterPolicyReport} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: kind + "List"})
		if err := r.reports.List(ctx, list, client.MatchingLabels{reports.LabelAdmissionResults: "true"}); err != nil {
			return err
		}
		for _, item := range list.Items {
			resource, ok := resourceOf(item)
			if !ok {
				continue
			}
			err := updateReport(ctx, r.Reader, r.Client, resource, reports.ProcessAdmission, func(existing []reports.Result) []reports.Result {
				return slices.DeleteFunc(slices.Clone(existing), func(res reports.Result) bool {
					return res.Policy == policy && res.Properties["process"] == reports.ProcessAdmission
				})
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// resourceOf is the resource a report is about, from its owner reference.
func resourceOf(report metav1.PartialObjectMetadata) (reports.Resource, bool) {
	for _, o := range report.OwnerReferences {
		if reports.Name(o.UID) == report.Name {
			return reports.Resource{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: report.Namespace, Name: o.Name, UID: o.UID}, true
		}
	}
	return reports.Resource{}, false
}

func toUnstructured(report *reports.PolicyReport) *unstructured.Unstructured {
	data, _ := json.Marshal(report)
	u := &unstructured.Unstructured{}
	_ = u.UnmarshalJSON(data)
	return u
}
