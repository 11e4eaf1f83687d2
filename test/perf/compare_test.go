// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/test/kyvernochart"
	"github.com/kyvap/kyvap/webhook"
)

// The columns of BenchmarkCompare's admission table.
const (
	colFloor          = "floor"
	colKyvapVAPs      = "kyvap VAPs"
	colKyvapWebhook   = "kyvap webhook only"
	colKyverno        = "Kyverno"
	colKyvapVAPsVPol  = "kyvap VAPs (vpol)"
	colKyvapWebhookVP = "kyvap webhook only (vpol)"
	colKyvernoVPol    = "Kyverno (vpol)"
	colKyvapVAPsPat   = "kyvap VAPs (pattern)"
	colKyvapWebhookPt = "kyvap webhook only (pattern)"
	colKyvernoPattern = "Kyverno (pattern)"
	colHandWritten    = "hand-written VAPs"
)

// compareColumns in the order of the report.
var compareColumns = []string{
	colFloor, colKyvapVAPs, colKyvapWebhook, colKyverno, colKyvapVAPsVPol, colKyvapWebhookVP, colKyvernoVPol,
	colKyvapVAPsPat, colKyvapWebhookPt, colKyvernoPattern, colHandWritten,
}

// policyFamily is one way of writing the benchmark's checks, measured in
// three columns: kyvap's VAPs, kyvap's webhook alone, Kyverno.
type policyFamily struct {
	// prefix names the family's measures in the compare lines ("" for the
	// CEL ClusterPolicies, the report's first lines since issue 23).
	prefix                    string
	vapCol, webhookCol, kyCol string
	objects                   func() ([]client.Object, error)
}

// policyFamilies are the checks as CEL ClusterPolicies, as
// ValidatingPolicies, and in Kyverno's classic language (patterns and deny
// conditions: what most Kyverno users run).
var policyFamilies = []policyFamily{
	{"", colKyvapVAPs, colKyvapWebhook, colKyverno, func() ([]client.Object, error) {
		var out []client.Object
		for _, p := range compareClusterPolicies() {
			out = append(out, p)
		}
		return out, nil
	}},
	{"vpol-", colKyvapVAPsVPol, colKyvapWebhookVP, colKyvernoVPol, func() ([]client.Object, error) {
		var out []client.Object
		for _, p := range compareValidatingPolicies() {
			out = append(out, p)
		}
		return out, nil
	}},
	{"pattern-", colKyvapVAPsPat, colKyvapWebhookPt, colKyvernoPattern, func() ([]client.Object, error) {
		policies, err := comparePatternPolicies()
		var out []client.Object
		for _, p := range policies {
			out = append(out, p)
		}
		return out, err
	}},
}

// What a denial by each enforcer says.
const (
	markVAP            = "ValidatingAdmissionPolicy"
	markKyvapWebhook   = "validate.kyvap.io"
	markKyvernoWebhook = "kyverno.svc"
)

// compareNamespace holds the admission benchmark's namespaced requests.
const compareNamespace = "compare"

// compareCheck is one policy of the admission benchmark, written as a
// Kyverno user writes it: a Pod check (Kyverno's autogen extends it to
// Deployments and the other pod controllers) or a check of one kind.
type compareCheck struct {
	name, kind, expression, message string
}

// compareChecks are the 8 checks of the admission benchmark, in the style
// of Kyverno's CEL policy library (pod security, best practices).
var compareChecks = []compareCheck{
	{"privileged", "Pod", "object.spec.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged)", "privileged containers are not allowed"},
	{"host-namespaces", "Pod", "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && !(has(object.spec.hostPID) && object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC)", "host namespaces are not allowed"},
	{"latest-tag", "Pod", "object.spec.containers.all(c, c.image.contains(':') && !c.image.endsWith(':latest'))", "images need a tag other than latest"},
	{"memory-limits", "Pod", "object.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && 'memory' in c.resources.limits)", "containers need a memory limit"},
	{"host-path", "Pod", "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))", "hostPath volumes are not allowed"},
	{"namespace-team", "Namespace", "has(object.metadata.labels) && 'team' in object.metadata.labels", "namespaces need a team label"},
	{"configmap-size", "ConfigMap", "!has(object.data) || size(object.data) <= 16", "at most 16 keys"},
	{"replicas", "Deployment", "!has(object.spec.replicas) || object.spec.replicas <= 10", "at most 10 replicas"},
}

// compareClusterPolicies are the checks as Enforce ClusterPolicies: the
// namespaced kinds in compareNamespace, the namespaces named bench-*.
func compareClusterPolicies() []*kyvernov1.ClusterPolicy {
	var out []*kyvernov1.ClusterPolicy
	for _, c := range compareChecks {
		rule := controlplane.CELRule(c.name, c.kind, c.expression, c.message)
		if c.kind == "Namespace" {
			rule.MatchResources.Any[0].Resources.Names = []string{"bench-*"}
		} else {
			rule.MatchResources.Any[0].Resources.Namespaces = []string{compareNamespace}
		}
		p := controlplane.ClusterPolicy("compare-"+c.name, kyvernov1.Enforce, rule)
		p.Labels = map[string]string{"bench": "compare"}
		out = append(out, p)
	}
	return out
}

// compareValidatingPolicies are the same checks as ValidatingPolicies
// (Deny): the Pod checks match Pods, and Kyverno's autogen (on by default
// for a ValidatingPolicy on Pods) extends them to the pod controllers, as
// for the ClusterPolicies.
func compareValidatingPolicies() []*policiesv1.ValidatingPolicy {
	resources := map[string][]admissionregistrationv1.Rule{
		"Pod":        {{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}},
		"Namespace":  {{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}}},
		"ConfigMap":  {{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
		"Deployment": {{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}},
	}
	off := false
	var out []*policiesv1.ValidatingPolicy
	for _, c := range compareChecks {
		match := &admissionregistrationv1.MatchResources{}
		for _, r := range resources[c.kind] {
			match.ResourceRules = append(match.ResourceRules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       r,
			}})
		}
		spec := policiesv1.ValidatingPolicySpec{
			MatchConstraints:        match,
			EvaluationConfiguration: &policiesv1.EvaluationConfiguration{Background: &policiesv1.BackgroundConfiguration{Enabled: &off}},
		}
		if c.kind == "Namespace" {
			spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "bench", Expression: "object.metadata.name.startsWith('bench-')"}}
		} else {
			match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: compareNamespace}}
		}
		spec.Validations = []admissionregistrationv1.Validation{{Expression: c.expression, Message: c.message}}
		out = append(out, &policiesv1.ValidatingPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "compare-" + c.name, Labels: map[string]string{"bench": "compare"}},
			Spec:       spec,
		})
	}
	return out
}

// compareRequest is one request of the mix and whether the checks deny it.
type compareRequest struct {
	obj    client.Object
	denied bool
}

