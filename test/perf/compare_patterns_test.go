// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/manifest"
)

// comparePatternsYAML holds compareChecks written in Kyverno's classic
// language, as its policy library writes them.
//
//go:embed testdata/compare-patterns.yaml
var comparePatternsYAML []byte

// comparePatternPolicies are the benchmark's checks as Enforce
// ClusterPolicies of patterns, anchors and deny conditions
// (testdata/compare-patterns.yaml), which Kyverno enforces with its pattern
// engine and kyvap compiles to CEL.
func comparePatternPolicies() ([]*kyvernov1.ClusterPolicy, error) {
	var set manifest.Set
	if err := set.Read("testdata/compare-patterns.yaml", comparePatternsYAML, manifest.AcceptAll); err != nil {
		return nil, err
	}
	if len(set.Policies) != len(compareChecks) {
		return nil, fmt.Errorf("testdata/compare-patterns.yaml: %d policies for %d checks", len(set.Policies), len(compareChecks))
	}
	var out []*kyvernov1.ClusterPolicy
	for i := range set.Policies {
		out = append(out, &set.Policies[i])
	}
	return out, nil
}

// podPlaces are where the pod spec of a Pod check is read, by the kinds
// Kyverno's autogen extends a Pod rule to: the Pod's own, a controller's
// template, a CronJob's job template.
var podPlaces = []struct {
	suffix, spec string
	rules        []admissionregistrationv1.Rule
}{
	{"", "object.spec", []admissionregistrationv1.Rule{{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
	{"-controllers", "object.spec.template.spec", []admissionregistrationv1.Rule{
		{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"daemonsets", "deployments", "replicasets", "statefulsets"}},
		{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
		{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"replicationcontrollers"}},
	}},
	{"-cronjobs", "object.spec.jobTemplate.spec.template.spec", []admissionregistrationv1.Rule{{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"cronjobs"}}}},
}

// handWrittenVAPs are the benchmark's checks as a person writes them
// straight into ValidatingAdmissionPolicies: the check's CEL and its
// message, the resources and namespace it applies to, and nothing else (no
// match condition but the Namespace check's name, no variable, no message
// expression). A Pod check has a VAP for each place of the pod spec, as
// kyvap writes one for each autogen variant. This is the floor kyvap's
// generated VAPs are measured against.
func handWrittenVAPs() ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	simple := map[string][]admissionregistrationv1.Rule{
		"Namespace":  {{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}}},
		"ConfigMap":  {{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}},
		"Deployment": {{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}},
	}
	var (
		vaps     []*admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	)
	add := func(name string, rules []admissionregistrationv1.Rule, expression, message string, namespaced bool) {
		match := &admissionregistrationv1.MatchResources{MatchPolicy: ptr.To(admissionregistrationv1.Exact)}
		for _, r := range rules {
			match.ResourceRules = append(match.ResourceRules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       r,
			}})
		}
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "compare"}},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: match,
				Validations:      []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "compare"}},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
		if namespaced {
			binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{
				MatchPolicy:       ptr.To(admissionregistrationv1.Exact),
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: compareNamespace}},
			}
		} else {
			vap.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "bench", Expression: "object.metadata.name.startsWith('bench-')"}}
		}
		vaps = append(vaps, vap)
		bindings = append(bindings, binding)
	}
	for _, c := range compareChecks {
		name := "hand-written-" + c.name
		if c.kind != "Pod" {
			add(name, simple[c.kind], c.expression, c.message, c.kind != "Namespace")
			continue
		}
		for _, place := range podPlaces {
			add(name+place.suffix, place.rules, strings.ReplaceAll(c.expression, "object.spec", place.spec), c.message, true)
		}
	}
	return vaps, bindings
}

// loadPatternPolicy is loadPolicy written as a pattern, as Kyverno's
// library requires a label: one rule that denies the ConfigMap probe-<i>
// of compareNamespace without an ok label.
func loadPatternPolicy(i int) *kyvernov1.ClusterPolicy {
	p := loadPolicy(i)
	p.Spec.Rules[0].Validation = &kyvernov1.Validation{
		Message:    fmt.Sprintf("policy %d wants an ok label", i),
		RawPattern: rawJSON(map[string]any{"metadata": map[string]any{"labels": map[string]any{"ok": "?*"}}}),
	}
	return p
}

// scanPatternPolicy is scanPolicy written in Kyverno's classic language:
// the same five checks, as patterns with anchors and as deny conditions
// with JMESPath.
func scanPatternPolicy(i int, namespace string) *kyvernov1.ClusterPolicy {
	p := scanPolicy(i, namespace)
	deny := func(key string, operator string, value any) *kyvernov1.Validation {
		return &kyvernov1.Validation{Deny: rawJSON(map[string]any{"conditions": map[string]any{"any": []any{
			map[string]any{"key": key, "operator": operator, "value": value},
		}}})}
	}
	pattern := func(v map[string]any) *kyvernov1.Validation {
		return &kyvernov1.Validation{RawPattern: rawJSON(v)}
	}
	validations := map[string]*kyvernov1.Validation{
		"name-length":        deny("{{ length(request.object.metadata.name) }}", "GreaterThanOrEquals", 64),
		"no-forbidden-label": pattern(map[string]any{"metadata": map[string]any{"=(labels)": map[string]any{fmt.Sprintf("X(forbidden-%d-1)", i): "null"}}}),
		"no-bad-data":        pattern(map[string]any{"=(data)": map[string]any{"X(bad)": "null"}}),
		"tier":               pattern(map[string]any{"metadata": map[string]any{"=(labels)": map[string]any{"=(tier)": fmt.Sprintf("!forbidden-%d", i)}}}),
		"data-size":          deny("{{ length(request.object.data || `{}`) }}", "GreaterThan", 16+i),
	}
	for k := range p.Spec.Rules {
		rule := &p.Spec.Rules[k]
		v, ok := validations[rule.Name]
		if !ok {
			panic("scanPatternPolicy: no pattern for rule " + rule.Name)
		}
		v.Message = rule.Validation.CEL.Expressions[0].Message
		rule.Validation = v
	}
	p.Name = "pattern-" + p.Name
	return p
}

// rawJSON is v as a policy's free-form field holds it.
func rawJSON(v any) *apiextensionsv1.JSON {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &apiextensionsv1.JSON{Raw: data}
}
