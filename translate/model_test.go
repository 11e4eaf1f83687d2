// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/frontend/validatingpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

// modelNow is the clock of the policy-model golden cases (exceptions expire
// relative to it).
var modelNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// modelCase is a testdata/model directory: input.yaml holds policies of the
// policy model's kinds and CEL PolicyExceptions; plan.yaml the plans.
type modelCase struct {
	name, dir string
	policies  []model.Policy
}

func loadModelCases(t testing.TB) []modelCase {
	dirs, err := filepath.Glob(filepath.Join("testdata", "model", "*", "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []modelCase
	for _, input := range dirs {
		var set manifest.Set
		if err := set.ReadPath(input, nil, manifest.AcceptAll); err != nil {
			t.Fatal(err)
		}
		c := modelCase{name: filepath.Base(filepath.Dir(input)), dir: filepath.Dir(input)}
		for i := range set.ValidatingPolicies {
			c.policies = append(c.policies, validatingpolicy.Lower(&set.ValidatingPolicies[i], set.CELExceptions, modelNow))
		}
		for i := range set.NamespacedValidatingPolicies {
			c.policies = append(c.policies, validatingpolicy.LowerNamespaced(&set.NamespacedValidatingPolicies[i], set.CELExceptions, modelNow))
		}
		cases = append(cases, c)
	}
	return cases
}

func translateModelCase(c modelCase, opts Options) []Plan {
	var plans []Plan
	for _, p := range c.policies {
		plans = append(plans, TranslatePolicy(p, kyverno.NewStaticResolver(), opts))
	}
	return plans
}

func TestModelGolden(t *testing.T) {
	cases := loadModelCases(t)
	if len(cases) < 10 {
		t.Fatalf("found only %d policy-model cases", len(cases))
	}
	opts := Options{GenerateValidatingAdmissionPolicy: true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plans := translateModelCase(c, opts)
			got, err := yaml.Marshal(plans)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := yaml.Marshal(translateModelCase(c, opts))
			if !bytes.Equal(got, again) {
				t.Fatal("translation is not deterministic")
			}
			for _, plan := range plans {
				assertCompiles(t, plan)
			}
			path := filepath.Join(c.dir, "plan.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./translate -run TestModelGolden -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestModelKyvernoConfig: Kyverno's global configuration filters requests
// before ValidatingPolicies too, and its webhook selectors reach the binding.
func TestModelKyvernoConfig(t *testing.T) {
	cfg := kyverno.ChartDefaults()
	for _, c := range loadModelCases(t) {
		if c.name != "namespaced" {
			continue
		}
		plan := TranslatePolicy(c.policies[0], kyverno.NewStaticResolver(), Options{GenerateValidatingAdmissionPolicy: true, KyvernoConfig: &cfg})
		assertCompiles(t, plan)
		if len(plan.ValidatingAdmissionPolicies) != 1 || len(plan.Bindings) != 1 {
			t.Fatalf("plan: %+v", plan.Rules)
		}
		names := map[string]bool{}
		for _, mc := range plan.ValidatingAdmissionPolicies[0].Spec.MatchConditions {
			names[mc.Name] = true
		}
		for _, want := range []string{kyverno.ConditionResourceFilters, kyverno.ConditionExcludedSubjects, vap.ConditionPolicyNamespace} {
			if !names[want] {
				t.Errorf("match condition %s missing: %v", want, names)
			}
		}
		sel := plan.Bindings[0].Spec.MatchResources.NamespaceSelector
		if sel == nil || len(sel.MatchExpressions) < 2 {
			t.Errorf("binding namespace selector: want the policy's namespace and Kyverno's webhook selector, got %+v", sel)
		}
		return
	}
	t.Fatal("case namespaced not found")
}

// TestModelGenerationDisabled: with VAP generation off nothing is generated
// and every rule says who enforces it.
func TestModelGenerationDisabled(t *testing.T) {
	for _, c := range loadModelCases(t) {
		for _, plan := range translateModelCase(c, Options{}) {
			if len(plan.ValidatingAdmissionPolicies)+len(plan.Bindings) > 0 {
				t.Errorf("%s: objects generated with generation disabled", c.name)
			}
			for _, r := range plan.Rules {
				if r.Verdict == VerdictTranslated && r.Reason != model.ReasonExemptedByException {
					t.Errorf("%s/%s: translated with generation disabled", c.name, r.Rule)
				}
			}
		}
	}
}

func BenchmarkTranslatePolicy(b *testing.B) {
	cases := loadModelCases(b)
	opts := Options{GenerateValidatingAdmissionPolicy: true}
	b.ResetTimer()
	for b.Loop() {
		for _, c := range cases {
			translateModelCase(c, opts)
		}
	}
}

// TestModelKyvernoGenerator: with Kyverno's own generator running, a
// ValidatingPolicy it turns into a VAP (opted in, no pod-controller
// variants) is left to it; one it skips (variants) is kyvap's.
func TestModelKyvernoGenerator(t *testing.T) {
	var set manifest.Set
	err := set.Read("inline", []byte(`
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: opted-in}
spec:
  autogen:
    validatingAdmissionPolicy: {enabled: true}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= 3"
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: opted-in-pods}
spec:
  autogen:
    validatingAdmissionPolicy: {enabled: true}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.hostNetwork != true"
`), manifest.AcceptAll)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := func(opts Options) []string {
		var out []string
		for i := range set.ValidatingPolicies {
			plan := TranslatePolicy(validatingpolicy.Lower(&set.ValidatingPolicies[i], nil, modelNow), kyverno.NewStaticResolver(), opts)
			for _, r := range plan.Rules {
				out = append(out, set.ValidatingPolicies[i].Name+"/"+r.Rule+"="+string(r.Verdict)+":"+string(r.Reason))
			}
		}
		return out
	}
	want := []string{
		"opted-in/policy=NotHandled:KyvernoGeneratesVAP",
		"opted-in-pods/policy=Translated:", "opted-in-pods/autogen-defaults=Translated:", "opted-in-pods/autogen-cronjobs=Translated:",
	}
	if diff := cmp.Diff(want, verdicts(Options{GenerateValidatingAdmissionPolicy: true, KyvernoGeneratesVAPs: true})); diff != "" {
		t.Errorf("Kyverno's generator running (-want +got):\n%s", diff)
	}
	for _, v := range verdicts(Options{GenerateValidatingAdmissionPolicy: true}) {
		if !strings.HasSuffix(v, "=Translated:") {
			t.Errorf("without Kyverno's generator, %s", v)
		}
	}
}

// FuzzTranslatePolicy feeds arbitrary manifests (policies.kyverno.io
// ValidatingPolicies, NamespacedValidatingPolicies and PolicyExceptions) to
// the policy model and TranslatePolicy: no panic, deterministic, the input
// unchanged, and everything emitted compiles and has valid names and labels.
func FuzzTranslatePolicy(f *testing.F) {
	for _, c := range loadModelCases(f) {
		if data, err := os.ReadFile(filepath.Join(c.dir, "input.yaml")); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var set manifest.Set
		if set.Read("fuzz", data, manifest.AcceptAll) != nil {
			return
		}
		before, _ := yaml.Marshal(set)
		opts := Options{GenerateValidatingAdmissionPolicy: true}
		var policies []model.Policy
		for i := range set.ValidatingPolicies {
			policies = append(policies, validatingpolicy.Lower(&set.ValidatingPolicies[i], set.CELExceptions, modelNow))
		}
		for i := range set.NamespacedValidatingPolicies {
			policies = append(policies, validatingpolicy.LowerNamespaced(&set.NamespacedValidatingPolicies[i], set.CELExceptions, modelNow))
		}
		for _, p := range policies {
			first := TranslatePolicy(p, kyverno.NewStaticResolver(), opts)
			second := TranslatePolicy(p, kyverno.NewStaticResolver(), opts)
			if !bytes.Equal(marshalJSON(t, first), marshalJSON(t, second)) {
				t.Fatal("translation is not deterministic")
			}
			assertCompiles(t, first)
			for _, vap := range first.ValidatingAdmissionPolicies {
				assertMeta(t, vap.Name, vap.Labels)
			}
			for _, b := range first.Bindings {
				assertMeta(t, b.Name, b.Labels)
			}
		}
		if after, _ := yaml.Marshal(set); !bytes.Equal(before, after) {
			t.Fatal("the input was changed")
		}
	})
}

// TestModelResourceWarnings: resources the cluster does not serve, and
// cluster-scoped resources in a namespaced policy, are said.
func TestModelResourceWarnings(t *testing.T) {
	var set manifest.Set
	err := set.Read("inline", []byte(`
apiVersion: policies.kyverno.io/v1
kind: NamespacedValidatingPolicy
metadata: {name: scoped, namespace: team}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps, namespaces, nodes, podz]}
    - {apiGroups: [rbac.authorization.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [clusterroles, roles]}
    - {apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE], resources: [widgets]}
  validations:
  - expression: "true"
`), manifest.AcceptAll)
	if err != nil {
		t.Fatal(err)
	}
	plan := TranslatePolicy(validatingpolicy.LowerNamespaced(&set.NamespacedValidatingPolicies[0], nil, modelNow), kyverno.NewStaticResolver(), Options{GenerateValidatingAdmissionPolicy: true})
	want := []string{
		"NamespacedValidatingPolicy/team/scoped: matchConstraints name resources the cluster does not serve (/podz): the policy never applies to them",
		"NamespacedValidatingPolicy/team/scoped: matchConstraints name cluster-scoped resources (/nodes, rbac.authorization.k8s.io/clusterroles): a namespaced policy applies only to requests in its namespace, never to them",
	}
	if diff := cmp.Diff(want, plan.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if len(plan.ValidatingAdmissionPolicies) != 1 {
		t.Errorf("the policy is still translated: %+v", plan.Rules)
	}
}

// TestModelResourceFiltersFollowMatch: a ValidatingPolicy's VAP carries
// only the resource filters of Kyverno's configuration that can name a
// resource it matches (the API server evaluates the condition on each of
// its requests); a wildcard rule keeps them all.
func TestModelResourceFiltersFollowMatch(t *testing.T) {
	cfg := kyverno.ChartDefaults()
	condition := func(resources ...string) string {
		t.Helper()
		vp := &policiesv1.ValidatingPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "scoped"},
			Spec: policiesv1.ValidatingPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: resources},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
			},
		}
		plan := TranslatePolicy(validatingpolicy.Lower(vp, nil, modelNow), kyverno.NewStaticResolver(), Options{GenerateValidatingAdmissionPolicy: true, KyvernoConfig: &cfg})
		assertCompiles(t, plan)
		// The policy's own VAP, not its pod controllers' (autogen).
		for _, vap := range plan.ValidatingAdmissionPolicies {
			if !strings.Contains(vap.Name, ".vpol-policy.") {
				continue
			}
			for _, mc := range vap.Spec.MatchConditions {
				if mc.Name == kyverno.ConditionResourceFilters {
					return mc.Expression
				}
			}
		}
		t.Fatalf("no VAP of the policy's rule with a %s condition: %+v", kyverno.ConditionResourceFilters, plan.Rules)
		return ""
	}
	pods := condition("pods")
	for _, want := range []string{`p[0] == "kyverno"`, `p[0] == "kube-system"`} {
		if !strings.Contains(pods, want) {
			t.Errorf("pods: the condition lacks %s: %s", want, pods)
		}
	}
	// The chart's Pod filters are all in Kyverno's namespace, which
	// [*/*,kyverno,*] filters whole: they add nothing.
	for _, unwanted := range []string{`"/v1/pods"`, "kyverno-admission-controller-", "/v1/events", "/v1/nodes", "apps/v1/deployments", "request.resource.resource == 'namespaces'"} {
		if strings.Contains(pods, unwanted) {
			t.Errorf("pods: the condition still names %s: %s", unwanted, pods)
		}
	}
	if namespaces := condition("namespaces"); !strings.Contains(namespaces, "request.resource.resource == 'namespaces'") {
		t.Errorf("namespaces: Kyverno filters a Namespace by its own name too: %s", namespaces)
	}
	all := condition("*")
	for _, want := range []string{"/v1/events", "/v1/nodes", "apps/v1/replicasets"} {
		if !strings.Contains(all, want) {
			t.Errorf("wildcard: the condition lacks %s", want)
		}
	}
	t.Logf("resource-filter condition: %d bytes for pods, %d bytes for every resource", len(pods), len(all))
	if len(pods) >= len(all)/4 {
		t.Errorf("the pods condition (%d bytes) is not much shorter than the wildcard one (%d bytes)", len(pods), len(all))
	}
}
