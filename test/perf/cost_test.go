// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// costNamespace holds the Deployments the cost benchmark sends.
const costNamespace = "cost"

// costPolicy is policy i of the cost benchmark. Even ones are Pod rules,
// which Kyverno's autogen applies to the pod controllers (three VAPs: the
// Pod rule, autogen-<rule>, autogen-cronjob-<rule>); odd ones are
// Deployment rules (one VAP). Every one applies to a Deployment create, and
// each denies only a probe object of its own, so the benchmark's
// Deployment passes all of them.
func costPolicy(i int) *kyvernov1.ClusterPolicy {
	name := fmt.Sprintf("cost-%04d", i)
	rule := controlplane.CELRule("deny-probe", "Deployment", fmt.Sprintf("object.metadata.name != 'probe-%04d'", i), "probe "+name)
	if i%2 == 0 {
		rule = controlplane.CELRule("deny-probe", "Pod",
			fmt.Sprintf("!has(object.metadata.labels) || !('probe-%04d' in object.metadata.labels)", i), "probe "+name)
	}
	return controlplane.ClusterPolicy(name, kyvernov1.Enforce, rule)
}

// costProbe is a Deployment that policy i denies.
func costProbe(i int) client.Object {
	if i%2 == 0 {
		return controlplane.Deployment(costNamespace, "probe", 1, map[string]string{fmt.Sprintf("probe-%04d", i): "x"})
	}
	return controlplane.Deployment(costNamespace, fmt.Sprintf("probe-%04d", i), 1, nil)
}

// costSetup is the operator (with its webhook) and the policies created so
// far, all enforced either by VAPs or by the webhook.
type costSetup struct {
	policies   int
	viaWebhook bool
}

// BenchmarkAPIServerCost measures what translated policies cost the API
// server: the latency of a Deployment create (dry run, admitted) with 0,
// 100 and 1,000 policies that all apply to it, half of them Pod rules with
// pod-controller variants, once enforced by their VAPs and once by kyvap's
// webhook (the same policies annotated kyvap.io/generate: "false"), on the
// same API server in the same run. b.N is the number of requests per path
// (use -benchtime=300x). It reports p50/p99 per path and the VAP and
// binding objects per policy.
func BenchmarkAPIServerCost(b *testing.B) {
	cp.EnsureNamespace(b, costNamespace, nil)
	cp.StartWebhookOperator(b, translate.Options{GenerateValidatingAdmissionPolicy: true}, controlplane.FreePort(b))
	setup := &costSetup{}
	for _, n := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			setup.grow(b, n)
			results := map[string][]time.Duration{}
			var vaps, bindings int
			for _, viaWebhook := range []bool{false, true} {
				setup.switchTo(b, viaWebhook)
				path := "vap"
				if viaWebhook {
					path = "webhook"
				} else {
					vaps, bindings = managedObjects(b)
				}
				results[path] = measureDeploymentCreates(b)
			}
			// Reported after the measurements: ResetTimer drops metrics.
			if n > 0 {
				b.ReportMetric(float64(vaps)/float64(n), "VAPs/policy")
				b.ReportMetric(float64(bindings)/float64(n), "bindings/policy")
			}
			for _, path := range []string{"vap", "webhook"} {
				v := results[path]
				b.ReportMetric(float64(percentile(v, 0.50).Microseconds()), path+"-p50-µs")
				b.ReportMetric(float64(percentile(v, 0.99).Microseconds()), path+"-p99-µs")
			}
			// Leave the VAPs in place for the next size.
			setup.switchTo(b, false)
		})
	}
}

