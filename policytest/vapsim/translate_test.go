// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vapsim

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

const kyvernoPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: sim}
spec:
  validationFailureAction: Enforce
  rules:
  - name: pods-need-labels
    match: {any: [{resources: {kinds: [Pod], operations: [CREATE, UPDATE]}}]}
    exclude: {any: [{resources: {namespaces: [kube-system]}}]}
    validate:
      cel:
        expressions:
        - {expression: "has(object.metadata.labels) && 'app' in object.metadata.labels", message: "pods need an app label"}
  - name: replicas-audit
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate:
      failureAction: Audit
      cel:
        expressions:
        - {expression: "object.spec.replicas <= 10", messageExpression: "'too many replicas: ' + string(object.spec.replicas)"}
  - name: replicas-limit
    match: {any: [{resources: {kinds: [Deployment], operations: [CREATE]}}]}
    validate:
      cel:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        paramRef: {name: replica-limit, namespace: default}
        expressions: [{expression: "object.spec.replicas <= int(params.data.maxReplicas)"}]
`

// TestTranslatedPlan evaluates the VAPs and bindings kyvap's translator
// emits for a Kyverno policy.
func TestTranslatedPlan(t *testing.T) {
	var policy kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(kyvernoPolicy), &policy); err != nil {
		t.Fatal(err)
	}
	plan, err := translate.Translate(clusterpolicy.Input{Policy: &policy}, kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	// pods-need-labels, its two pod-controller variants, and the two
	// Deployment rules.
	if len(plan.ValidatingAdmissionPolicies) != 5 {
		t.Fatalf("plan has %d VAPs, want 5:\n%+v", len(plan.ValidatingAdmissionPolicies), plan.Rules)
	}
	sim := New(plan.ValidatingAdmissionPolicies, plan.Bindings)
	if notes := sim.Notes(); len(notes) != 0 {
		t.Errorf("notes for a kyvap plan: %q", notes)
	}
	namespaces := []corev1.Namespace{namespace("default", nil), namespace("kube-system", nil)}
	params := []unstructured.Unstructured{configMap("default", "replica-limit", nil, map[string]string{"maxReplicas": "15"})}
	eval := func(t *testing.T, adm *admissionv1.AdmissionRequest) Response {
		t.Helper()
		resp, err := sim.Evaluate(context.Background(), Request{Admission: adm, Namespaces: namespaces, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Notes) != 0 {
			t.Errorf("notes: %q", resp.Notes)
		}
		return resp
	}
	ruleOf := func(p PolicyResult) string { return p.Labels["kyvap.io/rule"] }

	t.Run("pod without label is denied", func(t *testing.T) {
		resp := eval(t, podCreate("default", "p", nil))
		want := `pods "p" is forbidden: ValidatingAdmissionPolicy 'kyvap-sim.pods-need-labels' with binding 'kyvap-sim.pods-need-labels-0' denied request: pods need an app label`
		if resp.Allowed || resp.Message != want {
			t.Errorf("got allowed=%v message %q, want %q", resp.Allowed, resp.Message, want)
		}
		if len(resp.Policies) != 1 || ruleOf(resp.Policies[0]) != "pods-need-labels" || resp.Policies[0].Labels["kyvap.io/policy"] != "sim" {
			t.Errorf("policies = %+v", resp.Policies)
		}
	})
	t.Run("deployment whose pods lack the label is denied by the variant", func(t *testing.T) {
		d := deployment("default", "d", 1)
		delete(d["spec"].(obj)["template"].(obj)["metadata"].(obj), "labels")
		resp := eval(t, request(admissionv1.Create, deploymentsGVR, deploymentGVK, "default", "d", d, nil))
		want := `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'kyvap-sim.autogen-pods-need-labels' with binding 'kyvap-sim.autogen-pods-need-labels-0' denied request: pods need an app label`
		if resp.Allowed || resp.Message != want {
			t.Errorf("got allowed=%v message %q, want %q", resp.Allowed, resp.Message, want)
		}
	})
	t.Run("pod in an excluded namespace", func(t *testing.T) {
		resp := eval(t, podCreate("kube-system", "p", nil))
		if !resp.Allowed || len(resp.Policies) != 0 {
			t.Errorf("response = %+v", resp)
		}
	})
	t.Run("pod with label", func(t *testing.T) {
		resp := eval(t, podCreate("default", "p", map[string]string{"app": "a"}))
		if !resp.Allowed || len(resp.Policies) != 1 || !resp.Policies[0].Bindings[0].Evaluated {
			t.Errorf("response = %+v", resp)
		}
	})
	t.Run("audit rule warns and annotates", func(t *testing.T) {
		resp := eval(t, deploymentCreate("default", "d", 12))
		if !resp.Allowed {
			t.Fatalf("denied: %s", resp.Message)
		}
		wantWarnings := []string{"Validation failed for ValidatingAdmissionPolicy 'kyvap-sim.replicas-audit' with binding 'kyvap-sim.replicas-audit-0': too many replicas: 12"}
		if diff := cmp.Diff(wantWarnings, resp.Warnings); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
		failure := resp.AuditAnnotations["validation.policy.admission.k8s.io/validation_failure"]
		if !strings.Contains(failure, `"message":"too many replicas: 12","policy":"kyvap-sim.replicas-audit","binding":"kyvap-sim.replicas-audit-0"`) {
			t.Errorf("validation_failure annotation = %q", failure)
		}
		var rules []string
		for _, p := range resp.Policies {
			rules = append(rules, ruleOf(p))
		}
		if diff := cmp.Diff([]string{"autogen-pods-need-labels", "replicas-audit", "replicas-limit"}, rules); diff != "" {
			t.Errorf("matched rules (-want +got):\n%s", diff)
		}
	})
	t.Run("params rule denies above the limit", func(t *testing.T) {
		resp := eval(t, deploymentCreate("default", "d", 16))
		want := `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'kyvap-sim.replicas-limit' with binding 'kyvap-sim.replicas-limit-0' denied request: failed expression: object.spec.replicas <= int(params.data.maxReplicas)`
		if resp.Allowed || resp.Message != want {
			t.Errorf("got allowed=%v message %q, want %q", resp.Allowed, resp.Message, want)
		}
		if len(resp.Warnings) != 1 {
			t.Errorf("warnings = %q", resp.Warnings)
		}
	})
	t.Run("params rule without the parameter", func(t *testing.T) {
		resp, err := sim.Evaluate(context.Background(), Request{Admission: deploymentCreate("default", "d", 1), Namespaces: namespaces})
		if err != nil {
			t.Fatal(err)
		}
		want := "deployments.apps \"d\" is forbidden: ValidatingAdmissionPolicy 'kyvap-sim.replicas-limit' with binding 'kyvap-sim.replicas-limit-0' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
		if resp.Allowed || resp.Message != want {
			t.Errorf("got allowed=%v message %q, want %q", resp.Allowed, resp.Message, want)
		}
	})
}
