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

// podPolicyAllowingAll is a ClusterPolicy of one CEL rule on Pods that
// allows everything.
func podPolicyAllowingAll() *kyvernov1.ClusterPolicy {
	return &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{{
			Name:           "r",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
			Validation:     &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: "true"}}}},
		}}},
	}
}

// A translation whose context has ended returns the context's error and
// no plan, so that a stopping manager does not wait for it.
func TestTranslateContextEnds(t *testing.T) {
	policy := podPolicyAllowingAll()
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

// Translations beyond the slots wait for one to be returned, and give up
// when their context ends; a translation returns its slot.
func TestTranslationsWaitForASlot(t *testing.T) {
	policy := podPolicyAllowingAll()
	in := clusterpolicy.Input{Policy: policy}
	opts := Options{GenerateValidatingAdmissionPolicy: true}
	if _, err := TranslateContext(context.Background(), in, kyverno.NewStaticResolver(), opts); err != nil {
		t.Fatal(err)
	}
	if len(slots) != 0 {
		t.Fatalf("%d slots taken after a translation ended", len(slots))
	}
	// Every slot taken: only the context's end can answer.
	for range cap(slots) {
		slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TranslateContext(ctx, in, kyverno.NewStaticResolver(), opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("with every slot taken and a cancelled context: %v, want context.Canceled", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := TranslateContext(context.Background(), in, kyverno.NewStaticResolver(), opts)
		done <- err
	}()
	<-slots // one slot returned: the waiting translation runs
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range cap(slots) - 1 { // the rest of this test's
		<-slots
	}
}
