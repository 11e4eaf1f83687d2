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

// newPlanCache is an empty cache, a resolver and the options with VAPs on.
func newPlanCache() (*planCache, kyverno.KindResolver, translate.Options) {
	return &planCache{}, kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true}
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
	c, resolver, opts := newPlanCache()
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
	c, resolver, opts := newPlanCache()
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

// The plans of one policy under different options (the leader's and a
// replica's, a handover's bridge with generation off) do not evict each
// other, and a policy keeps at most planVariants of them.
func TestPlanCacheKeepsVariants(t *testing.T) {
	var c planCache
	resolver := kyverno.NewStaticResolver()
	in := clusterpolicy.Input{Policy: cachedPolicy()}
	withVAPs := translate.Options{GenerateValidatingAdmissionPolicy: true}
	first, err := c.translate(context.Background(), in, resolver, withVAPs)
	if err != nil {
		t.Fatal(err)
	}
	bridge, err := c.translate(context.Background(), in, resolver, translate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.ValidatingAdmissionPolicies) == 0 || len(bridge.ValidatingAdmissionPolicies) != 0 {
		t.Fatalf("%d and %d VAPs; want some, then none", len(first.ValidatingAdmissionPolicies), len(bridge.ValidatingAdmissionPolicies))
	}
	again, _ := c.translate(context.Background(), in, resolver, withVAPs)
	if &again.Rules[0] != &first.Rules[0] {
		t.Error("the bridge's plan evicted the policy's plan")
	}
	for i := range planVariants + 2 {
		if _, err := c.translate(context.Background(), in, resolver, translate.Options{GenerateValidatingAdmissionPolicy: true, CompatibilityVersion: fmt.Sprintf("1.%d", 30+i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.entries["p"]); n != planVariants {
		t.Errorf("%d plans remembered for one policy, want %d", n, planVariants)
	}
	if len(c.order) != 1 {
		t.Errorf("order %v, want the policy once", c.order)
	}
}

// A policy a reconciler polls (a handover of a burst larger than the
// cache) is not evicted until every holder lets it go; forget drops its
// holds.
func TestPlanCacheKeepsHeldPolicies(t *testing.T) {
	c, resolver, opts := newPlanCache()
	translateNamed := func(name string) translate.Plan {
		p := cachedPolicy()
		p.Name = name
		plan, err := c.translate(context.Background(), clusterpolicy.Input{Policy: p}, resolver, opts)
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	translateNamed("held")
	c.hold(holderPolicies, "held", true)
	c.hold(holderSync, "held", true)
	for i := range planCacheSize + 10 {
		translateNamed(fmt.Sprintf("p-%d", i))
	}
	if _, ok := c.entries["held"]; !ok {
		t.Fatal("a held policy's plan was evicted")
	}
	if len(c.entries) != planCacheSize+1 {
		t.Errorf("%d policies remembered, want %d and the held one", len(c.entries), planCacheSize)
	}
	c.hold(holderPolicies, "held", false)
	translateNamed("p-new")
	if _, ok := c.entries["held"]; !ok {
		t.Fatal("a policy still held by one reconciler was evicted")
	}
	c.hold(holderSync, "held", false)
	translateNamed("p-newer")
	if _, ok := c.entries["held"]; ok {
		t.Error("a policy nobody holds any more, and the least recent, was kept")
	}
	if len(c.entries) != planCacheSize {
		t.Errorf("%d policies remembered, want %d", len(c.entries), planCacheSize)
	}
	c.hold(holderSync, "p-newer", true)
	c.forget("p-newer")
	if len(c.held) != 0 {
		t.Errorf("forget left holds %v", c.held)
	}
}

// A reconciler asking for a plan that another is translating waits for it
// and takes the stored plan; it gives up when its context ends.
func TestPlanCacheWaitsForARunningTranslation(t *testing.T) {
	c, resolver, opts := newPlanCache()
	in := clusterpolicy.Input{Policy: cachedPolicy()}
	key := planKey(in, opts)
	runKey := "p\x00" + key
	run := &planRun{key: key, resolver: resolver, done: make(chan struct{})}
	c.running = map[string]*planRun{runKey: run}

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
	c.entries = map[string][]planEntry{"p": {{key: key, resolver: resolver, plan: sentinel}}}
	c.order = []string{"p"}
	delete(c.running, runKey)
	c.mu.Unlock()
	close(run.done)
	if plan := <-got; plan.Policy != sentinel.Policy {
		t.Errorf("the waiting reconciler translated again (plan of %q), want the running translation's plan", plan.Policy)
	}

	// A translation of another key is not waited for.
	c.running = map[string]*planRun{"p\x00another": {key: "another", resolver: resolver, done: make(chan struct{})}}
	c.entries = nil
	plan, err := c.translate(context.Background(), in, resolver, opts)
	if err != nil || len(plan.Rules) == 0 {
		t.Errorf("with another key running: %d rules, %v; want a translation", len(plan.Rules), err)
	}

	// Waiting ends with the context.
	c.running = map[string]*planRun{runKey: {key: key, resolver: resolver, done: make(chan struct{})}}
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
