// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
)

// This file mirrors Kyverno's pod-controller autogen (pkg/autogen/v1, the
// engine's default): which policies get controller variants, for which
// controllers, and how the variants are rewritten.

// podControllerGVK maps a controller kind to the spelling autogen writes.
var podControllerGVK = map[string]string{
	"DaemonSet":             "apps/v1/DaemonSet",
	"Deployment":            "apps/v1/Deployment",
	"Job":                   "batch/v1/Job",
	"StatefulSet":           "apps/v1/StatefulSet",
	"ReplicaSet":            "apps/v1/ReplicaSet",
	"ReplicationController": "v1/ReplicationController",
	"CronJob":               "batch/v1/CronJob",
	"Pod":                   "v1/Pod",
}

// nonCronJobControllers are the controllers whose pod template is at spec.template.
var nonCronJobControllers = []string{"DaemonSet", "Deployment", "Job", "ReplicaSet", "ReplicationController", "StatefulSet"}

// podCELRewrites and cronJobCELRewrites are Kyverno's byte replacements on
// the JSON of a CEL rule.
var (
	podCELRewrites = [][2]string{
		{"object.spec", "object.spec.template.spec"},
		{"oldObject.spec", "oldObject.spec.template.spec"},
		{"object.metadata", "object.spec.template.metadata"},
		{"oldObject.metadata", "oldObject.spec.template.metadata"},
	}
	cronJobCELRewrites = [][2]string{
		{"object.spec", "object.spec.jobTemplate.spec.template.spec"},
		{"oldObject.spec", "oldObject.spec.jobTemplate.spec.template.spec"},
		{"object.metadata", "object.spec.jobTemplate.spec.template.metadata"},
		{"oldObject.metadata", "oldObject.spec.jobTemplate.spec.template.metadata"},
	}
)

// podRewrites and cronJobRewrites are Kyverno's byte replacements on the
// JSON of a rule that is not CEL (a pattern rule's).
var (
	podRewrites = [][2]string{
		{"request.object.spec", "request.object.spec.template.spec"},
		{"request.oldObject.spec", "request.oldObject.spec.template.spec"},
		{"request.object.metadata", "request.object.spec.template.metadata"},
		{"request.oldObject.metadata", "request.oldObject.spec.template.metadata"},
	}
	cronJobRewrites = [][2]string{
		{"request.object.spec", "request.object.spec.jobTemplate.spec.template.spec"},
		{"request.oldObject.spec", "request.oldObject.spec.jobTemplate.spec.template.spec"},
		{"request.object.metadata", "request.object.spec.jobTemplate.spec.template.metadata"},
		{"request.oldObject.metadata", "request.oldObject.spec.jobTemplate.spec.template.metadata"},
	}
)

// nestPattern is generateRule's rewrite of a pattern (or anyPattern) rule
// for controllers whose pod template is at spec.<key>: the pattern (each
// pattern) nested there, and only the message, failure actions and
// allowExistingViolations kept.
func nestPattern(rule *kyvernov1.Rule, key string) *kyvernov1.Rule {
	if rule == nil {
		return nil
	}
	nest := func(pattern any) any { return map[string]any{"spec": map[string]any{key: pattern}} }
	v := rule.Validation
	out := rule.DeepCopy()
	out.Validation = &kyvernov1.Validation{
		Message: v.Message, FailureAction: v.FailureAction, FailureActionOverrides: v.FailureActionOverrides,
		AllowExistingViolations: v.AllowExistingViolations,
	}
	if v.RawAnyPattern != nil {
		// generateRule nests each of them.
		var patterns []any
		if json.Unmarshal(v.RawAnyPattern.Raw, &patterns) != nil {
			return nil
		}
		for i := range patterns {
			patterns[i] = nest(patterns[i])
		}
		raw, err := json.Marshal(patterns)
		if err != nil {
			return nil
		}
		out.Validation.RawAnyPattern = &apiextensionsv1.JSON{Raw: raw}
		return out
	}
	var pattern any
	if json.Unmarshal(v.RawPattern.Raw, &pattern) != nil {
		return nil
	}
	raw, err := json.Marshal(nest(pattern))
	if err != nil {
		return nil
	}
	out.Validation.RawPattern = &apiextensionsv1.JSON{Raw: raw}
	return out
}

