// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/translate/specialize"
	"github.com/kyvap/kyvap/translate/specialize/specializetest"
	"github.com/kyvap/kyvap/vap"
)

// TestTypedFormsAgreeWithGeneralForms is the differential test of the
// VAP specialization (translate.Options.TypedObjects): every ClusterPolicy
// and Policy of Kyverno's tests (its module's test/) and of the cost
// checks is translated both ways; each VAP whose expressions the
// specialization changed is evaluated both ways on random objects of the
// built-in types it matches, converted as the API server converts them
// and completed where the API server's validation requires it
// (specialize.AdmittedFacts), for each operation it matches. The two forms must give the same value,
// or both fail to evaluate.
func TestTypedFormsAgreeWithGeneralForms(t *testing.T) {
	policies := corpusPolicies(t, filepath.Join(kyvernoModule(t), "test"))
	for _, check := range costChecks {
		policies = append(policies, costPolicy(t, check.classic))
	}
	env := vapEnv(t)
	resolver := kyverno.NewStaticResolver()
	specialized, evaluations, changedExpressions := 0, 0, 0
	for _, p := range policies {
		in := clusterpolicy.InputFor(p, nil)
		general, err := translate.Translate(in, resolver, translate.Options{GenerateValidatingAdmissionPolicy: true})
		if err != nil {
			continue
		}
		typed, err := translate.Translate(in, resolver, translate.Options{GenerateValidatingAdmissionPolicy: true, TypedObjects: true})
		if err != nil {
			t.Fatalf("%s: the typed translation fails where the general one does not: %v", p.Name, err)
		}
		if len(general.ValidatingAdmissionPolicies) != len(typed.ValidatingAdmissionPolicies) {
			t.Fatalf("%s: %d VAPs in general form, %d typed", p.Name, len(general.ValidatingAdmissionPolicies), len(typed.ValidatingAdmissionPolicies))
		}
		for i := range general.ValidatingAdmissionPolicies {
			g, s := general.ValidatingAdmissionPolicies[i].Spec, typed.ValidatingAdmissionPolicies[i].Spec
			s.MatchConditions = droppedConditionsAsTrue(g.MatchConditions, s.MatchConditions)
			ge, se := vap.SpecExpressions(&g), vap.SpecExpressions(&s)
			changed := 0
			for j := range ge {
				if ge[j] != se[j] {
					changed++
				}
			}
			if changed == 0 {
				continue
			}
			specialized++
			changedExpressions += changed
			evaluations += compareForms(t, env, p.Name+"/"+general.ValidatingAdmissionPolicies[i].Name, &g, &s)
		}
	}
	t.Logf("%d policies: %d VAPs specialized (%d expressions changed), %d evaluations of both forms agree", len(policies), specialized, changedExpressions, evaluations)
	if specialized < 50 || evaluations < 10000 {
		t.Errorf("too little compared: %d VAPs, %d evaluations", specialized, evaluations)
	}
}

// droppedConditionsAsTrue puts back, as "true", the match conditions of
// the general form that the typed form dropped because the objects decide
// them true: the two forms' expressions then pair one for one, and
// compareForms checks that each dropped condition is indeed true.
func droppedConditionsAsTrue(general, typed []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
	kept := map[string]admissionregistrationv1.MatchCondition{}
	for _, mc := range typed {
		kept[mc.Name] = mc
	}
	out := make([]admissionregistrationv1.MatchCondition, 0, len(general))
	for _, mc := range general {
		if k, ok := kept[mc.Name]; ok {
			out = append(out, k)
		} else {
			out = append(out, admissionregistrationv1.MatchCondition{Name: mc.Name, Expression: "true"})
		}
	}
	return out
}

