// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// BenchmarkKyvernoClusterPolicyCEL profiles Kyverno v1.19.1's admission
// controller enforcing 8 CEL ClusterPolicies itself (its VAP generation
// off, no kyvap): 16 clients dry-run create an allowed ConfigMap for 20 s
// while a 15 s CPU profile of Kyverno is taken from its pprof endpoint
// (--profile). It reports the latency and throughput the API server gives
// the clients, and writes the profile to $KYVAP_PROFILE_OUT (default
// bin/kyverno-cel-cpu.pprof): `go tool pprof -top` shows where Kyverno's
// time goes (docs/performance.md). One run whatever b.N: -benchtime=1x.
//
//	go test ./test/kyverno -run '^$' -bench BenchmarkKyvernoClusterPolicyCEL -benchtime=1x
func BenchmarkKyvernoClusterPolicyCEL(b *testing.B) {
	ctx := context.Background()
	const ns = "kyverno-profile"
	cp.EnsureNamespace(b, ns, nil)
	profilePort := controlplane.FreePort(b)
	// KYVAP_KYVERNO_ARGS adds flags (e.g. --clientRateLimitQPS=1000) to
	// Kyverno's, which are its Helm chart's defaults otherwise.
	k, err := cp.StartKyverno(ctx, controlplane.KyvernoOptions{ExtraArgs: append([]string{
		"--profile=true", "--profileAddress=127.0.0.1", "--profilePort=" + strconv.Itoa(profilePort),
	}, strings.Fields(os.Getenv("KYVAP_KYVERNO_ARGS"))...)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := k.Stop(ctx, cp); err != nil {
			b.Error(err)
		}
	})
	createCheckPolicies(b, ns, "kyverno-profile")
	// Kyverno enforces the policies once its cache has them (its webhook
	// denies with a Bad Request, not Invalid as a VAP does).
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, controlplane.ConfigMap(ns, "deny-me", nil))
		return err != nil && strings.Contains(err.Error(), "check 0 failed"), fmt.Errorf("not denied by Kyverno yet: %w", err)
	})
	if err != nil {
		b.Fatal(err)
	}
	allowed := controlplane.ConfigMap(ns, "allowed", map[string]string{"a": "b"})
	allowed.Labels = map[string]string{"team": "x"}

	const clients, load, profiled = 16, 20 * time.Second, 15 * time.Second
	profile := make(chan error, 1)
	out := os.Getenv("KYVAP_PROFILE_OUT")
	if out == "" {
		out = controlplane.RepoPath(b, "bin", "kyverno-cel-cpu.pprof")
	}
	b.ResetTimer()
	goroutines := make(chan error, 1)
	go func() {
		// Where Kyverno's goroutines wait, halfway through the load.
		time.Sleep(load / 2)
		goroutines <- fetchProfile(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", profilePort), strings.TrimSuffix(out, ".pprof")+"-goroutines.txt")
	}()
	go func() {
		time.Sleep(2 * time.Second) // past the first requests' warm-up
		profile <- fetchProfile(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", profilePort, int(profiled.Seconds())), out)
	}()
	result := runLoad(ctx, allowed, clients, load)
	b.StopTimer()
	if err := <-profile; err != nil {
		b.Fatalf("profiling Kyverno: %v", err)
	}
	if err := <-goroutines; err != nil {
		b.Fatalf("Kyverno's goroutines: %v", err)
	}
	if result.failures > 0 || len(result.latencies) == 0 {
		b.Fatalf("%d requests failed, %d succeeded", result.failures, len(result.latencies))
	}
	b.ReportMetric(result.quantile(0.5), "p50-ms")
	b.ReportMetric(result.quantile(0.99), "p99-ms")
	b.ReportMetric(result.perSecond(), "req/s")
	b.Logf("Kyverno, 8 CEL ClusterPolicies, %d clients: %d requests in %s, p50 %.1f ms, p99 %.1f ms; CPU profile in %s", clients, len(result.latencies), load, result.quantile(0.5), result.quantile(0.99), out)
}

// checkExpressions are the 8 one-line CEL checks of the benchmarks, each
// allowing their ConfigMap; the first denies "deny-me".
var checkExpressions = []string{
	"object.metadata.name != 'deny-me'",
	"!has(object.data) || size(object.data) <= 16",
	"!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)",
	"object.metadata.name.size() <= 63",
	"!has(object.binaryData)",
	"!has(object.metadata.annotations) || size(object.metadata.annotations) <= 32",
	"!has(object.data) || object.data.all(k, k.size() <= 253)",
	"!has(object.data) || object.data.all(k, object.data[k].size() <= 4096)",
}

// createCheckPolicies creates one Enforce ClusterPolicy per check, for the
// namespace's ConfigMaps.
func createCheckPolicies(b testing.TB, ns, prefix string) []*kyvernov1.ClusterPolicy {
	var out []*kyvernov1.ClusterPolicy
	for i, expression := range checkExpressions {
		rule := controlplane.CELRule("check", "ConfigMap", expression, fmt.Sprintf("check %d failed", i))
		rule.MatchResources.Any[0].Resources.Namespaces = []string{ns}
		policy := controlplane.ClusterPolicy(fmt.Sprintf("%s-%d", prefix, i), kyvernov1.Enforce, rule)
		cp.Create(b, policy)
		out = append(out, policy)
	}
	return out
}

// loadResult is what clients saw during a load.
type loadResult struct {
	latencies []time.Duration // sorted
	failures  int
	duration  time.Duration
}

func (r loadResult) quantile(q float64) float64 {
	return float64(r.latencies[int(q*float64(len(r.latencies)-1))].Microseconds()) / 1000
}

func (r loadResult) perSecond() float64 { return float64(len(r.latencies)) / r.duration.Seconds() }

// runLoad has clients dry-run create obj, each one request after the
// other, for the duration.
func runLoad(ctx context.Context, obj client.Object, clients int, duration time.Duration) loadResult {
	var (
		mu     sync.Mutex
		result = loadResult{duration: duration}
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(duration)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				start := time.Now()
				err := cp.Client.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
				took := time.Since(start)
				mu.Lock()
				if err != nil {
					result.failures++
				} else {
					result.latencies = append(result.latencies, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(result.latencies, func(i, j int) bool { return result.latencies[i] < result.latencies[j] })
	return result
}

func fetchProfile(url, file string) error {
	resp, err := http.Get(url) //nolint:gosec,noctx // the benchmark's own Kyverno on 127.0.0.1
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(data)))
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// BenchmarkAdmissionSideBySide measures admission side by side on one API
// server: the same load (clients dry-run creating an allowed ConfigMap,
// each one request after the other) with the 8 CEL ClusterPolicies of
// BenchmarkKyvernoClusterPolicyCEL enforced by kyvap's VAPs (as deployed),
// by kyvap's webhook alone (every policy opted out of generation), by
// nothing (the floor: the policies exist, nobody enforces them) and by
// Kyverno v1.19.1's admission controller (its VAP generation off, its
// default flags), at 1, 16 and 64 clients, in rounds that alternate the
// four so that machine noise hits every column alike. kyvap runs in the
// benchmark's process, Kyverno in its own. It writes bin/bench-compare.txt
// (make bench-compare): a "compare" line per measure, then the table.
// KYVAP_BENCH_ROUNDS (default 2) and KYVAP_BENCH_LOAD (default 5s, per
// column, concurrency and round) size it. One run whatever b.N.
func BenchmarkAdmissionSideBySide(b *testing.B) {
	ctx := context.Background()
	const ns = "side-by-side"
	rounds, load := 2, 5*time.Second
	if v, err := strconv.Atoi(os.Getenv("KYVAP_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := time.ParseDuration(os.Getenv("KYVAP_BENCH_LOAD")); err == nil && v > 0 {
		load = v
	}
	concurrency := []int{1, 16, 64}
	columns := []string{"kyvap VAPs", "kyvap webhook only", "floor", "Kyverno"}
	results := map[string]map[int]*loadResult{}
	for _, c := range columns {
		results[c] = map[int]*loadResult{}
		for _, n := range concurrency {
			results[c][n] = &loadResult{}
		}
	}
	cp.EnsureNamespace(b, ns, nil)
	ensureAdminBinding(b)
	allowed := controlplane.ConfigMap(ns, "allowed", map[string]string{"a": "b"})
	denyMe := controlplane.ConfigMap(ns, "deny-me", nil)
	policies := createCheckPolicies(b, ns, "side-by-side")
	measure := func(column string) {
		b.StartTimer()
		defer b.StopTimer()
		for _, n := range concurrency {
			calls := controlplane.MetricValue(b, "controller_runtime_webhook_requests_total", nil)
			r := runLoad(ctx, allowed, n, load)
			if r.failures > 0 || len(r.latencies) == 0 {
				b.Fatalf("%s, %d clients: %d requests failed, %d succeeded", column, n, r.failures, len(r.latencies))
			}
			calls = controlplane.MetricValue(b, "controller_runtime_webhook_requests_total", nil) - calls
			// Only the webhook-only column goes through kyvap's webhook,
			// every request of it.
			if through := column == "kyvap webhook only"; through != (calls >= float64(len(r.latencies))) || (!through && calls > 0) {
				b.Fatalf("%s, %d clients: kyvap's webhook answered %v of %d requests", column, n, calls, len(r.latencies))
			}
			acc := results[column][n]
			acc.latencies = append(acc.latencies, r.latencies...)
			acc.duration += r.duration
		}
	}
	optOut := func(out bool) {
		for _, p := range policies {
			current := &kyvernov1.ClusterPolicy{}
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(p), current); err != nil {
				b.Fatal(err)
			}
			current.Annotations = nil
			if out {
				current.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
			}
			if err := cp.Client.Update(ctx, current); err != nil {
				b.Fatal(err)
			}
		}
	}
	noVAPs := func() {
		err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
			if err := cp.Client.List(ctx, &vaps); err != nil {
				return false, err
			}
			for _, v := range vaps.Items {
				if strings.HasPrefix(v.Name, "kyvap-side-by-side") {
					return false, fmt.Errorf("VAP %s still there", v.Name)
				}
			}
			return true, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.StopTimer()
	for range rounds {
		optOut(false)
		op := cp.StartWebhookOperator(b, translate.Options{GenerateValidatingAdmissionPolicy: true}, controlplane.FreePort(b))
		cp.WaitForDenial(b, denyMe, "check 0 failed")
		measure("kyvap VAPs")

		optOut(true)
		_ = waitForDenialBy(b, denyMe, "admission webhook", "check 0 failed") // fatal when never denied
		noVAPs()
		measure("kyvap webhook only")

		op.Stop()
		if err := cp.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}}); err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
		err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			_, err := cp.DryRunCreate(ctx, denyMe)
			return err == nil, fmt.Errorf("still denied: %w", err)
		})
		if err != nil {
			b.Fatal(err)
		}
		measure("floor")

		k, err := cp.StartKyverno(ctx, controlplane.KyvernoOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_ = waitForDenialBy(b, denyMe, "validate.kyverno.svc-fail", "check 0 failed") // fatal when never denied
		measure("Kyverno")
		if err := k.Stop(ctx, cp); err != nil {
			b.Fatal(err)
		}
	}

	var report strings.Builder
	for _, n := range concurrency {
		for _, m := range []struct {
			name, unit string
			value      func(*loadResult) float64
		}{
			{"admission-p50", "ms", func(r *loadResult) float64 { return r.quantile(0.5) }},
			{"admission-p99", "ms", func(r *loadResult) float64 { return r.quantile(0.99) }},
			{"admission-throughput", "req/s", func(r *loadResult) float64 { return r.perSecond() }},
		} {
			for _, c := range columns {
				sort.Slice(results[c][n].latencies, func(i, j int) bool { return results[c][n].latencies[i] < results[c][n].latencies[j] })
			}
			fmt.Fprintf(&report, "compare %s-%dclients kyvap=%.2f kyverno=%.2f floor=%.2f unit=%s\n", m.name, n,
				m.value(results["kyvap VAPs"][n]), m.value(results["Kyverno"][n]), m.value(results["floor"][n]), m.unit)
		}
	}
	fmt.Fprintf(&report, "\n%d rounds of %s per column and concurrency, 8 CEL ClusterPolicies, dry-run creates of an allowed ConfigMap\n", rounds, load)
	fmt.Fprintf(&report, "%-20s %8s %10s %10s %10s\n", "column", "clients", "req/s", "p50 ms", "p99 ms")
	for _, c := range columns {
		for _, n := range concurrency {
			r := results[c][n]
			fmt.Fprintf(&report, "%-20s %8d %10.1f %10.2f %10.2f\n", c, n, r.perSecond(), r.quantile(0.5), r.quantile(0.99))
		}
	}
	out := controlplane.RepoPath(b, "bin", "bench-compare.txt")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("report in %s:\n%s", out, report.String())
}
