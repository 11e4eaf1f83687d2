package scan

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/kyvap/kyvap/internal/kyverno"
	"github.com/kyvap/kyvap/internal/reports"
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
	Reader    client.Reader // direct reads of reports and namespaces
	Cache     cache.Cache
	Resolvers interface{ Resolver() translate.KindResolver }
	Kyverno   interface{ Running() bool }
	Options   func() translate.Options
	Scanner   *Scanner
	// Config returns Kyverno's global configuration: resources its
	// resource filters name are not scanned, as in Kyverno's background
	// scans (nil: none).
	Config func() *kyverno.Config
	// Interval rescans every watched resource this often (0: only on
	// changes), as Kyverno's background scan interval.
	Interval time.Duration

	mu        sync.Mutex
	watched   map[schema.GroupVersionKind]schema.GroupVersionResource
	resources controller.TypedController[resourceKey]
	rescan    chan event.TypedGenericEvent[resourceKey]
	// last are the results last written per resource, for the metrics.
	last map[resourceKey][]reports.Result
}

var policyResults = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kyvap_policy_results",
	Help: "Results of kyvap's background scans in its PolicyReports, per policy and result (pass, fail, error, skip).",
}, []string{"policy", "result"})

func init() { metrics.Registry.MustRegister(policyResults) }

// count moves the metrics from a resource's previous results to its new ones.
func (r *Reporter) count(key resourceKey, results []reports.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, old := range r.last[key] {
		policyResults.WithLabelValues(old.Policy, string(old.Result)).Dec()
	}
	for _, res := range results {
		policyResults.WithLabelValues(res.Policy, string(res.Result)).Inc()
	}
	if len(results) == 0 {
		delete(r.last, key)
	} else {
		r.last[key] = results
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
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "wgpolicyk8s.io", Kind: reports.KindPolicyReport}, "v1alpha2"); err != nil {
		ctrl.Log.WithName("reports").Info("the wgpolicyk8s.io PolicyReport CRDs are not installed: kyvap writes no PolicyReports (enforcement is not affected)", "error", err.Error())
		return nil
	}
	r.watched = map[schema.GroupVersionKind]schema.GroupVersionResource{}
	r.last = map[resourceKey][]reports.Result{}
	if r.Interval > 0 {
		if err := mgr.Add(periodic{r}); err != nil {
			return err
		}
	}
	r.rescan = make(chan event.TypedGenericEvent[resourceKey], 1024)
	var err error
	r.resources, err = controller.NewTyped[resourceKey]("background-scan", mgr, controller.TypedOptions[resourceKey]{
		Reconciler: reconcile.TypedFunc[resourceKey](r.reconcileResource),
	})
	if err != nil {
		return err
	}
	if err := r.resources.Watch(source.TypedChannel[resourceKey, resourceKey](r.rescan, handler.TypedFuncs[resourceKey, resourceKey]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[resourceKey], q workqueue.TypedRateLimitingInterface[resourceKey]) {
			q.Add(e.Object)
		},
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("background-scan-policies").For(&kyvernov1.ClusterPolicy{}).Complete(reconcile.Func(r.reconcilePolicy))
}

// reconcilePolicy hands the policy's scanned rules to the scanner and
// rescans the resources of their kinds.
func (r *Reporter) reconcilePolicy(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	policy := &kyvernov1.ClusterPolicy{}
	err := r.Client.Get(ctx, req.NamespacedName, policy)
	var kinds []schema.GroupVersionKind
	switch {
	case apierrors.IsNotFound(err):
		policy.Name = req.Name
		kinds = r.allWatched()
		r.Scanner.SetPolicy(policy, nil)
	case err != nil:
		return reconcile.Result{}, err
	default:
		rules, err := r.rulesOf(policy)
		if err != nil {
			return reconcile.Result{}, err
		}
		r.Scanner.SetPolicy(policy, rules)
		if kinds, err = r.watch(ctx, rules); err != nil {
			return reconcile.Result{}, err
		}
		// Results of rules no longer scanned must go too.
		kinds = append(kinds, r.allWatched()...)
	}
	go r.enqueueAll(ctx, kinds)
	return reconcile.Result{}, nil
}

func (r *Reporter) rulesOf(policy *kyvernov1.ClusterPolicy) ([]translate.FallbackRule, error) {
	opts := r.Options()
	resolver := r.Resolvers.Resolver()
	plan, err := translate.Translate(translate.Input{Policy: policy}, resolver, opts)
	if err != nil {
		return nil, err
	}
	opts.GenerateValidatingAdmissionPolicy = false
	engineForm, err := translate.Translate(translate.Input{Policy: policy}, resolver, opts)
	if err != nil {
		return nil, err
	}
	return RulesToScan(policy, &plan, &engineForm, r.Kyverno != nil && r.Kyverno.Running()), nil
}

