// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// chainCases are expressions that exercise the chain split: operators in
// strings, raw and triple-quoted strings, bytes, comments, quoted
// identifiers, parentheses, conditionals, optional selection, and type
// errors inside and across operands.
var chainCases = []string{
	`object.metadata.name != 'a && b' && has(object.data)`,
	`object.metadata.name != "x || y" || true`,
	`r'\' == '\\' && true`,
	`r"a\" || true" == "x" && false`,
	`'''a ' && b''' != '' && true`,
	`"""x "" || y""" == 'x' || false`,
	`b'&&' != b'' && true`,
	`rb'\' != b'' && true`,
	"true && // a comment && not code\n false",
	"true && false // ends with a comment",
	`(has(object.a) && has(object.b)) || (object.metadata.name == 'x' && true)`,
	`((true)) && ((false || true))`,
	`!(true && false) || false`,
	`true ? object.a : false && true`,
	`true && true ? 1 : 2`,
	`object.?metadata.orValue({}) != {} && true`,
	`[1, 2].all(x, x > 0 && x < 3) && true`,
	`{'a': 1 == 1 && true}.a && true`,
	`object.metadata.name && true`,
	`object.metadata.name == 'x' && object.metadata.name`,
	`1 && true`,
	`true && size(object.data)`,
	`true && 'a' + 1 == 'a1'`,
	`a && true`,
	`object.metadata.name == 'x' && (1 || true)`,
	"object.`a-b` == 'x' && true",
	`(true && false`,
	`true && false)`,
	`true && && false`,
	"'a\nb' == 'x' && true",
	`true && params.x == 1`,
	`true && authorizer.group('').resource('pods').check('get').allowed()`,
	`variables.v && object.metadata.name == 'x'`,
	`variables.missing && true`,
	`true &&`,
	`(true) (false) && true`,
}

// TestChainCheckNeverSucceedsWrongly: checking a chain in pieces never
// accepts an expression the whole-expression compile refuses, and it
// accepts the valid chains (so the fast path is taken), with pieces of one
// operand and of a few.
func TestChainCheckNeverSucceedsWrongly(t *testing.T) {
	defer func(threshold, piece int) { chainThreshold, chainPieceSize = threshold, piece }(chainThreshold, chainPieceSize)
	chainThreshold = 0
	v := NewestCompatibilityVersion
	compiler, err := plugincel.NewCompositedCompiler(BaseEnvSet(v))
	if err != nil {
		t.Fatal(err)
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
	compiler.CompileAndStoreVariable(accessor{name: "v", expression: "true", returns: []*cel.Type{cel.AnyType}}, opts, environment.NewExpressions)
	fast := 0
	for _, piece := range []int{1, 40} {
		chainPieceSize = piece
		for _, expression := range chainCases {
			whole := compiler.CompileCELExpression(accessor{expression: expression, returns: []*cel.Type{cel.BoolType}}, opts, environment.NewExpressions)
			chain := compilesAsChain(compiler, expression, opts, environment.NewExpressions, v)
			if chain && whole.Error != nil {
				t.Errorf("piece size %d: %q accepted in pieces, but the API server refuses it: %v", piece, expression, whole.Error)
			}
			if chain {
				fast++
			}
		}
	}
	if fast < 20 {
		t.Errorf("only %d cases took the chain path", fast)
	}
}

// TestChainCheckMatchesWholeCompile: CheckExpressions reports the same
// problems with and without the chain path.
func TestChainCheckMatchesWholeCompile(t *testing.T) {
	defer func(threshold, piece int) { chainThreshold, chainPieceSize = threshold, piece }(chainThreshold, chainPieceSize)
	for _, expression := range chainCases {
		spec := &admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			Variables: []admissionregistrationv1.Variable{{Name: "v", Expression: "true && " + expression}, {Name: "w", Expression: "variables.v"}},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "m", Expression: expression},
			},
			Validations: []admissionregistrationv1.Validation{
				{Expression: expression}, {Expression: "variables.w == true"},
			},
		}
		chainThreshold = 1 << 30
		wantUser, wantOurs := CheckExpressions(spec, NewestCompatibilityVersion, nil)
		chainThreshold, chainPieceSize = 0, 1
		gotUser, gotOurs := CheckExpressions(spec, NewestCompatibilityVersion, nil)
		if ProblemsMessage(wantUser) != ProblemsMessage(gotUser) || ProblemsMessage(wantOurs) != ProblemsMessage(gotOurs) {
			t.Errorf("%q:\n whole: %s\npieces: %s", expression, ProblemsMessage(wantUser), ProblemsMessage(gotUser))
		}
	}
}

func TestChainOperands(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{in: "a && b", want: []string{"a", "b"}},
		{in: "a && (b || c) || d", want: []string{"a", "b", "c", "d"}},
		{in: "('a&&b' && f(x && y)) && [1 && 2]", want: []string{"'a&&b'", "f(x && y)", "[1 && 2]"}},
		{in: "a && b // c && d", want: []string{"a", "b // c && d"}},
		{in: "r'\\' && x", want: []string{"r'\\'", "x"}},
		{in: "'\\' && x' && y", want: []string{"'\\' && x'", "y"}},
	}
	for _, tt := range tests {
		got, ok := chainOperands(tt.in)
		if !ok || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("chainOperands(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	for _, bad := range []string{"a ? b : c && d", "a.?b && c", "a && ", "(a && b", "'a && b", "a && // only a comment"} {
		if got, ok := chainOperands(bad); ok {
			t.Errorf("chainOperands(%q) = %q, want no split", bad, got)
		}
	}
}
