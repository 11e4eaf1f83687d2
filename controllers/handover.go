package controllers

import (
	"context"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	bindingsOf := map[string][]string{}
	for i := range plan.Bindings {
		b := &plan.Bindings[i]
		bindingsOf[b.Spec.PolicyName] = append(bindingsOf[b.Spec.PolicyName], b.Name)
	}
	vapsOf := map[string][]string{}
	for _, rr := range plan.Rules {
		vapsOf[rr.Rule] = append(vapsOf[rr.Rule], rr.ValidatingAdmissionPolicies...)
	}
	var held []translate.FallbackRule
	for i := range previous {
		fr := &previous[i]
		if handed[fr.Rule.Name] {
			continue // still the webhook's
		}
		missing := false
		for _, n := range ruleNames(fr) {
			for _, vap := range vapsOf[n] {
				if !present(kindVAP, vap) {
					missing = true
				}
				for _, b := range bindingsOf[vap] {
					if !present(kindBinding, b) {
						missing = true
					}
				}
			}
		}
		if missing {
			held = append(held, *fr)
		}
	}
	return held
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
	held := heldRules(previousRules(sink, policy), next, plan, func(kind, name string) bool {
		var obj client.Object = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if kind == kindBinding {
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		}
		// Any error but a found object holds: keeping a rule twice is safe.
		return reader.Get(ctx, types.NamespacedName{Name: name}, obj) == nil
	})
	return append(next, held...), len(held) > 0
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
