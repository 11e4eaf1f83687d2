// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

func TestDuplicateRuleNamesAreInvalid(t *testing.T) {
	policy := &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "dup"},
		Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{
			celTestRule("check", "Pod", "true"),
			celTestRule("other", "ConfigMap", "true"),
			celTestRule("check", "ConfigMap", "false"),
		}},
	}
	plan, err := Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), Options{GenerateValidatingAdmissionPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Rules) != 3 {
		t.Fatalf("results %+v, want one per rule", plan.Rules)
	}
	for _, i := range []int{0, 2} {
		r := plan.Rules[i]
		want := `rule name "check" is used by rules #1 and #3; Kyverno rejects such policies: rename one`
		if r.Rule != "check" || r.Verdict != VerdictInvalid || r.Reason != model.ReasonDuplicateRuleName || r.Message != want || len(r.ValidatingAdmissionPolicies) > 0 || r.Fallback != nil {
			t.Errorf("result %d = %+v, want Invalid %s: %s", i, r, model.ReasonDuplicateRuleName, want)
		}
	}
	if r := plan.Rules[1]; r.Verdict != VerdictTranslated {
		t.Errorf("the uniquely named rule: %+v, want Translated", r)
	}
	if len(plan.ValidatingAdmissionPolicies) != 1 || len(plan.Bindings) != 1 || plan.ValidatingAdmissionPolicies[0].Name != vapName("dup", "other") {
		t.Errorf("generated %d VAPs and %d bindings, want only the uniquely named rule's", len(plan.ValidatingAdmissionPolicies), len(plan.Bindings))
	}
}