// compareMix is the admission benchmark's request mix: Pods, Deployments,
// ConfigMaps and Namespaces, each allowed twice and denied once (a quarter
// of the requests are denied, each by one check).
func compareMix() []compareRequest {
	pod := func(name string, edit func(*corev1.PodSpec)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: compareNamespace, Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{
					Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				}},
			},
		}
		if edit != nil {
			edit(&p.Spec)
		}
		return p
	}
	deployment := func(name string, edit func(*corev1.PodSpec)) *appsv1.Deployment {
		d := controlplane.Deployment(compareNamespace, name, 2, nil)
		d.Spec.Template.Spec = pod(name, edit).Spec
		return d
	}
	data := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("key-%02d", i)] = "value"
		}
		return m
	}
	namespace := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	return []compareRequest{
		{pod("web", nil), false},
		{deployment("web", nil), false},
		{controlplane.ConfigMap(compareNamespace, "settings", data(4)), false},
		{namespace("bench-ok", map[string]string{"team": "a"}), false},
		{pod("api", nil), false},
		{deployment("api", nil), false},
		{controlplane.ConfigMap(compareNamespace, "flags", data(8)), false},
		{namespace("bench-ok-2", map[string]string{"team": "b"}), false},
		{pod("root", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), true},
		{deployment("latest", func(s *corev1.PodSpec) { s.Containers[0].Image = "nginx:latest" }), true},
		{controlplane.ConfigMap(compareNamespace, "huge", data(17)), true},
		{namespace("bench-no-team", nil), true},
	}
}

// mixResult is what the clients of a load saw.
type mixResult struct {
	latencies []time.Duration // sorted
	duration  time.Duration
	wrong     []string // requests answered otherwise than the column enforces
}

func (r *mixResult) quantile(q float64) float64 {
	if len(r.latencies) == 0 {
		return 0
	}
	return float64(r.latencies[int(q*float64(len(r.latencies)-1))].Microseconds()) / 1000
}

func (r *mixResult) perSecond() float64 { return float64(len(r.latencies)) / r.duration.Seconds() }

// add accumulates another round: quantiles read the rounds' latencies
// together, sorted.
func (r *mixResult) add(round *mixResult) {
	r.latencies = append(r.latencies, round.latencies...)
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	r.duration += round.duration
}

