// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package celeval

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// apiserverValidator builds the API server's own validator for spec, as its
// ValidatingAdmissionPolicy plugin does (validating.compilePolicy).
func apiserverValidator(t *testing.T, spec *admissionregistrationv1.ValidatingAdmissionPolicySpec) validating.Validator {
	t.Helper()
	withAuthz := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil, HasAuthorizer: true}
	withoutAuthz := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil}
	compiler, err := plugincel.NewCompositedCompiler(baseEnv())
	if err != nil {
		t.Fatal(err)
	}
	var variables []plugincel.NamedExpressionAccessor
	for _, v := range spec.Variables {
		variables = append(variables, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	compiler.CompileAndStoreVariables(variables, withAuthz, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if len(spec.MatchConditions) > 0 {
		var conds []plugincel.ExpressionAccessor
		for i := range spec.MatchConditions {
			conds = append(conds, (*matchconditions.MatchCondition)(&spec.MatchConditions[i]))
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(conds, withAuthz, environment.StoredExpressions), spec.FailurePolicy, "policy", "validate", "p")
	}
	validations := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	for i, v := range spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	annotations := make([]plugincel.ExpressionAccessor, len(spec.AuditAnnotations))
	for i, a := range spec.AuditAnnotations {
		annotations[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(
		compiler.CompileCondition(validations, withAuthz, environment.StoredExpressions), matcher,
		compiler.CompileCondition(annotations, withAuthz, environment.StoredExpressions),
		compiler.CompileCondition(messages, withoutAuthz, environment.StoredExpressions),
		spec.FailurePolicy, nil)
}

func admissionRequest(t *testing.T, obj map[string]any) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "team", Name: "x",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Object:   runtime.RawExtension{Raw: raw},
	}
}

// TestValidatorMatchesTheAPIServer: kyvap's validator (which keeps the
// admission plugin out of the manager) decides exactly as the API server's
// validator over specs that exercise every branch.
func TestValidatorMatchesTheAPIServer(t *testing.T) {
	forbidden := metav1.StatusReasonForbidden
	ignore := admissionregistrationv1.Ignore
	specs := map[string]admissionregistrationv1.ValidatingAdmissionPolicySpec{
		"pass and deny": {Validations: []admissionregistrationv1.Validation{
			{Expression: "object.metadata.name == 'x'", Message: "name"},
			{Expression: "has(object.data)", Message: "  data needed  "},
		}},
		"reason, messageExpression, fallbacks": {Validations: []admissionregistrationv1.Validation{
			{Expression: "false", Reason: &forbidden, MessageExpression: "'name ' + object.metadata.name"},
			{Expression: "false", MessageExpression: "'two\\nlines'", Message: "static"},
			{Expression: "false", MessageExpression: "'   '"},
			{Expression: "false", MessageExpression: "object.missing"},
		}},
		"runtime error under Fail":   {Validations: []admissionregistrationv1.Validation{{Expression: "object.data.missing == 'x'"}}},
		"runtime error under Ignore": {FailurePolicy: &ignore, Validations: []admissionregistrationv1.Validation{{Expression: "object.data.missing == 'x'"}}},
		"compile error":              {Validations: []admissionregistrationv1.Validation{{Expression: "object.("}}},
		"variables and namespaceObject": {
			Variables:   []admissionregistrationv1.Variable{{Name: "ns", Expression: "namespaceObject.metadata.name"}},
			Validations: []admissionregistrationv1.Validation{{Expression: "variables.ns != 'team'", Message: "not in team"}},
		},
		"match conditions false, true, error": {
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "never", Expression: "object.metadata.name == 'other'"}},
			Validations:     []admissionregistrationv1.Validation{{Expression: "false"}},
		},
		"match condition error under Ignore": {
			FailurePolicy:   &ignore,
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "err", Expression: "object.nope == 1"}},
			Validations:     []admissionregistrationv1.Validation{{Expression: "false"}},
		},
		"audit annotations": {
			Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
			AuditAnnotations: []admissionregistrationv1.AuditAnnotation{
				{Key: "publish", ValueExpression: "' value '"},
				{Key: "blank", ValueExpression: "'  '"},
				{Key: "null", ValueExpression: "null"},
				{Key: "error", ValueExpression: "object.missing"},
			},
		},
	}
	objects := []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "team"}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "y", "namespace": "team"}, "data": map[string]any{"a": "b"}},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	for name, spec := range specs {
		for i, obj := range objects {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				attrs, err := Attributes(admissionRequest(t, obj))
				if err != nil {
					t.Fatal(err)
				}
				gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
				ours := Compile("p", &spec).Validate(context.Background(), Input{Attributes: attrs, MatchedResource: gvr, Namespace: ns})
				theirs := apiserverValidator(t, &spec).Validate(context.Background(), gvr, attrs, nil, ns, celconfig.RuntimeCELCostBudget, denyAll{})
				// The API server's empty result is an excluded request; ours says so.
				want := Result{Excluded: theirs.Decisions == nil && theirs.AuditAnnotations == nil}
				for _, d := range theirs.Decisions {
					want.Decisions = append(want.Decisions, Decision{Action: Action(d.Action), Evaluation: Evaluation(d.Evaluation), Message: d.Message, Reason: d.Reason})
				}
				for _, a := range theirs.AuditAnnotations {
					want.AuditAnnotations = append(want.AuditAnnotations, AuditAnnotation{Key: a.Key, Value: a.Value, Action: AuditAnnotationAction(a.Action), Error: a.Error})
				}
				for i := range ours.Decisions {
					ours.Decisions[i].Elapsed = 0
				}
				for i := range ours.AuditAnnotations {
					ours.AuditAnnotations[i].Elapsed = 0
				}
				if diff := cmp.Diff(want, ours, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("decisions differ from the API server's (-want +got):\n%s", diff)
				}
			})
		}
	}
}
