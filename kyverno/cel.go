// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CEL fragments for what Kyverno's engine looks at. Kyverno evaluates match
// and exclude against "the resource": the new object, or the old one on
// DELETE. Every fragment guards against absent fields so that a predicate
// never errors (an erroring match condition would hit failurePolicy where
// Kyverno's Go matcher cannot fail).
const (
	celResource = `(request.operation == 'DELETE' ? oldObject : object)`
	// CELResourceName is Kyverno's resource name: metadata.name, or
	// metadata.generateName when the name is empty.
	CELResourceName    = `(` + celResource + ` != null && has(` + celResource + `.metadata) && has(` + celResource + `.metadata.name) && ` + celResource + `.metadata.name != '' ? ` + celResource + `.metadata.name : (` + celResource + ` != null && has(` + celResource + `.metadata) && has(` + celResource + `.metadata.generateName) ? ` + celResource + `.metadata.generateName : ''))`
	CELIsNamespaceKind = `(request.kind.group == '' && request.kind.kind == 'Namespace')`
	// CELResourceNamespace is Kyverno's resource namespace: the namespace of
	// the request, or the object's own name for a Namespace.
	CELResourceNamespace = `(` + CELIsNamespaceKind + ` ? ` + CELResourceName + ` : ` + celRequestNamespace + `)`
	// The API server leaves empty optional request fields out of `request`
	// (omitempty): reading them unguarded errors on every request without one.
	celRequestNamespace = `(has(request.namespace) ? request.namespace : '')`
	CELSubResource      = `(has(request.subResource) ? request.subResource : '')`
	CELResourceLabels   = `(` + celResource + ` != null && has(` + celResource + `.metadata) && has(` + celResource + `.metadata.labels) ? ` + celResource + `.metadata.labels : {})`
	celResourceAnnots   = `(` + celResource + ` != null && has(` + celResource + `.metadata) && has(` + celResource + `.metadata.annotations) ? ` + celResource + `.metadata.annotations : {})`
	CELNamespaceLabels  = `(has(namespaceObject.metadata) && has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})`
	celUsername         = `(has(request.userInfo.username) ? request.userInfo.username : '')`
)

// CELString quotes s as a CEL string literal.
func CELString(s string) string { return strconv.Quote(s) }

