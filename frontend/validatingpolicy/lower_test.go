// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package validatingpolicy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyvap/kyvap/model"
)

func podSpec() policiesv1.ValidatingPolicySpec {
	return policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}}},
		},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "labelled", Expression: "has(object.metadata.labels)"}},
		Validations: []admissionregistrationv1.Validation{{
			Expression: "object.spec.containers.all(c, !c.image.endsWith(':latest')) && object.metadata.namespace != ''",
			Message:    "object.spec has a latest image",
		}},
	}
}

func TestValidatingPolicyDefaults(t *testing.T) {
	p := Lower(&policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "latest", UID: "u1", Generation: 3}, Spec: podSpec()}, nil, time.Now())
	if got, want := p.Source, (model.Source{Kind: model.KindValidatingPolicy, APIVersion: "policies.kyverno.io/v1", Name: "latest", UID: "u1", Generation: 3}); got != want {
		t.Fatalf("source: got %+v, want %+v", got, want)
	}
	var ids []string
	for _, r := range p.Rules {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]string{"policy", "autogen-defaults", "autogen-cronjobs"}, ids); diff != "" {
		t.Fatalf("rule IDs (-want +got):\n%s", diff)
	}
	main := p.Rules[0]
	if diff := cmp.Diff([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, main.Actions); diff != "" {
		t.Errorf("default actions (-want +got):\n%s", diff)
	}
	if main.FailurePolicy != admissionregistrationv1.Fail || !main.Admission || !main.Background || main.Namespace != "" {
		t.Errorf("defaults: %+v", main)
	}
}

func TestAutogenVariants(t *testing.T) {
	p := Lower(&policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "latest"}, Spec: podSpec()}, nil, time.Now())
	defaults, cronjobs := p.Rules[1], p.Rules[2]
	if diff := cmp.Diff([]string{"DaemonSet", "Deployment", "ReplicaSet", "StatefulSet", "Job"}, defaults.Targets); diff != "" {
		t.Errorf("defaults targets (-want +got):\n%s", diff)
	}
	wantRules := []admissionregistrationv1.NamedRuleWithOperations{
		{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"daemonsets", "deployments", "replicasets", "statefulsets"}}}},
		{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}},
	}
	if diff := cmp.Diff(wantRules, defaults.MatchConstraints.ResourceRules); diff != "" {
		t.Errorf("defaults resource rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"env": "prod"}, defaults.MatchConstraints.NamespaceSelector.MatchLabels); diff != "" {
		t.Errorf("namespace selector kept (-want +got):\n%s", diff)
	}
	// object.metadata.namespace stays: the controller's namespace is the Pod's.
	if got, want := defaults.Validations[0].Expression, "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest')) && object.metadata.namespace != ''"; got != want {
		t.Errorf("defaults expression:\n got %s\nwant %s", got, want)
	}
	if got, want := cronjobs.Validations[0].Message, "object.spec.jobTemplate.spec.template.spec has a latest image"; got != want {
		t.Errorf("cronjobs message (Kyverno rewrites the whole spec):\n got %s\nwant %s", got, want)
	}
	if got, want := cronjobs.MatchConditions[0].Expression, "has(object.spec.jobTemplate.spec.template.metadata.labels)"; got != want {
		t.Errorf("cronjobs match condition:\n got %s\nwant %s", got, want)
	}
	// The input is not changed.
	if got := p.Rules[0].Validations[0].Expression; got != podSpec().Validations[0].Expression {
		t.Errorf("the Pod rule was changed: %s", got)
	}
}

func TestAutogenControllers(t *testing.T) {
	cases := map[string]struct {
		controllers []string
		want        []string
		unsupported bool
	}{
		"none":       {controllers: []string{}, want: []string{"policy"}},
		"cronjobs":   {controllers: []string{"cronjobs"}, want: []string{"policy", "autogen-cronjobs"}},
		"typo":       {controllers: []string{"deploymnets"}, want: []string{"policy"}},
		"extraction": {controllers: []string{"jobsets.v1alpha2.jobset.x-k8s.io"}, want: []string{"policy", "autogen-extract"}, unsupported: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := podSpec()
			spec.AutogenConfiguration = &policiesv1.ValidatingPolicyAutogenConfiguration{PodControllers: &policiesv1.PodControllersGenerationConfiguration{Controllers: tc.controllers}}
			p := Lower(&policiesv1.ValidatingPolicy{Spec: spec}, nil, time.Now())
			var ids []string
			for _, r := range p.Rules {
				ids = append(ids, r.ID)
			}
			if diff := cmp.Diff(tc.want, ids); diff != "" {
				t.Fatalf("rule IDs (-want +got):\n%s", diff)
			}
			if got := p.Rules[len(p.Rules)-1].Unsupported != ""; got != tc.unsupported {
				t.Errorf("unsupported: got %v, want %v", got, tc.unsupported)
			}
		})
	}
}

