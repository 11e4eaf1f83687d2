// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"encoding/json"
	"strings"
	"testing"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// A policy Kyverno's own generator takes keeps the generated field Kyverno
// writes: kyvap's status patch leaves it out.
func TestStatusPatchLeavesGeneratedToKyvernosGenerator(t *testing.T) {
	kyvernos := &translate.Plan{Rules: []translate.RuleResult{{Rule: "policy", Verdict: translate.VerdictNotHandled, Reason: model.ReasonKyvernoGeneratesVAP}}}
	ours := &translate.Plan{Rules: []translate.RuleResult{{Rule: "policy", Verdict: translate.VerdictTranslated}}}
	if !leftToKyvernosGenerator(kyvernos) || leftToKyvernosGenerator(ours) {
		t.Fatal("leftToKyvernosGenerator")
	}
	status := &policiesv1.ValidatingPolicyStatus{Generated: true}
	for _, tc := range []struct {
		generated bool
		want      bool
	}{{generated: true, want: true}, {generated: false, want: false}} {
		data, err := vpolStatusPatch{rv: "1", status: status, generated: tc.generated}.Data(nil)
		if err != nil {
			t.Fatal(err)
		}
		var patch struct {
			Status map[string]any `json:"status"`
		}
		if err := json.Unmarshal(data, &patch); err != nil {
			t.Fatal(err)
		}
		if _, ok := patch.Status["generated"]; ok != tc.want {
			t.Errorf("generated in the patch: %v, want %v (%s)", ok, tc.want, data)
		}
	}
}

// A rewrite of status.generated (by Kyverno's generator) re-queues the
// policy; other status changes do not.
func TestGeneratedRewrittenPredicate(t *testing.T) {
	before := &policiesv1.ValidatingPolicy{Status: policiesv1.ValidatingPolicyStatus{Generated: true}}
	rewritten := before.DeepCopy()
	rewritten.Status.Generated = false
	other := before.DeepCopy()
	other.Status.ConditionStatus.Message = "skip generating ValidatingAdmissionPolicy: not enabled."
	if !generatedRewritten.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: rewritten}) {
		t.Error("a rewrite of generated is not let through")
	}
	if generatedRewritten.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: other}) {
		t.Error("another status change is let through")
	}
}

// A ValidatingPolicy with nothing for kyvap at admission says so, not that
// it has no CEL rule (the ClusterPolicy wording).
func TestPolicyModelWithNothingForKyvap(t *testing.T) {
	plan := &translate.Plan{Rules: []translate.RuleResult{{Rule: "policy", Verdict: translate.VerdictNotHandled, Reason: model.ReasonAdmissionDisabled, Message: "background scans only"}}}
	st := computeStatus(statusInput{Plan: plan, GenerateEnabled: true, PolicyModel: true})
	if st.Condition.Reason != ReasonNotForKyvap || !strings.Contains(st.Condition.Message, "nothing of the policy is for kyvap to enforce at admission") || strings.Contains(st.Condition.Message, "no CEL") {
		t.Errorf("condition %s: %s", st.Condition.Reason, st.Condition.Message)
	}
	if st.VAP.Generated {
		t.Error("generated: Kyverno must keep a policy kyvap does not enforce")
	}
	cp := computeStatus(statusInput{Plan: plan, GenerateEnabled: true})
	if cp.Condition.Reason != ReasonNoCELRules {
		t.Errorf("ClusterPolicy reason %s", cp.Condition.Reason)
	}
}
