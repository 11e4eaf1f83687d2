// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

func cachedPolicy() *kyvernov1.ClusterPolicy {
	return &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1},
		Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{{
			Name:           "r",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
			Validation:     &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: "true"}}}},
		}}},
	}
}

func TestPlanKeyIgnoresStatusOnly(t *testing.T) {
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true}
	base := planKey(clusterpolicy.Input{Policy: cachedPolicy()}, opts)

	withStatus := cachedPolicy()
	withStatus.ResourceVersion = "99"
	withStatus.Status.ValidatingAdmissionPolicy.Generated = true
	if planKey(clusterpolicy.Input{Policy: withStatus}, opts) != base {
		t.Error("a status change changes the plan key")
	}

	changes := map[string]func(*kyvernov1.ClusterPolicy, *clusterpolicy.Input, *translate.Options){
		"generation": func(p *kyvernov1.ClusterPolicy, _ *clusterpolicy.Input, _ *translate.Options) { p.Generation = 2 },
		"annotation": func(p *kyvernov1.ClusterPolicy, _ *clusterpolicy.Input, _ *translate.Options) {
			p.Annotations = map[string]string{"a": "b"}
		},
		"uid": func(p *kyvernov1.ClusterPolicy, _ *clusterpolicy.Input, _ *translate.Options) { p.UID = "other" },
		"options": func(_ *kyvernov1.ClusterPolicy, _ *clusterpolicy.Input, o *translate.Options) {
			o.GenerateValidatingAdmissionPolicy = false
		},
		"exception": func(_ *kyvernov1.ClusterPolicy, in *clusterpolicy.Input, _ *translate.Options) {
			in.Exceptions = []kyvernov2.PolicyException{{ObjectMeta: metav1.ObjectMeta{Name: "e", Generation: 1}}}
		},
	}
	for name, change := range changes {
		p := cachedPolicy()
		in := clusterpolicy.Input{Policy: p}
		o := opts
		change(p, &in, &o)
		if planKey(in, o) == base {
			t.Errorf("changing the %s does not change the plan key", name)
		}
	}
}

func TestPlanCacheReusesAndRefreshes(t *testing.T) {
	var c planCache
	resolver := kyverno.NewStaticResolver()
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true}
	first, err := c.translate(context.Background(), clusterpolicy.Input{Policy: cachedPolicy()}, resolver, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.translate(context.Background(), clusterpolicy.Input{Policy: cachedPolicy()}, resolver, opts)
	if &first.Rules[0] != &again.Rules[0] {
		t.Error("an unchanged input was translated again")
	}
	other, _ := c.translate(context.Background(), clusterpolicy.Input{Policy: cachedPolicy()}, kyverno.NewStaticResolver(), opts)
	if &first.Rules[0] == &other.Rules[0] {
		t.Error("a new resolver (discovery changed) reused the old plan")
	}
	changed := cachedPolicy()
	changed.Generation = 2
	changed.Spec.Rules[0].Name = "renamed"
	plan, _ := c.translate(context.Background(), clusterpolicy.Input{Policy: changed}, kyverno.NewStaticResolver(), opts)
	if plan.Rules[0].Rule != "renamed" {
		t.Errorf("a new generation reused the old plan: rule %q", plan.Rules[0].Rule)
	}
}

func TestPlanCacheIsBounded(t *testing.T) {
	var c planCache
	resolver := kyverno.NewStaticResolver()
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true}
	for i := range planCacheSize + 10 {
		p := cachedPolicy()
		p.Name = fmt.Sprintf("p-%d", i)
		if _, err := c.translate(context.Background(), clusterpolicy.Input{Policy: p}, resolver, opts); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.entries) != planCacheSize || len(c.order) != planCacheSize {
		t.Fatalf("%d entries, %d in order; want %d", len(c.entries), len(c.order), planCacheSize)
	}
	if _, ok := c.entries["p-0"]; ok {
		t.Error("the oldest plan was not evicted")
	}
	if _, ok := c.entries[fmt.Sprintf("p-%d", planCacheSize+9)]; !ok {
		t.Error("the newest plan was evicted")
	}
	c.forget("p-20")
	if _, ok := c.entries["p-20"]; ok || len(c.order) != planCacheSize-1 {
		t.Error("forget left the plan behind")
	}
}

// A reconciler asking for a plan that another is translating waits for it
// and takes the stored plan; it gives up when its context ends.
func TestPlanCacheWaitsForARunningTranslation(t *testing.T) {
	var c planCache
	resolver := kyverno.NewStaticResolver()
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true}
	in := clusterpolicy.Input{Policy: cachedPolicy()}
	key := planKey(in, opts)
	run := &planRun{key: key, resolver: resolver, done: make(chan struct{})}
	c.running = map[string]*planRun{"p": run}

	got := make(chan translate.Plan, 1)
	go func() {
		plan, err := c.translate(context.Background(), in, resolver, opts)
		if err != nil {
			t.Error(err)
		}
		got <- plan
	}()
	// The running translation stores a plan no translation of the input
	// gives, then ends: the waiting reconciler must return that plan.
	sentinel := translate.Plan{Policy: "stored-by-the-running-translation"}
	c.mu.Lock()
	c.entries = map[string]planEntry{"p": {key: key, resolver: resolver, plan: sentinel}}
	c.order = []string{"p"}
	delete(c.running, "p")
	c.mu.Unlock()
	close(run.done)
	if plan := <-got; plan.Policy != sentinel.Policy {
		t.Errorf("the waiting reconciler translated again (plan of %q), want the running translation's plan", plan.Policy)
	}

	// A translation of another key is not waited for.
	c.running = map[string]*planRun{"p": {key: "another", resolver: resolver, done: make(chan struct{})}}
	c.entries = nil
	plan, err := c.translate(context.Background(), in, resolver, opts)
	if err != nil || len(plan.Rules) == 0 {
		t.Errorf("with another key running: %d rules, %v; want a translation", len(plan.Rules), err)
	}

	// Waiting ends with the context.
	c.running = map[string]*planRun{"p": {key: key, resolver: resolver, done: make(chan struct{})}}
	c.entries = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.translate(ctx, in, resolver, opts); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting with a cancelled context: %v, want context.Canceled", err)
	}
}

// A cancelled translation stores nothing and leaves no run behind.
func TestPlanCacheCancelledTranslation(t *testing.T) {
	var c planCache
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.translate(ctx, clusterpolicy.Input{Policy: cachedPolicy()}, kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("translating with a cancelled context: %v, want context.Canceled", err)
	}
	if len(c.entries) != 0 || len(c.running) != 0 {
		t.Errorf("a cancelled translation left %d entries and %d runs", len(c.entries), len(c.running))
	}
}
