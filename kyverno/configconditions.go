// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

// Names of the match conditions that carry Kyverno's global configuration;
// the conditions of the configuration's own matchConditions keep their
// names behind ConditionKyvernoConfigPrefix.
const (
	ConditionResourceFilters     = "kyverno-resource-filters"
	ConditionExcludedSubjects    = "kyverno-excluded-subjects"
	ConditionKyvernoConfigPrefix = "kyverno-config-"
)

// CEL fragments for the request fields Kyverno's resource filters read.
// Kyverno's webhook compares the request's namespace and name; its engine
// then compares the new and the old object's own namespace and name
// (pkg/engine/internal/match.go checkResourceFilters). A request is skipped
// when any of these pairs is filtered, so the condition tests all of them.
const (
	celRequestName         = `(has(request.name) ? request.name : '')`
	celFilteredPairs       = `([[` + celRequestNamespace + `, ` + celRequestName + `]] + ` + celObjectPairs + ` + ` + celOldObjectPairs + `)`
	celObjectPairs         = `(object != null ? [[` + celObjectNamespaceNew + `, ` + celObjectNameNew + `]] : [])`
	celOldObjectPairs      = `(oldObject != null ? [[` + celObjectNamespaceOld + `, ` + celObjectNameOld + `]] : [])`
	celObjectNamespaceNew  = `(has(object.metadata) && has(object.metadata.namespace) ? object.metadata.namespace : '')`
	celObjectNameNew       = `(has(object.metadata) && has(object.metadata.name) ? object.metadata.name : '')`
	celObjectNamespaceOld  = `(has(oldObject.metadata) && has(oldObject.metadata.namespace) ? oldObject.metadata.namespace : '')`
	celObjectNameOld       = `(has(oldObject.metadata) && has(oldObject.metadata.name) ? oldObject.metadata.name : '')`
	celRequestGroups       = `(has(request.userInfo.groups) ? request.userInfo.groups : [])`
	celIsNamespaceResource = `(request.resource.group == '' && request.resource.version == 'v1' && request.resource.resource == 'namespaces')`
	// celRequestResource is "group/version/resource" of the request: Kyverno
	// filters on the kind of the resource without its subresource (Pod for
	// pods/exec), which the resource identifies exactly.
	celRequestResource = `(request.resource.group + '/' + request.resource.version + '/' + request.resource.resource)`
)

// requestScope is the set of resources a VAP can receive requests for: its
// match's resources, or anything.
type requestScope struct {
	anything  bool
	resources []Resource
	// namespaces, when not nil, are the only namespaces the requests can
	// be in (ConfinedNamespaces).
	namespaces []string
}

// ConfinedNamespaces returns the namespaces a VAP's requests can be in, or
// nil when they can be in any: when every resource of kinds is namespaced
// and the namespace selector requires kubernetes.io/metadata.name to be
// one of a list of names (Kyverno's match namespaces, a namespaced
// Policy's namespace). The API server sets the namespace of a namespaced
// object from the request's before admission and refuses another, so the
// request's, the object's and the old object's namespaces are then all
// one of these names. A Namespace object is matched by its own labels and
// has no namespace: kinds with any cluster-scoped resource are not
// confined.
func ConfinedNamespaces(kinds []KindSet, selector *metav1.LabelSelector) []string {
	if selector == nil || len(kinds) == 0 {
		return nil
	}
	for _, k := range kinds {
		if !k.OnlyNamespaced() {
			return nil
		}
	}
	var names []string
	confined := false
	narrow := func(values []string) {
		if !confined {
			names, confined = UniqueSorted(slices.Clone(values)), true
			return
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(values, n) })
	}
	if v, ok := selector.MatchLabels[corev1.LabelMetadataName]; ok {
		narrow([]string{v})
	}
	for _, e := range selector.MatchExpressions {
		if e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpIn {
			narrow(e.Values)
		}
	}
	if !confined {
		return nil
	}
	if names == nil {
		names = []string{} // no namespace: the VAP matches nothing
	}
	return names
}

