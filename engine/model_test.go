// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kyvap/kyvap/model"
)

// configMapRule is a model rule on ConfigMap CREATE and UPDATE requiring a
// "team" label.
func configMapRule() model.Rule {
	return model.Rule{
		ID: model.RuleIDPolicy,
		MatchConstraints: admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			},
		}}},
		Validations:   []admissionregistrationv1.Validation{{Expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"}},
		FailurePolicy: admissionregistrationv1.Fail,
		Actions:       []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		Admission:     true,
	}
}

func labelledConfigMap(namespace, name string, labels map[string]any) *admissionv1.AdmissionRequest {
	meta := map[string]any{"name": name, "namespace": namespace}
	if labels != nil {
		meta["labels"] = labels
	}
	if name == "" {
		meta["generateName"] = "gen-"
		delete(meta, "name")
	}
	raw, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
	return &admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: namespace, Name: name,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Object:   runtime.RawExtension{Raw: raw},
	}
}

// modelOutcome is what a test compares: result, blocking, warning, message.
type modelOutcome struct {
	Result   Result
	Blocking bool
	Warn     bool
	Message  string
}

func evaluateModel(t *testing.T, src model.Source, rules []model.Rule, req Request) []modelOutcome {
	t.Helper()
	e := New()
	e.SetModelRules(src, rules)
	outcomes, err := e.Evaluate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []modelOutcome
	for _, o := range outcomes {
		if o.Kind != string(src.Kind) || o.Policy != src.Name || o.Namespace != src.Namespace {
			t.Errorf("outcome names %s %s/%s, want %s", o.Kind, o.Namespace, o.Policy, src)
		}
		out = append(out, modelOutcome{Result: o.Result, Blocking: o.Blocking, Warn: o.Warn, Message: o.Message})
	}
	return out
}

