// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package reporter

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/scan"
)

// AdmissionRecorder puts what kyvap's webhook found on the requests it
// admitted into the reports of their resources, with `process: admission
// review`, as Kyverno's admission reports do. It records only policies with
// `background: false`: a scanned policy's results come from the background
// scan, which evaluates the created or updated resource right after with
// the same rules. It runs on every replica (each serves the webhook),
// works off the admission path (Record never blocks nor fails a request)
// and holds at most MaxPendingAdmissionResults resources at once.
type AdmissionRecorder struct {
	// Client reads policies (cached) and writes reports.
	Client client.Client
	// Reader reads reports from the API server.
	Reader client.Reader

	enabled atomic.Bool
	once    sync.Once
	queue   workqueue.TypedRateLimitingInterface[reports.Resource]
	mu      sync.Mutex
	pending map[reports.Resource][]engine.Outcome
}

// MaxPendingAdmissionResults bounds the resources whose admission results
// wait to be written; more are dropped and counted.
const MaxPendingAdmissionResults = 10000

// admissionDelay lets the admitted request reach storage before its report
// names the resource as owner: the garbage collector deletes a report whose
// owner it cannot find, which is also right when a later admission step
// refused the request.
const admissionDelay = 2 * time.Second

// admissionWorkers write admission results at once, on each replica.
const admissionWorkers = 2

// maxAdmissionRetries bounds the attempts to write one resource's results.
const maxAdmissionRetries = 5

var admissionResultsDropped = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "kyvap_admission_results_dropped_total",
	Help: "Admission results not written to a PolicyReport: too many pending, or writing failed repeatedly.",
})

func init() { metrics.Registry.MustRegister(admissionResultsDropped) }

func (a *AdmissionRecorder) init() {
	a.once.Do(func() {
		a.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reports.Resource](),
			workqueue.TypedRateLimitingQueueConfig[reports.Resource]{Name: "admission-results"})
		a.pending = map[reports.Resource][]engine.Outcome{}
	})
}

// enable starts accepting results: the reports' CRDs are served.
func (a *AdmissionRecorder) enable() {
	a.init()
	a.enabled.Store(true)
}

// Record queues the outcomes of an admitted request. Requests that create
// or change nothing (dry runs, deletions, subresources) are not recorded.
func (a *AdmissionRecorder) Record(req *admissionv1.AdmissionRequest, outcomes []engine.Outcome) {
	if a == nil || !a.enabled.Load() || len(outcomes) == 0 || req.SubResource != "" || (req.DryRun != nil && *req.DryRun) ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return
	}
	var object metav1.PartialObjectMetadata
	if err := json.Unmarshal(req.Object.Raw, &object); err != nil || object.UID == "" || object.Name == "" {
		return
	}
	resource := reports.Resource{
		APIVersion: schema.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}.String(), Kind: req.Kind.Kind,
		Namespace: req.Namespace, Name: object.Name, UID: object.UID,
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	previous, queued := a.pending[resource]
	if !queued && len(a.pending) >= MaxPendingAdmissionResults {
		admissionResultsDropped.Inc()
		return
	}
	a.pending[resource] = latestPerPolicy(previous, outcomes)
	a.queue.AddAfter(resource, admissionDelay)
}

// latestPerPolicy replaces the previous outcomes of the policies the new
// ones are about.
func latestPerPolicy(previous, next []engine.Outcome) []engine.Outcome {
	policies := map[string]bool{}
	key := func(o engine.Outcome) string { return o.Kind + "/" + o.Namespace + "/" + o.Policy }
	for _, o := range next {
		policies[key(o)] = true
	}
	out := slices.DeleteFunc(slices.Clone(previous), func(o engine.Outcome) bool { return policies[key(o)] })
	return append(out, next...)
}

// NeedLeaderElection is false: every replica serves the webhook.
func (a *AdmissionRecorder) NeedLeaderElection() bool { return false }

// Start writes queued results until ctx ends.
func (a *AdmissionRecorder) Start(ctx context.Context) error {
	a.init()
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range admissionWorkers {
		wg.Go(func() {
			for a.next(ctx) {
			}
		})
	}
	wg.Wait()
	return nil
}

