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

	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/test/controlplane"
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
