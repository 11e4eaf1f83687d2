// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
)

// TestNotEnforced checks that the plan says which fallback rules kyvap's
// engine cannot evaluate, and only those.
func TestNotEnforced(t *testing.T) {
	celRule := func(name string) kyvernov1.Rule {
		return kyvernov1.Rule{
			Name:           name,
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}}}}},
			Validation:     &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: "true"}}}},
		}
	}
	withContext := celRule("ctx")
	withContext.Context = []apiextensionsv1.JSON{{Raw: []byte(`{"name":"v","variable":{"value":1}}`)}}
	withPreconditions := celRule("pre")
	withPreconditions.RawAnyAllConditions = &apiextensionsv1.JSON{Raw: []byte(`{"all":[{"key":"a","operator":"Equals","value":"a"}]}`)}
	emptyPreconditions := celRule("empty-pre")
	emptyPreconditions.RawAnyAllConditions = &apiextensionsv1.JSON{Raw: []byte(`{}`)}
	conditional := kyvernov2.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "conditional"},
		Spec: kyvernov2.PolicyExceptionSpec{
			Exceptions: []kyvernov2.Exception{{PolicyName: "p", RuleNames: []string{"plain"}}},
			Conditions: &kyvernov2.AnyAllConditions{AnyConditions: []apiextensionsv1.JSON{{Raw: []byte(`{"key":"{{ to_upper(request.name) }}","operator":"Equals","value":"a"}`)}}},
		},
	}
	compiled := kyvernov2.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "compiled"},
		Spec: kyvernov2.PolicyExceptionSpec{
			Exceptions: []kyvernov2.Exception{{PolicyName: "p", RuleNames: []string{"plain"}}},
			Conditions: &kyvernov2.AnyAllConditions{AnyConditions: []apiextensionsv1.JSON{{Raw: []byte(`{"key":"{{ request.object.metadata.name }}","operator":"Equals","value":"a"}`)}}},
		},
	}
	for _, tc := range []struct {
		name       string
		rule       kyvernov1.Rule
		exceptions []kyvernov2.PolicyException
		want       string
	}{
		{"context entries", withContext, nil, `rule "ctx" has context entries, which only Kyverno evaluates`},
		{"JMESPath preconditions", withPreconditions, nil, `rule "pre" has JMESPath preconditions, which only Kyverno evaluates`},
		{"empty preconditions", emptyPreconditions, nil, ""},
		{"exception with conditions", celRule("plain"), []kyvernov2.PolicyException{conditional}, `PolicyException ns/conditional: its conditions have no CEL form: the function to_upper() in the JMESPath expression "to_upper(request.name)" at any[0].key, which only Kyverno evaluates`},
		{"exception with conditions compiled", celRule("plain"), []kyvernov2.PolicyException{compiled}, ""},
		{"plain rule", celRule("plain"), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{tc.rule}}}
			// Generation off: every CEL rule goes to the fallback engine.
			plan, err := Translate(clusterpolicy.Input{Policy: policy, Exceptions: tc.exceptions}, kyverno.NewStaticResolver(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			fr := plan.Rules[0].Fallback
			if fr == nil {
				t.Fatalf("no fallback rule: %+v", plan.Rules[0])
			}
			if fr.NotEnforced != tc.want {
				t.Errorf("NotEnforced = %q, want %q", fr.NotEnforced, tc.want)
			}
		})
	}
}
