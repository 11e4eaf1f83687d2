// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/translate"
)

func rule(name, kind, expression string) kyvernov1.Rule {
	return kyvernov1.Rule{
		Name: name,
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{
			Resources: kyvernov1.ResourceDescription{Kinds: []string{kind}},
		}}},
		Validation: &kyvernov1.Validation{Message: "rule " + name + " failed", CEL: &kyvernov1.CEL{
			Expressions: []admissionregistrationv1.Validation{{Expression: expression}},
		}},
	}
}

func request(kind, resource, subresource string, op admissionv1.Operation, obj map[string]any) *admissionv1.AdmissionRequest {
	raw, _ := json.Marshal(obj)
	return &admissionv1.AdmissionRequest{
		Operation: op, Namespace: "team", Name: "x",
		Kind:        metav1.GroupVersionKind{Version: "v1", Kind: kind},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: resource},
		SubResource: subresource,
		Object:      runtime.RawExtension{Raw: raw},
	}
}

func configMap(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "team"}}
}

func results(outcomes []Outcome) string {
	var parts []string
	for _, o := range outcomes {
		parts = append(parts, o.Rule+"="+string(o.Result))
	}
	return strings.Join(parts, ",")
}

func TestEvaluate(t *testing.T) {
	one := "One"
	withException := func() []kyvernov2.PolicyException {
		ex := kyvernov2.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "allow-x"}}
		ex.Spec.Exceptions = []kyvernov2.Exception{{PolicyName: "p", RuleNames: []string{"a*"}}}
		ex.Spec.Match.Any = kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}, Names: []string{"x"}}}}
		return []kyvernov2.PolicyException{ex}
	}
	precondition := rule("pre", "ConfigMap", "false")
	precondition.CELPreconditions = []admissionregistrationv1.MatchCondition{{Name: "only-y", Expression: "object.metadata.name == 'y'"}}
	withContext := rule("ctx", "ConfigMap", "true")
	withContext.Context = []apiextensionsv1.JSON{{Raw: []byte(`{"name":"v","variable":{"value":1}}`)}}
	params := rule("params", "ConfigMap", "object.metadata.name != params.data.forbidden")
	params.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	params.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Name: "settings", Namespace: "kyvap"}
	exec := rule("no-exec", "Pod/exec", "false")
	// Kyverno's CEL handler (validate_cel.go): a rule without expressions
	// whose precondition is false is skipped, not passed.
	emptyPrecondition := rule("empty", "ConfigMap", "true")
	emptyPrecondition.Validation.CEL.Expressions = nil
	emptyPrecondition.CELPreconditions = []admissionregistrationv1.MatchCondition{{Name: "only-y", Expression: "object.metadata.name == 'y'"}}
	// Several parameters: the first one (by name) whose preconditions are
	// false skips the rule, whatever the others would say.
	selected := rule("selected", "ConfigMap", "object.metadata.name != params.data.forbidden")
	selected.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	selected.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "limits"}}, Namespace: "kyvap"}
	selected.CELPreconditions = []admissionregistrationv1.MatchCondition{{Name: "active", Expression: "params.data.active == 'yes'"}}
	// paramRef.namespace with a cluster-scoped paramKind: Kyverno's
	// CollectParams refuses it.
	clusterParams := rule("cluster-params", "ConfigMap", "true")
	clusterParams.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
	clusterParams.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Name: "view", Namespace: "kyvap"}
	// Kyverno clears request.namespace for Namespace objects.
	namespaceName := rule("ns-name", "Namespace", "!has(request.namespace) || request.namespace == ''")
	namespaceObject := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}}

	tests := []struct {
		name  string
		rules []translate.FallbackRule
		req   *admissionv1.AdmissionRequest
		kind  *schema.GroupVersionKind
		want  string
	}{
		{"pass and fail", []translate.FallbackRule{{Policy: "p", Rule: rule("a", "ConfigMap", "true"), AdditionalRules: []kyvernov1.Rule{rule("b", "ConfigMap", "false")}}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, "a=pass,b=fail"},
		{"not matched is absent", []translate.FallbackRule{{Policy: "p", Rule: rule("a", "Secret", "false")}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, ""},
		{"exception skips", []translate.FallbackRule{{Policy: "p", Rule: rule("a", "ConfigMap", "false"), Exceptions: withException()}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, "a=skip"},
		{"exception for another name", []translate.FallbackRule{{Policy: "p", Rule: rule("a", "ConfigMap", "false"), Exceptions: withException()}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("y")), nil, "a=fail"},
		{"celPreconditions false skip", []translate.FallbackRule{{Policy: "p", Rule: precondition}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, "pre=skip"},
		{"celPreconditions true evaluate", []translate.FallbackRule{{Policy: "p", Rule: precondition}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("y")), nil, "pre=fail"},
		{"applyRules One stops at the first applied rule", []translate.FallbackRule{{Policy: "p", Rule: rule("a", "ConfigMap", "true"), Spec: kyvernov1.Spec{ApplyRules: &one}},
			{Policy: "p", Rule: rule("b", "ConfigMap", "false"), Spec: kyvernov1.Spec{ApplyRules: &one}}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, "a=pass"},
		{"rules needing Kyverno's JMESPath engine are not enforced, not guessed", []translate.FallbackRule{{Policy: "p", Rule: withContext, NotEnforced: "rule \"ctx\" has context entries, which only Kyverno evaluates"}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, ""},
		{"params", []translate.FallbackRule{{Policy: "p", Rule: params}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("bad")), nil, "params=fail"},
		{"no expressions and a false precondition skip", []translate.FallbackRule{{Policy: "p", Rule: emptyPrecondition}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, "empty=skip"},
		{"no expressions and a true precondition pass", []translate.FallbackRule{{Policy: "p", Rule: emptyPrecondition}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("y")), nil, "empty=pass"},
		{"the first parameter failing the preconditions skips the rule", []translate.FallbackRule{{Policy: "p", Rule: selected}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("bad")), nil, "selected=skip"},
		{"paramRef.namespace with a cluster-scoped paramKind is an error", []translate.FallbackRule{{Policy: "p", Rule: clusterParams}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, "cluster-params=error"},
		{"a Namespace object's request has no namespace", []translate.FallbackRule{{Policy: "p", Rule: namespaceName}},
			request("Namespace", "namespaces", "", admissionv1.Update, namespaceObject), nil, "ns-name=pass"},
		{"CEL newer than Kyverno's environment fails, as in Kyverno", []translate.FallbackRule{{Policy: "p", Rule: rule("includes", "ConfigMap", "['x'].includes(object.metadata.name)")}},
			request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), nil, "includes=fail"},
		{"subresource matched by its parent kind", []translate.FallbackRule{{Policy: "p", Rule: exec}},
			request("PodExecOptions", "pods", "exec", admissionv1.Connect, map[string]any{"apiVersion": "v1", "kind": "PodExecOptions"}),
			&schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "no-exec=fail"},
	}
	settings := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "kyvap"}, "data": map[string]any{"forbidden": "bad"}}}
	// a-limits is inactive and comes first; b-limits would deny "bad".
	inactive := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a-limits", "namespace": "kyvap", "labels": map[string]any{"role": "limits"}}, "data": map[string]any{"active": "no", "forbidden": "bad"}}}
	active := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "b-limits", "namespace": "kyvap", "labels": map[string]any{"role": "limits"}}, "data": map[string]any{"active": "yes", "forbidden": "bad"}}}
	view := unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "view"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New()
			e.SetFallbackRules("p", tt.rules)
			got, err := e.Evaluate(context.Background(), Request{Admission: tt.req, Params: StaticParams{settings, active, inactive, view}, ResourceKind: tt.kind})
			if err != nil {
				t.Fatal(err)
			}
			if results(got) != tt.want {
				t.Errorf("outcomes %s, want %s (%+v)", results(got), tt.want, got)
			}
		})
	}
}

