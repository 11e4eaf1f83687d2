package translate

import (
	"sort"
	"testing"
	"time"
)

// BenchmarkTranslate translates every golden case; rule-ns/op and
// rule-allocs/op are per rule of the inputs.
func BenchmarkTranslate(b *testing.B) {
	cases := loadGoldenCases(b)
	resolver := NewStaticResolver(testCRDs()...)
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
	resolver := NewStaticResolver(testCRDs()...)
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
				vap := &p.ValidatingAdmissionPolicies[j]
				_, _ = checkVAPExpressions(&vap.Spec, newestCompatibilityVersion, nil)
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*vaps), "ns/vap")
}

// BenchmarkTranslatePerVAP reports Translate's time per emitted VAP, to
// compare with BenchmarkCELCompileOnly.
func BenchmarkTranslatePerVAP(b *testing.B) {
	cases := loadGoldenCases(b)
	resolver := NewStaticResolver(testCRDs()...)
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
