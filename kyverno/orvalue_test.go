// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"fmt"
	"testing"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apiserver/pkg/cel/environment"
)

// kyvernoCompatEnv is the reference: the API server's environment plus a
// macro with the meaning Kyverno v1.19.1's OrValueCompatEnvOptions gives
// x.orValue(y) (an optional's value or y; any other x as is; strict).
func kyvernoCompatEnv(t *testing.T) *cel.Env {
	t.Helper()
	base := plainEnv(t)
	env, err := base.Extend(
		cel.Macros(cel.ReceiverMacro("orValue", 1, func(eh cel.MacroExprFactory, target celast.Expr, args []celast.Expr) (celast.Expr, *cel.Error) {
			return eh.NewCall("reference_or_value", target, args[0]), nil
		})),
		cel.Function("reference_or_value", cel.Overload("reference_or_value_dyn_dyn", []*cel.Type{cel.DynType, cel.DynType}, cel.DynType,
			cel.BinaryBinding(func(x, y ref.Val) ref.Val {
				if o, ok := x.(*types.Optional); ok {
					if o.HasValue() {
						return o.GetValue()
					}
					return y
				}
				return x
			}))),
	)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func plainEnv(t *testing.T) *cel.Env {
	t.Helper()
	env, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err = env.Extend(cel.Variable("object", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func evaluate(t *testing.T, env *cel.Env, expression string, object map[string]any) string {
	t.Helper()
	ast, iss := env.Compile(expression)
	if iss.Err() != nil {
		return "compile error"
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(map[string]any{"object": object})
	if err != nil {
		return "error"
	}
	return fmt.Sprint(out.Value())
}

func TestRewriteOrValueGivesKyvernosVerdicts(t *testing.T) {
	reference, plain := kyvernoCompatEnv(t), plainEnv(t)
	expressions := []string{
		"object.spec.containers.all(c, c.volumeMounts.orValue([]).size() < 2)",
		"object.spec.containers.all(c, c.?volumeMounts.orValue([]).size() < 2)",
		"object.metadata.labels[?'team'].orValue('none') == 'a'",
		"object.metadata.?labels.orValue({}).size()",
		"object.spec.replicas.orValue(1) + 1",
		"object.?spec.?replicas.orValue(object.spec.replicas.orValue(7))",
		"object.spec.replicas.orValue(1).orValue(2)",
		"(object.spec.replicas + 1).orValue(0)",
		"size(object.spec.containers).orValue(0) > 1",
		"object.missing.orValue(1)",
		"object.spec.replicas.orValue(object.missing)",
		"'x'.orValue('y') == 'x' // object.a.orValue(1) in a comment",
		"object.metadata.name.orValue(\"a.orValue(b)\") == \"a.orValue(b)\"",
		"optional.none().orValue(3) + optional.of(4).orValue(5)",
		"[1, 2].orValue([]).size() == 2 && {'a': 1}.orValue({}).size() == 1",
		"object.spec.containers.map(c, c.name.orValue('')).size()",
		"object.spec.replicas > 3 ? object.spec.replicas.orValue(0) : -object.spec.replicas.orValue(0)",
	}
	objects := []map[string]any{
		{"metadata": map[string]any{"name": "n", "labels": map[string]any{"team": "a"}}, "spec": map[string]any{"replicas": int64(2), "containers": []any{map[string]any{"name": "c", "volumeMounts": []any{"a", "b", "c"}}}}},
		{"metadata": map[string]any{"name": "a.orValue(b)"}, "spec": map[string]any{"replicas": int64(5), "containers": []any{map[string]any{"name": "c"}}}},
		{"metadata": map[string]any{}, "spec": map[string]any{}},
	}
	plainErrors := 0
	for _, expression := range expressions {
		for _, object := range objects {
			if r := evaluate(t, plain, expression, object); r == "error" || r == "compile error" {
				plainErrors++
			}
		}
		rewritten, changed, err := RewriteOrValue(expression)
		if err != nil || !changed {
			t.Errorf("%s: changed %v, err %v", expression, changed, err)
			continue
		}
		for i, object := range objects {
			want := evaluate(t, reference, expression, object)
			if want == "compile error" {
				t.Errorf("%s: does not compile in the reference environment", expression)
			}
			got := evaluate(t, plain, rewritten, object)
			if want != got {
				t.Errorf("%s (object %d):\n  Kyverno: %s\n  rewritten: %s\n  %s", expression, i, want, got, rewritten)
			}
		}
	}
	// The difference the rewrite exists for: unrewritten, the API server
	// errors on most of these.
	if plainErrors < len(expressions) {
		t.Errorf("only %d unrewritten evaluations failed: the cases do not exercise the difference", plainErrors)
	}
}

func TestRewriteOrValueLeavesOtherExpressions(t *testing.T) {
	for _, e := range []string{"object.a.b == 1", "'x.orValue(y)' == object.a", "object.a // .orValue(1)"} {
		got, changed, err := RewriteOrValue(e)
		if err != nil || got != e {
			t.Errorf("%s: got %q, changed %v, err %v", e, got, changed, err)
		}
	}
	if _, _, err := RewriteOrValue("object.a.orValue((1)"); err == nil {
		t.Error("unbalanced: want an error")
	}
}
