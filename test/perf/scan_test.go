// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/test/controlplane"
)

// The background scan scenario of issue 15: 10 policies of 5 rules each.
const (
	scanPolicies       = 10
	scanRulesPerPolicy = 5
	scanChanged        = 100 // ConfigMaps changed in the last phase
)

var policyReportGVK = controlplane.PolicyReportListGVK.GroupVersion().WithKind("PolicyReport")

// scanBenchRuns names each invocation's namespace: the perf control plane
// runs no namespace controller, so a deleted namespace stays Terminating.
var scanBenchRuns atomic.Int32

// BenchmarkBackgroundScan measures issue 15's background scan: N existing
// ConfigMaps (KYVAP_BENCH_SCAN_RESOURCES, default 10,000) in one namespace,
// then 10 Audit ClusterPolicies of 5 CEL rules each (50 rules, all passing)
// created at once, scanned by the manager binary into one PolicyReport per
// ConfigMap. Goal: ≤ 30 s and ≤ 256 MiB RSS on 2 cores. It reports
//
//   - the full scan: time from the policies' creation until every ConfigMap
//     has its report with every rule's result and the manager is idle
//     (scan-s), the manager's API requests and writes meanwhile (the
//     policies' VAPs, bindings, statuses and Events included), its peak
//     RSS, and the scans it made per resource;
//   - an unchanged rescan (the periodic one, --background-scan-interval=40s):
//     the manager's writes while it rescans every ConfigMap (goal 0: a
//     rescan that finds nothing new writes nothing; an error otherwise);
//   - changes: 100 ConfigMaps edited so that one rule of each policy fails:
//     the writes until their 100 reports say so (goal: about one each).
//
// Report writes are counted twice: on the manager's client
// (rest_client_requests_total, every POST/PUT/PATCH/DELETE it sends,
// reports or not) and as the report changes a watch of the namespace sees.
// The scenario is one run whatever b.N: use -benchtime=1x. ns/op is the
// time of the three phases (the rescan waits for the periodic one).
func BenchmarkBackgroundScan(b *testing.B) {
	n := 10000
	if v := os.Getenv("KYVAP_BENCH_SCAN_RESOURCES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("KYVAP_BENCH_SCAN_RESOURCES=%q: a positive number of resources, please", v)
		}
	}
	changed := min(scanChanged, n)
	rules := scanPolicies * scanRulesPerPolicy
	ns := "scan-bench"
	if run := scanBenchRuns.Add(1); run > 1 {
		ns = fmt.Sprintf("scan-bench-%d", run)
	}
	ctx := context.Background()

	// Setup, not measured: the CRDs before the manager, as installed.
	cp.InstallPolicyReportCRDs(b)
	cp.Namespace(b, ns, nil)
	var policies []*kyvernov1.ClusterPolicy
	// Registered before startManager, so run after the manager stopped:
	// it would otherwise rescan everything as the policies go.
	b.Cleanup(func() {
		for _, p := range policies {
			vaps, bindings, err := cp.GeneratedFor(ctx, p)
			if err != nil {
				b.Error(err)
			}
			for i := range bindings {
				_ = client.IgnoreNotFound(cp.Client.Delete(ctx, &bindings[i]))
			}
			for i := range vaps {
				_ = client.IgnoreNotFound(cp.Client.Delete(ctx, &vaps[i]))
			}
			if err := client.IgnoreNotFound(cp.Client.Delete(ctx, p)); err != nil {
				b.Error(err)
			}
		}
		// The namespace stays Terminating: empty it for the next benchmarks
		// (its reports go with the CRDs).
		if err := cp.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)); err != nil {
			b.Error(err)
		}
	})
	configMaps := make([]*corev1.ConfigMap, n)
	if err := parallel(n, 8, func(i int) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"tier": "web"}},
			Data:       map[string]string{"k": "v"},
		}
		configMaps[i] = cm
		return cp.Client.Create(ctx, cm)
	}); err != nil {
		b.Fatal(err)
	}
	events := watchReports(b, ns)
	// KYVAP_BENCH_SCAN_FLAGS adds manager flags (e.g.
	// --background-scan-metadata-only) to compare scan modes.
	m := startManager(b, append([]string{"--background-scan-interval=40s"}, strings.Fields(os.Getenv("KYVAP_BENCH_SCAN_FLAGS"))...)...)
	rss := sampleRSS(b, m)

	// Phase 1: the full scan.
	before := m.requests(b)
	scansBefore := m.scans(b)
	eventsBefore := events.writes()
	rss.take(b)
	b.ResetTimer()
	start := time.Now()
	for i := range scanPolicies {
		p := scanPolicy(i, ns)
		if err := cp.Client.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
		policies = append(policies, p)
	}
	// Every ConfigMap has its report, the manager has nothing left to do,
	// and a sample of reports has every rule's result: all reports exist
	// as soon as the first policy's rules are scanned.
	sample := make([]int, 0, 11)
	for k := range 10 {
		sample = append(sample, k*n/10)
	}
	sample = append(sample, n-1)
	err := controlplane.EventuallyEvery(ctx, 100*time.Millisecond, 10*time.Minute, func(ctx context.Context) (bool, error) {
		if got := events.present(); got != int64(n) {
			return false, fmt.Errorf("%d reports of %d", got, n)
		}
		if idle, err := m.idle(); !idle {
			return false, err
		}
		for _, i := range sample {
			summary, err := reportSummary(ctx, configMaps[i])
			if err != nil {
				return false, err
			}
			if summary.pass != int64(rules) || summary.fail != 0 {
				return false, fmt.Errorf("the report of %s: %+v, want %d passes", configMaps[i].Name, summary, rules)
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("the full scan did not complete: %v", err)
	}
	m.waitIdle(b)
	scanTime := time.Since(start)
	scanRSS := rss.take(b)
	afterScan := m.requests(b)
	scansAfterScan := m.scans(b)
	scanReportWrites := events.writes() - eventsBefore

	// Phase 2: a rescan with nothing new. The periodic rescan starts on its
	// own; the manager is idle now, so the first scan seen starts one.
	// rescan-s runs from the last poll that saw no scan to the manager's
	// idleness after n scans: an upper bound, 0.1-0.2s above the truth.
	eventsBefore = events.writes()
	lastQuiet := time.Now()
	err = controlplane.EventuallyEvery(ctx, 100*time.Millisecond, 3*time.Minute, func(context.Context) (bool, error) {
		polled := time.Now()
		scans := m.scans(b) - scansAfterScan
		if scans == 0 {
			lastQuiet = polled
		}
		return scans >= float64(n), fmt.Errorf("kyvap_background_scans_total grew by %v, want %d (is the metric exported?)", scans, n)
	})
	rescanSeen := err == nil
	if !rescanSeen {
		b.Errorf("no rescan of the %d ConfigMaps seen: %v", n, err)
	}
	m.waitIdle(b)
	rescanTime := time.Since(lastQuiet)
	if !rescanSeen {
		rescanTime = 0
	}
	rescanRSS := rss.take(b)
	afterRescan := m.requests(b)
	scansAfterRescan := m.scans(b)
	rescanReportWrites := events.writes() - eventsBefore
	rescanWrites := afterRescan.writes - afterScan.writes
	if rescanWrites > 0 || rescanReportWrites > 0 {
		b.Errorf("a rescan that found nothing new wrote: %v writes by the manager, %d report changes", rescanWrites, rescanReportWrites)
	}

	// Phase 3: changes. One rule of each policy fails on `bad` data.
	eventsBefore = events.writes()
	start = time.Now()
	edited := make([]*corev1.ConfigMap, changed)
	if err := parallel(changed, 8, func(k int) error {
		cm := configMaps[k*n/changed]
		edited[k] = cm
		patch := client.MergeFrom(cm.DeepCopy())
		cm.Data["bad"] = "yes"
		return cp.Client.Patch(ctx, cm, patch)
	}); err != nil {
		b.Fatal(err)
	}
	pending := map[types.UID]*corev1.ConfigMap{}
	for _, cm := range edited {
		pending[cm.UID] = cm
	}
	err = controlplane.EventuallyEvery(ctx, 100*time.Millisecond, 5*time.Minute, func(ctx context.Context) (bool, error) {
		var last error
		for uid, cm := range pending {
			summary, err := reportSummary(ctx, cm)
			switch {
			case err != nil:
				last = err
			case summary.fail == scanPolicies:
				delete(pending, uid)
			default:
				last = fmt.Errorf("the report of %s: %+v, want %d failures", cm.Name, summary, scanPolicies)
			}
		}
		if len(pending) > 0 {
			return false, fmt.Errorf("%d reports of %d without the failures: %w", len(pending), changed, last)
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("the changes were not reported: %v", err)
	}
	m.waitIdle(b)
	changeTime := time.Since(start)
	changeRSS := rss.take(b)
	afterChanges := m.requests(b)
	changeReportWrites := events.writes() - eventsBefore
	changeWrites := afterChanges.writes - afterRescan.writes
	// One update per changed report is the goal. The allowance covers a
	// write that conflicts and is retried (its scan reread the report from
	// the API server: a second write), the few Events and statuses the
	// manager may write meanwhile, and a periodic rescan running across
	// the edits: anything beyond is a write not proportional to the changes.
	if limit := float64(3*changed + 20); changeWrites > limit {
		b.Errorf("%d ConfigMaps changed, the manager wrote %v times (more than %v)", changed, changeWrites, limit)
	}
	b.StopTimer()

	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(scanTime.Seconds(), "scan-s")
	b.ReportMetric(afterScan.total-before.total, "requests")
	b.ReportMetric(afterScan.get-before.get, "gets")
	b.ReportMetric(afterScan.writes-before.writes, "writes")
	b.ReportMetric(float64(scanReportWrites), "report-writes")
	b.ReportMetric((scansAfterScan-scansBefore)/float64(n), "scans/resource")
	b.ReportMetric(mib(scanRSS), "max-RSS-MiB")
	b.ReportMetric(float64(events.present()), "reports")
	b.ReportMetric(rescanTime.Seconds(), "rescan-s")
	b.ReportMetric(afterRescan.total-afterScan.total, "rescan-requests")
	b.ReportMetric(rescanWrites, "rescan-writes")
	b.ReportMetric(float64(rescanReportWrites), "rescan-report-writes")
	b.ReportMetric(mib(rescanRSS), "rescan-max-RSS-MiB")
	b.ReportMetric(changeTime.Seconds(), "change-s")
	b.ReportMetric(afterChanges.total-afterRescan.total, "change-requests")
	b.ReportMetric(changeWrites, "change-writes")
	b.ReportMetric(float64(changeReportWrites), "change-report-writes")
	b.ReportMetric(mib(changeRSS), "change-max-RSS-MiB")
	b.Logf("%d ConfigMaps × %d rules: full scan %.1fs, %v requests (%v writes, %d report writes), %.2f scans/resource, max RSS %.0f MiB; "+
		"unchanged rescan %.1fs (%v scans), %v requests, %v writes (%d report writes); %d changes: %.1fs, %v writes (%d report writes), max RSS %.0f MiB",
		n, rules, scanTime.Seconds(), afterScan.total-before.total, afterScan.writes-before.writes, scanReportWrites, (scansAfterScan-scansBefore)/float64(n), mib(scanRSS),
		rescanTime.Seconds(), scansAfterRescan-scansAfterScan, afterRescan.total-afterScan.total, rescanWrites, rescanReportWrites,
		changed, changeTime.Seconds(), changeWrites, changeReportWrites, mib(max(rescanRSS, changeRSS)))
}

// scanPolicy is the i-th policy: Audit, scanned in the background, five
// CEL rules on the namespace's ConfigMaps that the created ones pass;
// no-bad-data fails once `bad` is in a ConfigMap's data.
func scanPolicy(i int, namespace string) *kyvernov1.ClusterPolicy {
	exprs := []struct{ name, expression string }{
		{"name-length", "object.metadata.name.size() < 64"},
		{"no-forbidden-label", fmt.Sprintf("!has(object.metadata.labels) || !('forbidden-%d-1' in object.metadata.labels)", i)},
		{"no-bad-data", "!has(object.data) || !('bad' in object.data)"},
		{"tier", fmt.Sprintf("!has(object.metadata.labels) || !('tier' in object.metadata.labels) || object.metadata.labels['tier'] != 'forbidden-%d'", i)},
		{"data-size", fmt.Sprintf("!has(object.data) || size(object.data) <= %d", 16+i)},
	}
	var rules []kyvernov1.Rule
	for _, e := range exprs {
		r := controlplane.CELRule(e.name, "ConfigMap", e.expression, e.name+" failed")
		r.MatchResources.Any[0].Resources.Namespaces = []string{namespace}
		rules = append(rules, r)
	}
	p := controlplane.ClusterPolicy(fmt.Sprintf("%s-%02d", namespace, i), kyvernov1.Audit, rules...)
	p.Spec.Background = ptr.To(true)
	return p
}

// reportCounts counts the report changes a watch sees: creations,
// updates (a new resourceVersion) and deletions.
type reportCounts struct{ created, updated, deleted atomic.Int64 }

func (c *reportCounts) writes() int64 { return c.created.Load() + c.updated.Load() + c.deleted.Load() }

func (c *reportCounts) present() int64 { return c.created.Load() - c.deleted.Load() }

// watchReports watches the metadata of kyvap's PolicyReports in the
// namespace (a watch, not a list of thousands of reports in a loop, to
// load the API server the manager is measured against as little as
// possible) until the benchmark ends.
func watchReports(b *testing.B, namespace string) *reportCounts {
	report := &metav1.PartialObjectMetadata{}
	report.SetGroupVersionKind(policyReportGVK)
	informer, sync := reportInformer(b, namespace, "kyvap", report, cache.TransformStripManagedFields())
	counts := &reportCounts{}
	resourceVersion := func(obj any) string {
		if o, err := meta.Accessor(obj); err == nil {
			return o.GetResourceVersion()
		}
		return ""
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { counts.created.Add(1) },
		UpdateFunc: func(old, updated any) {
			if resourceVersion(old) != resourceVersion(updated) {
				counts.updated.Add(1)
			}
		},
		DeleteFunc: func(any) { counts.deleted.Add(1) },
	}); err != nil {
		b.Fatal(err)
	}
	sync()
	return counts
}

// reportInformer watches the PolicyReports (as obj) that writer (their
// app.kubernetes.io/managed-by label) writes in the namespace, until the
// benchmark ends; call sync once its handlers are added.
func reportInformer(b *testing.B, namespace, writer string, obj client.Object, transform toolscache.TransformFunc) (cache.Informer, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	watcher, err := cache.New(cp.Config, cache.Options{
		Scheme:               cp.Scheme,
		DefaultNamespaces:    map[string]cache.Config{namespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": writer}),
		DefaultTransform:     transform,
	})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = watcher.Start(ctx) }()
	informer, err := watcher.GetInformer(ctx, obj)
	if err != nil {
		b.Fatal(err)
	}
	return informer, func() {
		if !watcher.WaitForCacheSync(ctx) {
			b.Fatal("the PolicyReport watch never synced")
		}
	}
}

type reportTotals struct{ pass, fail int64 }

// reportSummary reads the summary of kyvap's report about the ConfigMap.
func reportSummary(ctx context.Context, cm *corev1.ConfigMap) (reportTotals, error) {
	report := &unstructured.Unstructured{}
	report.SetGroupVersionKind(policyReportGVK)
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: "kyvap-" + string(cm.UID)}, report); err != nil {
		return reportTotals{}, err
	}
	pass, _, _ := unstructured.NestedInt64(report.Object, "summary", "pass")
	fail, _, _ := unstructured.NestedInt64(report.Object, "summary", "fail")
	return reportTotals{pass: pass, fail: fail}, nil
}

// requestCounts are the manager's API requests so far, by its client-go
// metrics (labelled by HTTP method: lists and watches are GETs).
type requestCounts struct{ total, get, writes float64 }

func (m *manager) requests(b testing.TB) requestCounts {
	b.Helper()
	read := func(filters ...string) float64 {
		v, err := m.metric("rest_client_requests_total", filters...)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	c := requestCounts{total: read(), get: read(`method="GET"`)}
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		c.writes += read(`method="` + method + `"`)
	}
	return c
}

// scans reads kyvap_background_scans_total, the resources scanned so far
// (0 when the manager does not export it).
func (m *manager) scans(b testing.TB) float64 {
	b.Helper()
	v, err := m.metric("kyvap_background_scans_total")
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// idle says whether every controller's queue is empty and no reconcile
// runs (waitIdle's condition, once).
func (m *manager) idle() (bool, error) {
	queued, err := m.metric("workqueue_depth")
	if err != nil {
		return false, err
	}
	running, err := m.metric("controller_runtime_active_workers")
	if err != nil {
		return false, err
	}
	return queued == 0 && running == 0, fmt.Errorf("%v queued, %v reconciling", queued, running)
}

// rssSampler keeps a process's peak RSS, sampled every 250ms until the
// benchmark ends.
type rssSampler struct {
	rss  func() (int64, error)
	mu   sync.Mutex
	peak int64
	err  error
}

func sampleRSS(b *testing.B, m *manager) *rssSampler { return samplePeakRSS(b, m.rssBytes) }

// samplePeakRSS samples rss (a process's RSS) until the benchmark ends.
func samplePeakRSS(b *testing.B, rss func() (int64, error)) *rssSampler {
	s := &rssSampler{rss: rss}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		ticker := time.NewTicker(250 * time.Millisecond)
		defer ticker.Stop()
		for {
			s.sample()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() {
	v, err := s.rss()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.err == nil {
		s.err = err
	}
	s.peak = max(s.peak, v)
}

// take returns the peak since the last take, the current RSS included.
func (s *rssSampler) take(b testing.TB) int64 {
	b.Helper()
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		b.Fatalf("reading the RSS: %v", s.err)
	}
	peak := s.peak
	s.peak = 0
	return peak
}
