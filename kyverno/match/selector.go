// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kyvap/kyvap/kyverno"
)

// selectorMatches evaluates a label selector the way Kyverno's CheckSelector
// (pkg/utils/match/labels.go) does, wildcards included: a matchLabels entry
// whose key or value holds '*' or '?' is replaced by a label of the object
// that matches both (so it holds), or, when none does, by the entry with
// every wildcard character turned into '0' (so it fails, and may be an
// invalid selector). The result is then parsed as an ordinary selector;
// a parse error means no match, reported wrapped in ErrInvalid.
//
// Kyverno builds the substituted matchLabels in Go map order, so when a
// substituted key collides with another entry the surviving requirement is
// random; we keep every requirement instead (the stricter reading).
func selectorMatches(sel *metav1.LabelSelector, actual map[string]string) (bool, error) {
	if sel == nil {
		return false, nil
	}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	reqs := make([]labels.Requirement, 0, len(keys))
	var errs []error
	for _, k := range keys {
		v := sel.MatchLabels[k]
		if kyverno.ContainsWildcard(k) || kyverno.ContainsWildcard(v) {
			k, v = expandWildcardLabel(k, v, actual)
		}
		r, err := labels.NewRequirement(k, selection.Equals, []string{v})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		reqs = append(reqs, *r)
	}
	exprs, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: sel.MatchExpressions})
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return false, fmt.Errorf("%w: label selector: %w", ErrInvalid, joinErrs(errs))
	}
	return exprs.Add(reqs...).Matches(labels.Set(actual)), nil
}

// expandWildcardLabel is Kyverno's wildcard substitution for one
// matchLabels entry. Among several matching labels we pick the smallest
// key, where Kyverno picks whichever map iteration yields first; any of
// them satisfies the entry.
func expandWildcardLabel(k, v string, actual map[string]string) (string, string) {
	found := false
	var fk string
	for k1, v1 := range actual {
		if kyverno.WildcardMatch(k, k1) && kyverno.WildcardMatch(v, v1) && (!found || k1 < fk) {
			fk, found = k1, true
		}
	}
	if found {
		return fk, actual[fk]
	}
	zero := strings.NewReplacer("*", "0", "?", "0")
	return zero.Replace(k), zero.Replace(v)
}

// annotationsMatch is Kyverno's CheckAnnotations: every expected entry must
// be matched, key and value, by one annotation, wildcards allowed in both.
func annotationsMatch(expected, actual map[string]string) bool {
	for k, v := range expected {
		ok := false
		for k1, v1 := range actual {
			if kyverno.WildcardMatch(k, k1) && kyverno.WildcardMatch(v, v1) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
