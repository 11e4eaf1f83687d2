// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/classic"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
)

// namespaceNameLabel is the label the API server sets on every Namespace
// to its name; selecting on it selects namespaces by name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// Names of the match conditions kyvap adds; user celPreconditions keep
// their own names.
const (
	conditionMatch     = "kyvap-match"
	conditionExclude   = "kyvap-exclude"
	conditionException = "kyvap-exception"
)

// allOperations are the operations Kyverno's engine evaluates when a filter
// names none: it does not filter on the operation at all, so every
// operation a VAP can see applies.
var allOperations = []admissionregistrationv1.OperationType{
	admissionregistrationv1.Create, admissionregistrationv1.Update,
	admissionregistrationv1.Delete, admissionregistrationv1.Connect,
}

// resolvedFilter is a Kyverno resource filter with its kinds resolved.
type resolvedFilter struct {
	filter kyvernov1.ResourceFilter
	kinds  kyverno.KindSet
	// operations are the filter's operations; empty means all.
	operations []string
}

// resolveFilter resolves one filter and refuses what needs RBAC look-ups.
func resolveFilter(resolver kyverno.KindResolver, f kyvernov1.ResourceFilter) (resolvedFilter, *model.Refusal) {
	if len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
		return resolvedFilter{}, model.Refuse(model.ReasonRolesOrClusterRoles, "roles/clusterRoles need RBAC look-ups at admission")
	}
	kinds, fl := kyverno.ResolveKinds(resolver, f.Resources.Kinds)
	if fl != nil {
		return resolvedFilter{}, fl
	}
	ops := make([]string, 0, len(f.Resources.Operations))
	for _, op := range f.Resources.Operations {
		ops = append(ops, string(op))
	}
	return resolvedFilter{filter: f, kinds: kinds, operations: kyverno.UniqueSorted(ops)}, nil
}

// vapOperations converts a filter's operations; none means all.
func vapOperations(ops []string) []admissionregistrationv1.OperationType {
	if len(ops) == 0 {
		return append([]admissionregistrationv1.OperationType(nil), allOperations...)
	}
	var out []admissionregistrationv1.OperationType
	for _, known := range allOperations {
		for _, op := range ops {
			if op == string(known) {
				out = append(out, known)
				break
			}
		}
	}
	return out
}

// resourceRules renders a kind set and operations as VAP resource rules,
// one per group/version.
func resourceRules(kinds kyverno.KindSet, ops []string) []admissionregistrationv1.NamedRuleWithOperations {
	operations := vapOperations(ops)
	if len(operations) == 0 {
		// Only operations a VAP never sees (e.g. a typo): the filter cannot match.
		return nil
	}
	rule := func(group, version string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: operations,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: resources},
		}}
	}
	var out []admissionregistrationv1.NamedRuleWithOperations
	if kinds.Everything {
		return append(out, rule("*", "*", "*/*"))
	}
	if kinds.TopLevel {
		out = append(out, rule("*", "*", "*"), rule("", "v1", "pods/ephemeralcontainers"))
	}
	byGV := map[[2]string][]string{}
	for _, r := range kinds.Resources {
		name := r.Resource
		if r.Subresource != "" {
			name += "/" + r.Subresource
		}
		key := [2]string{r.Group, r.Version}
		byGV[key] = append(byGV[key], name)
	}
	for gv, resources := range byGV {
		out = append(out, rule(gv[0], gv[1], kyverno.UniqueSorted(resources)...))
	}
	return out
}

// mergeRules is MergeRules for a VAP's resource rules. kyvap never sets
// resourceNames, so the rules are merged as RuleWithOperations.
func mergeRules(rules []admissionregistrationv1.NamedRuleWithOperations) []admissionregistrationv1.NamedRuleWithOperations {
	plain := make([]admissionregistrationv1.RuleWithOperations, len(rules))
	for i := range rules {
		plain[i] = rules[i].RuleWithOperations
	}
	merged := MergeRules(plain)
	out := make([]admissionregistrationv1.NamedRuleWithOperations, len(merged))
	for i := range merged {
		out[i] = admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: merged[i]}
	}
	return out
}

