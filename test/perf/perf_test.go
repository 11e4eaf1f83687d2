// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package perf measures the operator against the real control plane. These
// are benchmarks (go test -bench), never timed assertions; `make bench`
// runs them and docs/performance.md records the numbers.
package perf

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
)

var cp *controlplane.ControlPlane

// TestMain starts the control plane only for benchmarks: the package's
// tests are of pure code, so `go test ./test/perf/` without -bench starts
// nothing. Kyverno's CRDs are all there: BenchmarkCompare runs Kyverno.
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunBenchmarkSuite(m, controlplane.Options{AllKyvernoCRDs: true}, &cp))
}

// manager is the real manager binary running against the control plane.
type manager struct {
	cmd         *exec.Cmd
	metricsAddr string
	probeAddr   string
	// pprofAddr serves Go's pprof endpoints when the benchmark asked for
	// them (--pprof-bind-address).
	pprofAddr string
}

var buildManager = sync.OnceValues(func() (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(root, "bin", "manager")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/manager")
	build.Dir = root
	if msg, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the manager: %w\n%s", err, msg)
	}
	return out, nil
})

// localAddr is 127.0.0.1 on a free port.
func localAddr(b testing.TB) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(controlplane.FreePort(b)))
}

// startManager runs the manager binary against the control plane (stopped
// when the benchmark ends) and waits until it is ready: its caches are
// synced and every policy is loaded (the readiness probe).
func startManager(b testing.TB, args ...string) *manager {
	b.Helper()
	return startManagerWithEnv(b, nil, args...)
}

// startManagerWithEnv is startManager with more environment variables
// ("NAME=value").
func startManagerWithEnv(b testing.TB, env []string, args ...string) *manager {
	b.Helper()
	bin, err := buildManager()
	if err != nil {
		b.Fatal(err)
	}
	user, err := cp.Env.AddUser(envtest.User{Name: "kyvap", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	m := &manager{metricsAddr: localAddr(b), probeAddr: localAddr(b)}
	// The manager runs as deployed, fallback webhook included; the API
	// server reaches it on this machine by URL.
	webhookAddr := localAddr(b)
	_, webhookPort, _ := net.SplitHostPort(webhookAddr)
	cp.EnsureNamespace(b, controlplane.OperatorNamespace, nil)
	m.cmd = exec.Command(bin, append([]string{
		// Plain HTTP metrics on 127.0.0.1, read without a token.
		"--metrics-bind-address=" + m.metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=" + m.probeAddr, "--zap-log-level=error",
		"--webhook-host=127.0.0.1", "--webhook-port=" + webhookPort, "--webhook-url=https://" + webhookAddr, "--webhook-namespace=kyvap-system",
	}, args...)...)
	m.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+path), env...)
	for _, a := range args {
		if addr, ok := strings.CutPrefix(a, "--pprof-bind-address="); ok {
			m.pprofAddr = addr
		}
	}
	m.cmd.Stderr = os.Stderr
	if err := m.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.stop)
	err = controlplane.Eventually(context.Background(), 2*time.Minute, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + m.probeAddr + "/readyz")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s: %s", resp.Status, body)
	})
	if err != nil {
		b.Fatalf("the manager never became ready: %v", err)
	}
	return m
}

// waitIdle waits until the manager has no work left: every controller's
// queue is empty and no reconcile runs.
func (m *manager) waitIdle(b testing.TB) {
	b.Helper()
	err := controlplane.Eventually(context.Background(), 5*time.Minute, func(context.Context) (bool, error) {
		queued, err := m.metric("workqueue_depth")
		if err != nil {
			return false, err
		}
		running, err := m.metric("controller_runtime_active_workers")
		if err != nil {
			return false, err
		}
		return queued == 0 && running == 0, fmt.Errorf("%v queued, %v reconciling", queued, running)
	})
	if err != nil {
		b.Fatalf("the manager never became idle: %v", err)
	}
}

