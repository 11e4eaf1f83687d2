// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/kyvap/kyvap/kyverno"
)

// TestWildcardSelectorCELAgreesWithMatcher compares the CEL that the
// translator writes for a selector with Kyverno wildcards in matchLabels
// (kyverno.ParseSelector) with selectorMatches, Kyverno's substitution
// (pkg/engine/wildcards ReplaceInSelector), over label sets around each
// selector: every selector the translator takes gives the same verdict.
func TestWildcardSelectorCELAgreesWithMatcher(t *testing.T) {
	selectors := []map[string]string{
		{"protected": "*"},
		{"protected": "*-test"},
		{"protected": "test-*"},
		{"ap?": "nginx"},
		{"*": "web"},
		{"team": "a?c", "env": "prod"},
		{"app": "*-"}, // unmatched: "0-", an invalid label value
		{"kubernetes.io/*": "*", "tier": "front*"},
	}
	labelSets := []map[string]string{
		nil, {}, {"protected": ""}, {"protected": "x"}, {"protected": "a-test"}, {"protected": "-test"}, {"protected": "test-"},
		{"protected": "test-a", "other": "1"}, {"app": "nginx"}, {"apq": "nginx"}, {"ap": "nginx"}, {"x": "web"}, {"x": "web2"},
		{"team": "abc", "env": "prod"}, {"team": "abc", "env": "dev"}, {"team": "ac", "env": "prod"}, {"app": "0-"}, {"app": "x-"},
		{"kubernetes.io/name": "a", "tier": "frontend"}, {"kubernetes.io/name": "a", "tier": "back"}, {"tier": "front"},
		// Invalid keys and values: no valid requirement, no match.
		{"ap!": "nginx"}, {"ap!": "nginx", "apa": "nginx"}, {"a/b/c": "web"}, {"-x": "web"}, {"Example.com/x": "web"}, {"example.com/x": "web"},
		{"protected": "test-" + strings.Repeat("a", 58)}, {"protected": "test-" + strings.Repeat("a", 59)}, {strings.Repeat("k", 64): "web"},
	}
	env, err := environment.MustBaseEnvSet(version.MajorMinor(1, 34)).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err = env.Extend(cel.Variable("labels", cel.MapType(cel.StringType, cel.StringType)))
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, ml := range selectors {
		sel := &metav1.LabelSelector{MatchLabels: ml}
		parsed, err := kyverno.ParseSelector(sel)
		if err != nil {
			t.Fatalf("%v: %v", ml, err)
		}
		if !parsed.HasWildcards() {
			t.Errorf("%v: no wildcards seen", ml)
		}
		ast, iss := env.Compile(parsed.CEL("labels"))
		if iss.Err() != nil {
			t.Fatalf("%v: %v", ml, iss.Err())
		}
		program, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		for _, ls := range labelSets {
			want, _ := selectorMatches(sel, ls)
			in := map[string]string{}
			for k, v := range ls {
				in[k] = v
			}
			out, _, err := program.Eval(map[string]any{"labels": in})
			if err != nil {
				t.Fatalf("%v on %v: %v", ml, ls, err)
			}
			if got := out.Value().(bool); got != want {
				t.Errorf("selector %v on labels %v: CEL %v, Kyverno's substitution %v", ml, ls, got, want)
			}
			compared++
		}
	}
	t.Logf("%d selectors, %d label sets compared", len(selectors), compared)
	// A plain key that a wildcard key matches: Kyverno's substitution
	// then depends on Go's map order.
	if _, err := kyverno.ParseSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "x", "a*": "y"}}); err == nil {
		t.Error("a plain key matched by a wildcard key: parsed; want a refusal")
	}
}