// MergeRules merges admission rules that differ only in resources: one rule
// per apiGroups, apiVersions, operations and scope, holding the union of
// their resources, sorted and deduplicated. The result is ordered by those
// fields, so equal inputs in any order give the same, stable rules (VAP
// matchConstraints and the fallback webhook's registration, which kyvap
// compares with the stored objects). The inputs are not modified.
func MergeRules(rules []admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.RuleWithOperations {
	type key struct{ groups, versions, ops, scope string }
	merged := map[key]*admissionregistrationv1.RuleWithOperations{}
	var order []key
	for i := range rules {
		r := &rules[i]
		ops := make([]string, len(r.Operations))
		for j, op := range r.Operations {
			ops[j] = string(op)
		}
		scope := ""
		if r.Scope != nil {
			scope = string(*r.Scope)
		}
		k := key{strings.Join(r.APIGroups, ","), strings.Join(r.APIVersions, ","), strings.Join(ops, ","), scope}
		if m, ok := merged[k]; ok {
			m.Resources = append(m.Resources, r.Resources...)
			continue
		}
		merged[k] = r.DeepCopy()
		order = append(order, k)
	}
	slices.SortFunc(order, func(a, b key) int {
		return cmp.Or(strings.Compare(a.groups, b.groups), strings.Compare(a.versions, b.versions),
			strings.Compare(a.ops, b.ops), strings.Compare(a.scope, b.scope))
	})
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(order))
	for _, k := range order {
		r := merged[k]
		r.Resources = kyverno.UniqueSorted(r.Resources)
		out = append(out, *r)
	}
	return out
}

// celKinds is the predicate "the request is about one of the kinds".
// Versions are not compared: Kyverno matches a kind in any version unless
// spelled with one, and resolution already pinned a single version.
func celKinds(kinds kyverno.KindSet) string {
	if kinds.Everything {
		return "true"
	}
	var terms []string
	if kinds.TopLevel {
		terms = append(terms, `(`+kyverno.CELSubResource+` == '' || (request.resource.group == '' && request.resource.resource == 'pods' && `+kyverno.CELSubResource+` == 'ephemeralcontainers'))`)
	}
	type key struct{ group, sub string }
	byKey := map[key][]string{}
	var keys []key
	for _, r := range kinds.Resources {
		k := key{r.Group, r.Subresource}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r.Resource)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return keys[i].sub < keys[j].sub
	})
	for _, k := range keys {
		terms = append(terms, fmt.Sprintf("(request.resource.group == %s && %s == %s && request.resource.resource in %s)",
			kyverno.CELString(k.group), kyverno.CELSubResource, kyverno.CELString(k.sub), kyverno.CELStringList(kyverno.UniqueSorted(byKey[k]))))
	}
	return kyverno.CELOr(terms)
}

// filterPurpose says which of Kyverno's two matchers a filter belongs to.
type filterPurpose int

const (
	// forRule: a rule's match or exclude (pkg/engine/utils): operations
	// count; a namespace selector never matches a Namespace.
	forRule filterPurpose = iota
	// forException: a PolicyException's match: operations are ignored and a
	// namespace selector is not checked for a Namespace.
	forException
)

// filterParts are the CEL predicates of one filter's attributes; empty
// strings are absent attributes.
type filterParts struct {
	kinds, operations, names, namespaces, annotations, selector, namespaceSelector, subjects string
}

