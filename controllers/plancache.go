// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

// planCache remembers each policy's last plans. Most reconciles are caused
// by kyvap's own writes (its VAPs and bindings appearing, the API server's
// type-checking status) or are a handover's polls, and translating again
// would compile every CEL expression again for nothing. A plan is reused
// only when everything it was computed from is the same: the policy's
// generation and annotations, the exceptions naming it, the resolver
// (discovery) and the options.
//
// A policy may have a few plans at once (planVariants): the leader's and
// the replicas' options can differ, and a handover's bridge is the policy
// translated with VAP generation off. Keeping one plan per policy made
// those evict each other, so that every poll translated again.
//
// The reconciles worth saving follow a policy's translation within seconds,
// so the cache keeps only the most recently translated policies
// (planCacheSize), and the policies a reconciler polls (hold): a handover
// polls every policy of a burst each second until its VAPs are active, and
// a burst larger than the cache translated every policy again on every
// poll. Its memory stays bounded by the cache's size and the policies in
// handover, however many policies the cluster holds.
type planCache struct {
	mu      sync.Mutex
	entries map[string][]planEntry
	// order lists policy names from the least to the most recently stored.
	order []string
	// held are the policies reconcilers poll, with who polls them: they are
	// not evicted.
	held map[string]map[string]bool
	// running are the translations in progress, by policy name and key.
	running map[string]*planRun
}

// planRun is a translation in progress; done is closed when it ends,
// stored or not.
type planRun struct {
	key      string
	resolver kyverno.KindResolver
	done     chan struct{}
}

const (
	// planCacheSize bounds the number of policies whose plans are
	// remembered, besides those held.
	planCacheSize = 256
	// planVariants bounds the plans remembered for one policy.
	planVariants = 3
)

type planEntry struct {
	key      string
	resolver kyverno.KindResolver
	plan     translate.Plan
}

// Holders of planCache.hold: the reconcilers that poll a policy.
const (
	holderPolicies = "policies"
	holderSync     = "sync"
)

// planName is the name the cache knows a policy by: its PolicyKey.
func planName(in clusterpolicy.Input) string {
	return clusterpolicy.PolicyKey(in.Namespace, in.Policy.Name)
}

// translate returns the policy's plan, translated or remembered. While
// one reconciler translates a policy, another asking for the same plan
// waits for it instead of translating it a second time; both give up when
// their context ends.
func (c *planCache) translate(ctx context.Context, in clusterpolicy.Input, resolver kyverno.KindResolver, opts translate.Options) (translate.Plan, error) {
	key := planKey(in, opts)
	name := planName(in)
	runKey := name + "\x00" + key
	for {
		c.mu.Lock()
		if plan, ok := c.lookup(name, key, resolver); ok {
			c.mu.Unlock()
			return plan, nil
		}
		running, busy := c.running[runKey]
		if !busy || running.resolver != resolver {
			break // with c.mu held
		}
		c.mu.Unlock()
		select {
		case <-running.done:
		case <-ctx.Done():
			return translate.Plan{}, ctx.Err()
		}
	}
	if c.running == nil {
		c.running = map[string]*planRun{}
	}
	run := &planRun{key: key, resolver: resolver, done: make(chan struct{})}
	c.running[runKey] = run
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.running[runKey] == run {
			delete(c.running, runKey)
		}
		c.mu.Unlock()
		close(run.done)
	}()
	plan, err := translate.TranslateContext(ctx, in, resolver, opts)
	if err != nil {
		return plan, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store(name, planEntry{key: key, resolver: resolver, plan: plan})
	return plan, nil
}

// lookup returns the remembered plan of the key and resolver. c.mu is held.
func (c *planCache) lookup(name, key string, resolver kyverno.KindResolver) (translate.Plan, bool) {
	for _, e := range c.entries[name] {
		if e.key == key && e.resolver == resolver {
			return e.plan, true
		}
	}
	return translate.Plan{}, false
}

// store remembers a plan as the policy's most recent, and evicts the
// least recently stored policies that no reconciler holds beyond
// planCacheSize. c.mu is held.
func (c *planCache) store(name string, entry planEntry) {
	if c.entries == nil {
		c.entries = map[string][]planEntry{}
	}
	variants, known := c.entries[name]
	kept := []planEntry{entry}
	for _, e := range variants {
		if len(kept) < planVariants && e.key != entry.key {
			kept = append(kept, e)
		}
	}
	c.entries[name] = kept
	if known {
		c.unlist(name)
	}
	c.order = append(c.order, name)
	for i := 0; len(c.entries) > planCacheSize+len(c.held) && i < len(c.order); {
		oldest := c.order[i]
		if len(c.held[oldest]) > 0 {
			i++
			continue
		}
		c.order = append(c.order[:i], c.order[i+1:]...)
		delete(c.entries, oldest)
	}
}

// unlist removes name from c.order. c.mu is held.
func (c *planCache) unlist(name string) {
	for i, n := range c.order {
		if n == name {
			c.order = append(c.order[:i], c.order[i+1:]...)
			return
		}
	}
}

// hold says whether a reconciler (holder) polls the policy, and so keeps
// its plans from eviction until it stops.
func (c *planCache) hold(holder, policy string, polling bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !polling {
		delete(c.held[policy], holder)
		if len(c.held[policy]) == 0 {
			delete(c.held, policy)
		}
		return
	}
	if c.held == nil {
		c.held = map[string]map[string]bool{}
	}
	if c.held[policy] == nil {
		c.held[policy] = map[string]bool{}
	}
	c.held[policy][holder] = true
}

// forget drops the policy's plans (it is gone) and its holds.
func (c *planCache) forget(policy string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.held, policy)
	if _, ok := c.entries[policy]; !ok {
		return
	}
	delete(c.entries, policy)
	c.unlist(policy)
}

// planKey identifies the inputs of a translation without the policy's
// status, which changes on every report and does not affect the plan.
func planKey(in clusterpolicy.Input, opts translate.Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d/%+v", in.Policy.UID, in.Policy.Generation, opts)
	keys := make([]string, 0, len(in.Policy.Annotations))
	for k := range in.Policy.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "|a:%s=%s", k, in.Policy.Annotations[k])
	}
	exceptions := make([]string, 0, len(in.Exceptions))
	for _, e := range in.Exceptions {
		exceptions = append(exceptions, fmt.Sprintf("%s/%s@%s#%d", e.Namespace, e.Name, e.UID, e.Generation))
	}
	sort.Strings(exceptions)
	for _, e := range exceptions {
		b.WriteString("|e:" + e)
	}
	return b.String()
}

// translationOptions are the options with Kyverno's configuration in force.
func translationOptions(opts translate.Options, config func() *kyverno.Config) translate.Options {
	if config != nil {
		opts.KyvernoConfig = config()
	}
	return opts
}
