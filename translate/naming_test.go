// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
)

// namingPairs are (policy, rule) pairs that tempt a naming scheme into
// collisions: separators moved between the parts, dots, case, spaces,
// characters a DNS name refuses, names too long to keep, and names that
// look like the hashed form of others.
func namingPairs() [][2]string {
	long := strings.Repeat("p", 250)
	longRule := strings.Repeat("r", 250)
	pairs := [][2]string{
		{"a", "b-c"}, {"a-b", "c"}, {"a", "b.c"}, {"a.b", "c"}, {"a", "b"}, {"a-b-c", "x"},
		{"pol", "rule"}, {"pol", "Rule"}, {"pol", "RULE"}, {"pol", "r"}, {"pol", "R"},
		{"pol", "Rule With Spaces"}, {"pol", "rule-with-spaces"}, {"pol", "rule with spaces"},
		{"pol", "---"}, {"pol", ""}, {"pol", " "}, {"pol", "."}, {"pol", "ü"}, {"pol", "u"},
		{"my.policy", "check"}, {"my", "policy.check"}, {"my.policy.v2", "check"}, {"my.policy", "v2.check"},
		{"my-policy", "check"}, {"my", "policy-check"},
		{long, "rule"}, {long, "rule2"}, {long + "x", "rule"}, {"pol", longRule}, {"pol", longRule + "x"},
		{long, longRule}, {long[:120], longRule[:120]}, {long[:121], longRule[:119]},
		{"pol", "autogen-check"}, {"pol", "autogen-cronjob-check"}, {"pol", "autogen-check (autogen)"},
		{"pol", "rule\x00x"}, {"pol\x00rule", "x"},
		{strings.Repeat("a", 114) + "-" + strings.Repeat("b", 100), "Rule"}, {strings.Repeat("a", 114) + "-" + strings.Repeat("b", 100), "rule"},
		{strings.Repeat("a", 200), longRule}, {strings.Repeat("a", 200), "r"}, {strings.Repeat("a", 200), "R"},
	}
	// A plain name that reads like the hashed form of another pair.
	hashed := vapName("pol", "Check")
	rest := strings.TrimPrefix(hashed, namePrefix+"pol.")
	pairs = append(pairs, [2]string{"pol", rest}, [2]string{"pol", strings.ReplaceAll(rest, ".", "-")})
	for i := range 50 {
		pairs = append(pairs, [2]string{fmt.Sprintf("p%d", i), fmt.Sprintf("r-%d", i)}, [2]string{fmt.Sprintf("p%d-r", i), fmt.Sprint(i)})
	}
	return pairs
}

func TestVAPNameIsInjective(t *testing.T) {
	seen := map[string][2]string{}
	for _, pr := range namingPairs() {
		name := vapName(pr[0], pr[1])
		if other, ok := seen[name]; ok && other != pr {
			t.Errorf("vapName(%q, %q) = vapName(%q, %q) = %q", pr[0], pr[1], other[0], other[1], name)
		}
		seen[name] = pr
		if !validName(name) {
			t.Errorf("vapName(%q, %q) = %q: not a DNS subdomain leaving room for binding suffixes", pr[0], pr[1], name)
		}
		if errs := validation.IsDNS1123Subdomain(name + "-99"); len(errs) > 0 {
			t.Errorf("binding name %q: %v", name+"-99", errs)
		}
		if !strings.HasPrefix(name, namePrefix) {
			t.Errorf("vapName(%q, %q) = %q lacks the prefix %q", pr[0], pr[1], name, namePrefix)
		}
		if prefix := VAPNamePrefix(pr[0]); !strings.HasPrefix(name, prefix) {
			t.Errorf("vapName(%q, %q) = %q does not start with VAPNamePrefix %q", pr[0], pr[1], name, prefix)
		}
	}
	bindings := map[string][2]string{}
	for name, pr := range seen {
		for i := range 12 {
			b := name + "-" + fmt.Sprint(i)
			if other, ok := bindings[b]; ok {
				t.Errorf("binding %s of both %q and %q", b, pr, other)
			}
			bindings[b] = pr
		}
	}
	for _, pr := range namingPairs() {
		if v := shadowedVariantName(pr[0], pr[1]); seen[v] != ([2]string{}) {
			t.Errorf("shadowedVariantName(%q, %q) = %q, the name of rule %q", pr[0], pr[1], v, seen[v])
		}
	}
}

func TestVAPNameIsReadable(t *testing.T) {
	for _, tc := range []struct{ policy, rule, want string }{
		{"pol", "rule", "kyvap-pol.rule"},
		{"a", "b-c", "kyvap-a.b-c"},
		{"a-b", "c", "kyvap-a-b.c"},
		{"require-labels", "autogen-cronjob-check", "kyvap-require-labels.autogen-cronjob-check"},
	} {
		if got := vapName(tc.policy, tc.rule); got != tc.want {
			t.Errorf("vapName(%q, %q) = %q, want %q", tc.policy, tc.rule, got, tc.want)
		}
	}
	// Names that need changes keep a readable prefix before the hash.
	for _, tc := range []struct{ policy, rule, prefix string }{
		{"pol", "Rule With Spaces", "kyvap-pol.rule-with-spaces."},
		{"my.policy", "check", "kyvap-my-policy.check."},
		{"pol", "---", "kyvap-pol.rule."},
		{"pol", "v1.check", "kyvap-pol.v1-check."},
	} {
		got := vapName(tc.policy, tc.rule)
		if !strings.HasPrefix(got, tc.prefix) || len(got) != len(tc.prefix)+hashLength {
			t.Errorf("vapName(%q, %q) = %q, want %q + hash", tc.policy, tc.rule, got, tc.prefix)
		}
	}
	// Long names are shortened to fit, each part keeping a share.
	got := vapName(strings.Repeat("p", 300), strings.Repeat("r", 300))
	if len(got) != maxVAPName || !strings.Contains(got, "ppp.rrr") {
		t.Errorf("long names: %q (%d bytes), want %d bytes with both parts", got, len(got), maxVAPName)
	}
}

func celTestRule(name, kind, expression string) kyvernov1.Rule {
	return kyvernov1.Rule{
		Name:           name,
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{kind}}}}},
		Validation:     &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: expression}}}},
	}
}

// Distinct policy/rule pairs whose old names collided get distinct objects.
func TestGeneratedNamesDoNotCollideAcrossPolicies(t *testing.T) {
	names := map[string]string{}
	for _, pr := range [][2]string{{"a", "b-c"}, {"a-b", "c"}} {
		policy := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: pr[0]}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{celTestRule(pr[1], "ConfigMap", "true")}}}
		plan, err := Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), Options{GenerateValidatingAdmissionPolicy: true})
		if err != nil || len(plan.ValidatingAdmissionPolicies) != 1 {
			t.Fatalf("%v: %d VAPs, %v", pr, len(plan.ValidatingAdmissionPolicies), err)
		}
		for _, obj := range []string{plan.ValidatingAdmissionPolicies[0].Name, plan.Bindings[0].Name} {
			if other, ok := names[obj]; ok {
				t.Errorf("%s is generated for %v and %s", obj, pr, other)
			}
			names[obj] = fmt.Sprint(pr)
		}
	}
}
