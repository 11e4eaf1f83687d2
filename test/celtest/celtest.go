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
