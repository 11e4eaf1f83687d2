// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"testing"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// generations maps the objects the policy controls to UID/generation: a
// spec rewritten (or an object replaced) changes it; the type checker's
// status writes do not.
func generations(t testing.TB, policy *kyvernov1.ClusterPolicy) map[string]string {
	t.Helper()
	vaps, bindings, err := cp.GeneratedFor(context.Background(), policy)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, v := range vaps {
		out["VAP/"+v.Name] = fmt.Sprintf("%s/%d", v.UID, v.Generation)
	}
	for _, b := range bindings {
		out["Binding/"+b.Name] = fmt.Sprintf("%s/%d", b.UID, b.Generation)
	}
	return out
}

// Two rules with the same name used to generate two objects of the same
// name, each reconcile writing one over the other.
func TestDuplicateRuleNamesAreInvalidAndNothingFlipFlops(t *testing.T) {
	op := cp.StartOperator(t, generateOn)
	policy := controlplane.ClusterPolicy("duplicate-names", kyvernov1.Enforce,
		controlplane.CELRule("check", "Deployment", "object.spec.replicas <= 5", controlplane.ReplicasMessage),
		controlplane.CELRule("unique", "ConfigMap", "object.metadata.name != 'forbidden'", "forbidden name"),
		controlplane.CELRule("check", "ConfigMap", "has(object.data)", "data required"))
	got := cp.CreatePolicy(t, policy, controllers.ReasonInvalidRules)
	want := `rule "check": not enforced: rule name "check" is used by rules #1 and #3; Kyverno rejects such policies: rename one (DuplicateRuleName)`
	if got.Status.ValidatingAdmissionPolicy.Message != want || got.Status.ValidatingAdmissionPolicy.Generated {
		t.Errorf("status %+v, want not generated, message %q", got.Status.ValidatingAdmissionPolicy, want)
	}
	vaps, bindings, err := cp.GeneratedFor(context.Background(), got)
	if err != nil {
		t.Fatal(err)
	}
	if len(vaps) != 1 || len(bindings) != 1 || vaps[0].Annotations[translate.AnnotationRule] != "unique" {
		t.Fatalf("generated %d VAPs and %d bindings, want only rule unique's VAP and binding", len(vaps), len(bindings))
	}
	before := generations(t, got)
	op.Touch(t, got)
	op.Touch(t, got)
	after := generations(t, got)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("generated objects rewritten by reconciles that had nothing to change:\nbefore %v\nafter  %v", before, after)
	}
}
