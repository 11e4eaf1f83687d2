// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/vap"
)

func TestWebhookEvaluationBudget(t *testing.T) {
	for timeout, want := range map[int32]time.Duration{
		0: 800 * time.Millisecond, 1: 800 * time.Millisecond, 2: 1600 * time.Millisecond,
		10: 8 * time.Second, 30: 28 * time.Second, 45: 28 * time.Second,
	} {
		if got := WebhookEvaluationBudget(timeout); got != want {
			t.Errorf("WebhookEvaluationBudget(%d) = %s, want %s", timeout, got, want)
		}
	}
}

// costRule is a ConfigMap rule with the given validations.
func costRule(name string, expressions ...string) kyvernov1.Rule {
	r := kyvernov1.Rule{
		Name: name,
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{
			Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}},
		}}},
		Validation: &kyvernov1.Validation{CEL: &kyvernov1.CEL{}},
	}
	for _, e := range expressions {
		r.Validation.CEL.Expressions = append(r.Validation.CEL.Expressions, admissionregistrationv1.Validation{Expression: e})
	}
	return r
}

// nestedComprehension iterates 100,000 times: an estimated 1,041,411 units.
func nestedComprehension() string {
	list := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprint(i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return list(100) + ".all(i, " + list(100) + ".all(j, " + list(10) + ".all(k, i + j + k >= 0)))"
}

func TestEstimateRuleCost(t *testing.T) {
	expensive := nestedComprehension()
	selector := costRule("selector", "has(params.data)")
	selector.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	selector.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}}
	tests := []struct {
		name     string
		rule     kyvernov1.Rule
		min, max uint64
		perParam bool
	}{
		{name: "cheap", rule: costRule("cheap", "object.metadata.name != 'bad'"), min: 1, max: 100},
		{name: "over an object's list: the per-expression limit", rule: costRule("containers", "object.spec.containers.all(c, c.name != '')"), min: celconfig.PerCallLimit, max: celconfig.PerCallLimit},
		{name: "one expensive expression", rule: costRule("one", expensive), min: celconfig.PerCallLimit, max: celconfig.PerCallLimit},
		{name: "ten expensive expressions: the budget per rule", rule: costRule("ten", slicesOf(expensive, 12)...), min: celconfig.RuntimeCELCostBudget, max: celconfig.RuntimeCELCostBudget},
		{name: "not compiling", rule: costRule("broken", "object.("), min: 0, max: 0},
		{name: "paramRef selector", rule: selector, min: 1, max: 100, perParam: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EstimateRuleCost(&tt.rule)
			if got.Units < tt.min || got.Units > tt.max || got.PerParam != tt.perParam {
				t.Errorf("cost = %+v, want %d to %d units, perParam %v", got, tt.min, tt.max, tt.perParam)
			}
		})
	}
}

func slicesOf(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestCostWarnings: a fallback rule whose worst-case cost times the
// policy's fallback rules exceeds the webhook's budget for the policy's
// timeout is named; cheap rules, and an expensive one alone under the
// default timeout, are not.
func TestCostWarnings(t *testing.T) {
	expensive := costRule("expensive", slicesOf(nestedComprehension(), 10)...) // 10M units, about 2.5 s
	cheap := costRule("cheap", "object.metadata.name != 'bad'")
	plan := func(timeout *int32, rules ...kyvernov1.Rule) *Plan {
		p := &Plan{Policy: "p"}
		for _, r := range rules {
			p.Rules = append(p.Rules, RuleResult{Rule: r.Name, Verdict: VerdictFallback, Fallback: &FallbackRule{
				Policy: "p", Rule: r, Spec: kyvernov1.Spec{WebhookTimeoutSeconds: timeout},
			}})
		}
		return p
	}
	two := int32(2)
	rules := func(n int) []kyvernov1.Rule {
		out := []kyvernov1.Rule{cheap}
		for i := range n {
			r := expensive
			r.Name = fmt.Sprintf("expensive-%d", i)
			out = append(out, r)
		}
		return out
	}
	if w := CostWarnings(plan(nil, rules(1)...)); len(w) != 0 {
		t.Errorf("one expensive rule under 10 s: %q", w)
	}
	w := CostWarnings(plan(&two, rules(1)...))
	if len(w) != 1 || !strings.Contains(w[0], `rule "expensive-0"`) || !strings.Contains(w[0], "1.6s") || !strings.Contains(w[0], "webhookTimeoutSeconds 2") {
		t.Errorf("one expensive rule under 2 s: %q", w)
	}
	w = CostWarnings(plan(nil, rules(10)...))
	if len(w) != 10 || !strings.Contains(w[9], `rule "expensive-9"`) || !strings.Contains(w[9], "10000000 units (about 2.5s)") || !strings.Contains(w[9], "11 rules") {
		t.Errorf("ten expensive rules under 10 s: %d warnings, %q", len(w), w)
	}
	for _, text := range w {
		if strings.Contains(text, `"cheap"`) {
			t.Errorf("a cheap rule is named: %q", text)
		}
	}
	if w := CostWarnings(&Plan{}); w != nil {
		t.Errorf("no fallback rules: %q", w)
	}
}

// TestTranslateWarnsAboutExpensiveFallbackRules: the warnings reach the plan.
func TestTranslateWarnsAboutExpensiveFallbackRules(t *testing.T) {
	expensive := costRule("expensive", slicesOf(nestedComprehension(), 10)...)
	two := int32(2)
	policy := &kyvernov1.ClusterPolicy{Spec: kyvernov1.Spec{WebhookTimeoutSeconds: &two, Rules: []kyvernov1.Rule{expensive}}}
	policy.Name = "p"
	plan, err := Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), Options{GenerateValidatingAdmissionPolicy: false})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range plan.Warnings {
		found = found || strings.Contains(w, `rule "expensive"`)
	}
	if !found {
		t.Errorf("plan warnings %q do not name the expensive fallback rule", plan.Warnings)
	}
}

// The memo of estimates gives the estimate computed afresh.
func TestExpressionCostMemo(t *testing.T) {
	env := costEnvFor(vap.KyvernoCELVersion, false)
	for _, e := range []string{"object.spec.containers.all(c, c.image.endsWith(':1'))", "true", "does not compile ("} {
		want := estimateExpressionCost(env, e)
		for range 2 {
			if got := expressionCost(env, e); got != want {
				t.Errorf("%s: %d, want %d", e, got, want)
			}
		}
	}
}