func TestFailMessageIsTheRuleMessageWhenTheValidationHasNone(t *testing.T) {
	e := New()
	e.SetFallbackRules("p", []translate.FallbackRule{{Policy: "p", Rule: rule("a", "ConfigMap", "false")}})
	got, _ := e.Evaluate(context.Background(), Request{Admission: request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x"))})
	if len(got) != 1 || got[0].Message != "rule a failed" {
		t.Fatalf("got %+v, want Kyverno's fallback to validate.message", got)
	}
}

func TestSnapshotsAreReplacedNotMutated(t *testing.T) {
	e := New()
	changes := 0
	e.OnChange(func() { changes++ })
	rules := []translate.FallbackRule{{Policy: "p", Rule: rule("a", "ConfigMap", "false")}}
	e.SetFallbackRules("p", rules)
	before := e.current.Load()
	e.SetFallbackRules("p", rules) // unchanged: no recompilation, no new snapshot
	if e.current.Load() != before || changes != 1 {
		t.Fatalf("unchanged rules published a new snapshot (changes=%d)", changes)
	}
	e.SetFallbackRules("p", nil)
	if len(e.Rules()) != 0 || changes != 2 || len(before.policies) != 1 {
		t.Fatalf("removal: rules %d, changes %d, old snapshot policies %d", len(e.Rules()), changes, len(before.policies))
	}
}

// BenchmarkEvaluate measures in-handler evaluation of a request that n
// rules match (issue 5's goal: p99 ≤ 1 ms at 10 rules; see
// webhook's BenchmarkHandler for the percentiles).
func BenchmarkEvaluate(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			e := New()
			var frs []translate.FallbackRule
			for i := range n {
				frs = append(frs, translate.FallbackRule{Policy: "p", Rule: rule(fmt.Sprintf("r%d", i), "ConfigMap", "object.metadata.name.startsWith('x') && size(object.metadata.name) < 64")})
			}
			e.SetFallbackRules("p", frs)
			req := Request{Admission: request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x"))}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Evaluate(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
