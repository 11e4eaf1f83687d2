// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/vap"
)

// DefaultTimeoutSeconds is Kyverno's default webhookTimeoutSeconds.
const DefaultTimeoutSeconds int32 = 10

// PathPrefix is where the handlers are served; a group's path follows it.
const PathPrefix = "/validate/"

// Group is the set of policies one configured webhook serves: the API server
// applies a failurePolicy and a timeout per webhook, so policies differing in
// either need their own.
type Group struct {
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds int32
}

// GroupOf is the group a policy belongs to. Timeouts are clamped to what the
// API server accepts (1 to 30 seconds).
func GroupOf(spec *kyvernov1.Spec) Group {
	failurePolicy := admissionregistrationv1.Fail
	if spec.FailurePolicy != nil && *spec.FailurePolicy == kyvernov1.Ignore {
		failurePolicy = admissionregistrationv1.Ignore
	}
	return GroupFor(engine.PolicyGroup{FailurePolicy: failurePolicy, TimeoutSeconds: spec.WebhookTimeoutSeconds})
}

// GroupFor is the group of a policy the engine holds.
func GroupFor(p engine.PolicyGroup) Group {
	g := Group{FailurePolicy: admissionregistrationv1.Fail, TimeoutSeconds: DefaultTimeoutSeconds}
	if p.FailurePolicy == admissionregistrationv1.Ignore {
		g.FailurePolicy = admissionregistrationv1.Ignore
	}
	if t := p.TimeoutSeconds; t != nil {
		g.TimeoutSeconds = min(max(*t, 1), 30)
	}
	return g
}

// Name is the configured webhook's name, e.g. "fail-10s.validate.kyvap.io".
func (g Group) Name() string {
	return fmt.Sprintf("%s-%ds.validate.kyvap.io", strings.ToLower(string(g.FailurePolicy)), g.TimeoutSeconds)
}

// Path is where the group's handler is served, e.g. "/validate/fail/10".
func (g Group) Path() string {
	return fmt.Sprintf("%s%s/%d", PathPrefix, strings.ToLower(string(g.FailurePolicy)), g.TimeoutSeconds)
}

// ParseGroupPath is the inverse of Group.Path.
func ParseGroupPath(path string) (Group, error) {
	rest, ok := strings.CutPrefix(path, PathPrefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 2 {
		return Group{}, fmt.Errorf("path %q is not %s<fail|ignore>/<seconds>", path, PathPrefix)
	}
	var g Group
	switch parts[0] {
	case "fail":
		g.FailurePolicy = admissionregistrationv1.Fail
	case "ignore":
		g.FailurePolicy = admissionregistrationv1.Ignore
	default:
		return Group{}, fmt.Errorf("path %q: unknown failure policy %q", path, parts[0])
	}
	t, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || t < 1 || t > 30 {
		return Group{}, fmt.Errorf("path %q: timeout %q is not 1 to 30 seconds", path, parts[1])
	}
	g.TimeoutSeconds = int32(t)
	return g, nil
}

// ConfigOptions say how the API server reaches the webhook.
type ConfigOptions struct {
	// Name of the ValidatingWebhookConfiguration.
	Name string
	// Service is the webhook's Service (namespace, name, port); the path is
	// set per group. Exactly one of Service and URL is set.
	Service *admissionregistrationv1.ServiceReference
	// URL is the webhook's base URL ("https://host:port"), for a manager
	// running outside the cluster.
	URL string
	// CABundle is the CA that signed the serving certificate; empty when
	// cert-manager's CA injector fills it in (see Annotations).
	CABundle []byte
	// ExcludedNamespaces are never sent to the webhook:
	// translate.WebhookProtectedNamespaces and the operator's own namespace,
	// so that the webhook can never lock out the cluster or itself.
	ExcludedNamespaces []string
	// Kyverno is Kyverno's global configuration: its webhook namespace and
	// object selectors and match conditions go on every webhook, as Kyverno
	// puts them on its own (the handler applies the rest of it).
	Kyverno *kyverno.Config
	// Engine is what the engine serving the webhook evaluates beyond
	// Kyverno's pure CEL libraries.
	Engine translate.EngineCapabilities
	// Labels and Annotations are set on the configuration.
	Labels      map[string]string
	Annotations map[string]string
	// Owner, when set, owns the configuration: the operator's Namespace,
	// so that whatever deletes the namespace (kubectl delete -k, deleting
	// it by hand) has the garbage collector delete the configuration too,
	// and no request is left to a webhook nobody serves.
	Owner *metav1.OwnerReference
	// ForceFailurePolicyIgnore sets failurePolicy Ignore on every webhook,
	// whatever the policies say (Kyverno's --forceFailurePolicyIgnore): the
	// API server admits what it could not send to kyvap. The webhook still
	// applies each policy's own failurePolicy to errors inside evaluation.
	ForceFailurePolicyIgnore bool
}

// DesiredConfiguration is the ValidatingWebhookConfiguration for a set of
// fallback rules: one webhook per group, each registered for exactly the
// resources and operations of its rules. It returns nil when no rule needs
// the webhook. Rules the engine cannot evaluate and rules whose kinds cannot
// be resolved are left out, and each such problem is returned.
func DesiredConfiguration(rules []translate.FallbackRule, models []engine.ModelPolicy, resolver kyverno.KindResolver, opts ConfigOptions) (*admissionregistrationv1.ValidatingWebhookConfiguration, []error) {
	var problems []error
	byGroup := map[Group][]admissionregistrationv1.RuleWithOperations{}
	for _, mp := range models {
		for i := range mp.Rules {
			r := &mp.Rules[i]
			if why := translate.ModelRuleNotEnforcedWith(r, opts.Engine); why != "" {
				problems = append(problems, fmt.Errorf("%s rule %s: %s", mp.Source, r.ID, why))
				continue
			}
			g := GroupFor(engine.PolicyGroup{FailurePolicy: r.FailurePolicy, TimeoutSeconds: r.TimeoutSeconds})
			byGroup[g] = append(byGroup[g], modelWebhookRules(r)...)
		}
	}
	for i := range rules {
		fr := &rules[i]
		if fr.NotEnforced != "" {
			problems = append(problems, fmt.Errorf("ClusterPolicy %s rule %s: %s", fr.Policy, fr.Rule.Name, fr.NotEnforced))
			continue
		}
		r, err := clusterpolicy.WebhookRules(resolver, append([]kyvernov1.Rule{fr.Rule}, fr.AdditionalRules...)...)
		if err != nil {
			problems = append(problems, fmt.Errorf("ClusterPolicy %s: %w", fr.Policy, err))
			continue
		}
		g := GroupOf(&fr.Spec)
		byGroup[g] = append(byGroup[g], r...)
	}
	if len(byGroup) == 0 {
		return nil, problems
	}
	groups := make([]Group, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name() < groups[j].Name() })

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: opts.Labels, Annotations: opts.Annotations},
	}
	if opts.Owner != nil {
		vwc.OwnerReferences = []metav1.OwnerReference{*opts.Owner}
	}
	excluded := append([]string(nil), opts.ExcludedNamespaces...)
	sort.Strings(excluded)
	for _, g := range groups {
		vwc.Webhooks = append(vwc.Webhooks, webhookFor(g, mergeWebhookRules(byGroup[g]), excluded, opts))
	}
	return vwc, problems
}

