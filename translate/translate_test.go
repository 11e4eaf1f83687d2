// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"context"
	"errors"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
)

// A translation whose context has ended returns the context's error and
// no plan, so that a stopping manager does not wait for it.
func TestTranslateContextEnds(t *testing.T) {
	policy := &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{{
			Name:           "r",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
			Validation:     &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: "true"}}}},
		}}},
	}
	opts := Options{GenerateValidatingAdmissionPolicy: true}
	plan, err := TranslateContext(context.Background(), clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), opts)
	if err != nil || len(plan.ValidatingAdmissionPolicies) == 0 {
		t.Fatalf("with a live context: %d VAPs, %v", len(plan.ValidatingAdmissionPolicies), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	plan, err = TranslateContext(ctx, clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), opts)
	if !errors.Is(err, context.Canceled) || len(plan.ValidatingAdmissionPolicies) != 0 || len(plan.Rules) != 0 {
		t.Errorf("with a cancelled context: %d VAPs, %d rules, %v; want none and context.Canceled", len(plan.ValidatingAdmissionPolicies), len(plan.Rules), err)
	}
}
