// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// kyvap's webhook fails closed by default. Whatever a cluster needs to keep
// running while the webhook is down must never be sent to it, whatever the
// policies say: node heartbeats (Leases in kube-node-lease, Node status),
// the control plane's namespaces, Events, the authentication and
// authorization reviews the API server itself issues, and every request of
// a node. Kyverno's chart excludes the same (its default resourceFilters and
// excludeGroups), so fallback rules keep Kyverno's verdicts there.

// WebhookProtectedNamespaces are never sent to kyvap's webhook (besides the
// operator's own namespace).
var WebhookProtectedNamespaces = []string{"kube-node-lease", "kube-public", "kube-system"}

// WebhookProtectedUserGroup is the group whose requests (the kubelets')
// never reach kyvap's webhook.
const WebhookProtectedUserGroup = "system:nodes"

// webhookProtectedResources are the resources, by API group, that never
// reach kyvap's webhook (with their subresources).
var webhookProtectedResources = []struct{ Group, Resource string }{
	{"", "events"},
	{"", "nodes"},
	{"authentication.k8s.io", "tokenreviews"},
	{"authorization.k8s.io", "localsubjectaccessreviews"},
	{"authorization.k8s.io", "selfsubjectaccessreviews"},
	{"authorization.k8s.io", "subjectaccessreviews"},
	{"coordination.k8s.io", "leases"},
	{"events.k8s.io", "events"},
}

// WebhookLockOutConditionName names the match condition that keeps the
// protected requests away from kyvap's webhook.
const WebhookLockOutConditionName = "kyvap-never-lock-out"

// WebhookLockOutCondition is the match condition every webhook of kyvap's
// configuration carries: the API server evaluates it before calling the
// webhook, so a protected request is admitted without it even when the
// webhook is down. Its expression cannot fail (a failing match condition
// would apply the webhook's failure policy).
func WebhookLockOutCondition() admissionregistrationv1.MatchCondition {
	byGroup := map[string][]string{}
	for _, r := range webhookProtectedResources {
		byGroup[r.Group] = append(byGroup[r.Group], r.Resource)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	terms := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		terms = append(terms, fmt.Sprintf("!(request.resource.group == %s && request.resource.resource in %s)", kyverno.CELString(g), kyverno.CELStringList(byGroup[g])))
	}
	terms = append(terms, fmt.Sprintf("!(%s in request.userInfo.groups)", kyverno.CELString(WebhookProtectedUserGroup)))
	return admissionregistrationv1.MatchCondition{Name: WebhookLockOutConditionName, Expression: strings.Join(terms, " && ")}
}

// webhookProtectedCovered lists the protected resources ("group/resource",
// "nodes" for the core group) that the rules' match blocks select: kyvap's
// webhook never receives them, so a fallback rule is not enforced there.
func webhookProtectedCovered(resolver kyverno.KindResolver, rules []kyvernov1.Rule) []string {
	registered, err := clusterpolicy.WebhookRules(resolver, rules...)
	if err != nil {
		return nil // the webhook configuration reports the resolver's error
	}
	return protectedIn(registered)
}

// modelWebhookProtectedCovered is webhookProtectedCovered for a rule of the
// policy model, whose resource rules are what the webhook registers.
func modelWebhookProtectedCovered(rule *model.Rule) []string {
	registered := make([]admissionregistrationv1.RuleWithOperations, 0, len(rule.MatchConstraints.ResourceRules))
	for _, nr := range rule.MatchConstraints.ResourceRules {
		registered = append(registered, nr.RuleWithOperations)
	}
	return protectedIn(registered)
}

// protectedIn lists the protected resources the registered rules name.
func protectedIn(registered []admissionregistrationv1.RuleWithOperations) []string {
	var out []string
	for _, p := range webhookProtectedResources {
		for _, r := range registered {
			if covers(r.APIGroups, p.Group) && coversResource(r.Resources, p.Resource) {
				name := p.Resource
				if p.Group != "" {
					name = p.Group + "/" + p.Resource
				}
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// coversResource reports whether a webhook rule's resources name the
// resource or one of its subresources ("nodes", "nodes/status", "*",
// "*/*").
func coversResource(resources []string, resource string) bool {
	for _, v := range resources {
		if parent, _, _ := strings.Cut(v, "/"); parent == "*" || parent == resource {
			return true
		}
	}
	return false
}

// covers reports whether a webhook rule's API groups name the group or "*".
func covers(list []string, value string) bool {
	for _, v := range list {
		if v == "*" || v == value {
			return true
		}
	}
	return false
}
