// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/translate"
)

// cancellingParams hands out one parameter object per call and cancels the
// request's context on call number cancelAt: a deterministic stand-in for
// a deadline that passes while a rule runs.
type cancellingParams struct {
	calls    int
	cancelAt int
	cancel   context.CancelFunc
}

func (p *cancellingParams) Params(context.Context, *admissionregistrationv1.ParamKind, *admissionregistrationv1.ParamRef, string) ([]runtime.Object, error) {
	p.calls++
	if p.calls == p.cancelAt {
		p.cancel()
	}
	obj := paramObject("Setting", "team", "s", nil)
	return []runtime.Object{&obj}, nil
}

// longList is a CEL list literal of n integers.
func longList(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// comprehensionRules are n ConfigMap rules with parameters whose validation
// iterates 10,000 times (passing): long enough that cel-go checks for
// interruption many times (every 100 iterations).
func comprehensionRules(n int) []translate.FallbackRule {
	l := longList(100)
	var frs []translate.FallbackRule
	for i := range n {
		r := rule(fmt.Sprintf("r%d", i), "ConfigMap", l+".all(i, "+l+".all(j, i + j >= 0))")
		r.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Setting"}
		r.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Name: "s"}
		frs = append(frs, translate.FallbackRule{Policy: "p", Rule: r, Spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce}})
	}
	return frs
}

// TestEvaluateStopsWhenTheContextEnds: rules run one after another; when
// the request's context ends, evaluation stops, both between rules and
// inside a rule's CEL (a comprehension is interrupted), the rule that was
// cut gives no outcome, and the error says how far it got.
func TestEvaluateStopsWhenTheContextEnds(t *testing.T) {
	eng := New()
	eng.SetFallbackRules("p", comprehensionRules(10))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The third rule's parameter look-up cancels: its CEL runs with an
	// ended context.
	params := &cancellingParams{cancelAt: 3, cancel: cancel}
	out, err := eng.Evaluate(ctx, Request{Admission: request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x")), Params: params})
	var oot *OutOfTimeError
	if !errors.As(err, &oot) {
		t.Fatalf("err = %v, want an OutOfTimeError", err)
	}
	if oot.Evaluated != 2 || oot.Rules != 10 || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %+v, want 2 of 10 rules evaluated, caused by the cancellation", oot)
	}
	if got := results(out); got != "r0=pass,r1=pass" {
		t.Errorf("outcomes = %s, want only the two rules that ran to their end", got)
	}
	if params.calls != 3 {
		t.Errorf("%d parameter look-ups, want 3: no rule may start after the context ended", params.calls)
	}
}

// TestEvaluateWithAnEndedContext: a context that ended before evaluation
// evaluates nothing; a rule set that completes is no error.
func TestEvaluateWithAnEndedContext(t *testing.T) {
	eng := New()
	eng.SetFallbackRules("p", []translate.FallbackRule{{Policy: "p", Rule: rule("a", "ConfigMap", "true"), Spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce}}})
	req := Request{Admission: request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("x"))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := eng.Evaluate(ctx, req)
	var oot *OutOfTimeError
	if !errors.As(err, &oot) || oot.Evaluated != 0 || oot.Rules != 1 || len(out) != 0 {
		t.Errorf("got %v, %v; want no outcome and 0 of 1 rules evaluated", out, err)
	}
	if out, err := eng.Evaluate(context.Background(), req); err != nil || results(out) != "a=pass" {
		t.Errorf("got %v, %v", results(out), err)
	}
}