// kindName is the kind part of a Kyverno kind spelling without group,
// version or subresource, as Kyverno compares it in pkg/utils/kube/kind.go
// ContainsKind (GetKindFromGVK, then SplitSubresource): not
// ParseKindSelector, which reads "*/status" as any kind's status.
func kindName(spelling string) string {
	parts := strings.Split(spelling, "/")
	var kind string
	switch len(parts) {
	case 1:
		kind = parts[0]
	case 2:
		if kyverno.IsVersion(parts[0]) || (parts[0] == "*" && parts[1] == "*") {
			kind = parts[1]
		} else {
			kind = parts[0]
		}
	case 3:
		if kyverno.IsVersion(parts[0]) {
			kind = parts[1]
		} else {
			kind = parts[2]
		}
	case 4:
		kind = parts[2]
	}
	if i := strings.Index(kind, "."); i >= 0 {
		kind = kind[:i]
	}
	return kind
}

func containsKind(kinds []string, kind string) bool {
	for _, k := range kinds {
		if kindName(k) == kind {
			return true
		}
	}
	return false
}

// descriptionsOf lists every resource description of a match block.
func descriptionsOf(m *kyvernov1.MatchResources) []kyvernov1.ResourceDescription {
	if m == nil {
		return nil
	}
	out := []kyvernov1.ResourceDescription{m.Resources}
	for _, f := range m.Any {
		out = append(out, f.Resources)
	}
	for _, f := range m.All {
		out = append(out, f.Resources)
	}
	return out
}

// rawHasKey reports whether raw JSON (an object, or objects in a list
// under "foreach") contains the key at top level.
func rawHasKey(raw []byte, key string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return false
	}
	if _, ok := obj[key]; ok {
		return true
	}
	var foreach []map[string]json.RawMessage
	if json.Unmarshal(obj["foreach"], &foreach) == nil {
		for _, f := range foreach {
			if _, ok := f[key]; ok {
				return true
			}
		}
	}
	return false
}

// autogenControllers returns the controllers Kyverno generates variants
// for (nil when none), following CanAutoGen and the annotation.
func autogenControllers(policy *kyvernov1.ClusterPolicy) []string {
	podKinds := map[string]bool{"Pod": true}
	for k := range podControllerGVK {
		podKinds[k] = true
	}
	needed := false
	for i := range policy.Spec.Rules {
		rule := &policy.Spec.Rules[i]
		if rule.Generation != nil {
			return nil
		}
		if rule.Mutation != nil && rawHasKey(rule.Mutation.Raw, "patchesJson6902") {
			return nil
		}
		for _, d := range append(descriptionsOf(&rule.MatchResources), descriptionsOf(rule.ExcludeResources)...) {
			if d.Name != "" || len(d.Names) > 0 || d.Selector != nil || d.Annotations != nil || (len(d.Kinds) > 1 && containsKind(d.Kinds, "Pod")) {
				return nil
			}
			for _, k := range d.Kinds {
				if podKinds[k] {
					needed = true
				}
			}
		}
	}
	if !needed {
		return nil
	}
	value, ok := policy.Annotations[kyvernov1.AutogenControllersAnnotation]
	if !ok {
		return append(append([]string(nil), nonCronJobControllers...), "CronJob")
	}
	controllers := strings.Split(value, ",")
	sort.Strings(controllers)
	if len(controllers) == 1 && controllers[0] == "none" {
		return nil
	}
	return controllers
}

// toGVKs is Kyverno's ConvertKindsToGVK.
func toGVKs(kinds []string) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		if gvk, ok := podControllerGVK[k]; ok {
			out[i] = gvk
		} else {
			out[i] = k
		}
	}
	return out
}

