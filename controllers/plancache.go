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

// planCache remembers each policy's last plan. Most reconciles are caused by
// kyvap's own writes (its VAPs and bindings appearing, the API server's
// type-checking status), and translating again would compile every CEL
// expression again for nothing. A plan is reused only when everything it was
// computed from is the same: the policy's generation and annotations, the
// exceptions naming it, the resolver (discovery) and the options.
//
// The reconciles worth saving follow a policy's translation within seconds,
// so the cache keeps only the most recently translated policies: its memory
// stays bounded however many policies the cluster holds.
type planCache struct {
	mu      sync.Mutex
	entries map[string]planEntry
	// order lists policy names from the least to the most recently stored.
	order []string
	// running are the translations in progress, by policy name.
	running map[string]*planRun
}

// planRun is a translation in progress; done is closed when it ends,
// stored or not.
type planRun struct {
	key      string
	resolver kyverno.KindResolver
	done     chan struct{}
}

// planCacheSize bounds the number of remembered plans.
const planCacheSize = 256

type planEntry struct {
	key      string
	resolver kyverno.KindResolver
	plan     translate.Plan
}

// translate returns the policy's plan, translated or remembered. While
// one reconciler translates a policy, another asking for the same plan
// waits for it instead of translating it a second time; both give up when
// their context ends.
func (c *planCache) translate(ctx context.Context, in clusterpolicy.Input, resolver kyverno.KindResolver, opts translate.Options) (translate.Plan, error) {
	key := planKey(in, opts)
	name := in.Policy.Name
	for {
		c.mu.Lock()
		entry, ok := c.entries[name]
		if ok && entry.key == key && entry.resolver == resolver {
			c.mu.Unlock()
			return entry.plan, nil
		}
		running, busy := c.running[name]
		if !busy || running.key != key || running.resolver != resolver {
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
	c.running[name] = run
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.running[name] == run {
			delete(c.running, name)
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
	if c.entries == nil {
		c.entries = map[string]planEntry{}
	}
	if _, ok := c.entries[name]; !ok {
		c.order = append(c.order, name)
	}
	c.entries[name] = planEntry{key: key, resolver: resolver, plan: plan}
	for len(c.entries) > planCacheSize && len(c.order) > 0 {
		oldest := c.order[0]
		c.order = c.order[1:]
		delete(c.entries, oldest)
	}
	return plan, nil
}

func (c *planCache) forget(policy string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[policy]; !ok {
		return
	}
	delete(c.entries, policy)
	for i, name := range c.order {
		if name == policy {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
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
