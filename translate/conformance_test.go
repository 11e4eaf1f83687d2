// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// vapSummary is the effective content of a VAP and its bindings, with
// names, labels and ordering normalised away.
type vapSummary struct {
	Rules             []string // group/version/resource/operation[/name]
	Excludes          []string
	NamespaceSelector string
	ObjectSelector    string
	Validations       []admissionregistrationv1.Validation
	UserConditions    []admissionregistrationv1.MatchCondition
	FailurePolicy     string
	Actions           []string
}

func ruleTuples(rules []admissionregistrationv1.NamedRuleWithOperations) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					for _, op := range r.Operations {
						for _, n := range names {
							out = append(out, strings.TrimSuffix(strings.Join([]string{g, v, res, string(op), n}, "/"), "/"))
						}
					}
				}
			}
		}
	}
	return kyverno.UniqueSorted(out)
}

func summarize(vap admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding) vapSummary {
	var s vapSummary
	if mc := vap.Spec.MatchConstraints; mc != nil {
		s.Rules = ruleTuples(mc.ResourceRules)
		s.Excludes = ruleTuples(mc.ExcludeResourceRules)
		if mc.NamespaceSelector != nil {
			s.NamespaceSelector = metav1.FormatLabelSelector(mc.NamespaceSelector)
		}
		if mc.ObjectSelector != nil {
			s.ObjectSelector = metav1.FormatLabelSelector(mc.ObjectSelector)
		}
	}
	s.Validations = vap.Spec.Validations
	for _, c := range vap.Spec.MatchConditions {
		if !strings.HasPrefix(c.Name, "kyvap-") {
			s.UserConditions = append(s.UserConditions, c)
		}
	}
	s.FailurePolicy = "Fail"
	if vap.Spec.FailurePolicy != nil {
		s.FailurePolicy = string(*vap.Spec.FailurePolicy)
	}
	for _, b := range bindings {
		var acts []string
		for _, a := range b.Spec.ValidationActions {
			acts = append(acts, string(a))
		}
		s.Actions = append(s.Actions, strings.Join(acts, ","))
	}
	sort.Strings(s.Actions)
	return s
}

// parityCase documents how kyvap's output for a Kyverno "generate" case
// relates to Kyverno's expected VAP: adjust turns Kyverno's summary into
// ours, and conditions lists fragments kyvap's generated match conditions
// must contain to carry what was moved out of resource rules and selectors.
type parityCase struct {
	why        string
	adjust     func(*vapSummary)
	conditions []string
}

// allOps is how kyvap spells "no operations given" (Kyverno's generator
// lists the same four).
var withoutNames = func(tuples []string) []string {
	var out []string
	for _, t := range tuples {
		parts := strings.Split(t, "/")
		if len(parts) > 4 && parts[len(parts)-1] != "" && !strings.Contains(parts[2], "*") {
			// group/version/resource[/sub]/op/name: drop the name
			t = strings.Join(parts[:len(parts)-1], "/")
		}
		out = append(out, t)
	}
	return kyverno.UniqueSorted(out)
}

