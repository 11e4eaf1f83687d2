// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package scan

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/translate"
)

const policyYAML = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-team
  annotations: {policies.kyverno.io/category: Best Practices, policies.kyverno.io/severity: medium}
spec:
  validationFailureAction: Audit
  rules:
  - name: configmaps-have-team
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      cel:
        expressions:
        - {expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", message: "a team label is required"}
  - name: not-cel
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {labels: {"tea?": "?*"}}}}
`

func loadPolicy(t *testing.T) *kyvernov1.ClusterPolicy {
	t.Helper()
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(policyYAML), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func plans(t *testing.T, p *kyvernov1.ClusterPolicy) (plan, engineForm translate.Plan) {
	t.Helper()
	var err error
	if plan, err = translate.Translate(clusterpolicy.Input{Policy: p}, kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true}); err != nil {
		t.Fatal(err)
	}
	if engineForm, err = translate.Translate(clusterpolicy.Input{Policy: p}, kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: false}); err != nil {
		t.Fatal(err)
	}
	return plan, engineForm
}

func configMap(name string, labels map[string]any) Object {
	md := map[string]any{"name": name, "namespace": "team-a"}
	if labels != nil {
		md["labels"] = labels
	}
	return Object{
		Resource:  &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}},
		GVR:       schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"kubernetes.io/metadata.name": "team-a"}}},
	}
}

// TestScanReportsTheRulesKyvapEnforces: an existing resource is judged by
// the CEL rule (fail without the label, pass with it), with the policy's
// category and severity; the pattern rule, which Kyverno enforces, is not
// reported by kyvap.
func TestScanReportsTheRulesKyvapEnforces(t *testing.T) {
	p := loadPolicy(t)
	plan, engineForm := plans(t, p)
	s := New()
	s.SetPolicy(p, RulesToScan(p, &plan, &engineForm, false))
	now := time.Unix(1700000000, 0)
	got, err := s.Scan(context.Background(), configMap("no-team", nil), now)
	if err != nil {
		t.Fatal(err)
	}
	want := []reports.Result{{
		Source: "kyvap", Policy: "require-team", Rule: "configmaps-have-team", Result: reports.StatusFail,
		Message: "a team label is required", Scored: true, Category: "Best Practices", Severity: "medium",
		Timestamp: metav1.Timestamp{Seconds: 1700000000}, Properties: map[string]string{"process": "background scan"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = s.Scan(context.Background(), configMap("with-team", map[string]any{"team": "a"}), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Result != reports.StatusPass {
		t.Errorf("labelled ConfigMap: %+v, want one pass", got)
	}
}

func TestBackgroundFalseAndRemovedPoliciesAreNotScanned(t *testing.T) {
	p := loadPolicy(t)
	plan, engineForm := plans(t, p)
	s := New()
	s.SetPolicy(p, RulesToScan(p, &plan, &engineForm, false))
	off := false
	p.Spec.Background = &off
	s.SetPolicy(p, RulesToScan(p, &plan, &engineForm, false))
	got, err := s.Scan(context.Background(), configMap("no-team", nil), time.Now())
	if err != nil || len(got) != 0 {
		t.Errorf("background: false: %+v, %v; want no results", got, err)
	}
}

func TestRulesLeftToKyvernoAreNotScanned(t *testing.T) {
	p := loadPolicy(t)
	p.Annotations[translate.AnnotationGenerate] = "false" // every rule goes to the fallback
	plan, engineForm := plans(t, p)
	if rules := RulesToScan(p, &plan, &engineForm, true); len(rules) != 0 {
		t.Errorf("with Kyverno running, its rules are its to report: %d rules", len(rules))
	}
	if rules := RulesToScan(p, &plan, &engineForm, false); len(rules) != 1 {
		t.Errorf("without Kyverno, kyvap's webhook enforces (and reports) the CEL rule: %d rules", len(rules))
	}
}

func TestKyvernoScansThePoliciesItEnforces(t *testing.T) {
	p := loadPolicy(t)
	plan, engineForm := plans(t, p)
	if rules := RulesToScan(p, &plan, &engineForm, true); len(rules) != 0 {
		t.Errorf("with Kyverno running, a policy not marked generated is scanned by Kyverno, every rule of it: kyvap scans %d rules", len(rules))
	}
	p.Status.ValidatingAdmissionPolicy.Generated = true
	if rules := RulesToScan(p, &plan, &engineForm, true); len(rules) != 1 {
		t.Errorf("a generated policy, which Kyverno skips: kyvap scans %d rules, want 1", len(rules))
	}
}

// BenchmarkScan is the evaluation part of a background scan: one
// ConfigMap against 10 policies of 5 CEL rules (test/perf's scenario).
func BenchmarkScan(b *testing.B) {
	s := New()
	for i := range 10 {
		p := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('a'+i))}}
		p.Spec.ValidationFailureAction = kyvernov1.Audit
		for j, expr := range []string{
			"object.metadata.name.size() < 64",
			"!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)",
			"!has(object.data) || !('bad' in object.data)",
			"object.metadata.namespace != 'kube-system'",
			"!has(object.metadata.annotations) || object.metadata.annotations.size() < 100",
		} {
			p.Spec.Rules = append(p.Spec.Rules, kyvernov1.Rule{
				Name:           "r" + string(rune('a'+j)),
				MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}}}}},
				Validation:     &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: expr, Message: "m"}}}},
			})
		}
		plan, err := translate.Translate(clusterpolicy.Input{Policy: p}, kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true})
		if err != nil {
			b.Fatal(err)
		}
		engineForm, err := translate.Translate(clusterpolicy.Input{Policy: p}, kyverno.NewStaticResolver(), translate.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if rules := RulesToScan(p, &plan, &engineForm, false); len(rules) != 5 {
			b.Fatalf("%d rules to scan, want 5", len(rules))
		} else {
			s.SetPolicy(p, rules)
		}
	}
	obj := configMap("cm-00001", map[string]any{"tier": "web"})
	obj.Resource.Object["data"] = map[string]any{"k": "v"}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		results, err := s.Scan(context.Background(), obj, now)
		if err != nil || len(results) != 50 {
			b.Fatalf("%d results, %v", len(results), err)
		}
		_ = reports.Fingerprint(results)
	}
}

func TestUserDependentPoliciesAreNotScanned(t *testing.T) {
	p := loadPolicy(t)
	plan, engineForm := plans(t, p)
	if rules := RulesToScan(p, &plan, &engineForm, false); len(rules) != 1 {
		t.Fatalf("%d rules scanned, want 1", len(rules))
	}
	p.Spec.Rules[0].ExcludeResources = &kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{UserInfo: kyvernov1.UserInfo{ClusterRoles: []string{"cluster-admin"}}}}}
	if got := UserDependent(p); got != "spec/rules[0]/exclude/any[0]/clusterRoles" {
		t.Errorf("UserDependent = %q", got)
	}
	if rules := RulesToScan(p, &plan, &engineForm, false); len(rules) != 0 {
		t.Errorf("a background policy that excludes by user (Kyverno refuses it in background mode): %d rules scanned", len(rules))
	}
}
