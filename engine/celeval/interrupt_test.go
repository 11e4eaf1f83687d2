// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package celeval

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestValidateStopsWhenTheContextEnds: CEL evaluation is interruptible. A
// comprehension evaluated with an ended context stops (cel-go checks every
// 100 iterations) and the result says it was interrupted rather than
// passing the interruption off as the expression's error; a result that
// did not depend on anything cut short is complete.
func TestValidateStopsWhenTheContextEnds(t *testing.T) {
	parts := make([]string, 1000)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	list := "[" + strings.Join(parts, ",") + "]"
	ignore := admissionregistrationv1.Ignore
	tests := []struct {
		name        string
		spec        admissionregistrationv1.ValidatingAdmissionPolicySpec
		interrupted bool
	}{
		{name: "comprehension", interrupted: true, spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			Validations: []admissionregistrationv1.Validation{{Expression: list + ".all(i, i >= 0)"}}}},
		{name: "comprehension under Ignore", interrupted: true, spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &ignore,
			Validations:   []admissionregistrationv1.Validation{{Expression: list + ".all(i, i >= 0)"}}}},
		{name: "match condition under Ignore", interrupted: true, spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:   &ignore,
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "long", Expression: list + ".all(i, i >= 0)"}},
			Validations:     []admissionregistrationv1.Validation{{Expression: "false"}}}},
		{name: "no comprehension", interrupted: false, spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name == 'x'"}}}},
	}
	attrs, err := Attributes(admissionRequest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "team"}}))
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Attributes: attrs, MatchedResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Compile("p", &tt.spec)
			if r := p.Validate(context.Background(), in); r.Interrupted || r.Excluded || len(r.Decisions) != 1 || r.Decisions[0].Evaluation == EvalError {
				t.Fatalf("with a live context: %+v", r)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r := p.Validate(ctx, in)
			if r.Interrupted != tt.interrupted {
				t.Fatalf("interrupted = %v, want %v (%+v)", r.Interrupted, tt.interrupted, r)
			}
			if tt.interrupted && len(r.Decisions) == 1 && r.Decisions[0].Evaluation == EvalError && !strings.Contains(r.Decisions[0].Message, "interrupted") {
				t.Errorf("the error is not cel-go's interruption: %q", r.Decisions[0].Message)
			}
		})
	}
}