// CELStringList renders a CEL list of string literals.
func CELStringList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = CELString(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// wildcardRegex turns a Kyverno wildcard pattern into an anchored RE2.
func wildcardRegex(pattern string) string {
	quoted := regexp.QuoteMeta(pattern)
	quoted = strings.ReplaceAll(quoted, `\*`, `.*`)
	quoted = strings.ReplaceAll(quoted, `\?`, `.`)
	return `^(?s:` + quoted + `)$`
}

// CELPatternMatch is a predicate "value matches one of the Kyverno
// wildcard patterns": exact patterns become a list membership test,
// wildcard ones an RE2 match.
func CELPatternMatch(value string, patterns []string) string {
	var exact, wild []string
	for _, p := range patterns {
		if ContainsWildcard(p) {
			wild = append(wild, p)
		} else {
			exact = append(exact, p)
		}
	}
	var terms []string
	if len(exact) > 0 {
		terms = append(terms, value+" in "+CELStringList(UniqueSorted(exact)))
	}
	for _, p := range UniqueSorted(wild) {
		terms = append(terms, wildcardCEL(value, p))
	}
	return CELOr(terms)
}

// wildcardCEL is "value matches the wildcard pattern p": the cheap string
// functions for a prefix, a suffix or an infix between stars (a star
// matches any runes, none included), an RE2 match otherwise.
func wildcardCEL(value, p string) string {
	inner := strings.Trim(p, "*")
	if inner != "" && !ContainsWildcard(inner) {
		leading, trailing := strings.HasPrefix(p, "*"), strings.HasSuffix(p, "*")
		switch {
		case leading && trailing && p == "*"+inner+"*":
			return value + ".contains(" + CELString(inner) + ")"
		case leading && !trailing && p == "*"+inner:
			return value + ".endsWith(" + CELString(inner) + ")"
		case trailing && !leading && p == inner+"*":
			return value + ".startsWith(" + CELString(inner) + ")"
		}
	}
	return value + ".matches(" + CELString(wildcardRegex(p)) + ")"
}

// CELAnd joins terms with &&; no terms is true.
func CELAnd(terms []string) string {
	switch len(terms) {
	case 0:
		return "true"
	case 1:
		return terms[0]
	}
	return "(" + strings.Join(terms, " && ") + ")"
}

// CELOr joins terms with ||; no terms is false.
func CELOr(terms []string) string {
	switch len(terms) {
	case 0:
		return "false"
	case 1:
		return terms[0]
	}
	return "(" + strings.Join(terms, " || ") + ")"
}

// UniqueSorted returns the sorted distinct values.
func UniqueSorted(values []string) []string {
	out := append([]string(nil), values...)
	sort.Strings(out)
	n := 0
	for i, v := range out {
		if i == 0 || v != out[n-1] {
			out[n] = v
			n++
		}
	}
	return out[:n]
}

// ParsedSelector is a label selector checked for what VAPs can carry.
type ParsedSelector struct {
	Source   *metav1.LabelSelector
	selector labels.Selector
	// wildcards are the matchLabels entries whose key or value holds a
	// Kyverno wildcard, by key.
	wildcards map[string]string
}

// ParseSelector validates a Kyverno label selector. Kyverno substitutes
// wildcards in matchLabels against the actual labels (pkg/engine/
// wildcards ReplaceInSelector): an entry with a wildcard holds where some
// label's key and value match it, which CEL says. It is refused where the
// substitution's outcome depends on Go's map order (a plain key that a
// wildcard key matches), and for wildcards in matchExpressions, which
// Kyverno does not substitute.
func ParseSelector(sel *metav1.LabelSelector) (ParsedSelector, error) {
	plain := &metav1.LabelSelector{MatchExpressions: sel.MatchExpressions}
	wildcards := map[string]string{}
	for k, v := range sel.MatchLabels {
		if ContainsWildcard(k) || ContainsWildcard(v) {
			wildcards[k] = v
			continue
		}
		if plain.MatchLabels == nil {
			plain.MatchLabels = map[string]string{}
		}
		plain.MatchLabels[k] = v
	}
	for w := range wildcards {
		for k := range plain.MatchLabels {
			if WildcardMatch(w, k) {
				return ParsedSelector{}, fmt.Errorf("label selector %q has the key %q and the wildcard key %q that matches it (Kyverno's substitution then depends on map order)", metav1.FormatLabelSelector(sel), k, w)
			}
		}
	}
	for _, req := range sel.MatchExpressions {
		if ContainsWildcard(req.Key) {
			return ParsedSelector{}, fmt.Errorf("label selector %q uses Kyverno wildcards in matchExpressions", metav1.FormatLabelSelector(sel))
		}
		for _, v := range req.Values {
			if ContainsWildcard(v) {
				return ParsedSelector{}, fmt.Errorf("label selector %q uses Kyverno wildcards in matchExpressions", metav1.FormatLabelSelector(sel))
			}
		}
	}
	s, err := metav1.LabelSelectorAsSelector(plain)
	if err != nil {
		return ParsedSelector{}, fmt.Errorf("invalid label selector: %w", err)
	}
	if len(wildcards) == 0 {
		wildcards = nil
	}
	return ParsedSelector{Source: sel, selector: s, wildcards: wildcards}, nil
}

// celValidLabelKey is "the string k is a valid label key" (a qualified
// name: an optional DNS subdomain prefix of at most 253 characters and a
// slash, then a name of at most 63), as labels.NewRequirement checks it.
func celValidLabelKey(k string) string {
	const subdomain = `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
	const name = `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
	return "(" + k + ".matches(" + CELString("^("+subdomain+"/)?"+name+"$") + ") && size(" + k + ") - " + k + ".lastIndexOf('/') - 1 <= 63 && " + k + ".lastIndexOf('/') <= 253)"
}

// celValidLabelValue is "the string v is a valid label value".
func celValidLabelValue(v string) string {
	return "(size(" + v + ") <= 63 && " + v + ".matches(" + CELString(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`) + "))"
}

// HasWildcards reports whether the selector's matchLabels hold Kyverno
// wildcards, which a Kubernetes label selector cannot carry.
func (p ParsedSelector) HasWildcards() bool { return len(p.wildcards) > 0 }

// MatchesEmpty reports whether the selector matches an empty label set,
// which is what Kyverno checks namespace selectors against for
// cluster-scoped resources.
// A wildcard entry matches no label there.
func (p ParsedSelector) MatchesEmpty() bool {
	return !p.HasWildcards() && p.selector.Matches(labels.Set{})
}

// CEL renders the selector as a predicate over the label map expression.
func (p ParsedSelector) CEL(labelMap string) string {
	var terms []string
	keys := make([]string, 0, len(p.Source.MatchLabels))
	for k := range p.Source.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := p.Source.MatchLabels[k]
		if _, ok := p.wildcards[k]; ok {
			// The label whose key and value match the entry's (the least
			// key, where Kyverno takes the first in Go's map order), which
			// must make a valid requirement: an invalid key or value, or
			// no such label (the entry with its wildcards made '0', which
			// no label has), matches nothing.
			matching := fmt.Sprintf("%s.filter(k, %s && %s)", labelMap, CELPatternMatch("k", []string{k}), CELPatternMatch(labelMap+"[k]", []string{v}))
			terms = append(terms, fmt.Sprintf("[%s].all(ks, size(ks) > 0 && [ks.min()].all(k, %s && %s))", matching, celValidLabelKey("k"), celValidLabelValue(labelMap+"[k]")))
			continue
		}
		terms = append(terms, fmt.Sprintf("(%s in %s && %s[%s] == %s)", CELString(k), labelMap, labelMap, CELString(k), CELString(v)))
	}
	for _, req := range p.Source.MatchExpressions {
		key := CELString(req.Key)
		switch req.Operator {
		case metav1.LabelSelectorOpIn:
			terms = append(terms, fmt.Sprintf("(%s in %s && %s[%s] in %s)", key, labelMap, labelMap, key, CELStringList(UniqueSorted(req.Values))))
		case metav1.LabelSelectorOpNotIn:
			terms = append(terms, fmt.Sprintf("(!(%s in %s) || !(%s[%s] in %s))", key, labelMap, labelMap, key, CELStringList(UniqueSorted(req.Values))))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, fmt.Sprintf("(%s in %s)", key, labelMap))
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, fmt.Sprintf("!(%s in %s)", key, labelMap))
		}
	}
	return CELAnd(terms)
}

// CELSubjects is Kyverno's subject check: a ServiceAccount by its user
// name, a User by name, a Group by membership; names are wildcard patterns.
// Subjects of other kinds never match.
func CELSubjects(subjects []rbacv1.Subject) string {
	var userPatterns, groupPatterns []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			userPatterns = append(userPatterns, "system:serviceaccount:"+s.Namespace+":"+s.Name)
		case rbacv1.UserKind:
			userPatterns = append(userPatterns, s.Name)
		case rbacv1.GroupKind:
			groupPatterns = append(groupPatterns, s.Name)
		}
	}
	var terms []string
	if len(userPatterns) > 0 {
		terms = append(terms, CELPatternMatch(celUsername, userPatterns))
	}
	if len(groupPatterns) > 0 {
		terms = append(terms, "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, "+CELPatternMatch("g", groupPatterns)+"))")
	}
	return CELOr(terms)
}

// CELAnnotations is Kyverno's annotation check: every expected key/value
// pair (both wildcard patterns) matches some annotation of the resource.
func CELAnnotations(expected map[string]string) string {
	keys := make([]string, 0, len(expected))
	for k := range expected {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var terms []string
	for _, k := range keys {
		v := expected[k]
		if !ContainsWildcard(k) {
			terms = append(terms, fmt.Sprintf("(%s in %s && %s)", CELString(k), celResourceAnnots, CELPatternMatch(celResourceAnnots+"["+CELString(k)+"]", []string{v})))
			continue
		}
		terms = append(terms, fmt.Sprintf("%s.exists(k, %s && %s)", celResourceAnnots, CELPatternMatch("k", []string{k}), CELPatternMatch(celResourceAnnots+"[k]", []string{v})))
	}
	return CELAnd(terms)
}

// CELOperations is "the request's operation is one of ops".
func CELOperations(ops []string) string {
	return "request.operation in " + CELStringList(UniqueSorted(ops))
}