func (a *AdmissionRecorder) next(ctx context.Context) bool {
	resource, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(resource)
	a.mu.Lock()
	outcomes := a.pending[resource]
	delete(a.pending, resource)
	a.mu.Unlock()
	if len(outcomes) == 0 {
		a.queue.Forget(resource)
		return true
	}
	if err := a.write(ctx, resource, outcomes, time.Now()); err != nil {
		if a.queue.NumRequeues(resource) >= maxAdmissionRetries {
			log.FromContext(ctx).Error(err, "writing admission results to a PolicyReport", "resource", resource.Name, "namespace", resource.Namespace)
			admissionResultsDropped.Inc()
			a.queue.Forget(resource)
			return true
		}
		a.mu.Lock()
		a.pending[resource] = latestPerPolicy(outcomes, a.pending[resource])
		a.mu.Unlock()
		a.queue.AddRateLimited(resource)
		return true
	}
	a.queue.Forget(resource)
	return true
}

// write replaces the admission results of the outcomes' policies in the
// resource's report.
func (a *AdmissionRecorder) write(ctx context.Context, resource reports.Resource, outcomes []engine.Outcome, now time.Time) error {
	policies := map[string]*kyvernov1.ClusterPolicy{}
	models := map[string]metav1.Object{}
	var results []reports.Result
	for _, o := range outcomes {
		if o.Kind != "" {
			name := scan.ReportName(model.Source{Namespace: o.Namespace, Name: o.Policy})
			policy, seen := models[name]
			if !seen {
				var err error
				if policy, err = a.modelPolicy(ctx, o); err != nil {
					return err
				}
				models[name] = policy
			}
			if policy == nil {
				continue
			}
			res := reports.ResultFor(policy, o.Rule, reports.Status(o.Result), o.Message, reports.ProcessAdmission, now)
			res.Policy = name
			results = append(results, res)
			continue
		}
		policy, seen := policies[o.Policy]
		if !seen {
			var err error
			if policy, err = a.kyvernoPolicy(ctx, o); err != nil {
				return err
			}
			policies[o.Policy] = policy
		}
		if policy == nil || scan.Background(policy) {
			continue
		}
		res := reports.ResultFor(policy, o.Rule, reports.Status(o.Result), o.Message, reports.ProcessAdmission, now)
		res.Policy = o.Policy // namespace/name for a namespaced Policy
		results = append(results, res)
	}
	if len(results) == 0 {
		return nil
	}
	return updateReport(ctx, a.Reader, a.Client, resource, reports.ProcessAdmission, func(existing []reports.Result) []reports.Result {
		kept := slices.DeleteFunc(slices.Clone(existing), func(r reports.Result) bool {
			_, replaced := policies[r.Policy]
			_, replacedModel := models[r.Policy]
			return (replaced || replacedModel) && r.Properties["process"] == reports.ProcessAdmission
		})
		return append(kept, results...)
	})
}

// modelPolicy reads the policy of the policy model an outcome is about: nil
// when it is gone, or when background scans report its results (as for a
// ClusterPolicy with background on, the scan's results stand for it).
func (a *AdmissionRecorder) modelPolicy(ctx context.Context, o engine.Outcome) (metav1.Object, error) {
	key := types.NamespacedName{Namespace: o.Namespace, Name: o.Policy}
	var spec *policiesv1.ValidatingPolicySpec
	var policy metav1.Object
	switch model.Kind(o.Kind) {
	case model.KindValidatingPolicy:
		p := &policiesv1.ValidatingPolicy{}
		spec, policy = &p.Spec, p
	case model.KindNamespacedValidatingPolicy:
		p := &policiesv1.NamespacedValidatingPolicy{}
		spec, policy = &p.Spec, p
	default:
		return nil, nil
	}
	if err := a.Client.Get(ctx, key, policy.(client.Object)); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if spec.BackgroundEnabled() {
		return nil, nil
	}
	return policy, nil
}

// kyvernoPolicy reads the ClusterPolicy, or the namespaced Policy (as a
// ClusterPolicy of kind Policy), an outcome is about; nil when it is gone.
func (a *AdmissionRecorder) kyvernoPolicy(ctx context.Context, o engine.Outcome) (*kyvernov1.ClusterPolicy, error) {
	if o.Namespace != "" {
		p := &kyvernov1.Policy{}
		name := strings.TrimPrefix(o.Policy, o.Namespace+"/")
		if err := a.Client.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: name}, p); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return p.AsClusterPolicy(), nil
	}
	p := &kyvernov1.ClusterPolicy{}
	if err := a.Client.Get(ctx, types.NamespacedName{Name: o.Policy}, p); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return p, nil
}
