// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"fmt"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// notEnforceable says why kyvap's fallback engine cannot evaluate a fallback
// rule, or "" when it can. The constructs named here are evaluated only by
// Kyverno's JMESPath engine: approximating them would give wrong verdicts,
// so the rule is reported NOT ENFORCED instead. It is a static property of
// the rule and its exceptions, decided here so that the status, the webhook
// configuration and the engine agree on it.
func notEnforceable(rules []kyvernov1.Rule, exceptions []kyvernov2.PolicyException) string {
	for i := range rules {
		rule := &rules[i]
		switch {
		case !rule.HasValidateCEL():
			return fmt.Sprintf("rule %q is not a validate.cel rule", rule.Name)
		case rule.RawAnyAllConditions != nil && !kyverno.NoPreconditions(rule.RawAnyAllConditions.Raw):
			return fmt.Sprintf("rule %q has JMESPath preconditions, which only Kyverno evaluates", rule.Name)
		case len(rule.Context) > 0:
			return fmt.Sprintf("rule %q has context entries, which only Kyverno evaluates", rule.Name)
		}
	}
	for _, ex := range exceptions {
		if _, err := clusterpolicy.ExceptionConditions(&ex); err != nil {
			return fmt.Sprintf("PolicyException %s/%s: %v, which only Kyverno evaluates", ex.Namespace, ex.Name, err)
		}
	}
	return ""
}

// newFallbackRule is the part of a rule handed to the fallback engine: rule
// and the further rules enforced like it (autogen variants), with the
// exceptions naming any of them that skip them (those with podSecurity
// controls naming a podSecurity rule are compiled into it).
func (t *translation) newFallbackRule(rules []kyvernov1.Rule, reason model.Reason, message string) *FallbackRule {
	names := make([]string, len(rules))
	for i := range rules {
		names[i] = rules[i].Name
	}
	var additional []kyvernov1.Rule
	if len(rules) > 1 {
		additional = rules[1:]
	}
	fr := &FallbackRule{
		Policy: t.lowering.Key(), Namespace: t.namespace, Rule: rules[0], AdditionalRules: additional, Spec: t.fallbackSpec(),
		Exceptions: t.lowering.SkippingExceptionsFor(names...), Reason: reason, Message: message,
	}
	for _, name := range names {
		if t.lowering.FailuresAreErrors(name) {
			fr.FailuresAreErrors = append(fr.FailuresAreErrors, name)
		}
		if t.lowering.IsPodSecurity(name) {
			fr.ExceptionsNotOnDelete = append(fr.ExceptionsNotOnDelete, name)
		}
	}
	fr.NotEnforced = notEnforceable(rules, fr.Exceptions)
	fr.WebhookExempt = webhookProtectedCovered(t.resolver, rules)
	return fr
}
