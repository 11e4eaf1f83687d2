// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package celeval

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestProgramsWithoutVariablesShareACompiler: programs without variables
// share their environment's compiler, concurrently (run with -race), and a
// program's variables never reach another program: a spec reading
// variables.x without declaring it fails to compile, as in the API server,
// even after another spec declared x.
func TestProgramsWithoutVariablesShareACompiler(t *testing.T) {
	// Each evaluation gets its own attributes, as each request does: an
	// evaluation marks them (UseSchemalessTypeRef).
	input := func() Input {
		attrs, err := Attributes(admissionRequest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "team"}}))
		if err != nil {
			t.Error(err)
		}
		return Input{Attributes: attrs, MatchedResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	}
	withX := &admissionregistrationv1.ValidatingAdmissionPolicySpec{
		Variables:   []admissionregistrationv1.Variable{{Name: "x", Expression: "object.metadata.name"}},
		Validations: []admissionregistrationv1.Validation{{Expression: "variables.x == 'x'"}},
	}
	admitted := func(r Result) bool { return len(r.Decisions) == 1 && r.Decisions[0].Evaluation == EvalAdmit }
	if r := Compile("with-x", withX).Validate(context.Background(), input()); !admitted(r) {
		t.Fatalf("the spec declaring x: %+v", r)
	}
	var wg sync.WaitGroup
	results := make([]Result, 16)
	for i := range results {
		wg.Go(func() {
			spec := &admissionregistrationv1.ValidatingAdmissionPolicySpec{Validations: []admissionregistrationv1.Validation{{Expression: fmt.Sprintf("object.metadata.name == 'x' && %d >= 0", i)}}}
			results[i] = Compile(fmt.Sprint("p", i), spec).Validate(context.Background(), input())
		})
	}
	undeclared := Compile("undeclared", &admissionregistrationv1.ValidatingAdmissionPolicySpec{Validations: []admissionregistrationv1.Validation{{Expression: "variables.x == 'x'"}}}).Validate(context.Background(), input())
	wg.Wait()
	for i, r := range results {
		if !admitted(r) {
			t.Errorf("program %d: %+v", i, r)
		}
	}
	if len(undeclared.Decisions) != 1 || undeclared.Decisions[0].Evaluation != EvalError || !strings.Contains(undeclared.Decisions[0].Message, "x") {
		t.Errorf("a spec reading an undeclared variable must fail to compile: %+v", undeclared)
	}
	if _, shared := sharedCompilers.Load("|"); !shared {
		t.Error("programs without variables did not share a compiler")
	}
}