// residual is the conjunction of everything but kinds and operations.
func (p filterParts) residual() []string {
	var out []string
	for _, t := range []string{p.names, p.namespaces, p.annotations, p.selector, p.namespaceSelector, p.subjects} {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// all is the whole filter as one predicate.
func (p filterParts) all() string {
	var terms []string
	for _, t := range []string{p.kinds, p.operations} {
		if t != "" && t != "true" {
			terms = append(terms, t)
		}
	}
	return kyverno.CELAnd(append(terms, p.residual()...))
}

// celFilterParts renders a resolved filter's attributes as CEL.
func celFilterParts(f resolvedFilter, purpose filterPurpose) (filterParts, *model.Refusal) {
	var p filterParts
	d := f.filter.Resources
	p.kinds = celKinds(f.kinds)
	if purpose == forRule && len(f.operations) > 0 {
		p.operations = kyverno.CELOperations(f.operations)
	}
	if d.Name != "" {
		p.names = kyverno.CELPatternMatch(kyverno.CELResourceName, []string{d.Name})
	}
	if len(d.Names) > 0 {
		names := kyverno.CELPatternMatch(kyverno.CELResourceName, d.Names)
		if p.names != "" {
			names = kyverno.CELAnd([]string{p.names, names})
		}
		p.names = names
	}
	if len(d.Namespaces) > 0 {
		p.namespaces = kyverno.CELPatternMatch(kyverno.CELResourceNamespace, d.Namespaces)
	}
	if len(d.Annotations) > 0 {
		p.annotations = kyverno.CELAnnotations(d.Annotations)
	}
	if d.Selector != nil {
		sel, err := kyverno.ParseSelector(d.Selector)
		if err != nil {
			return filterParts{}, model.Refuse(model.ReasonSelectorNotExpressible, "selector: %v", err)
		}
		p.selector = sel.CEL(kyverno.CELResourceLabels)
	}
	if d.NamespaceSelector != nil {
		sel, err := kyverno.ParseSelector(d.NamespaceSelector)
		if err != nil {
			return filterParts{}, model.Refuse(model.ReasonSelectorNotExpressible, "namespaceSelector: %v", err)
		}
		// Cluster-scoped resources have no namespace object; Kyverno checks
		// the selector against empty labels, a constant.
		inNamespace := fmt.Sprintf("(namespaceObject == null ? %t : %s)", sel.MatchesEmpty(), sel.CEL(kyverno.CELNamespaceLabels))
		if purpose == forRule {
			p.namespaceSelector = fmt.Sprintf("(!%s && %s)", kyverno.CELIsNamespaceKind, inNamespace)
		} else {
			p.namespaceSelector = fmt.Sprintf("(%s || %s)", kyverno.CELIsNamespaceKind, inNamespace)
		}
	}
	if len(f.filter.Subjects) > 0 {
		p.subjects = kyverno.CELSubjects(f.filter.Subjects)
	}
	return p, nil
}

// filtersOf returns a match block's filters the way Kyverno's engine picks
// them: any, else all, else the legacy inline filter.
func filtersOf(m kyvernov1.MatchResources) (filters []kyvernov1.ResourceFilter, all bool) {
	switch {
	case len(m.Any) > 0:
		return m.Any, false
	case len(m.All) > 0:
		return m.All, true
	}
	legacy := kyvernov1.ResourceFilter{UserInfo: m.UserInfo, Resources: m.Resources}
	if isEmptyFilter(legacy) {
		return nil, false
	}
	return []kyvernov1.ResourceFilter{legacy}, false
}

// isEmptyFilter reports a filter Kyverno treats as empty (never matches in
// match, never excludes in exclude).
func isEmptyFilter(f kyvernov1.ResourceFilter) bool {
	return f.Resources.IsEmpty() && f.UserInfo.IsEmpty()
}

// matchTranslation is what match, exclude and exceptions become.
type matchTranslation struct {
	constraints admissionregistrationv1.MatchResources
	conditions  []admissionregistrationv1.MatchCondition
	// kinds are the match filters' kinds, for autogen and override checks.
	kinds []kyverno.KindSet
}

// structuralNamespaces returns the namespace selector that carries a
// filter's namespaces and namespaceSelector exactly, when its kinds allow.
func structuralNamespaces(f resolvedFilter) (*metav1.LabelSelector, bool) {
	d := f.filter.Resources
	if len(d.Namespaces) == 0 && d.NamespaceSelector == nil {
		return nil, false
	}
	for _, ns := range d.Namespaces {
		if kyverno.ContainsWildcard(ns) || ns == "" {
			return nil, false
		}
	}
	if len(d.Namespaces) > 0 && !f.kinds.OnlyNamespacedOrNamespace() {
		return nil, false
	}
	sel := &metav1.LabelSelector{}
	if d.NamespaceSelector != nil {
		// A VAP namespace selector applies to a Namespace's own labels;
		// Kyverno's never matches a Namespace: exact only for namespaced kinds.
		if !f.kinds.OnlyNamespaced() {
			return nil, false
		}
		if parsed, err := kyverno.ParseSelector(d.NamespaceSelector); err != nil || parsed.HasWildcards() {
			return nil, false
		}
		sel = d.NamespaceSelector.DeepCopy()
	}
	if len(d.Namespaces) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: kyverno.UniqueSorted(d.Namespaces),
		})
	}
	return sel, true
}

// withoutNamespaces drops the namespace attributes a structural selector took over.
func withoutNamespaces(f resolvedFilter) resolvedFilter {
	c := f
	c.filter = *f.filter.DeepCopy()
	c.filter.Resources.Namespaces = nil
	c.filter.Resources.NamespaceSelector = nil
	return c
}

