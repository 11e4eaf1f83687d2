// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/vap"
)

// BenchmarkTranslate translates every golden case; rule-ns/op and
// rule-allocs/op are per rule of the inputs.
func BenchmarkTranslate(b *testing.B) {
	cases := loadGoldenCases(b)
	resolver := kyverno.NewStaticResolver(testCRDs()...)
	rules := 0
	for _, c := range cases {
		rules += len(c.input.Policy.Spec.Rules)
	}
	// Warm the per-version CEL environments once, as a running operator has.
	for _, c := range cases {
		_, _ = Translate(c.input, resolver, c.opts)
	}
	perCase := make([]time.Duration, len(cases))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for j, c := range cases {
			caseStart := time.Now()
			_, _ = Translate(c.input, resolver, c.opts)
			perCase[j] += time.Since(caseStart)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*rules), "ns/rule")
	// The median over cases of each case's time per rule: the goal is stated
	// as a median, and a few cases with variables (a fresh compiler each)
	// weigh on the mean.
	var perRule []float64
	for j, c := range cases {
		if n := len(c.input.Policy.Spec.Rules); n > 0 {
			perRule = append(perRule, float64(perCase[j].Nanoseconds())/float64(b.N*n))
		}
	}
	sort.Float64s(perRule)
	if len(perRule) > 0 {
		b.ReportMetric(perRule[len(perRule)/2], "median-ns/rule")
	}
}

// BenchmarkCELCompileOnly compiles exactly the expressions of the VAPs the
// golden cases produce, with the same compiler Translate uses: the floor
// that translation overhead is measured against (per emitted VAP).
func BenchmarkCELCompileOnly(b *testing.B) {
	resolver := kyverno.NewStaticResolver(testCRDs()...)
	var plans []Plan
	vaps := 0
	for _, c := range loadGoldenCases(b) {
		p, _ := Translate(c.input, resolver, c.opts)
		plans = append(plans, p)
		vaps += len(p.ValidatingAdmissionPolicies)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for _, p := range plans {
			for j := range p.ValidatingAdmissionPolicies {
				policy := &p.ValidatingAdmissionPolicies[j]
				_, _ = vap.CheckExpressions(&policy.Spec, vap.NewestCompatibilityVersion, nil)
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*vaps), "ns/vap")
}

// BenchmarkTranslatePerVAP reports Translate's time per emitted VAP, to
// compare with BenchmarkCELCompileOnly.
func BenchmarkTranslatePerVAP(b *testing.B) {
	cases := loadGoldenCases(b)
	resolver := kyverno.NewStaticResolver(testCRDs()...)
	vaps := 0
	for _, c := range cases {
		p, _ := Translate(c.input, resolver, c.opts)
		vaps += len(p.ValidatingAdmissionPolicies)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for _, c := range cases {
			_, _ = Translate(c.input, resolver, c.opts)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*vaps), "ns/vap")
}

// andChain is `term && term && ...` of about size bytes.
func andChain(term string, size int) string {
	n := max(1, (size+4)/(len(term)+4))
	terms := make([]string, n)
	for i := range terms {
		terms[i] = term
	}
	return strings.Join(terms, " && ")
}

// chainPolicy is a one-rule policy whose validation is expression.
func chainPolicy(expression string) *kyvernov1.ClusterPolicy {
	return &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "chain"},
		Spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce, Rules: []kyvernov1.Rule{{
			Name: "chain",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{
				Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}},
			}}},
			Validation: &kyvernov1.Validation{Message: "chain", CEL: &kyvernov1.CEL{
				Expressions: []admissionregistrationv1.Validation{{Expression: expression}},
			}},
		}}},
	}
}

// guardedChainPolicy is chainPolicy with a namespaceSelector next to
// another kind, which kyvap checks in the VAP's guard variable: the
// validation is wrapped in `variables.kyvap_applies ? (...) : true`.
func guardedChainPolicy(expression string) *kyvernov1.ClusterPolicy {
	p := chainPolicy(expression)
	p.Spec.Rules[0].MatchResources.Any = kyvernov1.ResourceFilters{
		{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}}},
		{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Secret"}}},
	}
	return p
}

// BenchmarkTranslateAndChain translates a rule whose expression is a long
// `&&` chain of `object.metadata.name != 'x'` (issue 14: 94 KB took 1.2 s),
// at growing sizes, plain and guarded (see guardedChainPolicy): the time
// per KB shows whether translation is linear in the expression's size.
func BenchmarkTranslateAndChain(b *testing.B) {
	resolver := kyverno.NewStaticResolver(testCRDs()...)
	opts := Options{GenerateValidatingAdmissionPolicy: true}
	for _, guard := range []bool{false, true} {
		for _, kb := range []int{6, 24, 94} {
			name := fmt.Sprintf("size=%dKB", kb)
			policy := chainPolicy(andChain("object.metadata.name != 'x'", kb*1024))
			if guard {
				name += ",guarded"
				policy = guardedChainPolicy(andChain("object.metadata.name != 'x'", kb*1024))
			}
			b.Run(name, func(b *testing.B) {
				in := clusterpolicy.Input{Policy: policy}
				for b.Loop() {
					plan, _ := Translate(in, resolver, opts)
					if len(plan.Rules) != 1 || plan.Rules[0].Verdict != VerdictTranslated {
						b.Fatalf("%+v", plan.Rules)
					}
					if guard && !vap.IsGuarded(&plan.ValidatingAdmissionPolicies[0].Spec) {
						b.Fatal("not guarded")
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(kb), "µs/KB")
			})
		}
	}
}