// modelWebhookRules are the requests a rule of the policy model needs:
// those of its match constraints' resource rules (resource names,
// exclusions and selectors are the engine's to check).
func modelWebhookRules(r *model.Rule) []admissionregistrationv1.RuleWithOperations {
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(r.MatchConstraints.ResourceRules))
	for _, nr := range r.MatchConstraints.ResourceRules {
		rule := *nr.RuleWithOperations.DeepCopy()
		rule.Scope = nil
		out = append(out, rule)
	}
	return out
}

func webhookFor(g Group, rules []admissionregistrationv1.RuleWithOperations, excluded []string, opts ConfigOptions) admissionregistrationv1.ValidatingWebhook {
	failurePolicy := g.FailurePolicy
	if opts.ForceFailurePolicyIgnore {
		failurePolicy = admissionregistrationv1.Ignore
	}
	equivalent := admissionregistrationv1.Equivalent
	sideEffects := admissionregistrationv1.SideEffectClassNone
	timeout := g.TimeoutSeconds
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: opts.CABundle}
	if opts.Service != nil {
		svc := *opts.Service
		path := g.Path()
		svc.Path = &path
		cc.Service = &svc
	} else {
		url := strings.TrimRight(opts.URL, "/") + g.Path()
		cc.URL = &url
	}
	namespaceSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: excluded,
	}}}
	objectSelector := &metav1.LabelSelector{}
	conditions := []admissionregistrationv1.MatchCondition{translate.WebhookLockOutCondition()}
	if cfg := opts.Kyverno; cfg != nil {
		namespaceSelector = vap.AndLabelSelectors(namespaceSelector, cfg.NamespaceSelector)
		objectSelector = vap.AndLabelSelectors(objectSelector, cfg.ObjectSelector)
		conditions = append(conditions, kyverno.KyvernoConfigMatchConditions(cfg)...)
	}
	// Every field the API server would default is set, so the stored object
	// equals the desired one and an unchanged configuration is never written.
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    g.Name(),
		ClientConfig:            cc,
		Rules:                   rules,
		FailurePolicy:           &failurePolicy,
		MatchPolicy:             &equivalent,
		NamespaceSelector:       namespaceSelector,
		ObjectSelector:          objectSelector,
		MatchConditions:         conditions,
		SideEffects:             &sideEffects,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}
}

// mergeWebhookRules merges rules that differ only in resources
// (clusterpolicy.MergeRules), with the explicit scope "*" the API server would
// default them to, so the stored configuration equals the desired one.
func mergeWebhookRules(rules []admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.RuleWithOperations {
	all := admissionregistrationv1.AllScopes
	scoped := make([]admissionregistrationv1.RuleWithOperations, len(rules))
	for i := range rules {
		scoped[i] = rules[i]
		scoped[i].Scope = &all
	}
	return clusterpolicy.MergeRules(scoped)
}

// errNoClientConfig is returned when neither a Service nor a URL is set.
var errNoClientConfig = errors.New("webhook: neither a Service nor a URL is configured")
