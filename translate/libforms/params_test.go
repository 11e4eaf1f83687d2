// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package libforms

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

// getRule is a rule with variables (name, expression pairs, in order),
// validations and match conditions.
func getRule(variables []string, validations []string, conditions ...string) *model.Rule {
	r := &model.Rule{}
	for i := 0; i+1 < len(variables); i += 2 {
		r.Variables = append(r.Variables, admissionregistrationv1.Variable{Name: variables[i], Expression: variables[i+1]})
	}
	for _, v := range validations {
		r.Validations = append(r.Validations, admissionregistrationv1.Validation{Expression: v})
	}
	for i, c := range conditions {
		r.MatchConditions = append(r.MatchConditions, admissionregistrationv1.MatchCondition{Name: "c" + string(rune('0'+i)), Expression: c})
	}
	r.Libraries = cellib.Used(r.Expressions()...)
	return r
}

var paramOptions = Options{NamespacedOnly: true, ObjectInNamespace: true, Kinds: map[string]ServedKind{
	"v1/configmaps": {Kind: "ConfigMap", Namespaced: true},
	"v1/namespaces": {Kind: "Namespace"},
}}

func TestRuleWritesResourceGetAsParam(t *testing.T) {
	allow := admissionregistrationv1.AllowAction
	for _, tc := range []struct {
		name     string
		rule     *model.Rule
		want     []string // variables then validations
		wantKind admissionregistrationv1.ParamKind
		wantRef  admissionregistrationv1.ParamRef
		// policyNamespace: a NamespacedValidatingPolicy's
		policyNamespace string
	}{
		{"a variable, in the request's namespace",
			getRule([]string{"cm", `resource.Get("v1", "configmaps", object.metadata.namespace, "policy-cm")`},
				[]string{`type(variables.cm) == type(null) || object.metadata.name != variables.cm.data.forbidden`}),
			[]string{`params`, `type(variables.cm) == type(null) || object.metadata.name != variables.cm.data.forbidden`},
			admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			admissionregistrationv1.ParamRef{Name: "policy-cm", ParameterNotFoundAction: &allow}, ""},
		{"calls in place, a constant namespace",
			getRule(nil, []string{`resource.get("v1", "configmaps", "kube-system", "cfg") == null || resource.Get("v1", "configmaps", "kube-system", "cfg").?data.?max.orValue("1") != "0"`}),
			[]string{`params == null || params.?data.?max.orValue("1") != "0"`},
			admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			admissionregistrationv1.ParamRef{Name: "cfg", Namespace: "kube-system", ParameterNotFoundAction: &allow}, ""},
		{"a cluster-scoped object, through a second variable",
			getRule([]string{"ns", `resource.Get("v1", "namespaces", "", "limits")`, "max", `variables.ns == null ? "" : variables.ns.metadata.?labels.?max.orValue("")`},
				[]string{`variables.max != "zero"`}),
			[]string{`params`, `(variables.ns == null) ? "" : variables.ns.metadata.?labels.?max.orValue("")`, `variables.max != "zero"`},
			admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "Namespace"},
			admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &allow}, ""},
		{"a NamespacedValidatingPolicy's read in its namespace",
			getRule(nil, []string{`resource.Get("v1", "configmaps", "cfg") == null`, `true`}),
			[]string{`params == null`, `true`},
			admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			admissionregistrationv1.ParamRef{Name: "cfg", Namespace: "team", ParameterNotFoundAction: &allow}, "team"},
	} {
		opts := paramOptions
		opts.PolicyNamespace = tc.policyNamespace
		got := checkWritten(t, tc.name, tc.rule, opts, tc.want)
		if got == nil {
			continue
		}
		if got.ParamKind == nil || got.ParamRef == nil {
			t.Errorf("%s: no parameter: %+v %+v", tc.name, got.ParamKind, got.ParamRef)
			continue
		}
		if diff := cmp.Diff(tc.wantKind, *got.ParamKind); diff != "" {
			t.Errorf("%s: paramKind (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.wantRef, *got.ParamRef); diff != "" {
			t.Errorf("%s: paramRef (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestRuleRefusesOtherGets(t *testing.T) {
	get := func(ns, name string) string {
		return `resource.Get("v1", "configmaps", ` + ns + `, ` + name + `)`
	}
	for name, tc := range map[string]struct {
		rule *model.Rule
		want string
	}{
		"two objects":                                 {getRule(nil, []string{get(`"a"`, `"x"`) + ` == null || ` + get(`"b"`, `"x"`) + ` == null`}), "a VAP has one parameter"},
		"a name by expression":                        {getRule(nil, []string{get(`"a"`, `object.metadata.name`) + ` == null`}), "does not name one object by constants"},
		"a namespace by expression":                   {getRule(nil, []string{get(`object.data.ns`, `"x"`) + ` == null`}), "neither a constant nor the request's"},
		"a namespaced kind without a namespace":       {getRule(nil, []string{get(`""`, `"x"`) + ` == null`}), "with no namespace"},
		"a cluster-scoped kind in a namespace":        {getRule(nil, []string{`resource.Get("v1", "namespaces", "a", "x") == null`}), "in a namespace"},
		"a kind not served":                           {getRule(nil, []string{`resource.Get("v1", "widgets", "a", "x") == null`}), "does not serve"},
		"false without the object":                    {getRule(nil, []string{get(`"a"`, `"x"`) + ` != null`}), "is not true for every request"},
		"an error without the object":                 {getRule(nil, []string{get(`"a"`, `"x"`) + `.data.y == "1"`}), "is not true for every request"},
		"a match condition reads it":                  {getRule(nil, []string{get(`"a"`, `"x"`) + ` == null || true`}, get(`"a"`, `"x"`)+` != null`), "matchConditions[c0] reads"},
		"read as a whole":                             {getRule([]string{"cm", get(`"a"`, `"x"`)}, []string{`variables.cm == null || variables.cm == {}`}), "read as a whole"},
		"its kind":                                    {getRule(nil, []string{get(`"a"`, `"x"`) + ` == null || ` + get(`"a"`, `"x"`) + `.kind == "ConfigMap"`}), "read as a whole or by a field"},
		"its managed fields":                          {getRule(nil, []string{get(`"a"`, `"x"`) + ` == null || size(` + get(`"a"`, `"x"`) + `.metadata.managedFields) > 0`}), "read as a whole or by a field"},
		"three arguments outside a namespaced policy": {getRule(nil, []string{`resource.Get("v1", "configmaps", "x") == null || true`}), "GroupVersionResource"},
		"a GroupVersionResource":                      {getRule(nil, []string{`resource.Get(resource.toGVR("v1", "configmaps"), "a", "x") == null || true`}), "GroupVersionResource"},
	} {
		got, err := Rule(tc.rule, paramOptions)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error with %q, got %v", name, tc.want, err)
		}
		if got != tc.rule {
			t.Errorf("%s: the rule is not returned as it is", name)
		}
	}
}

// TestHoldsWithoutParamIsSound evaluates the validations that
// holdsWithoutParam proves true with params null on random objects and
// requests: each must be true on every one, and the proof must refuse
// those that are not.
func TestHoldsWithoutParamIsSound(t *testing.T) {
	env, err := vap.DynEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		expression string
		proven     bool
	}{
		{`params == null || object.metadata.name != params.data.x`, true},
		{`type(params) == type(null) || object.spec.replicas < int(params.data.max)`, true},
		{`object.metadata.name == "a" || params == null`, true},
		{`params != null ? params.data.x == object.metadata.name : true`, true},
		{`params == null && object.metadata.name != ""`, false},
		{`object.metadata.name != "" || params == null`, true},
		{`params == null ? object.metadata.name != "" : true`, false},
		{`!has(object.spec) || params == null`, true},
		{`[1, 2].all(i, params == null || i > 5)`, true},
		{`object.metadata.labels.all(k, params == null)`, false}, // an error where object has no labels
	} {
		rule := &model.Rule{Validations: []admissionregistrationv1.Validation{{Expression: tc.expression}}}
		err := holdsWithoutParam(rule)
		if (err == nil) != tc.proven {
			t.Errorf("%s: proven %v, want %v", tc.expression, err == nil, tc.proven)
			continue
		}
		if !tc.proven {
			continue
		}
		checked, iss := env.Compile(tc.expression)
		if iss != nil && iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		prg, err := env.Program(checked)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 35))
		for i := 0; i < 500; i++ {
			object := map[string]any{}
			if rng.IntN(4) > 0 {
				meta := map[string]any{"name": []string{"", "a", "b"}[rng.IntN(3)]}
				if rng.IntN(2) == 0 {
					meta["labels"] = map[string]any{"x": "1"}
				}
				object["metadata"] = meta
			}
			if rng.IntN(2) == 0 {
				object["spec"] = map[string]any{"replicas": int64(rng.IntN(5))}
			}
			val, _, err := prg.Eval(map[string]any{"object": object, "params": nil, "request": map[string]any{}})
			if err != nil || val != types.True {
				t.Errorf("%s on %v: %v, %v; want true", tc.expression, object, val, err)
				break
			}
		}
	}
}