// compareForms evaluates a VAP's general and specialized expressions on
// random objects of its types, and returns the number of evaluations.
func compareForms(t *testing.T, env *cel.Env, name string, general, typed *admissionregistrationv1.ValidatingAdmissionPolicySpec) int {
	t.Helper()
	ge, te := vap.SpecExpressions(general), vap.SpecExpressions(typed)
	gp, tp := make([]cel.Program, len(ge)), make([]cel.Program, len(te))
	for i := range ge {
		gp[i], tp[i] = program(t, env, ge[i]), program(t, env, te[i])
	}
	var ops []admissionregistrationv1.OperationType
	for _, r := range general.MatchConstraints.ResourceRules {
		ops = append(ops, r.Operations...)
	}
	n := 0
	for _, builtin := range specialize.ObjectTypes(general.MatchConstraints) {
		typ := builtin.Type
		objects := specializetest.RandomObjects(typ, int64(len(name)), 5, builtin.Facts...)
		for k, obj := range objects {
			for _, op := range ops {
				var object, oldObject any = obj, nil
				switch op {
				case admissionregistrationv1.Update:
					oldObject = objects[(k+1)%len(objects)]
				case admissionregistrationv1.Delete:
					object, oldObject = nil, obj
				}
				vars := map[string]any{
					"object": object, "oldObject": oldObject, "params": nil, "namespaceObject": nil,
					"request": map[string]any{"operation": string(op), "namespace": "default", "name": "x",
						"userInfo": map[string]any{"username": "alice", "groups": []any{"system:authenticated"}}},
				}
				gv, tv := evaluateAll(gp, vars, general), evaluateAll(tp, vars, typed)
				for i := range gv {
					n++
					if !sameResult(gv[i], tv[i]) {
						t.Errorf("%s: %s on a %v: expression %d: general form %v, specialized %v\ngeneral: %s\nspecialized: %s", name, op, typ, i, gv[i], tv[i], ge[i], te[i])
						return n
					}
				}
			}
		}
	}
	return n
}

// evaluateAll evaluates a spec's expressions in SpecExpressions' order
// (match conditions, variables, validations and their messages), each
// variable bound under `variables` once evaluated.
func evaluateAll(programs []cel.Program, vars map[string]any, spec *admissionregistrationv1.ValidatingAdmissionPolicySpec) []ref.Val {
	out := make([]ref.Val, len(programs))
	variables := map[string]any{}
	vars["variables"] = variables
	for i, p := range programs {
		if p == nil {
			continue
		}
		v, _, err := p.Eval(vars)
		if err != nil {
			v = types.NewErr("%v", err)
		}
		out[i] = v
		if j := i - len(spec.MatchConditions); j >= 0 && j < len(spec.Variables) && err == nil {
			variables[spec.Variables[j].Name] = v
		}
	}
	return out
}

func sameResult(a, b ref.Val) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if types.IsError(a) || types.IsError(b) {
		return types.IsError(a) && types.IsError(b)
	}
	return a.Equal(b) == types.True
}

func program(t *testing.T, env *cel.Env, expression string) cel.Program {
	t.Helper()
	if expression == "" {
		return nil
	}
	ast, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		t.Fatalf("%s: %v", expression, iss.Err())
	}
	p, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// vapEnv is the API server's environment for a VAP's expressions, every
// variable dyn.
func vapEnv(t *testing.T) *cel.Env {
	t.Helper()
	env, err := vap.BaseEnvSet(vap.NewestCompatibilityVersion).Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	var decls []cel.EnvOption
	for _, name := range []string{"object", "oldObject", "request", "params", "namespaceObject", "authorizer", "variables"} {
		decls = append(decls, cel.Variable(name, cel.DynType))
	}
	env, err = env.Extend(decls...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// corpusPolicies reads every ClusterPolicy and Policy under dir, sorted
// by file.
func corpusPolicies(t *testing.T, dir string) []*kyvernov1.ClusterPolicy {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (filepath.Ext(path) == ".yaml" || filepath.Ext(path) == ".yml") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []*kyvernov1.ClusterPolicy
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var head struct{ Kind string }
			if yaml.Unmarshal([]byte(doc), &head) != nil || (head.Kind != "ClusterPolicy" && head.Kind != "Policy") {
				continue
			}
			var p kyvernov1.ClusterPolicy
			if yaml.Unmarshal([]byte(doc), &p) != nil {
				continue
			}
			out = append(out, &p)
		}
	}
	return out
}
