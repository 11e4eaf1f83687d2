// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest/vapsim"
	"github.com/kyvap/kyvap/test/kyvernochart"
	"github.com/kyvap/kyvap/translate"
)

// chartConfig is Kyverno's global configuration as its Helm chart writes
// it, which BenchmarkCompare's manager reads: its resource filters and
// excluded groups become match conditions of every generated VAP.
func chartConfig(tb testing.TB) *kyverno.Config {
	tb.Helper()
	chart, err := kyvernochart.Render()
	if err != nil {
		tb.Fatal(err)
	}
	config, _ := kyverno.ParseConfig(chart.ConfigMap)
	return &config
}

// translateWithConfig translates the policies as BenchmarkCompare's
// manager does: VAPs on, typed objects, Kyverno's chart configuration.
func translateWithConfig(tb testing.TB, config *kyverno.Config, policies []*kyvernov1.ClusterPolicy) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	tb.Helper()
	var (
		vaps     []admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	)
	for _, p := range policies {
		plan, err := translate.Translate(clusterpolicy.InputFor(p, nil), kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true, TypedObjects: true, KyvernoConfig: config})
		if err != nil {
			tb.Fatal(err)
		}
		vaps = append(vaps, plan.ValidatingAdmissionPolicies...)
		bindings = append(bindings, plan.Bindings...)
	}
	return vaps, bindings
}

// withoutMatchConditions is vaps without the named match conditions.
func withoutMatchConditions(vaps []admissionregistrationv1.ValidatingAdmissionPolicy, names ...string) []admissionregistrationv1.ValidatingAdmissionPolicy {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	out := make([]admissionregistrationv1.ValidatingAdmissionPolicy, len(vaps))
	for i := range vaps {
		v := vaps[i].DeepCopy()
		var kept []admissionregistrationv1.MatchCondition
		for _, mc := range v.Spec.MatchConditions {
			if !drop[mc.Name] {
				kept = append(kept, mc)
			}
		}
		v.Spec.MatchConditions = kept
		out[i] = *v
	}
	return out
}

// BenchmarkVAPsOnTheMix evaluates BenchmarkCompare's request mix against
// each form of its checks with the API server's own VAP admission code
// (policytest/vapsim): what the VAP columns cost the API server, per
// request, without the HTTP path, etcd or the clients. The variants without
// kyvap's Kyverno-configuration match conditions (the chart's resource
// filters and excluded groups) attribute the difference between kyvap's
// VAPs and the hand-written ones. One op is one request of the mix.
func BenchmarkVAPsOnTheMix(b *testing.B) {
	config := chartConfig(b)
	patterns, err := comparePatternPolicies()
	if err != nil {
		b.Fatal(err)
	}
	celVAPs, celBindings := translateWithConfig(b, config, compareClusterPolicies())
	patternVAPs, patternBindings := translateWithConfig(b, config, patterns)
	handVAPs, handBindings := handWrittenVAPs()
	var hand []admissionregistrationv1.ValidatingAdmissionPolicy
	var handB []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for i := range handVAPs {
		hand, handB = append(hand, *handVAPs[i]), append(handB, *handBindings[i])
	}
	filters := []string{"kyverno-excluded-subjects", "kyverno-resource-filters"}
	cases := []struct {
		name     string
		vaps     []admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	}{
		{"hand-written", hand, handB},
		{"kyvap-cel", celVAPs, celBindings},
		{"kyvap-cel-without-kyverno-config", withoutMatchConditions(celVAPs, filters...), celBindings},
		{"kyvap-cel-without-resource-filters", withoutMatchConditions(celVAPs, filters[1]), celBindings},
		{"kyvap-cel-without-excluded-subjects", withoutMatchConditions(celVAPs, filters[0]), celBindings},
		{"kyvap-pattern", patternVAPs, patternBindings},
		{"kyvap-pattern-without-kyverno-config", withoutMatchConditions(patternVAPs, filters...), patternBindings},
	}
	mix := compareMix()
	requests := make([]*admissionv1.AdmissionRequest, len(mix))
	for i, req := range mix {
		requests[i] = mixRequest(b, req.obj)
	}
	namespaces := []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: compareNamespace}}}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			sim := vapsim.New(c.vaps, c.bindings)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				k := i % len(requests)
				resp, err := sim.Evaluate(ctx, vapsim.Request{Admission: requests[k], Namespaces: namespaces})
				if err != nil {
					b.Fatal(err)
				}
				if resp.Allowed == mix[k].denied {
					b.Fatalf("%s: allowed %v", mix[k].obj.GetName(), resp.Allowed)
				}
			}
		})
	}
}