// reaches reports whether the filter's namespace pattern can name a
// namespace of the scope.
func (s requestScope) reaches(f ResourceFilter) bool {
	if s.namespaces == nil {
		return true
	}
	for _, ns := range s.namespaces {
		if WildcardMatch(f.Namespace, ns) {
			return true
		}
	}
	return false
}

func scopeOf(kinds []KindSet) requestScope {
	var s requestScope
	for _, k := range kinds {
		if k.Everything || k.TopLevel {
			return requestScope{anything: true}
		}
		s.resources = append(s.resources, k.Resources...)
	}
	return s
}

// ConfigConditions returns the match conditions that make a VAP skip
// every request Kyverno's global configuration makes Kyverno skip: its
// excluded users and groups and its resource filters, then the
// configuration's own matchConditions. Filters that cannot name a request
// of the VAP's scope are left out: those of kinds it does not match, and
// those of namespaces its requests cannot be in (namespaces, from
// ConfinedNamespaces; nil: any). A configuration that excludes by role
// cannot be expressed: a VAP does not see the requester's roles.
func ConfigConditions(cfg *Config, resolver KindResolver, kinds []KindSet, namespaces []string) ([]admissionregistrationv1.MatchCondition, *model.Refusal) {
	if cfg == nil {
		return nil, nil
	}
	if cfg.NeedsRoles() {
		return nil, model.Refuse(model.ReasonKyvernoConfigRoles, "Kyverno's configuration excludes or includes requests by the requester's Roles or ClusterRoles (excludeRoles, excludeClusterRoles), which a ValidatingAdmissionPolicy cannot see")
	}
	var out []admissionregistrationv1.MatchCondition
	if !cfg.Exclude.IsEmpty() {
		out = append(out, admissionregistrationv1.MatchCondition{Name: ConditionExcludedSubjects, Expression: excludedSubjectsExpression(cfg)})
	}
	scope := scopeOf(kinds)
	scope.namespaces = namespaces
	filters, fl := resourceFiltersExpression(cfg.ResourceFilters, resolver, scope)
	if fl != nil {
		return nil, fl
	}
	if filters != "" {
		out = append(out, admissionregistrationv1.MatchCondition{Name: ConditionResourceFilters, Expression: "!(" + filters + ")"})
	}
	return append(out, KyvernoConfigMatchConditions(cfg)...), nil
}

// KyvernoConfigMatchConditions are the matchConditions of Kyverno's
// configuration, which Kyverno puts on its webhooks, named apart from
// kyvap's and the rules' own conditions.
func KyvernoConfigMatchConditions(cfg *Config) []admissionregistrationv1.MatchCondition {
	if cfg == nil {
		return nil
	}
	var out []admissionregistrationv1.MatchCondition
	taken := map[string]bool{}
	for i, mc := range cfg.MatchConditions {
		name := ConditionKyvernoConfigPrefix + mc.Name
		if len(validation.IsQualifiedName(name)) > 0 || taken[name] {
			name = vap.QualifiedConditionName(ConditionKyvernoConfigPrefix, i, taken)
		}
		taken[name] = true
		out = append(out, admissionregistrationv1.MatchCondition{Name: name, Expression: mc.Expression})
	}
	return out
}

// excludedSubjectsExpression is true when Kyverno evaluates the request:
// an inclusion matches, or no exclusion does (config.go IsExcluded).
func excludedSubjectsExpression(cfg *Config) string {
	excluded := "!(" + subjectsExpression(cfg.Exclude) + ")"
	if cfg.Include.IsEmpty() {
		return excluded
	}
	return CELOr([]string{subjectsExpression(cfg.Include), excluded})
}

func subjectsExpression(s Subjects) string {
	var terms []string
	if len(s.Usernames) > 0 {
		terms = append(terms, celWildcardAny(celUsername, s.Usernames))
	}
	if len(s.Groups) > 0 {
		terms = append(terms, celRequestGroups+".exists(g, "+celWildcardAny("g", s.Groups)+")")
	}
	return CELOr(terms)
}