// translateMatch turns the rule's match block into matchConstraints and,
// where resource rules and selectors cannot say it exactly, a match condition.
func translateMatch(resolver kyverno.KindResolver, m kyvernov1.MatchResources) (matchTranslation, *model.Refusal) {
	var out matchTranslation
	raw, conjunctive := filtersOf(m)
	var filters []resolvedFilter
	for _, f := range raw {
		if isEmptyFilter(f) {
			// Kyverno: "match cannot be empty"; this filter never matches.
			if conjunctive {
				return out, model.Refuse(model.ReasonMatchNotExpressible, "an empty match filter makes the rule never apply")
			}
			continue
		}
		rf, fl := resolveFilter(resolver, f)
		if fl != nil {
			return out, fl
		}
		filters = append(filters, rf)
		out.kinds = append(out.kinds, rf.kinds)
	}
	if len(filters) == 0 {
		return out, model.Refuse(model.ReasonMatchNotExpressible, "the match block selects nothing; Kyverno never applies the rule")
	}

	if conjunctive && len(filters) > 1 {
		// Envelope: the first filter with kinds (every request must match it);
		// the condition checks all filters entirely.
		envelope := filters[0]
		for _, f := range filters {
			if !f.kinds.Everything {
				envelope = f
				break
			}
		}
		out.constraints.ResourceRules = mergeRules(resourceRules(envelope.kinds, envelope.operations))
		var terms []string
		for _, f := range filters {
			parts, fl := celFilterParts(f, forRule)
			if fl != nil {
				return out, fl
			}
			terms = append(terms, parts.all())
		}
		out.conditions = append(out.conditions, admissionregistrationv1.MatchCondition{Name: conditionMatch, Expression: kyverno.CELAnd(terms)})
		return out, nil
	}

	// Disjunction (any, or a single filter). Namespaces and namespace
	// selectors shared by every filter go to the VAP's namespace selector
	// when that is exact for all of them.
	var shared *metav1.LabelSelector
	sharedOK := true
	for i, f := range filters {
		sel, ok := structuralNamespaces(f)
		if !ok || (i > 0 && !sameNamespaceAttributes(filters[0], f)) {
			sharedOK = false
			break
		}
		shared = sel
	}
	var rules []admissionregistrationv1.NamedRuleWithOperations
	var parts []filterParts
	for _, f := range filters {
		if sharedOK {
			f = withoutNamespaces(f)
		}
		p, fl := celFilterParts(f, forRule)
		if fl != nil {
			return out, fl
		}
		parts = append(parts, p)
		rules = append(rules, resourceRules(f.kinds, f.operations)...)
	}
	out.constraints.ResourceRules = mergeRules(rules)
	if sharedOK {
		out.constraints.NamespaceSelector = shared
	}
	if cond := disjunctionCondition(parts); cond != "" {
		out.conditions = append(out.conditions, admissionregistrationv1.MatchCondition{Name: conditionMatch, Expression: cond})
	}
	return out, nil
}

// sameNamespaceAttributes reports whether two filters select namespaces alike.
func sameNamespaceAttributes(a, b resolvedFilter) bool {
	return reflect.DeepEqual(kyverno.UniqueSorted(a.filter.Resources.Namespaces), kyverno.UniqueSorted(b.filter.Resources.Namespaces)) &&
		reflect.DeepEqual(a.filter.Resources.NamespaceSelector, b.filter.Resources.NamespaceSelector)
}

// disjunctionCondition is the condition for "any" filters whose kinds and
// operations the resource rules already carry: nothing when no filter has
// other attributes, the shared residual when all filters have the same, or
// the full disjunction.
func disjunctionCondition(parts []filterParts) string {
	anyResidual := false
	same := true
	for _, p := range parts {
		if len(p.residual()) > 0 {
			anyResidual = true
		}
		if kyverno.CELAnd(p.residual()) != kyverno.CELAnd(parts[0].residual()) {
			same = false
		}
	}
	switch {
	case !anyResidual:
		return ""
	case same:
		return kyverno.CELAnd(parts[0].residual())
	}
	terms := make([]string, len(parts))
	for i, p := range parts {
		terms[i] = p.all()
	}
	return kyverno.CELOr(terms)
}

// exclusionKind classifies an exclude filter by its exact VAP form.
type exclusionKind int

const (
	// excludeByRules: kinds (and operations) only → excludeResourceRules.
	excludeByRules exclusionKind = iota
	// excludeByNamespaceNames: plain namespace names only → NotIn on the
	// VAP namespace selector (excludes resources in those namespaces).
	excludeByNamespaceNames
	// excludeByCondition: anything else → a negated match condition.
	excludeByCondition
)

