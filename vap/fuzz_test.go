// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"testing"

	"github.com/google/cel-go/cel"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// FuzzChainCheck: checking an expression as a && / || chain in pieces
// (celsplit.go) never accepts what compiling the whole expression, as the
// API server does, refuses.
func FuzzChainCheck(f *testing.F) {
	for _, c := range chainCases {
		f.Add(c)
	}
	defer func(threshold, piece int) { chainThreshold, chainPieceSize = threshold, piece }(chainThreshold, chainPieceSize)
	chainThreshold, chainPieceSize = 0, 1
	v := NewestCompatibilityVersion
	compiler, err := compilerFor(v, false)
	if err != nil {
		f.Fatal(err)
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
	f.Fuzz(func(t *testing.T, expression string) {
		if len(expression) > 4096 {
			return
		}
		if !compilesAsChain(compiler, expression, opts, environment.NewExpressions, v) {
			return
		}
		if whole := compiler.CompileCELExpression(accessor{expression: expression, returns: []*cel.Type{cel.BoolType}}, opts, environment.NewExpressions); whole.Error != nil {
			t.Fatalf("%q accepted in pieces, but the API server refuses it: %v", expression, whole.Error)
		}
	})
}