func (m *manager) stop() {
	if m.cmd.Process == nil || m.cmd.ProcessState != nil {
		return
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	_ = m.cmd.Wait()
}

// rssBytes reads the manager's resident set size from /proc.
func (m *manager) rssBytes() (int64, error) { return controlplane.ProcessRSS(m.cmd.Process.Pid) }

// metric sums the samples of a metric on the manager's metrics endpoint
// whose line contains every filter.
func (m *manager) metric(name string, filters ...string) (float64, error) {
	resp, err := http.Get("http://" + m.metricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total := 0.0
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, f := range filters {
			if !strings.Contains(line, f) {
				continue lines
			}
		}
		fields := strings.Fields(line)
		n, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
		total += n
	}
	return total, s.Err()
}

// reconciles reads controller_runtime_reconcile_total for the policy controller.
func (m *manager) reconciles() (int, error) {
	n, err := m.metric("controller_runtime_reconcile_total", `controller="clusterpolicy"`)
	return int(n), err
}

// parallel runs fn(i) for i in [0,n) on workers goroutines.
func parallel(n, workers int, fn func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func converged(p *kyvernov1.ClusterPolicy) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, controllers.ConditionType)
	return c != nil && c.ObservedGeneration == p.Generation && c.Reason == controllers.ReasonAllRulesTranslated
}

// loaded reports whether the policy's Ready condition says the API server
// enforces its VAPs: the last status kyvap writes, after polling for the
// API server to load the VAPs it has just written (Ready is Pending until
// then).
func loaded(p *kyvernov1.ClusterPolicy) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, "Ready")
	return converged(p) && c != nil && c.ObservedGeneration == p.Generation && c.Status == metav1.ConditionTrue
}