// classifyExclusion picks the exact form of one exclusion filter. coveredOps
// are the operations the match envelope admits: a namespace exclusion is
// structural only if it applies to all of them.
func classifyExclusion(f resolvedFilter, purpose filterPurpose, coveredOps []string) exclusionKind {
	d := f.filter.Resources
	other := d.Name != "" || len(d.Names) > 0 || len(d.Annotations) > 0 || d.Selector != nil || d.NamespaceSelector != nil || len(f.filter.Subjects) > 0
	if other {
		return excludeByCondition
	}
	if len(d.Kinds) > 0 && len(d.Namespaces) == 0 {
		return excludeByRules
	}
	if len(d.Kinds) == 0 && len(d.Namespaces) > 0 {
		for _, ns := range d.Namespaces {
			if kyverno.ContainsWildcard(ns) || ns == "" {
				return excludeByCondition
			}
		}
		if purpose == forException || len(f.operations) == 0 || containsAll(f.operations, coveredOps) {
			return excludeByNamespaceNames
		}
	}
	return excludeByCondition
}

// containsAll reports whether every element of want is in have.
func containsAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// envelopeOperations are the operations the match resource rules admit.
func envelopeOperations(rules []admissionregistrationv1.NamedRuleWithOperations) []string {
	var ops []string
	for _, r := range rules {
		for _, op := range r.Operations {
			ops = append(ops, string(op))
		}
	}
	return kyverno.UniqueSorted(ops)
}

// addExclusions adds exclusion filters (a rule's exclude block or a
// PolicyException's match) to the translation. conjunctive filters
// exclude only together; otherwise each excludes on its own.
func addExclusions(out *matchTranslation, resolver kyverno.KindResolver, raw []kyvernov1.ResourceFilter, conjunctive bool, purpose filterPurpose, conditionName string) *model.Refusal {
	var filters []resolvedFilter
	for _, f := range raw {
		if isEmptyFilter(f) {
			if conjunctive {
				// An empty filter never matches, so the conjunction never excludes.
				return nil
			}
			continue
		}
		rf, fl := resolveFilter(resolver, f)
		if fl != nil {
			return fl
		}
		filters = append(filters, rf)
	}
	if len(filters) == 0 {
		return nil
	}
	if conjunctive && len(filters) > 1 {
		var terms []string
		for _, f := range filters {
			parts, fl := celFilterParts(f, purpose)
			if fl != nil {
				return fl
			}
			terms = append(terms, parts.all())
		}
		out.conditions = append(out.conditions, admissionregistrationv1.MatchCondition{Name: conditionName, Expression: "!" + kyverno.CELAnd(terms)})
		return nil
	}
	covered := envelopeOperations(out.constraints.ResourceRules)
	var negated []string
	for _, f := range filters {
		switch classifyExclusion(f, purpose, covered) {
		case excludeByRules:
			ops := f.operations
			if purpose == forException {
				ops = nil // exceptions ignore operations
			}
			out.constraints.ExcludeResourceRules = mergeRules(append(out.constraints.ExcludeResourceRules, resourceRules(f.kinds, ops)...))
		case excludeByNamespaceNames:
			if out.constraints.NamespaceSelector == nil {
				out.constraints.NamespaceSelector = &metav1.LabelSelector{}
			}
			out.constraints.NamespaceSelector.MatchExpressions = append(out.constraints.NamespaceSelector.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: kyverno.UniqueSorted(f.filter.Resources.Namespaces),
			})
		default:
			parts, fl := celFilterParts(f, purpose)
			if fl != nil {
				return fl
			}
			negated = append(negated, parts.all())
		}
	}
	if len(negated) > 0 {
		out.conditions = append(out.conditions, admissionregistrationv1.MatchCondition{Name: conditionName, Expression: "!" + kyverno.CELOr(negated)})
	}
	return nil
}

// ErrExceptionMatchesNothing is ExceptionCondition's error for an exception
// without filters: Kyverno never applies it.
var ErrExceptionMatchesNothing = errors.New("the exception has no match filters: Kyverno never applies it")

