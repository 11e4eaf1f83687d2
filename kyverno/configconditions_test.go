// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConfinedNamespaces(t *testing.T) {
	resolver := NewStaticResolver()
	kinds := func(spellings ...string) []KindSet {
		set, fl := ResolveKinds(resolver, spellings)
		if fl != nil {
			t.Fatal(fl)
		}
		return []KindSet{set}
	}
	names := func(values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: values}
	}
	for _, c := range []struct {
		name     string
		kinds    []KindSet
		selector *metav1.LabelSelector
		want     []string
	}{
		{"no selector", kinds("Pod"), nil, nil},
		{"names", kinds("Pod", "ConfigMap"), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{names("b", "a")}}, []string{"a", "b"}},
		{"names of a subresource's parent", kinds("Pod/exec"), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{names("a")}}, []string{"a"}},
		{"names and a label", kinds("Pod"), &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}, MatchExpressions: []metav1.LabelSelectorRequirement{names("a")}}, []string{"a"}},
		{"two lists intersect", kinds("Pod"), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{names("a", "b"), names("b", "c")}}, []string{"b"}},
		{"a name label and a list", kinds("Pod"), &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "c"}, MatchExpressions: []metav1.LabelSelectorRequirement{names("a", "b")}}, []string{}},
		{"NotIn does not confine", kinds("Pod"), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}}, nil},
		{"labels only do not confine", kinds("Pod"), &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}, nil},
		// A Namespace is selected by its own labels, a Node by none.
		{"a Namespace kind", kinds("Pod", "Namespace"), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{names("a")}}, nil},
		{"a cluster-scoped kind", kinds("Node"), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{names("a")}}, nil},
		{"every kind", []KindSet{{Everything: true}}, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{names("a")}}, nil},
	} {
		got := ConfinedNamespaces(c.kinds, c.selector)
		if diff := cmp.Diff(c.want, got); diff != "" || (c.want == nil) != (got == nil) {
			t.Errorf("%s: (-want +got)\n%s (got nil: %t)", c.name, diff, got == nil)
		}
	}
}

// A filter is left out of a confined VAP's condition exactly when its
// namespace pattern names none of the namespaces.
func TestConfigConditionsConfined(t *testing.T) {
	cfg, problems := ParseConfig(map[string]string{"resourceFilters": "[*/*,kyverno,*] [Pod,kube-*,*] [Pod,team-?,x] [Event,*,*]"})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	set, fl := ResolveKinds(NewStaticResolver(), []string{"Pod", "Event"})
	if fl != nil {
		t.Fatal(fl)
	}
	condition := func(namespaces []string) string {
		conditions, fl := ConfigConditions(&cfg, NewStaticResolver(), []KindSet{set}, namespaces)
		if fl != nil {
			t.Fatal(fl)
		}
		for _, mc := range conditions {
			if mc.Name == ConditionResourceFilters {
				return mc.Expression
			}
		}
		return ""
	}
	all := condition(nil)
	for _, pattern := range []string{`"kyverno"`, `startsWith("kube-")`, `team-.)`, `/v1/events`} {
		if !strings.Contains(all, pattern) {
			t.Fatalf("the unconfined condition lacks %s: %s", pattern, all)
		}
	}
	for _, c := range []struct {
		namespaces []string
		kept, left []string
	}{
		{namespaces: []string{"team-a"}, kept: []string{`team-.)`, `/v1/events`}, left: []string{`"kyverno"`, `startsWith("kube-")`}},
		{namespaces: []string{"kyverno", "kube-system"}, kept: []string{`"kyverno"`, `startsWith("kube-")`, `/v1/events`}, left: []string{`team-.)`}},
		// No namespace: the VAP matches no request, and no filter is left.
		{namespaces: []string{}, left: []string{`/v1/events`, `"kyverno"`, `startsWith("kube-")`, `team-.)`}},
	} {
		got := condition(c.namespaces)
		for _, k := range c.kept {
			if !strings.Contains(got, k) {
				t.Errorf("confined to %v: the condition lost %s: %s", c.namespaces, k, got)
			}
		}
		for _, l := range c.left {
			if strings.Contains(got, l) {
				t.Errorf("confined to %v: the condition keeps %s: %s", c.namespaces, l, got)
			}
		}
	}
}
