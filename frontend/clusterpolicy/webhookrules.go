// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
)

// WebhookRules returns admission webhook rules that cover every request the
// rules' match blocks can select: the union over all filters (an `all`
// block's intersection is narrower, and the fallback engine matches exactly;
// the webhook only has to be called). Kinds served in several versions are
// covered in each; kinds the cluster does not serve need no registration.
// An error is the resolver's.
func WebhookRules(resolver kyverno.KindResolver, rules ...kyvernov1.Rule) ([]admissionregistrationv1.RuleWithOperations, error) {
	var named []admissionregistrationv1.NamedRuleWithOperations
	for i := range rules {
		m := rules[i].MatchResources
		filters, _ := filtersOf(m)
		for _, f := range filters {
			kinds, fl := kyverno.CollectKinds(resolver, f.Resources.Kinds, false)
			if fl != nil {
				return nil, fmt.Errorf("rule %q: %s", rules[i].Name, fl.Message)
			}
			ops := make([]string, 0, len(f.Resources.Operations))
			for _, op := range f.Resources.Operations {
				ops = append(ops, string(op))
			}
			named = append(named, resourceRules(kinds, kyverno.UniqueSorted(ops))...)
		}
	}
	merged := mergeRules(named)
	out := make([]admissionregistrationv1.RuleWithOperations, len(merged))
	for i, r := range merged {
		out[i] = r.RuleWithOperations
	}
	return out, nil
}