// BenchmarkConvergence1000 applies 1,000 ClusterPolicies at once and
// measures the time until every VAP, binding and status is written, beside
// the floor: the same 3,000 writes sent directly by a parallel client to the
// same API server in the same run. It also checks that a restart (a full
// resync) writes nothing, and reports the manager's RSS: its peak during
// the burst, when the manager is idle again, and once it has returned the
// burst's heap (rss-MiB).
func BenchmarkConvergence1000(b *testing.B) {
	const n, workers = 1000, 16
	ctx := context.Background()
	for iter := 0; iter < b.N; iter++ {
		prefix := fmt.Sprintf("conv%d-%d", time.Now().UnixNano()%1_000_000, iter)

		// Floor: the same scenario written directly by a parallel client, as
		// an ideal operator would with no latency of its own: each worker
		// creates a policy, its VAP and binding, and writes its status. The
		// operator's timer also starts before the policies are created.
		floorPolicies := make([]*kyvernov1.ClusterPolicy, n)
		start := time.Now()
		if err := parallel(n, workers, func(i int) error {
			p := controlplane.ReplicasPolicy(fmt.Sprintf("%s-floor-%04d", prefix, i), kyvernov1.Enforce)
			floorPolicies[i] = p
			if err := cp.Client.Create(ctx, p); err != nil {
				return err
			}
			name := p.Name
			vap := controlplane.VAP("floor-"+name, appsv1.SchemeGroupVersion.WithResource("deployments"),
				[]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5", Message: controlplane.ReplicasMessage})
			if err := cp.Client.Create(ctx, vap); err != nil {
				return err
			}
			if err := cp.Client.Create(ctx, controlplane.Binding("floor-"+name, vap.Name, admissionregistrationv1.Deny)); err != nil {
				return err
			}
			p.Status.ValidatingAdmissionPolicy = kyvernov1.ValidatingAdmissionPolicyStatus{Generated: true, Message: ""}
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: "floor", Status: metav1.ConditionTrue, Reason: "Floor", Message: "floor"})
			return cp.Client.Status().Update(ctx, p)
		}); err != nil {
			b.Fatal(err)
		}
		floor := time.Since(start)
		// The floor's objects would be seen (and left alone) by the operator; remove them first.
		if err := parallel(n, workers, func(i int) error {
			name := floorPolicies[i].Name
			_ = cp.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "floor-" + name}})
			_ = cp.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "floor-" + name}})
			return cp.Client.Delete(ctx, floorPolicies[i])
		}); err != nil {
			b.Fatal(err)
		}

		// The operator: start it, then apply 1,000 policies at once. Progress
		// is read from a watch (an informer): listing 1,000 policies in a loop
		// would load the API server the operator is measured against.
		watcher, err := cache.New(cp.Config, cache.Options{Scheme: cp.Scheme})
		if err != nil {
			b.Fatal(err)
		}
		watchCtx, stopWatch := context.WithCancel(ctx)
		go func() { _ = watcher.Start(watchCtx) }()
		if _, err := watcher.GetInformer(ctx, &kyvernov1.ClusterPolicy{}); err != nil {
			b.Fatal(err)
		}
		watcher.WaitForCacheSync(ctx)
		// KYVAP_BENCH_PROFILE=dir saves the manager's CPU profile of the
		// convergence and its heap profile after it.
		profileDir := os.Getenv("KYVAP_BENCH_PROFILE")
		var args []string
		pprofAddr := ""
		if profileDir != "" {
			pprofAddr = localAddr(b)
			args = append(args, "--pprof-bind-address="+pprofAddr)
		}
		// KYVAP_BENCH_MANAGER_ARGS adds manager flags, for A/B runs (e.g.
		// --release-memory=false).
		args = append(args, strings.Fields(os.Getenv("KYVAP_BENCH_MANAGER_ARGS"))...)
		mgr := startManager(b, args...)
		if profileDir != "" {
			go saveProfile(pprofAddr, "profile?seconds=12", filepath.Join(profileDir, "cpu.pprof"))
		}
		peakRSS := sampleRSS(b, mgr)
		start = time.Now()
		if err := parallel(n, workers, func(i int) error {
			return cp.Client.Create(ctx, controlplane.ReplicasPolicy(fmt.Sprintf("%s-op-%04d", prefix, i), kyvernov1.Enforce))
		}); err != nil {
			b.Fatal(err)
		}
		// Convergence: every policy translated and its VAP and binding
		// written; then loaded: every policy Ready, the API server having
		// loaded its VAP.
		count := func(state func(*kyvernov1.ClusterPolicy) bool) int {
			var list kyvernov1.ClusterPolicyList
			if err := watcher.List(ctx, &list); err != nil {
				b.Fatal(err)
			}
			done := 0
			for i := range list.Items {
				if strings.HasPrefix(list.Items[i].Name, prefix+"-op-") && state(&list.Items[i]) {
					done++
				}
			}
			return done
		}
		waitFor := func(what string, state func(*kyvernov1.ClusterPolicy) bool) time.Duration {
			for done := 0; done < n; done = count(state) {
				time.Sleep(50 * time.Millisecond)
				if time.Since(start) > 10*time.Minute {
					b.Fatalf("only %d of %d policies %s in 10 minutes", done, n, what)
				}
			}
			return time.Since(start)
		}
		operatorTime := waitFor("converged", converged)
		// Ready is written by the reconciles a policy's requeue (its
		// handover poll) makes: the work queue is empty between them, so the
		// manager is idle only once every policy is Ready.
		loadedTime := waitFor("loaded", loaded)
		stopWatch()
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		if err := cp.Client.List(ctx, &vaps, client.MatchingLabels{"app.kubernetes.io/managed-by": "kyvap"}); err != nil {
			b.Fatal(err)
		}
		if len(vaps.Items) < n {
			b.Fatalf("%d VAPs for %d converged policies", len(vaps.Items), n)
		}
		// The reconciles its own last writes cause are part of convergence.
		mgr.waitIdle(b)
		peak := peakRSS.take(b)
		idleRSS, err := mgr.rssBytes()
		if err != nil {
			b.Fatal(err)
		}
		// What the pod keeps: the RSS once the manager has returned the
		// burst's heap (--release-memory: within a few of its 5 s looks
		// once idle). Without a release in 30 s (--release-memory=false),
		// what the runtime's scavenger returned by then.
		_ = controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) {
			releases, err := mgr.metric("kyvap_memory_releases_total")
			return releases > 0, err
		})
		rss, err := mgr.rssBytes()
		if err != nil {
			b.Fatal(err)
		}
		if profileDir != "" {
			saveProfile(pprofAddr, "heap", filepath.Join(profileDir, "heap.pprof"))
		}
		heap, err := mgr.metric("go_memstats_heap_inuse_bytes")
		if err != nil {
			b.Fatal(err)
		}
		reconcilesToConverge, _ := mgr.reconciles()

		// No-op resync: a restart reconciles every policy and must write nothing.
		before := snapshot(b, prefix)
		mgr.stop()
		mgr = startManager(b)
		err = controlplane.Eventually(ctx, 10*time.Minute, func(context.Context) (bool, error) {
			count, err := mgr.reconciles()
			if err != nil {
				return false, err
			}
			return count >= n, fmt.Errorf("%d reconciles of %d policies", count, n)
		})
		if err != nil {
			b.Fatal(err)
		}
		mgr.waitIdle(b)
		after := snapshot(b, prefix)
		writes := 0
		for k, v := range before {
			if after[k] != v {
				writes++
			}
		}
		mgr.stop()

		// Leave the API server as this iteration found it (the perf suite
		// runs no garbage collector, so generated objects are deleted too).
		if err := parallel(n, workers, func(i int) error {
			return cp.Client.Delete(ctx, &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-op-%04d", prefix, i)}})
		}); err != nil {
			b.Fatal(err)
		}
		managed := client.MatchingLabels{"app.kubernetes.io/managed-by": "kyvap"}
		if err := cp.Client.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, managed); err != nil {
			b.Fatal(err)
		}
		if err := cp.Client.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{}, managed); err != nil {
			b.Fatal(err)
		}

		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(operatorTime.Seconds(), "operator-s")
		b.ReportMetric(operatorTime.Seconds()/floor.Seconds(), "ratio")
		b.ReportMetric(loadedTime.Seconds(), "ready-s")
		b.ReportMetric(float64(writes), "resync-writes")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		b.ReportMetric(float64(idleRSS)/(1<<20), "rss-at-idle-MiB")
		b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MiB")
		b.ReportMetric(heap/(1<<20), "heap-inuse-MiB")
		b.ReportMetric(float64(reconcilesToConverge)/n, "reconciles/policy")
		if writes != 0 {
			b.Errorf("a restart with nothing changed wrote %d objects", writes)
		}
	}
}