var parityCases = map[string]parityCase{
	"block-ephemeral-containers": {why: "identical"},
	"block-exec-in-pods":         {why: "identical"},
	"cpol-all-match-resource": {
		why:        "objectSelector becomes a condition on the new object's labels: a VAP objectSelector also matches on the old object's labels on UPDATE, Kyverno only on the new one",
		adjust:     func(s *vapSummary) { s.ObjectSelector = "" },
		conditions: []string{`["app"] == "critical"`},
	},
	"cpol-any-exclude-namespace-match-resource": {
		why: "Kyverno defect #3: its VAP excludes the Namespace objects named testing-ns/staging-ns; Kyverno's engine (and kyvap) exclude the resources in those namespaces",
		adjust: func(s *vapSummary) {
			s.Excludes = nil
			s.NamespaceSelector = "kubernetes.io/metadata.name notin (staging-ns,testing-ns)"
		},
	},
	"cpol-any-exclude-resource": {
		why:        "excluded names become a condition on the object name (a VAP resourceName is empty for generateName creates, Kyverno uses the generated name)",
		adjust:     func(s *vapSummary) { s.Excludes = nil },
		conditions: []string{`in ["testing"]`, `request.resource.resource in ["deployments"]`, `request.operation in ["CREATE", "UPDATE"]`},
	},
	"cpol-any-exclude-resource-match-with-namespace-selector": {
		why:        "as cpol-any-exclude-resource",
		adjust:     func(s *vapSummary) { s.Excludes = nil },
		conditions: []string{`in ["testing"]`},
	},
	"cpol-any-exclude-resource-match-with-object-selector": {
		why:        "as cpol-any-exclude-resource, and the objectSelector as in cpol-all-match-resource",
		adjust:     func(s *vapSummary) { s.Excludes = nil; s.ObjectSelector = "" },
		conditions: []string{`in ["testing"]`, `["app"] == "critical"`},
	},
	"cpol-any-match-multiple-resources": {why: "identical"},
	"cpol-any-match-resource":           {why: "identical"},
	"cpol-any-match-resources-by-names": {
		why:        "names become a condition on the object name (see cpol-any-exclude-resource)",
		adjust:     func(s *vapSummary) { s.Rules = withoutNames(s.Rules) },
		conditions: []string{`in ["staging"]`},
	},
	"cpol-match-all-exclude-one": {
		why: "kind '*' with namespaces: a VAP namespaceSelector lets every cluster-scoped resource through, Kyverno matches none but the named Namespaces; kyvap checks the namespace in a condition. '*' also covers pods/ephemeralcontainers in Kyverno's engine",
		adjust: func(s *vapSummary) {
			s.NamespaceSelector = ""
			s.Rules = append(s.Rules, "/v1/pods/ephemeralcontainers/CREATE")
			sort.Strings(s.Rules)
		},
		conditions: []string{`request.namespace : '')) in ["production", "staging"]`},
	},
	"cpol-match-kind-with-wildcard": {
		why: "as cpol-match-all-exclude-one",
		adjust: func(s *vapSummary) {
			s.NamespaceSelector = ""
			for _, op := range []string{"CONNECT", "CREATE", "DELETE", "UPDATE"} {
				s.Rules = append(s.Rules, "/v1/pods/ephemeralcontainers/"+op)
			}
			sort.Strings(s.Rules)
		},
		conditions: []string{`request.namespace : '')) in ["production", "staging"]`},
	},
	"cpol-match-resource-in-specific-namespace": {why: "identical"},
	"cpol-with-an-exception": {
		why:        "the exception's names become a condition; Kyverno's engine ignores an exception's operations",
		adjust:     func(s *vapSummary) { s.Excludes = nil },
		conditions: []string{`request.resource.resource in ["deployments"]) && `, `in ["important-tool"]`},
	},
	"cpol-with-an-exception-excluding-namespaces": {
		why: "Kyverno defect #3 again: its VAP excludes the Namespace objects; an exception by namespace exempts the resources in those namespaces",
		adjust: func(s *vapSummary) {
			s.Excludes = nil
			s.NamespaceSelector = "kubernetes.io/metadata.name notin (staging-ns,testing-ns)"
		},
	},
	"cpol-with-two-exceptions": {
		why:        "as cpol-with-an-exception",
		adjust:     func(s *vapSummary) { s.Excludes = nil },
		conditions: []string{`in ["deployments"]) && `, `in ["statefulsets"]) && `, `in ["important-tool"]`},
	},
}

// rulesOf is the plan's results for the policy's own rules, without the
// entries of their pod-controller variants (which follow their rule).
func rulesOf(plan Plan, policy *kyvernov1.ClusterPolicy) []RuleResult {
	var out []RuleResult
	next := 0
	for _, r := range plan.Rules {
		if next < len(policy.Spec.Rules) && r.Rule == policy.Spec.Rules[next].Name {
			out = append(out, r)
			next++
		}
	}
	return out
}

// vapOf returns the plan's VAP of that name and its bindings.
func vapOf(plan Plan, name string) (admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	for _, v := range plan.ValidatingAdmissionPolicies {
		if v.Name == name {
			vap = v
		}
	}
	var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, b := range plan.Bindings {
		if b.Spec.PolicyName == name {
			bindings = append(bindings, b)
		}
	}
	return vap, bindings
}