// ExceptionCondition is the CEL condition under which a kyverno.io
// PolicyException's match holds, with Kyverno's semantics for exceptions
// (operations ignored; a namespace selector not checked for a Namespace;
// wildcards): what a policies.kyverno.io PolicyException's matchConditions
// say. It reads namespaceObject where the match has a namespace selector.
// JMESPath conditions are compiled by frontend/classic (ExceptionConditions)
// and joined to the match; conditions it refuses, and podSecurity, have no
// such form.
func ExceptionCondition(resolver kyverno.KindResolver, ex *kyvernov2.PolicyException) (string, error) {
	if len(ex.Spec.PodSecurity) > 0 {
		return "", errors.New("it has podSecurity controls, which apply to Kyverno's pod security rules only")
	}
	return exceptionApplies(resolver, ex, false)
}

// exceptionApplies is the CEL predicate, never failing to evaluate, that
// holds where the exception's match and conditions hold, whatever its
// podSecurity controls: on the request, or (onOldObject) on the old object
// of an UPDATE as Kyverno's podSecurity handler matches exceptions there
// (validateOldObject: the old object as a CREATE of it, request.object
// the old object, no request.oldObject).
func exceptionApplies(resolver kyverno.KindResolver, ex *kyvernov2.PolicyException, onOldObject bool) (string, error) {
	match, err := exceptionMatch(resolver, ex)
	if err != nil {
		return "", err
	}
	scope := classic.RequestScope
	if onOldObject {
		raw, err := json.Marshal(ex.Spec.Match)
		if err != nil || strings.Contains(string(raw), "request.") || strings.Contains(string(raw), "object") {
			return "", errors.New("on the old object of an UPDATE: a filter's text holds \"request.\" or \"object\"")
		}
		match = strings.ReplaceAll(match, celRequestResource, "oldObject")
		match = strings.ReplaceAll(match, "request.operation", "'CREATE'")
		scope = oldObjectScope
	}
	if !ex.Spec.HasConditions() {
		return match, nil
	}
	conditions, err := exceptionConditions(ex, scope)
	if err != nil {
		if onOldObject {
			return "", fmt.Errorf("on the old object of an UPDATE: %w", err)
		}
		return "", err
	}
	return kyverno.CELAnd([]string{match, conditions}), nil
}

// ExceptionConditions compiles the JMESPath conditions of an exception
// into a CEL predicate over the admission request that never fails to
// evaluate and holds where Kyverno applies the exception ("true" when it
// has none); conditions frontend/classic refuses are an error naming the
// construct.
func ExceptionConditions(ex *kyvernov2.PolicyException) (string, error) {
	return exceptionConditions(ex, classic.RequestScope)
}

// exceptionConditions is ExceptionConditions read in the scope.
func exceptionConditions(ex *kyvernov2.PolicyException, scope classic.Scope) (string, error) {
	if !ex.Spec.HasConditions() {
		return "true", nil
	}
	raw, err := json.Marshal(ex.Spec.Conditions)
	if err != nil {
		return "", fmt.Errorf("its conditions: %w", err)
	}
	conditions, fl := classic.ExceptionConditions(raw, scope)
	if fl != nil {
		return "", fmt.Errorf("its conditions have no CEL form: %s", fl.Message)
	}
	// An exception's conditions are a condition of the rule's VAP (and
	// of kyvap's exception programs): the JMESPath functions only kyvap's
	// engine evaluates have no place there.
	if functions := cellib.JMESPathFunctions(conditions); len(functions) > 0 {
		return "", fmt.Errorf("its conditions have no CEL form: they call %s, which the API server does not have", strings.Join(functions, ", "))
	}
	return conditions, nil
}

// exceptionMatch is the CEL condition under which an exception's match
// holds.
func exceptionMatch(resolver kyverno.KindResolver, ex *kyvernov2.PolicyException) (string, error) {
	if resolver == nil {
		resolver = kyverno.NewStaticResolver()
	}
	filters, conjunctive := ex.Spec.Match.Any, false
	if len(filters) == 0 {
		filters, conjunctive = ex.Spec.Match.All, true
	}
	var terms []string
	for _, f := range filters {
		if isEmptyFilter(f) {
			if conjunctive {
				return "", ErrExceptionMatchesNothing
			}
			continue
		}
		rf, fl := resolveFilter(resolver, f)
		if fl != nil {
			return "", errors.New(fl.Message)
		}
		parts, fl := celFilterParts(rf, forException)
		if fl != nil {
			return "", errors.New(fl.Message)
		}
		terms = append(terms, parts.all())
	}
	switch {
	case len(terms) == 0:
		return "", ErrExceptionMatchesNothing
	case conjunctive:
		return kyverno.CELAnd(terms), nil
	}
	return kyverno.CELOr(terms), nil
}