// resourceFiltersExpression is true when a resource filter names the
// request (config.go ToFilter, over the request and the objects); empty
// when no filter can name a request of the scope.
func resourceFiltersExpression(filters []ResourceFilter, resolver KindResolver, scope requestScope) (string, *model.Refusal) {
	// Filters are grouped by their kind predicate, in order of first
	// appearance, so that each predicate is written once.
	var order []string
	pairs := map[string][]string{}
	unconditional := map[string]bool{}
	blankets, fl := blanketFilters(filters, resolver, scope)
	if fl != nil {
		return "", fl
	}
	for i, f := range filters {
		if subsumed(i, f, filters, blankets) || !scope.reaches(f) {
			continue
		}
		kindTerm, relevant, fl := filterKindTerm(f, resolver, scope)
		if fl != nil {
			return "", fl
		}
		if !relevant {
			continue
		}
		if _, ok := pairs[kindTerm]; !ok {
			order = append(order, kindTerm)
			pairs[kindTerm] = nil
		}
		pair := celAll(celWildcard("p[0]", f.Namespace), celWildcard("p[1]", f.Name))
		// A v1 Namespace is also filtered when its own name matches the
		// namespace pattern.
		if scope.canReceiveNamespaces() && WildcardMatch(f.Group, "") && WildcardMatch(f.Version, "v1") && WildcardMatch(f.Kind, "Namespace") {
			pair = CELOr([]string{pair, celAll(celIsNamespaceResource, celWildcard("p[1]", f.Namespace))})
		}
		if pair == "true" {
			unconditional[kindTerm] = true
		}
		if !slices.Contains(pairs[kindTerm], pair) {
			pairs[kindTerm] = append(pairs[kindTerm], pair)
		}
	}
	var always, perPair []string
	for _, kindTerm := range order {
		if unconditional[kindTerm] {
			always = append(always, kindTerm)
			continue
		}
		perPair = append(perPair, celAll(kindTerm, CELOr(pairs[kindTerm])))
	}
	terms := always
	if len(perPair) > 0 {
		terms = append(terms, celFilteredPairs+".exists(p, "+CELOr(perPair)+")")
	}
	if len(terms) == 0 {
		return "", nil
	}
	return CELOr(terms), nil
}

// blanketFilters are the indexes of the filters that name every request
// of a namespace pattern: any group, version, kind and subresource, any
// name ([*/*,kyverno,*] in Kyverno's default configuration).
func blanketFilters(filters []ResourceFilter, resolver KindResolver, scope requestScope) ([]int, *model.Refusal) {
	var out []int
	for i, f := range filters {
		if f.Group != "*" || f.Version != "*" || f.Kind != "*" || f.Name != "*" {
			continue
		}
		kindTerm, relevant, fl := filterKindTerm(f, resolver, scope)
		if fl != nil {
			return nil, fl
		}
		if relevant && kindTerm == "true" {
			out = append(out, i)
		}
	}
	return out, nil
}

// subsumed reports whether a blanket filter other than filters[i] names
// every request f names, so that f adds nothing to the condition: f's
// namespace is a plain name that the blanket's namespace pattern matches.
// Whatever f's kind and name, a pair f names is in that namespace, and the
// blanket names it; a v1 Namespace named by f's namespace is named by the
// blanket too, whose kind matches Namespace. Kyverno's default
// configuration has 70 filters in its own namespace under [*/*,kyverno,*]:
// without them a Pod VAP's condition is a fifth as long, and the API
// server evaluates it on every request (BenchmarkVAPsOnTheMix,
// docs/performance.md).
func subsumed(i int, f ResourceFilter, filters []ResourceFilter, blankets []int) bool {
	if ContainsWildcard(f.Namespace) {
		return false
	}
	for _, b := range blankets {
		if b != i && WildcardMatch(filters[b].Namespace, f.Namespace) {
			return true
		}
	}
	return false
}