// snapshot maps every object of the run to its resourceVersion.
func snapshot(b testing.TB, prefix string) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	var policies kyvernov1.ClusterPolicyList
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	for _, l := range []client.ObjectList{&policies, &vaps, &bindings} {
		if err := cp.Client.List(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range policies.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out["cpol/"+p.Name] = p.ResourceVersion
		}
	}
	for _, v := range vaps.Items {
		out["vap/"+v.Name] = v.ResourceVersion
	}
	for _, v := range bindings.Items {
		out["binding/"+v.Name] = v.ResourceVersion
	}
	return out
}

// BenchmarkDriftRevert edits a generated VAP b.N times (use -benchtime=200x)
// and reports the time from the edit to the revert, p50 and p99.
func BenchmarkDriftRevert(b *testing.B) {
	ctx := context.Background()
	startManager(b)
	policy := controlplane.ReplicasPolicy(fmt.Sprintf("drift-%d", time.Now().UnixNano()), kyvernov1.Enforce)
	vaps, _, err := cp.GeneratedFor(ctx, cp.CreatePolicy(b, policy, controllers.ReasonAllRulesTranslated))
	if err != nil || len(vaps) != 1 {
		b.Fatalf("%d VAPs generated (%v)", len(vaps), err)
	}
	vapName := vaps[0].Name
	var samples []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		if err := cp.Client.Get(ctx, types.NamespacedName{Name: vapName}, &vap); err != nil {
			b.Fatal(err)
		}
		want := vap.Spec.Validations[0].Expression
		vap.Spec.Validations[0].Expression = fmt.Sprintf("%d == %d", i, i)
		if err := cp.Client.Update(ctx, &vap); err != nil {
			b.Fatal(err)
		}
		edited := time.Now()
		for {
			var got admissionregistrationv1.ValidatingAdmissionPolicy
			if err := cp.Client.Get(ctx, types.NamespacedName{Name: vapName}, &got); err != nil {
				b.Fatal(err)
			}
			if got.Spec.Validations[0].Expression == want {
				samples = append(samples, time.Since(edited))
				break
			}
			if time.Since(edited) > 30*time.Second {
				b.Fatal("the edit was not reverted within 30s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(percentile(samples, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(samples, 0.99).Microseconds())/1000, "p99-ms")
}

// saveProfile fetches a pprof profile from the manager into a file.
func saveProfile(addr, profile, path string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}
