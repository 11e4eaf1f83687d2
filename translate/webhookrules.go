package translate

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

// WebhookRules returns admission webhook rules that cover every request the
// rules' match blocks can select: the union over all filters (an `all`
// block's intersection is narrower, and the fallback engine matches exactly;
// the webhook only has to be called). Kinds served in several versions are
// covered in each; kinds the cluster does not serve need no registration.
// An error is the resolver's.
func WebhookRules(resolver KindResolver, rules ...kyvernov1.Rule) ([]admissionregistrationv1.RuleWithOperations, error) {
	var named []admissionregistrationv1.NamedRuleWithOperations
	for i := range rules {
		m := rules[i].MatchResources
		filters, _ := filtersOf(m)
		for _, f := range filters {
			kinds, err := webhookKinds(resolver, f.Resources.Kinds)
			if err != nil {
				return nil, fmt.Errorf("rule %q: %w", rules[i].Name, err)
			}
			ops := make([]string, 0, len(f.Resources.Operations))
			for _, op := range f.Resources.Operations {
				ops = append(ops, string(op))
			}
			named = append(named, resourceRules(kinds, uniqueSorted(ops))...)
		}
	}
	merged := mergeRules(named)
	out := make([]admissionregistrationv1.RuleWithOperations, len(merged))
	for i, r := range merged {
		out[i] = r.RuleWithOperations
	}
	return out, nil
}

// webhookKinds is resolveKinds without the ambiguity refusal: a webhook may
// register every version of a kind.
func webhookKinds(resolver KindResolver, kinds []string) (kindSet, error) {
	var set kindSet
	if len(kinds) == 0 {
		set.everything = true
		return set, nil
	}
	seen := map[Resource]bool{}
	for _, kind := range kinds {
		if kind == "*" {
			set.topLevel = true
			continue
		}
		if sel, ok := parseKindSelector(kind); ok && sel == (kindSelector{"*", "*", "*", "*"}) {
			set.everything = true
			continue
		}
		resolved, err := resolver.Resolve(kind)
		if err != nil {
			return kindSet{}, fmt.Errorf("kind %q: %w", kind, err)
		}
		// A kind the cluster does not serve cannot be requested: nothing to
		// register (discovery changes re-run this).

		for _, r := range resolved {
			seen[r] = true
			if r.Group == "" && r.Resource == "pods" && r.Subresource == "" {
				eph := r
				eph.Subresource = "ephemeralcontainers"
				seen[eph] = true
			}
		}
	}
	for r := range seen {
		set.resources = append(set.resources, r)
	}
	sortResources(set.resources)
	return set, nil
}