// TestModelRules covers Kyverno's ValidatingPolicy engine semantics that
// the conformance suites (run through Kyverno's CLI, which passes no
// namespace predicate and ignores validationActions) cannot show.
func TestModelRules(t *testing.T) {
	vpol := model.Source{Kind: model.KindValidatingPolicy, Name: "require-team"}
	nvpol := model.Source{Kind: model.KindNamespacedValidatingPolicy, Namespace: "a", Name: "require-team"}
	with := func(f func(r *model.Rule)) []model.Rule {
		r := configMapRule()
		f(&r)
		return []model.Rule{r}
	}
	plain := with(func(*model.Rule) {})
	team := map[string]any{"team": "x"}
	fail := []modelOutcome{{Result: Fail, Blocking: true, Message: "CEL expression validation failed at index 0"}}
	pass := []modelOutcome{{Result: Pass}}
	cases := []struct {
		name  string
		src   model.Source
		rules []model.Rule
		req   Request
		want  []modelOutcome
	}{
		{"labelled passes", vpol, plain, Request{Admission: labelledConfigMap("a", "x", team)}, pass},
		{"unlabelled fails", vpol, plain, Request{Admission: labelledConfigMap("a", "x", nil)}, fail},
		{"message is the validation's", vpol, with(func(r *model.Rule) { r.Validations[0].Message = "needs a team" }),
			Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Fail, Blocking: true, Message: "needs a team"}}},
		{"messageExpression wins", vpol, with(func(r *model.Rule) {
			r.Validations[0].Message = "needs a team"
			r.Validations[0].MessageExpression = "'ConfigMap ' + object.metadata.name + ' needs a team'"
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Fail, Blocking: true, Message: "ConfigMap x needs a team"}}},
		{"first failing validation decides", vpol, with(func(r *model.Rule) {
			r.Validations = append([]admissionregistrationv1.Validation{{Expression: "true"}, {Expression: "false", Message: "second"}}, r.Validations...)
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Fail, Blocking: true, Message: "second"}}},
		{"audit does not block", vpol, with(func(r *model.Rule) {
			r.Actions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
		}),
			Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Fail, Message: "CEL expression validation failed at index 0"}}},
		{"warn warns", vpol, with(func(r *model.Rule) {
			r.Actions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
		}),
			Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Fail, Warn: true, Message: "CEL expression validation failed at index 0"}}},
		{"error denies whatever the failurePolicy", vpol, with(func(r *model.Rule) {
			r.FailurePolicy = admissionregistrationv1.Ignore
			r.Validations[0].Expression = "object.metadata.labels.team == 'x'"
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Error, Blocking: true, Message: "expression 'object.metadata.labels.team == 'x'' resulted in error: no such key: labels"}}},
		{"false matchCondition skips", vpol, with(func(r *model.Rule) {
			r.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "named-x", Expression: "object.metadata.name == 'y'"}}
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Skip, Message: "matchConditions not met"}}},
		{"erring matchCondition under Ignore skips", vpol, with(func(r *model.Rule) {
			r.FailurePolicy = admissionregistrationv1.Ignore
			r.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "team", Expression: "object.metadata.labels.team == 'y'"}}
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Skip, Message: "matchConditions not met"}}},
		{"erring matchCondition under Fail errs", vpol, with(func(r *model.Rule) {
			r.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "team", Expression: "object.metadata.labels.team == 'y'"}}
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Error, Blocking: true, Message: "expression 'object.metadata.labels.team == 'y'' resulted in error: no such key: labels"}}},
		{"full exception skips", vpol, with(func(r *model.Rule) {
			r.Exceptions = []model.Exception{{Namespace: "a", Name: "x-only", MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "x", Expression: "object.metadata.name == 'x'"}}}}
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Skip, Message: "exempted by PolicyException a/x-only"}}},
		{"exception with reportResult pass passes", vpol, with(func(r *model.Rule) {
			r.Exceptions = []model.Exception{{Namespace: "a", Name: "all", ReportResult: "pass"}}
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, []modelOutcome{{Result: Pass, Message: "exempted by PolicyException a/all"}}},
		{"exception that does not apply", vpol, with(func(r *model.Rule) {
			r.Exceptions = []model.Exception{{Namespace: "a", Name: "y-only", MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "y", Expression: "object.metadata.name == 'y'"}}}}
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, fail},
		{"nvpol in its namespace", nvpol, with(func(r *model.Rule) { r.Namespace = "a" }), Request{Admission: labelledConfigMap("a", "x", nil)}, fail},
		{"nvpol never applies in another namespace", nvpol, with(func(r *model.Rule) { r.Namespace = "a" }), Request{Admission: labelledConfigMap("b", "x", nil)}, nil},
		{"other operations do not match", vpol, plain, Request{Admission: func() *admissionv1.AdmissionRequest {
			r := labelledConfigMap("a", "x", nil)
			r.Operation = admissionv1.Delete
			return r
		}()}, nil},
		{"excluded resource", vpol, with(func(r *model.Rule) { r.MatchConstraints.ExcludeResourceRules = r.MatchConstraints.ResourceRules }),
			Request{Admission: labelledConfigMap("a", "x", nil)}, nil},
		{"resource names", vpol, with(func(r *model.Rule) { r.MatchConstraints.ResourceRules[0].ResourceNames = []string{"y"} }),
			Request{Admission: labelledConfigMap("a", "x", nil)}, nil},
		{"resource names match a generateName that starts with them", vpol, with(func(r *model.Rule) { r.MatchConstraints.ResourceRules[0].ResourceNames = []string{"gen"} }),
			Request{Admission: labelledConfigMap("a", "", nil)}, fail},
		{"namespace selector on the namespace's labels", vpol, with(func(r *model.Rule) {
			r.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		}), Request{Admission: labelledConfigMap("a", "x", nil), Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"env": "prod"}}}}, fail},
		{"namespace selector that does not select", vpol, with(func(r *model.Rule) {
			r.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		}), Request{Admission: labelledConfigMap("a", "x", nil), Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"env": "dev"}}}}, nil},
		{"an unknown namespace has its name label", vpol, with(func(r *model.Rule) {
			r.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "a"}}
		}), Request{Admission: labelledConfigMap("a", "x", nil)}, fail},
		{"object selector", vpol, with(func(r *model.Rule) {
			r.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "yes"}}
			r.Validations[0].Expression = "'team' in object.metadata.labels"
		}), Request{Admission: labelledConfigMap("a", "x", map[string]any{"checked": "yes"})}, fail},
		{"a library the engine lacks: not evaluated", vpol, with(func(r *model.Rule) { r.Libraries = []string{"http"} }),
			Request{Admission: labelledConfigMap("a", "x", nil)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := evaluateModel(t, c.src, c.rules, c.req)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetModelRulesReplacesAndRemoves(t *testing.T) {
	src := model.Source{Kind: model.KindValidatingPolicy, Name: "p"}
	e := New()
	changes := 0
	e.OnChange(func() { changes++ })
	rules := []model.Rule{configMapRule()}
	e.SetModelRules(src, rules)
	e.SetModelRules(src, []model.Rule{configMapRule()})
	if changes != 1 {
		t.Errorf("setting equal rules again published %d snapshots, want 1", changes)
	}
	if got := e.ModelRules(); len(got) != 1 || got[0].Source != src {
		t.Errorf("ModelRules() = %+v", got)
	}
	e.SetModelRules(src, nil)
	if got := e.ModelRules(); len(got) != 0 || changes != 2 {
		t.Errorf("after removal ModelRules() = %+v, %d changes", got, changes)
	}
}

func TestPoliciesPredicateSelectsModelPolicies(t *testing.T) {
	e := New()
	timeout := int32(5)
	r := configMapRule()
	r.FailurePolicy, r.TimeoutSeconds = admissionregistrationv1.Ignore, &timeout
	e.SetModelRules(model.Source{Kind: model.KindValidatingPolicy, Name: "ignore-5s"}, []model.Rule{r})
	e.SetModelRules(model.Source{Kind: model.KindValidatingPolicy, Name: "fail-default"}, []model.Rule{configMapRule()})
	var seen []string
	outcomes, err := e.Evaluate(context.Background(), Request{
		Admission: labelledConfigMap("a", "x", nil),
		Policies: func(g PolicyGroup) bool {
			seen = append(seen, g.Policy)
			return g.FailurePolicy == admissionregistrationv1.Ignore && g.TimeoutSeconds != nil && *g.TimeoutSeconds == 5
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != 1 || outcomes[0].Policy != "ignore-5s" {
		t.Errorf("outcomes = %+v, want only ignore-5s's", outcomes)
	}
	if got := strings.Join(seen, ","); got != "ValidatingPolicy/fail-default,ValidatingPolicy/ignore-5s" {
		t.Errorf("predicate saw %s", got)
	}
}

// BenchmarkEvaluateModelRules: one ConfigMap request against 50
// ValidatingPolicies, half of them calling a Kyverno library (hash) and
// one partial exception.
func BenchmarkEvaluateModelRules(b *testing.B) {
	e := New()
	for i := range 50 {
		r := configMapRule()
		if i%2 == 0 {
			r.Validations = append(r.Validations, admissionregistrationv1.Validation{Expression: "sha256(object.metadata.name) != ''"})
			r.Libraries = []string{"hash"}
		}
		e.SetModelRules(model.Source{Kind: model.KindValidatingPolicy, Name: fmt.Sprintf("p%02d", i)}, []model.Rule{r})
	}
	req := Request{Admission: labelledConfigMap("a", "x", map[string]any{"team": "x"})}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evaluate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