// runMix has clients dry-run create the mix, each one request after the
// other (client k starts at request k), for the duration; mark is what a
// denial by the column's enforcer says ("" for the floor: nothing is
// denied).
func runMix(ctx context.Context, mix []compareRequest, mark string, clients int, duration time.Duration) *mixResult {
	var (
		mu     sync.Mutex
		result = &mixResult{duration: duration}
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(duration)
	for k := range clients {
		wg.Go(func() {
			for i := k; time.Now().Before(deadline); i++ {
				req := mix[i%len(mix)]
				obj := req.obj.DeepCopyObject().(client.Object)
				start := time.Now()
				err := cp.Client.Create(ctx, obj, client.DryRunAll)
				took := time.Since(start)
				var wrong string
				switch {
				case mark == "" && err != nil:
					wrong = fmt.Sprintf("%s %s denied with no policy enforced: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
				case mark != "" && req.denied && (err == nil || !strings.Contains(err.Error(), mark)):
					wrong = fmt.Sprintf("%s not denied by %q: %v", obj.GetName(), mark, err)
				case mark != "" && !req.denied && err != nil:
					wrong = fmt.Sprintf("%s denied: %v", obj.GetName(), err)
				}
				mu.Lock()
				result.latencies = append(result.latencies, took)
				if wrong != "" && len(result.wrong) < 5 {
					result.wrong = append(result.wrong, wrong)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sort.Slice(result.latencies, func(i, j int) bool { return result.latencies[i] < result.latencies[j] })
	return result
}

// compareBench is one run of BenchmarkCompare: its settings, the Kyverno
// its chart configures, and what it measured.
type compareBench struct {
	b            *testing.B
	ctx          context.Context
	rounds       int
	load         time.Duration
	concurrency  []int
	policies     int // loaded in the memory measures
	scanned      int // resources of the scan
	scanLimit    time.Duration
	apiServerPid int
	kyverno      *kyvernochart.Config
	mix          []compareRequest

	admission map[string]map[int]*mixResult
	// phases are the benchmark's parts and how long each took.
	phases []benchPhase
	cpu    map[string]*cpuCount
	memory map[string]*memoryRow
	scan   map[string]*scanRow
}

type benchPhase struct {
	name string
	took time.Duration
}

// phase runs one part of the benchmark and records how long it took.
func (r *compareBench) phase(name string, run func()) {
	start := time.Now()
	run()
	r.phases = append(r.phases, benchPhase{name, time.Since(start)})
	r.b.Logf("%s: %s", name, time.Since(start).Round(time.Second))
}

type cpuCount struct {
	apiServer, policy time.Duration
	requests          int
}

type memoryRow struct {
	rss100, rss1000                     int64
	heapBase, heap100, heap1000         int64
	firstDenials                        []time.Duration
	policies100Ready, policies1000Ready time.Duration
}

type scanRow struct {
	wall    time.Duration
	peakRSS int64
	// complete is the reports complete when the wait ended: fewer than
	// the resources when the scan took longer than r.scanLimit.
	complete int
}

// estimate is the scan's wall time, extrapolated at the rate measured when
// it did not complete in time.
func (s *scanRow) estimate(total int) time.Duration {
	if s.complete >= total || s.complete == 0 {
		return s.wall
	}
	return time.Duration(float64(s.wall) * float64(total) / float64(s.complete))
}

// scanHangGuard is the longest wait for a scan that must complete (kyvap's,
// the floor's): a hang guard, not a measure.
const scanHangGuard = 10 * time.Minute

// scanResult waits for a scan's reports (at most limit, which keeps
// the benchmark's time bounded when a scanner is slow) and its peak RSS.
func (r *compareBench) scanResult(reports *completeReports, start time.Time, rss *rssSampler, limit time.Duration) *scanRow {
	complete := reports.wait(r.scanned, limit)
	row := &scanRow{wall: time.Since(start), complete: complete}
	if limit == scanHangGuard && complete < r.scanned {
		r.b.Errorf("only %d of %d reports complete after %s", complete, r.scanned, limit)
	}
	if rss != nil {
		row.peakRSS = rss.take(r.b)
	}
	r.b.Logf("%d of %d reports complete after %s", complete, r.scanned, row.wall.Round(100*time.Millisecond))
	return row
}

// kyvapEnv is the environment config/manager gives the manager.
var kyvapEnv = []string{"GOMEMLIMIT=256MiB"}

// BenchmarkCompare is `make bench-compare`: kyvap side by side with
// Kyverno v1.19.1 on one API server, every measure of issue 23 in one run.
// Kyverno runs as its own Helm chart (default values, rendered from its
// module by test/kyvernochart) configures it: its admission controller's
// and reports controller's flags and environment, and its `kyverno`
// ConfigMap, which kyvap reads too; only its VAP generation is off and its
// listening ports are local. kyvap is the manager binary as config/manager
// runs it. It measures:
//
//   - admission: 8 checks written three ways (policyFamilies): CEL
//     ClusterPolicies (compareChecks), ValidatingPolicies, and Kyverno's
//     classic language (patterns, anchors, deny conditions:
//     testdata/compare-patterns.yaml), each enforced by kyvap's VAPs, by
//     kyvap's webhook alone and by Kyverno; and the same checks written by
//     hand into VAPs (handWrittenVAPs). A request mix (compareMix: Pods,
//     Deployments, ConfigMaps, Namespaces; a quarter denied), 1, 16 and 64
//     clients, in rounds alternating the columns; every answer is checked
//     against the column's enforcer; CPU of the API server and the policy
//     process per 1,000 requests;
//   - policies loaded, written in CEL and as patterns: the policy
//     process's RSS with 100 and 1,000 single-rule policies, the API
//     server's heap per 100 policies, and the time from a policy's creation
//     to its first enforced denial;
//   - the background scan of 10,000 ConfigMaps × 50 rules (kyvap's scanner,
//     Kyverno's reports controller), with CEL rules and with the same rules
//     as patterns and deny conditions: wall time until every report has
//     every result, and the peak RSS.
//
// It writes bin/bench-compare.txt ("compare" lines, then the tables) and
// bin/bench-compare.svg (latency against clients). KYVAP_BENCH_ROUNDS
// (default 1; more alternate the columns again), KYVAP_BENCH_LOAD (4s),
// KYVAP_BENCH_POLICIES (1000), KYVAP_BENCH_SCAN_RESOURCES (10000) and
// KYVAP_BENCH_SCAN_LIMIT (1m: the longest wait for a scan, whose rate then
// gives an estimate; Kyverno's never completes within minutes) size it.
// One run whatever b.N; the defaults take about 25 minutes on 2 cores.
func BenchmarkCompare(b *testing.B) {
	r := &compareBench{
		b: b, ctx: context.Background(), rounds: 1, load: 4 * time.Second, concurrency: []int{1, 16, 64},
		policies: 1000, scanned: 10000, scanLimit: time.Minute, mix: compareMix(),
		admission: map[string]map[int]*mixResult{}, cpu: map[string]*cpuCount{}, memory: map[string]*memoryRow{}, scan: map[string]*scanRow{},
	}
	envInt := func(name string, into *int) {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			*into = v
		}
	}
	envInt("KYVAP_BENCH_ROUNDS", &r.rounds)
	envInt("KYVAP_BENCH_POLICIES", &r.policies)
	envInt("KYVAP_BENCH_SCAN_RESOURCES", &r.scanned)
	if v, err := time.ParseDuration(os.Getenv("KYVAP_BENCH_LOAD")); err == nil && v > 0 {
		r.load = v
	}
	if v, err := time.ParseDuration(os.Getenv("KYVAP_BENCH_SCAN_LIMIT")); err == nil && v > 0 {
		r.scanLimit = v
	}
	var err error
	if r.kyverno, err = kyvernochart.Render(); err != nil {
		b.Fatal(err)
	}
	if r.apiServerPid, err = cp.APIServerPid(); err != nil {
		b.Fatal(err)
	}
	r.setUp()
	started := time.Now()
	b.ResetTimer()
	for round := range r.rounds {
		r.phase(fmt.Sprintf("admission round %d", round+1), func() { r.admissionRound(round) })
	}
	r.policyLoad()
	r.backgroundScan()
	b.StopTimer()
	r.writeReport(time.Since(started))
}

// setUp creates Kyverno's namespace and ConfigMaps as its chart does, and
// the namespace of the requests (with its ServiceAccount: no controller
// makes it here).
func (r *compareBench) setUp() {
	b := r.b
	cp.EnsureNamespace(b, controlplane.KyvernoNamespace, nil)
	for name, data := range map[string]map[string]string{"kyverno": r.kyverno.ConfigMap, "kyverno-metrics": r.kyverno.MetricsConfigMap} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.KyvernoNamespace, Name: name}, Data: data}
		err := cp.Client.Create(r.ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			err = cp.Client.Update(r.ctx, cm)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	// Kyverno resolves the requester's roles from the bindings; the
	// benchmark's client (system:masters) gets cluster-admin through this.
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:masters"}},
	}
	if err := cp.Client.Create(r.ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	cp.EnsureNamespace(b, compareNamespace, nil)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: compareNamespace, Name: "default"}}
	if err := cp.Client.Create(r.ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
}

// kyvernoArgs are the flags of Kyverno's chart for a controller, without
// those only meaningful in a cluster (ports, Services, the controller-
// runtime metrics address: StartKyverno sets its own), its VAP generation
// off (the admission controller's flag). Its metrics stay on, as the chart
// has them.
func kyvernoArgs(c kyvernochart.Container) []string {
	args := kyvernochart.WithoutFlags(c.Args, "servicePort", "webhookServerPort", "metricsPort", "serverIP", "kubeconfig",
		"controllerRuntimeMetricsAddress", "caSecretName", "tlsSecretName", "generateValidatingAdmissionPolicy")
	if _, ok := kyvernochart.Flag(c.Args, "generateValidatingAdmissionPolicy"); ok {
		args = append(args, "--generateValidatingAdmissionPolicy=false")
	}
	return args
}

// kyvernoEnv is the chart's literal environment of a controller, without
// the variables StartKyverno sets for running out of cluster.
func kyvernoEnv(c kyvernochart.Container) []string {
	var env []string
	for name, value := range c.Env {
		switch name {
		case "KYVERNO_NAMESPACE", "KYVERNO_SERVICEACCOUNT_NAME", "KYVERNO_DEPLOYMENT", "KYVERNO_POD_NAME", "INIT_CONFIG", "METRICS_CONFIG", "KYVERNO_SVC":
			continue
		}
		env = append(env, name+"="+value)
	}
	sort.Strings(env)
	return env
}

func (r *compareBench) startKyverno() *controlplane.Kyverno {
	k, err := cp.StartKyverno(r.ctx, controlplane.KyvernoOptions{ExtraArgs: kyvernoArgs(r.kyverno.AdmissionController), Env: kyvernoEnv(r.kyverno.AdmissionController)})
	if err != nil {
		r.b.Fatal(err)
	}
	return k
}

func (r *compareBench) stopKyverno(k *controlplane.Kyverno) {
	if err := k.Stop(r.ctx, cp); err != nil {
		r.b.Fatal(err)
	}
}

// startKyvap runs the manager, VAP generation on or off, serving pprof
// (for the heap profiles of the memory measures).
func (r *compareBench) startKyvap(vaps bool) *manager {
	return startManagerWithEnv(r.b, kyvapEnv, "--generate-validating-admission-policy="+strconv.FormatBool(vaps), "--pprof-bind-address="+localAddr(r.b))
}

// stopKyvap stops the manager and removes its webhook configuration, as an
// uninstall does: nothing calls a webhook that is gone.
func (r *compareBench) stopKyvap(m *manager) {
	m.stop()
	err := cp.Client.Delete(r.ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}})
	if err != nil && !apierrors.IsNotFound(err) {
		r.b.Fatal(err)
	}
}

// waitForMix waits until every request of the mix gets the column's
// answer.
func (r *compareBench) waitForMix(column, mark string) {
	err := controlplane.Eventually(r.ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		got := runMixOnce(ctx, r.mix, mark)
		return got == nil, got
	})
	if err != nil {
		r.b.Fatalf("%s: the mix is not answered as enforced: %v", column, err)
	}
}

func runMixOnce(ctx context.Context, mix []compareRequest, mark string) error {
	var errs []error
	for _, req := range mix {
		_, err := cp.DryRunCreate(ctx, req.obj)
		switch {
		case mark == "" && err != nil:
			errs = append(errs, fmt.Errorf("%s denied: %w", req.obj.GetName(), err))
		case mark != "" && req.denied && (err == nil || !strings.Contains(err.Error(), mark)):
			if err == nil {
				err = errors.New("admitted")
			}
			errs = append(errs, fmt.Errorf("%s not denied by %q: %w", req.obj.GetName(), mark, err))
		case mark != "" && !req.denied && err != nil:
			errs = append(errs, fmt.Errorf("%s denied: %w", req.obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// measure runs the mix at every concurrency for the column, charging the
// CPU of the API server and of the policy process (0: none).
func (r *compareBench) measure(column, mark string, policyPid int, webhookCalls func() float64) {
	b := r.b
	if r.admission[column] == nil {
		r.admission[column] = map[int]*mixResult{}
		r.cpu[column] = &cpuCount{}
	}
	for _, n := range r.concurrency {
		var callsBefore float64
		if webhookCalls != nil {
			callsBefore = webhookCalls()
		}
		apiBefore, policyBefore := r.cpuOf(r.apiServerPid), r.cpuOf(policyPid)
		got := runMix(r.ctx, r.mix, mark, n, r.load)
		r.cpu[column].apiServer += r.cpuOf(r.apiServerPid) - apiBefore
		r.cpu[column].policy += r.cpuOf(policyPid) - policyBefore
		r.cpu[column].requests += len(got.latencies)
		if len(got.wrong) > 0 {
			b.Fatalf("%s, %d clients: wrong answers, e.g. %s", column, n, strings.Join(got.wrong, "; "))
		}
		if webhookCalls != nil {
			// kyvap's webhook answers the requests of its webhook columns
			// (three in four match a check), none of the VAP columns.
			calls := webhookCalls() - callsBefore
			through := strings.Contains(column, "webhook")
			if (through && calls < float64(len(got.latencies))/2) || (!through && calls > 0) {
				b.Fatalf("%s, %d clients: kyvap's webhook answered %v of %d requests", column, n, calls, len(got.latencies))
			}
		}
		acc := r.admission[column][n]
		if acc == nil {
			acc = &mixResult{}
			r.admission[column][n] = acc
		}
		acc.add(got)
	}
}

func (r *compareBench) cpuOf(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	d, err := controlplane.ProcessCPU(pid)
	if err != nil {
		r.b.Fatal(err)
	}
	return d
}

func kyvapWebhookCalls(b *testing.B, m *manager) func() float64 {
	return func() float64 {
		v, err := m.metric("controller_runtime_webhook_requests_total")
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
}

// deleteKyvapVAPs deletes kyvap's generated VAPs and bindings, as the
// garbage collector would once their policies are gone; the manager is
// stopped.
func (r *compareBench) deleteKyvapVAPs() {
	managed := client.MatchingLabels{"app.kubernetes.io/managed-by": "kyvap"}
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, &admissionregistrationv1.ValidatingAdmissionPolicy{}} {
		if err := cp.Client.DeleteAllOf(r.ctx, obj, managed); err != nil {
			r.b.Fatal(err)
		}
	}
	r.waitNoKyvapVAPs()
}

// waitNoKyvapVAPs waits until kyvap's generated VAPs are gone.
func (r *compareBench) waitNoKyvapVAPs() {
	err := controlplane.Eventually(r.ctx, 5*time.Minute, func(ctx context.Context) (bool, error) {
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		if err := cp.Client.List(ctx, &vaps, client.MatchingLabels{"app.kubernetes.io/managed-by": "kyvap"}); err != nil {
			return false, err
		}
		return len(vaps.Items) == 0, fmt.Errorf("%d of kyvap's VAPs left", len(vaps.Items))
	})
	if err != nil {
		r.b.Fatal(err)
	}
}

// waitNoKyvapWebhookConfiguration waits until kyvap's webhook configuration
// is gone: its webhook has no rule to enforce.
func (r *compareBench) waitNoKyvapWebhookConfiguration() {
	err := controlplane.Eventually(r.ctx, time.Minute, func(ctx context.Context) (bool, error) {
		err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		return apierrors.IsNotFound(err), fmt.Errorf("kyvap's webhook configuration is still there: %w", err)
	})
	if err != nil {
		r.b.Fatal(err)
	}
}

// admissionRound measures every admission column once, in an order that
// never leaves a policy enforced by two enforcers or a webhook
// configuration pointing at a stopped process.
func (r *compareBench) admissionRound(round int) {
	b := r.b
	r.b.Logf("admission round %d", round+1)
	for _, family := range policyFamilies {
		objs, err := family.objects()
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range objs {
			cp.Create(b, o)
		}
		// kyvap as deployed: every check is a VAP.
		m := r.startKyvap(true)
		r.waitForMix(family.vapCol, markVAP)
		// New rules go through kyvap's webhook until their VAPs are
		// active; then it has no rule left, and no configuration.
		r.waitNoKyvapWebhookConfiguration()
		r.measure(family.vapCol, markVAP, m.cmd.Process.Pid, kyvapWebhookCalls(b, m))
		r.stopKyvap(m)
		// kyvap's webhook alone: the manager removes its VAPs.
		m = r.startKyvap(false)
		r.waitNoKyvapVAPs()
		r.waitForMix(family.webhookCol, markKyvapWebhook)
		r.measure(family.webhookCol, markKyvapWebhook, m.cmd.Process.Pid, kyvapWebhookCalls(b, m))
		r.stopKyvap(m)
		// Kyverno, its chart's configuration, VAP generation off.
		k := r.startKyverno()
		r.waitForMix(family.kyCol, markKyvernoWebhook)
		r.measure(family.kyCol, markKyvernoWebhook, k.Pid(), nil)
		for _, o := range objs {
			if err := cp.Client.Delete(r.ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		r.stopKyverno(k)
	}
	// The same checks written by hand into VAPs: what the API server's
	// evaluation of a check costs without anything kyvap adds.
	vaps, bindings := handWrittenVAPs()
	for i := range vaps {
		cp.Create(b, vaps[i])
		cp.Create(b, bindings[i])
	}
	r.waitForMix(colHandWritten, markVAP)
	r.measure(colHandWritten, markVAP, 0, nil)
	for i := range vaps {
		if err := cp.Client.Delete(r.ctx, bindings[i]); err != nil {
			b.Fatal(err)
		}
		if err := cp.Client.Delete(r.ctx, vaps[i]); err != nil {
			b.Fatal(err)
		}
	}
	r.waitForMix(colFloor, "")
	r.measure(colFloor, "", 0, nil)
}

// loadPolicy is the i-th policy of the memory measures: one rule that
// denies the ConfigMap probe-<i> of its namespace (and nothing else: a
// request matches one policy whatever their number).
func loadPolicy(i int) *kyvernov1.ClusterPolicy {
	rule := controlplane.CELRule("labelled", "ConfigMap", "has(object.metadata.labels) && 'ok' in object.metadata.labels", fmt.Sprintf("policy %d wants an ok label", i))
	rule.MatchResources.Any[0].Resources.Namespaces = []string{compareNamespace}
	rule.MatchResources.Any[0].Resources.Names = []string{fmt.Sprintf("probe-%d", i)}
	p := controlplane.ClusterPolicy(fmt.Sprintf("load-%04d", i), kyvernov1.Enforce, rule)
	p.Labels = map[string]string{"bench": "compare-load"}
	return p
}

func loadProbe(i int) *corev1.ConfigMap {
	return controlplane.ConfigMap(compareNamespace, fmt.Sprintf("probe-%d", i), nil)
}

// loadPolicies creates policies [from, to) and waits until each denies its
// probe with the enforcer's mark; it returns how long that took.
func (r *compareBench) loadPolicies(policy func(int) *kyvernov1.ClusterPolicy, from, to int, mark string) time.Duration {
	start := time.Now()
	if err := parallel(to-from, 16, func(i int) error { return cp.Client.Create(r.ctx, policy(from+i)) }); err != nil {
		r.b.Fatal(err)
	}
	err := parallel(to-from, 8, func(i int) error {
		probe := loadProbe(from + i)
		return controlplane.Eventually(r.ctx, 5*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := cp.DryRunCreate(ctx, probe)
			return err != nil && strings.Contains(err.Error(), mark), fmt.Errorf("%s not denied by %q: %w", probe.Name, mark, err)
		})
	})
	if err != nil {
		r.b.Fatal(err)
	}
	return time.Since(start)
}

// firstDenial is the time from a new policy's creation (the moment
// `kubectl apply` returns) to its first denial by the enforcer (marks:
// kyvap's webhook enforces a new rule until its VAP is active).
func (r *compareBench) firstDenial(policy func(int) *kyvernov1.ClusterPolicy, i int, marks ...string) time.Duration {
	p := policy(i)
	probe := loadProbe(i)
	if err := cp.Client.Create(r.ctx, p); err != nil {
		r.b.Fatal(err)
	}
	applied := time.Now()
	for {
		_, err := cp.DryRunCreate(r.ctx, probe)
		for _, mark := range marks {
			if err != nil && strings.Contains(err.Error(), mark) {
				return time.Since(applied)
			}
		}
		if time.Since(applied) > 3*time.Minute {
			r.b.Fatalf("policy %s never denied %s with %q: %v", p.Name, probe.Name, marks, err)
		}
	}
}

func (r *compareBench) heap() int64 {
	h, err := cp.APIServerHeap(r.ctx)
	if err != nil {
		r.b.Fatal(err)
	}
	return h
}

// loadColumn fills a memory row: the enforcer runs with no policy, then
// 100, then r.policies, then three more are timed to their first denial.
// With every policy loaded, it saves the API server's heap profile (and
// the manager's, m, when kyvap enforces) under bin/.
func (r *compareBench) loadColumn(policy func(int) *kyvernov1.ClusterPolicy, column, mark string, pid int, m *manager) {
	row := &memoryRow{heapBase: r.heap()}
	r.memory[column] = row
	rss := func() int64 {
		v, err := controlplane.ProcessRSS(pid)
		if err != nil {
			r.b.Fatal(err)
		}
		return v
	}
	first := min(100, r.policies)
	row.policies100Ready = r.loadPolicies(policy, 0, first, mark)
	row.rss100, row.heap100 = rss(), r.heap()
	releases := func() float64 { return 0 }
	if m != nil {
		releases = func() float64 {
			v, err := m.metric("kyvap_memory_releases_total")
			if err != nil {
				r.b.Fatal(err)
			}
			return v
		}
	}
	released := releases()
	row.policies1000Ready = r.loadPolicies(policy, first, r.policies, mark)
	if m != nil {
		// kyvap returns the heap of the load's burst once idle
		// (--release-memory, within a few of its 5 s looks): the RSS it
		// keeps is measured after that, or after 30 s without one.
		_ = controlplane.Eventually(r.ctx, 30*time.Second, func(context.Context) (bool, error) {
			return releases() > released, nil
		})
	}
	row.rss1000, row.heap1000 = rss(), r.heap()
	// Heap profiles with every policy loaded, for go tool pprof.
	slug := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(strings.ToLower(column))
	if err := cp.SaveAPIServerHeapProfile(r.ctx, controlplane.RepoPath(r.b, "bin", "bench-compare-apiserver-heap-"+slug+".pprof")); err != nil {
		r.b.Fatal(err)
	}
	if m != nil && m.pprofAddr != "" {
		saveProfile(m.pprofAddr, "heap", controlplane.RepoPath(r.b, "bin", "bench-compare-manager-heap-"+slug+".pprof"))
	}
	for k := range 3 {
		row.firstDenials = append(row.firstDenials, r.firstDenial(policy, r.policies+k, mark, markKyvapWebhook))
	}
}

func (r *compareBench) deleteLoadPolicies() {
	if err := cp.Client.DeleteAllOf(r.ctx, &kyvernov1.ClusterPolicy{}, client.MatchingLabels{"bench": "compare-load"}); err != nil {
		r.b.Fatal(err)
	}
	err := controlplane.Eventually(r.ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var left kyvernov1.ClusterPolicyList
		if err := cp.Client.List(ctx, &left, client.MatchingLabels{"bench": "compare-load"}); err != nil {
			return false, err
		}
		return len(left.Items) == 0, fmt.Errorf("%d policies left", len(left.Items))
	})
	if err != nil {
		r.b.Fatal(err)
	}
}

// policyLoad measures the enforcers with many policies, written in CEL
// (loadPolicy) and as patterns (loadPatternPolicy): kyvap's webhook
// alone, Kyverno, kyvap as deployed. Each column deletes its policies
// before the next; the VAP column comes last, as its VAPs and bindings are
// the most objects to delete.
func (r *compareBench) policyLoad() {
	for _, family := range []struct {
		policy                    func(int) *kyvernov1.ClusterPolicy
		vapCol, webhookCol, kyCol string
	}{
		{loadPolicy, colKyvapVAPs, colKyvapWebhook, colKyverno},
		{loadPatternPolicy, colKyvapVAPsPat, colKyvapWebhookPt, colKyvernoPattern},
	} {
		r.b.Logf("policy load: %d policies (%s)", r.policies, family.vapCol)
		r.phase("policy load, "+family.webhookCol, func() {
			m := r.startKyvap(false)
			r.loadColumn(family.policy, family.webhookCol, markKyvapWebhook, m.cmd.Process.Pid, m)
			r.stopKyvap(m)
			r.deleteLoadPolicies()
		})
		r.phase("policy load, "+family.kyCol, func() {
			k := r.startKyverno()
			r.loadColumn(family.policy, family.kyCol, markKyvernoWebhook, k.Pid(), nil)
			r.deleteLoadPolicies()
			r.stopKyverno(k)
		})
		r.phase("policy load, "+family.vapCol, func() {
			m := r.startKyvap(true)
			r.loadColumn(family.policy, family.vapCol, markVAP, m.cmd.Process.Pid, m)
			r.stopKyvap(m)
			// The perf control plane has no garbage collector: the VAPs
			// and bindings go with collection deletes, then the policies.
			r.deleteKyvapVAPs()
			r.deleteLoadPolicies()
		})
	}
}

// Scanners of the scan table: kyvap and Kyverno with the CEL rules
// (scanPolicy), the same with the classic rules (scanPatternPolicy), and the
// floor.
const (
	scanKyvap          = "kyvap"
	scanKyverno        = "Kyverno"
	scanKyvapPattern   = "kyvap (pattern)"
	scanKyvernoPattern = "Kyverno (pattern)"
	scanFloor          = "floor"
)

// backgroundScan measures the scan of r.scanned ConfigMaps × 50 rules by
// kyvap's scanner and by Kyverno's reports controller (beside its
// admission controller, which marks the policies ready, as installed),
// first with CEL rules, then with the same rules in Kyverno's classic
// language, on the same ConfigMaps with no report left between them.
func (r *compareBench) backgroundScan() {
	b := r.b
	const ns = "compare-scan"
	rules := scanPolicies * scanRulesPerPolicy
	r.b.Logf("background scan: %d ConfigMaps × %d rules", r.scanned, rules)
	cp.EnsureNamespace(b, ns, nil)
	r.phase("scan, creating the ConfigMaps", func() {
		if err := parallel(r.scanned, 16, func(i int) error {
			return cp.Client.Create(r.ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"tier": "web"}},
				Data:       map[string]string{"k": "v"},
			})
		}); err != nil {
			b.Fatal(err)
		}
	})
	r.phase("scan, CEL rules", func() { r.scanWith(ns, scanPolicy, scanKyvap, scanKyverno) })
	r.phase("scan, floor", func() { r.scanFloor(ns, ns+"-floor") })
	r.phase("scan, deleting the reports", func() { r.deleteReports(ns) })
	r.phase("scan, pattern rules", func() { r.scanWith(ns, scanPatternPolicy, scanKyvapPattern, scanKyvernoPattern) })
}

// scanWith runs the scan of ns by kyvap, then by Kyverno, with the
// policies policy makes, and deletes them.
func (r *compareBench) scanWith(ns string, policy func(int, string) *kyvernov1.ClusterPolicy, kyvapRow, kyvernoRow string) {
	b := r.b
	rules := int64(scanPolicies * scanRulesPerPolicy)
	create := func(prefix string) []*kyvernov1.ClusterPolicy {
		var policies []*kyvernov1.ClusterPolicy
		for i := range scanPolicies {
			p := policy(i, ns)
			p.Name = prefix + p.Name
			cp.Create(b, p)
			policies = append(policies, p)
		}
		return policies
	}
	remove := func(policies []*kyvernov1.ClusterPolicy) {
		for _, p := range policies {
			if err := cp.Client.Delete(r.ctx, p); err != nil {
				b.Fatal(err)
			}
		}
	}

	// kyvap: the manager as deployed.
	kyvapReports := watchCompleteReports(b, ns, "kyvap", rules)
	m := r.startKyvap(true)
	rss := samplePeakRSS(b, m.rssBytes)
	rss.take(b)
	start := time.Now()
	policies := create("")
	r.scan[kyvapRow] = r.scanResult(kyvapReports, start, rss, scanHangGuard)
	r.stopKyvap(m)
	remove(policies)

	// Kyverno: fresh policies, which kyvap never marked generated.
	kyvernoReports := watchCompleteReports(b, ns, "kyverno", rules)
	k := r.startKyverno()
	reports := cp.StartKyvernoReports(b, controlplane.KyvernoOptions{ExtraArgs: kyvernoArgs(r.kyverno.ReportsController), Env: kyvernoEnv(r.kyverno.ReportsController)})
	rss = samplePeakRSS(b, func() (int64, error) { return controlplane.ProcessRSS(reports.Pid()) })
	rss.take(b)
	start = time.Now()
	policies = create("kyverno-")
	r.scan[kyvernoRow] = r.scanResult(kyvernoReports, start, rss, r.scanLimit)
	// Nothing else runs during what follows.
	reports.Stop()
	r.stopKyverno(k)
	remove(policies)
}

// scanFloor writes the same number of reports as a scan, copies of one of
// kyvap's in ns, by 16 parallel clients, as a scanner with no cost of its
// own would write them. They go to a namespace of their own, into, where
// nothing scans and nothing deletes them: the next scan of ns starts with
// no report but kyvap's and Kyverno's to delete.
func (r *compareBench) scanFloor(ns, into string) {
	b := r.b
	rules := int64(scanPolicies * scanRulesPerPolicy)
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(policyReportGVK.GroupVersion().WithKind("PolicyReportList"))
	if err := cp.Client.List(r.ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/managed-by": "kyvap"}, client.Limit(1)); err != nil || len(list.Items) == 0 {
		b.Fatalf("no report of kyvap's to copy: %v", err)
	}
	template := list.Items[0]
	cp.EnsureNamespace(b, into, nil)
	floorReports := watchCompleteReports(b, into, "floor", rules)
	start := time.Now()
	if err := parallel(r.scanned, 16, func(i int) error {
		report := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": template.GetAPIVersion(), "kind": template.GetKind(),
			"scope": template.Object["scope"], "summary": template.Object["summary"], "results": template.Object["results"],
		}}
		report.SetNamespace(into)
		report.SetName(fmt.Sprintf("floor-%05d", i))
		report.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "floor"})
		return cp.Client.Create(r.ctx, report)
	}); err != nil {
		b.Fatal(err)
	}
	r.scan[scanFloor] = r.scanResult(floorReports, start, nil, scanHangGuard)
}