// retarget replaces kinds in a rule copy the way generateRule does: in any
// (else all) filters selected by pick, or the legacy kinds.
func retarget(rule *kyvernov1.Rule, name string, kinds []string, pick func([]string) bool) *kyvernov1.Rule {
	out := rule.DeepCopy()
	out.Name = name
	gvks := toGVKs(kinds)
	replace := func(filters kyvernov1.ResourceFilters) {
		for i := range filters {
			if pick(filters[i].Resources.Kinds) {
				filters[i].Resources.Kinds = append([]string(nil), gvks...)
			}
		}
	}
	switch {
	case len(out.MatchResources.Any) > 0:
		replace(out.MatchResources.Any)
	case len(out.MatchResources.All) > 0:
		replace(out.MatchResources.All)
	default:
		out.MatchResources.Resources.Kinds = append([]string(nil), gvks...)
	}
	if ex := out.ExcludeResources; ex != nil {
		switch {
		case len(ex.Any) > 0:
			replace(ex.Any)
		case len(ex.All) > 0:
			replace(ex.All)
		case len(ex.Resources.Kinds) != 0:
			ex.Resources.Kinds = append([]string(nil), gvks...)
		}
	}
	return out
}

// controllersRule is Kyverno's generateRuleForControllers for a CEL rule
// (before the expression rewrite).
func controllersRule(rule *kyvernov1.Rule, controllers []string) *kyvernov1.Rule {
	if strings.HasPrefix(rule.Name, "autogen-") || len(controllers) == 0 {
		return nil
	}
	var matchKinds, excludeKinds []string
	for _, d := range descriptionsOf(&rule.MatchResources) {
		matchKinds = append(matchKinds, d.Kinds...)
	}
	for _, d := range descriptionsOf(rule.ExcludeResources) {
		excludeKinds = append(excludeKinds, d.Kinds...)
	}
	if !containsKind(matchKinds, "Pod") || (len(excludeKinds) != 0 && !containsKind(excludeKinds, "Pod")) {
		return nil
	}
	kinds := controllers
	var valid []string
	for _, c := range controllers {
		for _, known := range nonCronJobControllers {
			if c == known {
				valid = append(valid, c)
			}
		}
	}
	if len(controllers) == 1 && controllers[0] == "all" {
		valid = append([]string(nil), nonCronJobControllers...)
	}
	if len(valid) > 0 {
		kinds = valid
		// Kyverno generates the variants per request, for the request's kind
		// (ComputeRules(policy, kind)): an annotation listing Pod makes a Pod
		// request get the variant too, with kinds [Pod] and the template
		// paths. One variant matching both gives the same verdicts.
		for _, c := range controllers {
			if c == "Pod" {
				kinds = append(kinds, "Pod")
			}
		}
	}
	sort.Strings(kinds)
	return retarget(rule, kyverno.AutogenRuleName(rule.Name), kinds, func(k []string) bool { return containsKind(k, "Pod") })
}

// rewriteCEL applies Kyverno's byte replacements to the rule's JSON.
func rewriteCEL(rule *kyvernov1.Rule, rewrites [][2]string) *kyvernov1.Rule {
	if rule == nil {
		return nil
	}
	data, err := json.Marshal(rule)
	if err != nil {
		return nil
	}
	for _, r := range rewrites {
		data = bytes.ReplaceAll(data, []byte(r[0]), []byte(r[1]))
	}
	var out kyvernov1.Rule
	if json.Unmarshal(data, &out) != nil {
		return nil
	}
	return &out
}

// autogenRules returns Kyverno's autogen variants of a rule: the pod
// controllers one and the CronJob one, in that order, each when generated.
func autogenRules(rule *kyvernov1.Rule, controllers []string) []kyvernov1.Rule {
	var withoutCronJob []string
	hasCronJob := false
	for _, c := range controllers {
		if c == "CronJob" {
			hasCronJob = true
			continue
		}
		if c == "all" {
			hasCronJob = true
		}
		withoutCronJob = append(withoutCronJob, c)
	}
	pattern := isPatternRule(rule)
	pod, cronJob := podCELRewrites, cronJobCELRewrites
	if pattern || isDenyRule(rule) || isForEachRule(rule) || isPodSecurityRule(rule) {
		pod, cronJob = podRewrites, cronJobRewrites
	}
	var out []kyvernov1.Rule
	if gen := controllersRule(rule, withoutCronJob); gen != nil {
		if pattern {
			gen = nestPattern(gen, "template")
		}
		if r := rewriteCEL(gen, pod); r != nil {
			out = append(out, *r)
		}
	}
	if hasCronJob {
		if base := controllersRule(rule, controllers); base != nil {
			if pattern {
				base = nestPattern(base, "template")
			}
			gen := retarget(base, kyverno.AutogenCronJobRuleName(rule.Name), []string{"CronJob"}, func([]string) bool { return true })
			if pattern {
				gen = nestPattern(gen, "jobTemplate")
			}
			if r := rewriteCEL(gen, cronJob); r != nil {
				out = append(out, *r)
			}
		}
	}
	return out
}

