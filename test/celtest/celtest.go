// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package celtest compiles CEL for the differential tests (test/classic,
// test/podsecurity) in the API server's base environment, where the
// compiled forms must hold.
package celtest

import (
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/kyvap/kyvap/vap"
)

// Env is the API server's base CEL environment at kyvap's newest
// compatibility version, with the variables, each of type dyn.
func Env(t testing.TB, variables ...string) *cel.Env {
	t.Helper()
	options := make([]cel.EnvOption, len(variables))
	for i, name := range variables {
		options[i] = cel.Variable(name, cel.DynType)
	}
	set, err := vap.BaseEnvSet(vap.NewestCompatibilityVersion).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        options,
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Program compiles the expression in env; one that does not compile
// fails the test.
func Program(t testing.TB, env *cel.Env, expression string) cel.Program {
	t.Helper()
	ast, issues := env.Compile(expression)
	if issues != nil && issues.Err() != nil {
		t.Fatalf("%s does not compile: %v", expression, issues.Err())
	}
	program, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	return program
}

// CostPrograms compiles the expressions in env with the API server's cost
// tracking (its estimator's runtime costs): what Evaluate counts.
func CostPrograms(t testing.TB, env *cel.Env, expressions []string) []cel.Program {
	t.Helper()
	out := make([]cel.Program, len(expressions))
	for i, e := range expressions {
		ast, issues := env.Compile(e)
		if issues != nil && issues.Err() != nil {
			t.Fatalf("%s does not compile: %v", e, issues.Err())
		}
		p, err := env.Program(ast, cel.CostTracking(&library.CostEstimator{}), cel.EvalOptions(cel.OptTrackCost))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = p
	}
	return out
}

// Evaluate evaluates a rule as a VAP's evaluation does: its conditions
// (match conditions, preconditions) until one is false, then, when every
// one holds, all its validations. It returns whether the request passes
// and the runtime cost CEL counted. The programs come from CostPrograms;
// an evaluation error fails the test.
func Evaluate(t testing.TB, conditions, validations []cel.Program, vars map[string]any) (bool, uint64) {
	t.Helper()
	var cost uint64
	for _, p := range conditions {
		out, det, err := p.Eval(vars)
		if err != nil {
			t.Fatal(err)
		}
		cost += *det.ActualCost()
		if out.Value() != true {
			return true, cost
		}
	}
	pass := true
	for _, p := range validations {
		out, det, err := p.Eval(vars)
		if err != nil {
			t.Fatal(err)
		}
		cost += *det.ActualCost()
		pass = pass && out.Value() == true
	}
	return pass, cost
}