// deleteReports deletes every PolicyReport of the namespace, and Kyverno's
// ephemeral reports, and waits until none is left: the next scan starts
// from nothing, as the first did. Reports go by collection deletes of
// reportDeleteChunk (the API server deletes a page of a collection
// delete's list): one collection delete of 20,000 reports outlasts the
// API server's request timeout, and deleting them one by one costs a
// request each.
func (r *compareBench) deleteReports(ns string) {
	for _, gvk := range []schema.GroupVersionKind{policyReportGVK, ephemeralReportGVK} {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		for {
			if err := cp.Client.List(r.ctx, &list, client.InNamespace(ns), client.Limit(1)); err != nil {
				if meta.IsNoMatchError(err) {
					break
				}
				r.b.Fatal(err)
			}
			if len(list.Items) == 0 {
				break
			}
			if err := cp.Client.DeleteAllOf(r.ctx, obj, &client.DeleteAllOfOptions{ListOptions: client.ListOptions{Namespace: ns, Limit: reportDeleteChunk}}); err != nil {
				r.b.Fatal(err)
			}
		}
	}
}

// reportDeleteChunk is the page of a collection delete of reports: the API
// server deletes about 300 reports a second one after the other, so a page
// ends well within its request timeout.
const reportDeleteChunk = 2000