// hasAutogenVariants reports whether Kyverno generates pod-controller
// variants for some rule of the policy (its own rules named autogen-* never
// get any).
func hasAutogenVariants(policy *kyvernov1.ClusterPolicy, controllers []string) bool {
	for i := range policy.Spec.Rules {
		if len(autogenRules(&policy.Spec.Rules[i], controllers)) > 0 {
			return true
		}
	}
	return false
}

// shadowedAutogenRule narrows a user rule whose name starts with
// "autogen-" the way Kyverno evaluates it in a policy that gets pod
// controller variants: ComputeRules drops such rules for requests of the
// controllers' kinds, and the policy cache (built from the rules without
// them) routes a request to the policy only when another of its rules
// matches the request's kind. So the rule applies only to the kinds it
// matches that are not controllers and that another rule (or a generated
// variant) matches. ok is false when kyvap cannot tell (wildcard kinds); a
// nil rule with ok means Kyverno never evaluates it.
func shadowedAutogenRule(rule *kyvernov1.Rule, policy *kyvernov1.ClusterPolicy, controllers []string) (narrowed *kyvernov1.Rule, ok bool) {
	controllerKinds := map[string]bool{}
	for _, c := range controllers {
		controllerKinds[c] = true
	}
	routed := map[string]bool{}
	routedAll := false
	addKinds := func(r *kyvernov1.Rule) {
		for _, d := range descriptionsOf(&r.MatchResources) {
			for _, k := range d.Kinds {
				if kyverno.ContainsWildcard(k) {
					routedAll = true
				}
				routed[kindName(k)] = true
			}
			if len(d.Kinds) == 0 && !d.IsEmpty() {
				routedAll = true
			}
		}
	}
	for i := range policy.Spec.Rules {
		other := &policy.Spec.Rules[i]
		if strings.HasPrefix(other.Name, "autogen-") {
			continue
		}
		addKinds(other)
		for _, variant := range autogenRules(other, controllers) {
			addKinds(&variant)
		}
	}
	out := rule.DeepCopy()
	keep := func(kinds []string) ([]string, bool) {
		var kept []string
		for _, k := range kinds {
			if kyverno.ContainsWildcard(k) {
				return nil, false
			}
			name := kindName(k)
			if !controllerKinds[name] && (routedAll || routed[name]) {
				kept = append(kept, k)
			}
		}
		return kept, true
	}
	filters := append(append(kyvernov1.ResourceFilters{}, out.MatchResources.Any...), out.MatchResources.All...)
	legacy := len(filters) == 0
	if legacy {
		kinds, fine := keep(out.MatchResources.Resources.Kinds)
		if !fine || len(out.MatchResources.Resources.Kinds) == 0 {
			return nil, false
		}
		if len(kinds) == 0 {
			return nil, true
		}
		out.MatchResources.Resources.Kinds = kinds
		return out, true
	}
	narrow := func(list kyvernov1.ResourceFilters, all bool) (kyvernov1.ResourceFilters, bool, bool) {
		var kept kyvernov1.ResourceFilters
		for _, f := range list {
			if len(f.Resources.Kinds) == 0 {
				return nil, false, false
			}
			kinds, fine := keep(f.Resources.Kinds)
			if !fine {
				return nil, false, false
			}
			if len(kinds) == 0 {
				if all {
					return nil, true, true // one filter can never match: the rule never applies
				}
				continue
			}
			f.Resources.Kinds = kinds
			kept = append(kept, f)
		}
		return kept, len(kept) == 0, true
	}
	if len(out.MatchResources.Any) > 0 {
		kept, never, fine := narrow(out.MatchResources.Any, false)
		if !fine {
			return nil, false
		}
		if never {
			return nil, true
		}
		out.MatchResources.Any = kept
		return out, true
	}
	kept, never, fine := narrow(out.MatchResources.All, true)
	if !fine {
		return nil, false
	}
	if never {
		return nil, true
	}
	out.MatchResources.All = kept
	return out, true
}