// watch starts an informer (full objects: the rules read them) for every
// kind the rules match and not watched yet, and returns the kinds.
func (r *Reporter) watch(ctx context.Context, rules []translate.FallbackRule) ([]schema.GroupVersionKind, error) {
	var kinds []schema.GroupVersionKind
	resolver := r.Resolvers.Resolver()
	for i := range rules {
		webhookRules, err := translate.WebhookRules(resolver, append([]kyvernov1.Rule{rules[i].Rule}, rules[i].AdditionalRules...)...)
		if err != nil {
			continue // the status reports unresolvable kinds
		}
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
						if err := r.ensureInformer(ctx, gvk, gvr); err != nil {
							return nil, err
						}
						kinds = append(kinds, gvk)
					}
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

func (r *Reporter) ensureInformer(ctx context.Context, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.watched[gvk]; ok {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[resourceKey]) {
		q.Add(resourceKey{GVK: gvk, Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	err := r.resources.Watch(source.TypedKind[client.Object, resourceKey](r.Cache, obj, handler.TypedFuncs[client.Object, resourceKey]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[resourceKey]) {
			enqueue(e.Object, q)
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
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Cache.List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing resources to scan", "kind", gvk.String())
			continue
		}
		for i := range list.Items {
			select {
			case r.rescan <- event.TypedGenericEvent[resourceKey]{Object: resourceKey{GVK: gvk, Namespace: list.Items[i].GetNamespace(), Name: list.Items[i].GetName()}}:
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
	if err := r.Cache.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			// A deleted resource's report goes with it (owner reference).
			r.count(key, nil)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.Config != nil {
		if cfg := r.Config(); cfg != nil && cfg.IsFiltered(key.GVK.Group, key.GVK.Version, key.GVK.Kind, "", key.Namespace, key.Name) {
			resource := reports.Resource{APIVersion: key.GVK.GroupVersion().String(), Kind: key.GVK.Kind, Namespace: key.Namespace, Name: key.Name, UID: obj.GetUID()}
			r.count(key, nil)
			return reconcile.Result{}, r.write(ctx, resource, nil)
		}
	}
	r.mu.Lock()
	gvr := r.watched[key.GVK]
	r.mu.Unlock()
	target := Object{Resource: obj, GVR: gvr}
	if key.Namespace != "" {
		ns := &corev1.Namespace{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		target.Namespace = ns
	}
	results, err := r.Scanner.Scan(ctx, target, time.Now())
	if err != nil {
		return reconcile.Result{}, err
	}
	resource := reports.Resource{APIVersion: key.GVK.GroupVersion().String(), Kind: key.GVK.Kind, Namespace: key.Namespace, Name: key.Name, UID: obj.GetUID()}
	if err := r.write(ctx, resource, results); err != nil {
		return reconcile.Result{}, err
	}
	r.count(key, results)
	return reconcile.Result{}, nil
}

// write creates, updates or deletes the resource's report, writing only
// when its results changed.
func (r *Reporter) write(ctx context.Context, resource reports.Resource, results []reports.Result) error {
	desired := reports.For(resource, results)
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(desired.GroupVersionKind())
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: desired.Namespace, Name: desired.Name}, current)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		if len(results) == 0 {
			return nil
		}
		return r.Client.Create(ctx, toUnstructured(desired))
	case err != nil:
		return err
	}
	var existing reports.PolicyReport
	data, _ := current.MarshalJSON()
	if err := json.Unmarshal(data, &existing); err != nil {
		return err
	}
	if len(results) == 0 {
		return client.IgnoreNotFound(r.Client.Delete(ctx, current))
	}
	desired = reports.For(resource, reports.Stable(existing.Results, results))
	if equality.Semantic.DeepEqual(existing.Results, desired.Results) && existing.Summary == desired.Summary {
		return nil // nothing new: no write
	}
	update := toUnstructured(desired)
	update.SetResourceVersion(current.GetResourceVersion())
	return r.Client.Update(ctx, update)
}

func toUnstructured(report *reports.PolicyReport) *unstructured.Unstructured {
	data, _ := json.Marshal(report)
	u := &unstructured.Unstructured{}
	_ = u.UnmarshalJSON(data)
	return u
}
