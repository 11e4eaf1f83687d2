// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"sort"
	"sync"

	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// FallbackSink receives, per policy, the rules kyvap's webhook must enforce
// because they are not (entirely) expressed as VAPs. The webhook component
// implements it in-process.
type FallbackSink interface {
	// SetFallbackRules replaces the fallback rules of a policy; none removes it.
	SetFallbackRules(policy string, rules []translate.FallbackRule)
	// Enforcing reports whether fallback rules are actually enforced (a
	// webhook is serving); when false, status says they are not enforced.
	Enforcing() bool
	// OnEnforcingChange registers a function called, without blocking,
	// when Enforcing changes (the webhook engine: once its configuration is
	// installed).
	OnEnforcingChange(func())
	// Rules returns every policy's fallback rules, ordered by policy.
	Rules() []translate.FallbackRule
	// RulesOf returns the fallback rules SetFallbackRules set for the
	// policy.
	RulesOf(policy string) []translate.FallbackRule
	// SetModelRules replaces the rules of a policy of the policy model
	// (ValidatingPolicy, NamespacedValidatingPolicy) that the webhook
	// enforces; none removes the policy.
	SetModelRules(source model.Source, rules []model.Rule)
	// ModelRulesOf returns the rules SetModelRules set for the policy
	// (matched by kind, namespace and name).
	ModelRulesOf(source model.Source) []model.Rule
}

// FallbackStore is a FallbackSink that only remembers the rules. It is what
// the manager uses while no webhook serves them: Enforcing is false.
type FallbackStore struct {
	mu    sync.RWMutex
	rules map[string][]translate.FallbackRule
	// models are the policy model's rules, by model.Source.String().
	models map[string][]model.Rule
}

// NewFallbackStore returns an empty store.
func NewFallbackStore() *FallbackStore {
	return &FallbackStore{rules: map[string][]translate.FallbackRule{}, models: map[string][]model.Rule{}}
}

// SetModelRules implements FallbackSink.
func (s *FallbackStore) SetModelRules(source model.Source, rules []model.Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(rules) == 0 {
		delete(s.models, source.String())
		return
	}
	s.models[source.String()] = rules
}

// ModelRulesOf implements FallbackSink.
func (s *FallbackStore) ModelRulesOf(source model.Source) []model.Rule {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.models[source.String()]
}

// SetFallbackRules implements FallbackSink.
func (s *FallbackStore) SetFallbackRules(policy string, rules []translate.FallbackRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(rules) == 0 {
		delete(s.rules, policy)
		return
	}
	s.rules[policy] = rules
}

// Enforcing implements FallbackSink: a store alone enforces nothing.
func (s *FallbackStore) Enforcing() bool { return false }

// OnEnforcingChange implements FallbackSink: a store's Enforcing never changes.
func (s *FallbackStore) OnEnforcingChange(func()) {}

// RulesOf implements FallbackSink.
func (s *FallbackStore) RulesOf(policy string) []translate.FallbackRule {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rules[policy]
}

// Rules implements FallbackSink: every stored fallback rule, ordered by
// policy then rule.
func (s *FallbackStore) Rules() []translate.FallbackRule {
	s.mu.RLock()
	defer s.mu.RUnlock()
	policies := make([]string, 0, len(s.rules))
	for p := range s.rules {
		policies = append(policies, p)
	}
	sort.Strings(policies)
	var out []translate.FallbackRule
	for _, p := range policies {
		out = append(out, s.rules[p]...)
	}
	return out
}

// KyvernoPresence tells whether Kyverno's admission controller runs in the
// cluster. When it does, the rules kyvap cannot turn into VAPs are left to
// it: their policies are not marked generated, so Kyverno enforces them
// whole, and a second webhook would only do the same work twice.
type KyvernoPresence interface {
	Running() bool
}

func kyvernoRunning(k KyvernoPresence) bool { return k != nil && k.Running() }

// fallbackRules collects the plan's fallback rules for kyvap's webhook:
// none when Kyverno runs and enforces them itself.
func fallbackRules(plan *translate.Plan, kyvernoRunning bool) []translate.FallbackRule {
	if kyvernoRunning {
		return nil
	}
	var out []translate.FallbackRule
	for _, r := range plan.Rules {
		if r.Fallback != nil {
			out = append(out, *r.Fallback)
		}
	}
	return out
}
