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

// BenchmarkAdmissionSideBySide is a first side-by-side measure: the same
// load (16 clients dry-run creating an allowed ConfigMap for 10 s) on the
// same API server, with nothing to enforce (the floor), then with the 8
// CEL ClusterPolicies of BenchmarkKyvernoClusterPolicyCEL enforced by
// kyvap's VAPs, by kyvap's webhook alone (every policy opted out of
// generation), and by Kyverno v1.19.1's admission controller (its VAP
// generation off, its default flags). kyvap runs in the benchmark's process
// (as the other suites run it), Kyverno in its own. One run whatever b.N:
// -benchtime=1x. Issue 23's harness (make bench-compare) is to extend this
// to more measures, concurrencies and alternating rounds.
func BenchmarkAdmissionSideBySide(b *testing.B) {
	ctx := context.Background()
	const ns, clients, load = "side-by-side", 16, 10 * time.Second
	cp.EnsureNamespace(b, ns, nil)
	allowed := controlplane.ConfigMap(ns, "allowed", map[string]string{"a": "b"})
	type column struct {
		name   string
		result loadResult
	}
	var columns []column
	measure := func(name string) {
		r := runLoad(ctx, allowed, clients, load)
		if r.failures > 0 || len(r.latencies) == 0 {
			b.Fatalf("%s: %d requests failed, %d succeeded", name, r.failures, len(r.latencies))
		}
		columns = append(columns, column{name, r})
	}
	denyMe := controlplane.ConfigMap(ns, "deny-me", nil)
	b.ResetTimer()

	measure("floor")

	op := cp.StartWebhookOperator(b, translate.Options{GenerateValidatingAdmissionPolicy: true}, controlplane.FreePort(b))
	policies := createCheckPolicies(b, ns, "side-by-side")
	b.StopTimer()
	cp.WaitForDenial(b, denyMe, "check 0 failed")
	b.StartTimer()
	measure("kyvap VAPs")

	b.StopTimer()
	for _, p := range policies {
		current := &kyvernov1.ClusterPolicy{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(p), current); err != nil {
			b.Fatal(err)
		}
		current.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
		if err := cp.Client.Update(ctx, current); err != nil {
			b.Fatal(err)
		}
	}
	_ = waitForDenialBy(b, denyMe, "admission webhook", "check 0 failed") // fatal when never denied
	// No VAP of the policies left: only the webhook enforces them.
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
	b.StartTimer()
	calls := controlplane.MetricValue(b, "controller_runtime_webhook_requests_total", nil)
	measure("kyvap webhook only")
	// Every admitted request went through kyvap's webhook.
	if calls = controlplane.MetricValue(b, "controller_runtime_webhook_requests_total", nil) - calls; calls < float64(len(columns[len(columns)-1].result.latencies)) {
		b.Fatalf("kyvap's webhook answered %v requests of %d", calls, len(columns[len(columns)-1].result.latencies))
	}

	b.StopTimer()
	op.Stop()
	if err := cp.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	startKyverno(b, false)
	_ = waitForDenialBy(b, denyMe, "validate.kyverno.svc-fail", "check 0 failed") // fatal when never denied
	b.StartTimer()
	measure("Kyverno")
	b.StopTimer()

	for _, c := range columns {
		metric := strings.ReplaceAll(strings.ToLower(c.name), " ", "-")
		b.ReportMetric(c.result.quantile(0.5), metric+"-p50-ms")
		b.ReportMetric(c.result.quantile(0.99), metric+"-p99-ms")
		b.ReportMetric(c.result.perSecond(), metric+"-req/s")
		b.Logf("%-20s %6.0f req/s  p50 %7.2f ms  p99 %7.2f ms", c.name, c.result.perSecond(), c.result.quantile(0.5), c.result.quantile(0.99))
	}
}