// measureDeploymentCreates sends b.N admitted Deployment creates (dry run)
// and returns their latencies, sorted.
func measureDeploymentCreates(b *testing.B) []time.Duration {
	ctx := context.Background()
	d := controlplane.Deployment(costNamespace, "web", 1, nil)
	out := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := cp.Client.Create(ctx, d.DeepCopy(), client.DryRunAll); err != nil {
			b.Fatalf("an admitted Deployment was refused: %v", err)
		}
		out = append(out, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// grow creates policies up to n (in VAP mode) and waits until the operator
// has translated all of them.
func (s *costSetup) grow(b *testing.B, n int) {
	if n <= s.policies {
		return
	}
	s.switchTo(b, false)
	ctx := context.Background()
	first := s.policies
	if err := parallel(n-first, 16, func(i int) error {
		err := cp.Client.Create(ctx, costPolicy(first+i))
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	s.policies = n
	s.waitFor(b, false)
}

// switchTo hands every policy to the webhook (annotation kyvap.io/generate:
// "false") or back to VAPs, and waits until only that mechanism enforces
// them.
func (s *costSetup) switchTo(b *testing.B, viaWebhook bool) {
	if s.viaWebhook == viaWebhook {
		return
	}
	ctx := context.Background()
	if err := parallel(s.policies, 16, func(i int) error {
		p := &kyvernov1.ClusterPolicy{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(costPolicy(i)), p); err != nil {
			return err
		}
		if viaWebhook {
			p.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
		} else {
			p.Annotations = nil
		}
		return cp.Client.Update(ctx, p)
	}); err != nil {
		b.Fatal(err)
	}
	s.viaWebhook = viaWebhook
	s.waitFor(b, viaWebhook)
}

// waitFor waits until every policy's status reflects the mode, the other
// mode's objects are gone, and the probes of the first and the last policy
// of each kind are denied by the expected mechanism (the API server loads
// VAPs and webhook configurations asynchronously, in order).
func (s *costSetup) waitFor(b *testing.B, viaWebhook bool) {
	ctx := context.Background()
	wantReason, wantDenier := controllers.ReasonAllRulesTranslated, "ValidatingAdmissionPolicy"
	if viaWebhook {
		wantReason, wantDenier = controllers.ReasonFallback, "admission webhook"
	}
	err := controlplane.Eventually(ctx, 20*time.Minute, func(ctx context.Context) (bool, error) {
		var list kyvernov1.ClusterPolicyList
		if err := cp.Client.List(ctx, &list); err != nil {
			return false, err
		}
		done := 0
		for i := range list.Items {
			p := &list.Items[i]
			c := meta.FindStatusCondition(p.Status.Conditions, controllers.ConditionType)
			if strings.HasPrefix(p.Name, "cost-") && c != nil && c.ObservedGeneration == p.Generation && c.Reason == wantReason {
				done++
			}
		}
		if done < s.policies {
			return false, fmt.Errorf("%d of %d policies reached %s", done, s.policies, wantReason)
		}
		vaps, _ := managedObjects(b)
		if viaWebhook && vaps > 0 {
			return false, fmt.Errorf("%d VAPs left", vaps)
		}
		if !viaWebhook {
			vwc, err := cp.WebhookConfiguration(ctx)
			if err != nil {
				return false, err
			}
			if vwc != nil {
				return false, fmt.Errorf("the webhook configuration is still there")
			}
		}
		for _, i := range probeIndexes(s.policies) {
			err := cp.Client.Create(ctx, costProbe(i), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), wantDenier) || !strings.Contains(err.Error(), fmt.Sprintf("probe cost-%04d", i)) {
				return false, fmt.Errorf("probe of policy %d: want a denial by %s, got %w", i, wantDenier, err)
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// probeIndexes are the first and last policy of each kind among n.
func probeIndexes(n int) []int {
	if n == 0 {
		return nil
	}
	out := []int{0, (n - 1) / 2 * 2}
	if n > 1 {
		out = append(out, 1, (n-2)/2*2+1)
	}
	return out
}

// managedObjects counts kyvap's VAPs and bindings.
func managedObjects(b *testing.B) (vaps, bindings int) {
	ctx := context.Background()
	managed := client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}
	var vl admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := cp.Client.List(ctx, &vl, managed); err != nil {
		b.Fatal(err)
	}
	var bl admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := cp.Client.List(ctx, &bl, managed); err != nil {
		b.Fatal(err)
	}
	return len(vl.Items), len(bl.Items)
}