func readObject(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestKyvernoConformanceParity checks every "generate" case of Kyverno's
// conformance suite against Kyverno's expected VAP and binding.
func TestKyvernoConformanceParity(t *testing.T) {
	cases := map[string]goldenCase{}
	for _, c := range loadGoldenCases(t) {
		if strings.HasPrefix(c.name, "kyverno-conformance/generate/") {
			cases[filepath.Base(c.dir)] = c
		}
	}
	if len(cases) != len(parityCases) {
		t.Fatalf("%d generate cases on disk, %d documented", len(cases), len(parityCases))
	}
	for name, pc := range parityCases {
		t.Run(name, func(t *testing.T) {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("no testdata for %s", name)
			}
			var kyvernoVAP admissionregistrationv1.ValidatingAdmissionPolicy
			var kyvernoBinding admissionregistrationv1.ValidatingAdmissionPolicyBinding
			readObject(t, filepath.Join(c.dir, "kyverno-vap.yaml"), &kyvernoVAP)
			readObject(t, filepath.Join(c.dir, "kyverno-binding.yaml"), &kyvernoBinding)
			plan, err := Translate(c.input, kyverno.NewStaticResolver(), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			// Kyverno's generator makes one VAP for the rule and none for its
			// pod-controller variants (so with generated: true the
			// controllers are enforced by nobody); kyvap translates the
			// variants too. The rule's own VAP is compared.
			rules := rulesOf(plan, c.input.Policy)
			if len(rules) != 1 || rules[0].Verdict != VerdictTranslated || len(rules[0].ValidatingAdmissionPolicies) != 1 {
				t.Fatalf("want one translated rule with one VAP, got %+v", plan.Rules)
			}
			for _, v := range plan.Rules[1:] {
				if !strings.HasPrefix(v.Rule, "autogen-") || v.Verdict != VerdictTranslated {
					t.Errorf("variant %s: verdict %s (%s: %s), want a translated autogen variant", v.Rule, v.Verdict, v.Reason, v.Message)
				}
			}
			want := summarize(kyvernoVAP, []admissionregistrationv1.ValidatingAdmissionPolicyBinding{kyvernoBinding})
			if pc.adjust != nil {
				pc.adjust(&want)
			}
			ours, bindings := vapOf(plan, rules[0].ValidatingAdmissionPolicies[0])
			got := summarize(ours, bindings)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("effective VAP differs from Kyverno's beyond the documented difference (%s) (-want +got):\n%s", pc.why, diff)
			}
			var generated []string
			for _, mc := range ours.Spec.MatchConditions {
				if strings.HasPrefix(mc.Name, "kyvap-") {
					generated = append(generated, mc.Expression)
				}
			}
			all := strings.Join(generated, "\n")
			for _, frag := range pc.conditions {
				if !strings.Contains(all, frag) {
					t.Errorf("generated conditions lack %q:\n%s", frag, all)
				}
			}
			if len(pc.conditions) == 0 && len(generated) > 0 {
				t.Errorf("unexpected generated conditions:\n%s", all)
			}
		})
	}
}

// skipGenerateDecisions records, for every "skip-generate" case, kyvap's
// decision: translated (with the semantics argued in testdata/README.md)
// or the reason it refuses.
var skipGenerateDecisions = map[string]struct {
	verdict Verdict
	reason  model.Reason
}{
	"cpol-any-match-multiple-resources-with-namespace-selector":   {VerdictTranslated, ""},
	"cpol-any-match-multiple-resources-with-object-selector":      {VerdictTranslated, ""},
	"cpol-any-match-resources-by-names-with-wildcard":             {VerdictTranslated, ""},
	"cpol-any-match-resources-in-namespaces-with-wildcard":        {VerdictTranslated, ""},
	"cpol-any-match-resources-with-different-namespace-selectors": {VerdictTranslated, ""},
	"cpol-any-match-resources-with-different-object-selectors":    {VerdictTranslated, ""},
	"cpol-exclude-resources-in-specific-namespace":                {VerdictTranslated, ""},
	"cpol-exclude-resources-with-namespace-selector":              {VerdictTranslated, ""},
	"cpol-exclude-resources-with-object-selector":                 {VerdictTranslated, ""},
	"cpol-exclude-user-and-roles":                                 {VerdictFallback, model.ReasonRolesOrClusterRoles},
	"cpol-match-resource-created-by-user":                         {VerdictFallback, model.ReasonRolesOrClusterRoles},
	"cpol-match-resource-using-annotations":                       {VerdictTranslated, ""},
	"cpol-multiple-all-match-resources":                           {VerdictTranslated, ""},
	"cpol-multiple-rules":                                         {VerdictTranslated, ""},
	"cpol-multiple-validation-failure-action-overrides":           {VerdictTranslated, ""},
	"cpol-non-cel-rule":                                           {VerdictTranslated, ""},
	"cpol-validation-failure-action-overrides-with-namespace":     {VerdictTranslated, ""},
	"cpol-with-exception-and-conditions":                          {VerdictTranslated, ""},
	"cpol-with-exception-and-namespace-selector":                  {VerdictTranslated, ""},
	"cpol-with-exception-and-object-selector":                     {VerdictTranslated, ""},
	"cpol-with-exception-in-specific-namespace":                   {VerdictTranslated, ""},
	"disable-generate":                                            {VerdictFallback, model.ReasonGenerateOptOut},
}

func TestKyvernoConformanceSkipGenerate(t *testing.T) {
	seen := 0
	for _, c := range loadGoldenCases(t) {
		if !strings.HasPrefix(c.name, "kyverno-conformance/skip-generate/") {
			continue
		}
		seen++
		name := filepath.Base(c.dir)
		t.Run(name, func(t *testing.T) {
			want, ok := skipGenerateDecisions[name]
			if !ok {
				t.Fatal("undocumented case")
			}
			plan, err := Translate(c.input, kyverno.NewStaticResolver(), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range plan.Rules {
				if r.Verdict != want.verdict || r.Reason != want.reason {
					t.Errorf("rule %s: got %s/%s (%s), want %s/%s", r.Rule, r.Verdict, r.Reason, r.Message, want.verdict, want.reason)
				}
			}
		})
	}
	if seen != len(skipGenerateDecisions) {
		t.Errorf("%d skip-generate cases on disk, %d documented", seen, len(skipGenerateDecisions))
	}
}