// canReceiveNamespaces reports whether requests on v1 Namespaces are in
// scope.
func (s requestScope) canReceiveNamespaces() bool {
	if s.anything {
		return true
	}
	for _, r := range s.resources {
		if r.Group == "" && r.Version == "v1" && r.Resource == "namespaces" {
			return true
		}
	}
	return false
}

// filterKindTerm returns the predicate on the request's resource and
// subresource for the filter's kind part, and false when no request of
// the scope can match it.
func filterKindTerm(f ResourceFilter, resolver KindResolver, scope requestScope) (string, bool, *model.Refusal) {
	subTerm := celWildcard(CELSubResource, f.Subresource)
	if f.Group == "*" && f.Version == "*" && f.Kind == "*" {
		if !scope.anything && !scope.anySubresource(f.Subresource) {
			return "", false, nil
		}
		return subTerm, true, nil
	}
	spelling := f.Kind
	switch {
	case f.Group != "*":
		spelling = f.Group + "/" + f.Version + "/" + f.Kind
	case f.Version != "*":
		spelling = f.Version + "/" + f.Kind
	}
	resolved, err := resolver.Resolve(spelling)
	if err != nil {
		return "", false, model.Refuse(model.ReasonKindResolutionError, "Kyverno's resource filter %s: %v", f, err)
	}
	var keys []string
	for _, r := range resolved {
		if r.Subresource != "" || !WildcardMatch(f.Group, r.Group) || !WildcardMatch(f.Version, r.Version) || !WildcardMatch(f.Kind, r.Kind) {
			continue
		}
		if !scope.anything && !scope.hasParent(r, f.Subresource) {
			continue
		}
		keys = append(keys, r.Group+"/"+r.Version+"/"+r.Resource)
	}
	if len(keys) == 0 {
		return "", false, nil
	}
	sort.Strings(keys)
	keys = UniqueSorted(keys)
	return celAll(celRequestResource+" in "+CELStringList(keys), subTerm), true, nil
}

// anySubresource reports whether some resource of the scope has a
// subresource matching the pattern.
func (s requestScope) anySubresource(pattern string) bool {
	for _, r := range s.resources {
		if WildcardMatch(pattern, r.Subresource) {
			return true
		}
	}
	return false
}

// hasParent reports whether the scope holds the top-level resource r, or a
// subresource of it matching the pattern.
func (s requestScope) hasParent(r Resource, subresource string) bool {
	for _, in := range s.resources {
		if in.Group == r.Group && in.Version == r.Version && in.Resource == r.Resource && WildcardMatch(subresource, in.Subresource) {
			return true
		}
	}
	return false
}

// celWildcard is the predicate "value matches the Kyverno wildcard
// pattern", in the cheapest CEL that says it.
func celWildcard(value, pattern string) string {
	switch {
	case pattern == "*":
		return "true"
	case !ContainsWildcard(pattern):
		return value + " == " + CELString(pattern)
	case pattern == "?*":
		return value + " != ''"
	}
	if body, ok := strings.CutSuffix(pattern, "*"); ok && !ContainsWildcard(body) {
		return value + ".startsWith(" + CELString(body) + ")"
	}
	if body, ok := strings.CutPrefix(pattern, "*"); ok && !ContainsWildcard(body) {
		return value + ".endsWith(" + CELString(body) + ")"
	}
	return value + ".matches(" + CELString(wildcardRegex(pattern)) + ")"
}

// celAll joins terms with &&, leaving out those that are literally true.
func celAll(terms ...string) string {
	var kept []string
	for _, t := range terms {
		if t != "true" {
			kept = append(kept, t)
		}
	}
	return CELAnd(kept)
}

// celWildcardAny is true when value matches one of the patterns.
func celWildcardAny(value string, patterns []string) string {
	terms := make([]string, 0, len(patterns))
	for _, p := range UniqueSorted(patterns) {
		terms = append(terms, celWildcard(value, p))
	}
	return CELOr(terms)
}