// ephemeralReportGVK is Kyverno's per-resource report, which its reports
// controller aggregates into PolicyReports.
var ephemeralReportGVK = schema.GroupVersionKind{Group: "reports.kyverno.io", Version: "v1", Kind: "EphemeralReport"}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// writeReport writes bin/bench-compare.txt and bin/bench-compare.svg.
func (r *compareBench) writeReport(took time.Duration) {
	b := r.b
	var out strings.Builder
	// other names what kyvap is compared with: "kyverno", or
	// "handwritten" (the same checks written by hand into VAPs).
	other := "kyverno"
	line := func(measure string, kyvap, against float64, floor string, unit string) {
		fmt.Fprintf(&out, "compare %s kyvap=%.2f %s=%.2f floor=%s unit=%s\n", measure, kyvap, other, against, floor, unit)
	}
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	cpuPer1000 := func(c *cpuCount) float64 {
		return (c.apiServer + c.policy).Seconds() / float64(c.requests) * 1000
	}
	// admissionLines compare column a (as "kyvap") with column b.
	admissionLines := func(prefix, a, b string) {
		for _, n := range r.concurrency {
			kv, ky, fl := r.admission[a][n], r.admission[b][n], r.admission[colFloor][n]
			line(fmt.Sprintf("%sadmission-p50-%dclients", prefix, n), kv.quantile(0.5), ky.quantile(0.5), f2(fl.quantile(0.5)), "ms")
			line(fmt.Sprintf("%sadmission-p99-%dclients", prefix, n), kv.quantile(0.99), ky.quantile(0.99), f2(fl.quantile(0.99)), "ms")
			line(fmt.Sprintf("%sadmission-throughput-%dclients", prefix, n), kv.perSecond(), ky.perSecond(), f2(fl.perSecond()), "req/s")
		}
		line(prefix+"cpu-per-1000-requests", cpuPer1000(r.cpu[a]), cpuPer1000(r.cpu[b]), f2(cpuPer1000(r.cpu[colFloor])), "cpu-s")
	}
	// The API server's heap grows by this much per 100 policies between
	// 100 and r.policies of them: objects deleted by the previous column
	// may still leave the watch cache's history meanwhile, a few MiB of
	// noise that the difference with 0 policies would carry in full.
	perHundred := func(m *memoryRow) float64 {
		if r.policies <= 100 {
			return mib(m.heap100-m.heapBase) / float64(r.policies) * 100
		}
		return mib(m.heap1000-m.heap100) / float64(r.policies-100) * 100
	}
	memoryLines := func(prefix, a, b string) {
		kv, ky := r.memory[a], r.memory[b]
		line(prefix+"rss-100-policies", mib(kv.rss100), mib(ky.rss100), "-", "MiB")
		line(fmt.Sprintf("%srss-%d-policies", prefix, r.policies), mib(kv.rss1000), mib(ky.rss1000), "-", "MiB")
		line(prefix+"first-denial", float64(median(kv.firstDenials).Milliseconds()), float64(median(ky.firstDenials).Milliseconds()), "-", "ms")
		line(prefix+"apiserver-heap-per-100-policies", perHundred(kv), perHundred(ky), "-", "MiB")
	}
	scanLines := func(prefix, a, b string) {
		floor := f2(r.scan[scanFloor].estimate(r.scanned).Seconds())
		line(prefix+"scan-wall", r.scan[a].estimate(r.scanned).Seconds(), r.scan[b].estimate(r.scanned).Seconds(), floor, "s")
		line(prefix+"scan-peak-rss", mib(r.scan[a].peakRSS), mib(r.scan[b].peakRSS), "-", "MiB")
	}
	// kyvap as deployed against Kyverno's ClusterPolicy path (CEL rules).
	admissionLines("", colKyvapVAPs, colKyverno)
	memoryLines("", colKyvapVAPs, colKyverno)
	scanLines("", scanKyvap, scanKyverno)
	// The same with ValidatingPolicies, then with Kyverno's classic
	// language (Kyverno's pattern engine); kyvap's webhook alone against
	// Kyverno's.
	admissionLines("vpol-", colKyvapVAPsVPol, colKyvernoVPol)
	admissionLines("vpol-webhook-", colKyvapWebhookVP, colKyvernoVPol)
	admissionLines("webhook-", colKyvapWebhook, colKyverno)
	admissionLines("pattern-", colKyvapVAPsPat, colKyvernoPattern)
	admissionLines("pattern-webhook-", colKyvapWebhookPt, colKyvernoPattern)
	memoryLines("pattern-", colKyvapVAPsPat, colKyvernoPattern)
	memoryLines("pattern-webhook-", colKyvapWebhookPt, colKyvernoPattern)
	scanLines("pattern-", scanKyvapPattern, scanKyvernoPattern)
	// kyvap's generated VAPs against the same checks written by hand into
	// VAPs.
	other = "handwritten"
	admissionLines("handwritten-cel-", colKyvapVAPs, colHandWritten)
	admissionLines("handwritten-pattern-", colKyvapVAPsPat, colHandWritten)
	// Each check's CEL cost: kyvap's VAPs compiled from the pattern against
	// the hand-written CEL of the same check (compareCheckCosts).
	costs := compareCheckCosts(b)
	for _, c := range costs {
		fmt.Fprintf(&out, "compare pattern-cel-cost-%s kyvap=%d handwritten=%d floor=- unit=cost-units\n", c.check, c.patternVAP, c.handWritten)
		fmt.Fprintf(&out, "compare pattern-cel-cost-without-config-%s kyvap=%d handwritten=%d floor=- unit=cost-units\n", c.check, c.patternCheck, c.handWritten)
		fmt.Fprintf(&out, "compare pattern-cost-estimate-%s kyvap=%d handwritten=%d floor=- unit=cost-units\n", c.check, c.patternEstimate, c.celEstimate)
	}

	fmt.Fprintf(&out, "\nBenchmarkCompare in %s: %d rounds of %s per column and concurrency; 8 checks (CEL, ValidatingPolicies, patterns, hand-written VAPs); a mix of Pods, Deployments, ConfigMaps, Namespaces (a quarter denied)\n", took.Round(time.Second), r.rounds, r.load)
	fmt.Fprintf(&out, "Kyverno's admission controller flags (its chart's, VAP generation off): %s\n", strings.Join(kyvernoArgs(r.kyverno.AdmissionController), " "))
	fmt.Fprintf(&out, "\n%-30s %8s %10s %10s %10s %16s\n", "column", "clients", "req/s", "p50 ms", "p99 ms", "CPU s/1000 req")
	for _, c := range compareColumns {
		for _, n := range r.concurrency {
			m := r.admission[c][n]
			fmt.Fprintf(&out, "%-30s %8d %10.1f %10.2f %10.2f %16.3f\n", c, n, m.perSecond(), m.quantile(0.5), m.quantile(0.99), cpuPer1000(r.cpu[c]))
		}
	}
	fmt.Fprintf(&out, "\nCPU per 1,000 requests, by process (all concurrencies):\n%-30s %14s %14s\n", "column", "API server s", "policy proc s")
	for _, c := range compareColumns {
		cc := r.cpu[c]
		fmt.Fprintf(&out, "%-30s %14.3f %14.3f\n", c, cc.apiServer.Seconds()/float64(cc.requests)*1000, cc.policy.Seconds()/float64(cc.requests)*1000)
	}
	fmt.Fprintf(&out, "\n%d single-rule policies loaded:\n%-30s %10s %10s %14s %14s %18s %14s\n", r.policies, "column", "RSS@100", fmt.Sprintf("RSS@%d", r.policies), "ready@100 s", fmt.Sprintf("ready@%d s", r.policies), "API heap/100 MiB", "1st denial ms")
	for _, c := range []string{colKyvapVAPs, colKyvapWebhook, colKyverno, colKyvapVAPsPat, colKyvapWebhookPt, colKyvernoPattern} {
		m := r.memory[c]
		var denials []string
		for _, d := range m.firstDenials {
			denials = append(denials, strconv.FormatInt(d.Milliseconds(), 10))
		}
		fmt.Fprintf(&out, "%-30s %10.1f %10.1f %14.1f %14.1f %18.2f %14s\n", c, mib(m.rss100), mib(m.rss1000), m.policies100Ready.Seconds(), m.policies1000Ready.Seconds(), perHundred(m), strings.Join(denials, ","))
	}
	fmt.Fprintf(&out, "\nbackground scan, %d ConfigMaps × %d rules (Kyverno's waited for at most %s):\n%-30s %10s %14s %12s %14s\n", r.scanned, scanPolicies*scanRulesPerPolicy, r.scanLimit, "scanner", "wall s", "peak RSS MiB", "complete", "estimate s")
	for _, c := range []string{scanKyvap, scanKyverno, scanKyvapPattern, scanKyvernoPattern, scanFloor} {
		row := r.scan[c]
		fmt.Fprintf(&out, "%-30s %10.1f %14.1f %12d %14.1f\n", c, row.wall.Seconds(), mib(row.peakRSS), row.complete, row.estimate(r.scanned).Seconds())
	}
	fmt.Fprintf(&out, "(floor: the same reports written directly by 16 clients; estimate: the wall time at the measured rate when a scan did not complete in time)\n")
	fmt.Fprintf(&out, "\nCEL cost of each check on the mix (runtime: what CEL counts evaluating the VAPs on the requests they match; estimate: the lowered rules' worst case; ratio: pattern VAPs to hand-written VAPs):\n%s", checkCostTable(costs))
	fmt.Fprintf(&out, "\nwhere the time went:\n")
	for _, p := range r.phases {
		fmt.Fprintf(&out, "%-44s %8.1f s\n", p.name, p.took.Seconds())
	}
	dir := controlplane.RepoPath(b, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-compare.txt"), []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var series []plotSeries
	for _, c := range compareColumns {
		s := plotSeries{name: c}
		for _, n := range r.concurrency {
			s.points = append(s.points, plotPoint{clients: n, p50: r.admission[c][n].quantile(0.5), p99: r.admission[c][n].quantile(0.99)})
		}
		series = append(series, s)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-compare.svg"), latencyPlot(series), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("report in %s:\n%s", filepath.Join(dir, "bench-compare.txt"), out.String())
}

// completeReports counts the PolicyReports of one writer in a namespace
// that have a result for every rule, as a watch sees them.
type completeReports struct {
	mu       sync.Mutex
	complete map[string]bool
	writer   string
}

// watchCompleteReports watches the PolicyReports that writer ("kyvap",
// "kyverno": their app.kubernetes.io/managed-by label) writes in the
// namespace; a report is complete with rules passes. Only names and
// summaries are kept.
func watchCompleteReports(b *testing.B, namespace, writer string, rules int64) *completeReports {
	report := &unstructured.Unstructured{}
	report.SetGroupVersionKind(policyReportGVK)
	informer, sync := reportInformer(b, namespace, writer, report, func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			summary, _, _ := unstructured.NestedMap(u.Object, "summary")
			kept := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "summary": summary}}
			kept.SetName(u.GetName())
			kept.SetNamespace(u.GetNamespace())
			kept.SetResourceVersion(u.GetResourceVersion())
			return kept, nil
		}
		return obj, nil
	})
	c := &completeReports{complete: map[string]bool{}, writer: writer}
	record := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		pass, _, _ := unstructured.NestedInt64(u.Object, "summary", "pass")
		c.mu.Lock()
		defer c.mu.Unlock()
		if pass >= rules {
			c.complete[u.GetName()] = true
		} else {
			delete(c.complete, u.GetName())
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
		DeleteFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				c.mu.Lock()
				delete(c.complete, u.GetName())
				c.mu.Unlock()
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	sync()
	return c
}

func (c *completeReports) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.complete)
}

// wait waits until n reports are complete, at most limit, and returns
// how many are.
func (c *completeReports) wait(n int, limit time.Duration) int {
	_ = controlplane.EventuallyEvery(context.Background(), 100*time.Millisecond, limit, func(context.Context) (bool, error) {
		return c.count() >= n, nil
	})
	return c.count()
}
