// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// A rule that moves between a VAP and kyvap's webhook is handed over so
// that it is never enforced by nobody: the old enforcement goes only once
// the new one is in place.
//
//   - webhook → VAP (a rule becomes translatable, generation is switched
//     on, the opt-out annotation is removed): every replica keeps the rule
//     in its engine until the rule's VAPs and bindings exist (heldRules);
//   - VAP → webhook: the leader keeps the rule's VAPs and bindings until
//     the webhook configuration covers the rule (WebhookCoverage).
//
// handoverPoll is how often a held hand-over looks again.
const handoverPoll = time.Second

// WebhookCoverage says whether kyvap's webhook configuration, as the API
// server has it, sends the requests of a policy's rule to the webhook.
type WebhookCoverage interface {
	Covers(policy, rule string) bool
}

// ruleNames are the names a fallback rule enforces: its rule and the
// autogen variants it carries.
func ruleNames(fr *translate.FallbackRule) []string {
	names := []string{fr.Rule.Name}
	for i := range fr.AdditionalRules {
		names = append(names, fr.AdditionalRules[i].Name)
	}
	return names
}

// heldRules returns the previous fallback rules the engine must keep
// although the plan no longer hands them over: the plan enforces them with
// VAPs that present does not report yet (with their bindings).
func heldRules(previous, next []translate.FallbackRule, plan *translate.Plan, present func(kind, name string) bool) []translate.FallbackRule {
	handed := map[string]bool{}
	for i := range next {
		for _, n := range ruleNames(&next[i]) {
			handed[n] = true
		}
	}
	var held []translate.FallbackRule
	for i := range previous {
		fr := &previous[i]
		if handed[fr.Rule.Name] {
			continue // still the webhook's
		}
		for _, n := range ruleNames(fr) {
			if !inPlace(plan, n, present) {
				held = append(held, *fr)
				break
			}
		}
	}
	return held
}

// heldModelRules is heldRules for the rules of a policy of the policy
// model, which the plan names by rule ID.
func heldModelRules(previous, next []model.Rule, plan *translate.Plan, present func(kind, name string) bool) []model.Rule {
	handed := map[string]bool{}
	for i := range next {
		handed[next[i].ID] = true
	}
	var held []model.Rule
	for i := range previous {
		if !handed[previous[i].ID] && !inPlace(plan, previous[i].ID, present) {
			held = append(held, previous[i])
		}
	}
	return held
}

// inPlace reports whether every VAP the plan enforces rule with exists,
// with its bindings.
func inPlace(plan *translate.Plan, rule string, present func(kind, name string) bool) bool {
	for _, rr := range plan.Rules {
		if rr.Rule != rule {
			continue
		}
		for _, vap := range rr.ValidatingAdmissionPolicies {
			if !present(kindVAP, vap) {
				return false
			}
			for i := range plan.Bindings {
				if b := &plan.Bindings[i]; b.Spec.PolicyName == vap && !present(kindBinding, b.Name) {
					return false
				}
			}
		}
	}
	return true
}

// Kinds of generated objects, as objectOutcome.Kind spells them.
const (
	kindVAP     = "ValidatingAdmissionPolicy"
	kindBinding = "ValidatingAdmissionPolicyBinding"
)

// previousRules returns the policy's rules the sink holds.
func previousRules(sink FallbackSink, policy string) []translate.FallbackRule {
	var out []translate.FallbackRule
	for _, fr := range sink.Rules() {
		if fr.Policy == policy {
			out = append(out, fr)
		}
	}
	return out
}

// handOver computes the rules to give the sink for a plan: the plan's, plus
// the previous ones whose VAPs are not in place yet; requeue is true while
// any is held.
func handOver(ctx context.Context, reader client.Reader, sink FallbackSink, policy string, plan *translate.Plan, next []translate.FallbackRule) (rules []translate.FallbackRule, requeue bool) {
	held := heldRules(previousRules(sink, policy), next, plan, presentIn(ctx, reader))
	return append(next, held...), len(held) > 0
}

// presentIn reports, through reader, whether a generated object exists.
// Any error but a found object says no: keeping a rule twice is safe.
func presentIn(ctx context.Context, reader client.Reader) func(kind, name string) bool {
	return func(kind, name string) bool {
		var obj client.Object = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if kind == kindBinding {
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		}
		return reader.Get(ctx, types.NamespacedName{Name: name}, obj) == nil
	}
}

// handOverModel is handOver for a policy of the policy model.
func handOverModel(ctx context.Context, reader client.Reader, sink FallbackSink, source model.Source, plan *translate.Plan, next []model.Rule) (rules []model.Rule, requeue bool) {
	held := heldModelRules(sink.ModelRulesOf(source), next, plan, presentIn(ctx, reader))
	return append(next, held...), len(held) > 0
}

// webhookModelRules are the rules of a lowered policy that the plan hands
// to kyvap's webhook (its engine can evaluate them): none when Kyverno runs
// and enforces them itself.
func webhookModelRules(p *model.Policy, plan *translate.Plan, kyvernoRunning bool) []model.Rule {
	if kyvernoRunning {
		return nil
	}
	toWebhook := map[string]bool{}
	for _, rr := range plan.Rules {
		if rr.Verdict == translate.VerdictFallback && rr.Fallback != nil && rr.Fallback.NotEnforced == "" {
			toWebhook[rr.Rule] = true
		}
	}
	var out []model.Rule
	for _, r := range p.Rules {
		if toWebhook[r.ID] {
			out = append(out, r)
		}
	}
	return out
}

// webhookModelRuleIDs are the IDs of rules.
func webhookModelRuleIDs(rules []model.Rule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		out[r.ID] = true
	}
	return out
}

// webhookRuleNames are the names of the rules the plan hands to kyvap's
// webhook for enforcement.
func webhookRuleNames(rules []translate.FallbackRule) map[string]bool {
	out := map[string]bool{}
	for i := range rules {
		if rules[i].NotEnforced != "" {
			continue
		}
		for _, n := range ruleNames(&rules[i]) {
			out[n] = true
		}
	}
	return out
}

// holdStale reports whether a generated object the plan no longer wants
// must stay: its rule is now the webhook's, and the webhook configuration
// does not cover it yet.
func holdStale(obj client.Object, policy string, toWebhook map[string]bool, coverage WebhookCoverage) bool {
	if coverage == nil {
		return false
	}
	rule := obj.GetAnnotations()[translate.AnnotationRule]
	return toWebhook[rule] && !coverage.Covers(policy, rule)
}

// held reports whether an outcome kept a stale object.
func held(outcomes []objectOutcome) bool {
	for _, o := range outcomes {
		if o.Action == actionHeld {
			return true
		}
	}
	return false
}