func TestNoAutogenUnlessExactlyPods(t *testing.T) {
	for name, mutate := range map[string]func(*admissionregistrationv1.MatchResources){
		"object selector": func(m *admissionregistrationv1.MatchResources) {
			m.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		},
		"resource names": func(m *admissionregistrationv1.MatchResources) { m.ResourceRules[0].ResourceNames = []string{"x"} },
		"two resources": func(m *admissionregistrationv1.MatchResources) {
			m.ResourceRules[0].Resources = []string{"pods", "services"}
		},
		"any version":      func(m *admissionregistrationv1.MatchResources) { m.ResourceRules[0].APIVersions = []string{"*"} },
		"exclusions":       func(m *admissionregistrationv1.MatchResources) { m.ExcludeResourceRules = m.ResourceRules },
		"pod subresources": func(m *admissionregistrationv1.MatchResources) { m.ResourceRules[0].Resources = []string{"pods/exec"} },
	} {
		t.Run(name, func(t *testing.T) {
			spec := podSpec()
			mutate(spec.MatchConstraints)
			if p := Lower(&policiesv1.ValidatingPolicy{Spec: spec}, nil, time.Now()); len(p.Rules) != 1 {
				t.Errorf("got %d rules, want the policy alone", len(p.Rules))
			}
		})
	}
}

func TestNamespacedPolicyIsConfined(t *testing.T) {
	p := LowerNamespaced(&policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "team-a"}, Spec: podSpec()}, nil, time.Now())
	for _, r := range p.Rules {
		if r.Namespace != "team-a" {
			t.Errorf("rule %s: namespace %q, want team-a", r.ID, r.Namespace)
		}
	}
	if p.Source.Kind != model.KindNamespacedValidatingPolicy || !p.Source.Namespaced() {
		t.Errorf("source: %+v", p.Source)
	}
}

func TestEvaluation(t *testing.T) {
	off := false
	spec := podSpec()
	spec.EvaluationConfiguration = &policiesv1.EvaluationConfiguration{Admission: &policiesv1.AdmissionConfiguration{Enabled: &off}, Background: &policiesv1.BackgroundConfiguration{Enabled: &off}}
	spec.ValidationAction = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit, admissionregistrationv1.Warn}
	ignore := admissionregistrationv1.Ignore
	spec.FailurePolicy = &ignore
	r := Lower(&policiesv1.ValidatingPolicy{Spec: spec}, nil, time.Now()).Rules[0]
	if r.Admission || r.Background || r.FailurePolicy != ignore || len(r.Actions) != 2 {
		t.Errorf("evaluation not carried: %+v", r)
	}
	json := podSpec()
	json.EvaluationConfiguration = &policiesv1.EvaluationConfiguration{Mode: model.ModeJSON}
	p := Lower(&policiesv1.ValidatingPolicy{Spec: json}, nil, time.Now())
	if len(p.Rules) != 1 || p.Rules[0].Admission || p.Rules[0].Mode != model.ModeJSON {
		t.Errorf("JSON mode: %+v", p.Rules)
	}
}

func TestExceptions(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	exception := func(ns, name, kind, policy string, expires *time.Time) policiesv1.PolicyException {
		ex := policiesv1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		ex.Spec.PolicyRefs = []policiesv1.PolicyRef{{Name: policy, Kind: kind}}
		ex.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "n", Expression: "object.metadata.name == 'x'"}}
		if expires != nil {
			ex.Spec.ExpiresAt = &metav1.Time{Time: *expires}
		}
		return ex
	}
	soon, later, past := now.Add(time.Hour), now.Add(48*time.Hour), now.Add(-time.Second)
	exceptions := []policiesv1.PolicyException{
		exception("z", "later", "ValidatingPolicy", "p", &later),
		exception("a", "soon", "ValidatingPolicy", "p", &soon),
		exception("a", "expired", "ValidatingPolicy", "p", &past),
		exception("a", "other-policy", "ValidatingPolicy", "q", nil),
		exception("a", "other-kind", "NamespacedValidatingPolicy", "p", nil),
		exception("b", "forever", "ValidatingPolicy", "p", nil),
	}
	p := Lower(&policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: podSpec()}, exceptions, now)
	for _, r := range p.Rules {
		var keys []string
		for _, ex := range r.Exceptions {
			keys = append(keys, ex.Key())
		}
		if diff := cmp.Diff([]string{"a/soon", "b/forever", "z/later"}, keys); diff != "" {
			t.Errorf("rule %s exceptions (-want +got):\n%s", r.ID, diff)
		}
	}
	if p.NextExpiry == nil || !p.NextExpiry.Equal(soon) {
		t.Errorf("next expiry: got %v, want %v", p.NextExpiry, soon)
	}
}

func TestRewriteToPodTemplate(t *testing.T) {
	cases := map[string]string{
		"object.spec.x":                           "object.spec.template.spec.x",
		"oldObject.spec.x == object.spec.x":       "oldObject.spec.template.spec.x == object.spec.template.spec.x",
		"object.metadata.namespace":               "object.metadata.namespace",
		"object.metadata.namespaceFoo":            "object.spec.template.metadata.namespaceFoo",
		"object.metadata.labels":                  "object.spec.template.metadata.labels",
		"has(object.metadata.namespace) && true":  "has(object.metadata.namespace) && true",
		"object.specification":                    "object.spec.template.specification",
		"request.object.spec (not rewritten? is)": "request.object.spec.template.spec (not rewritten? is)",
	}
	for in, want := range cases {
		if got := RewriteToPodTemplate(in, "spec.template.spec", "spec.template.metadata"); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}
