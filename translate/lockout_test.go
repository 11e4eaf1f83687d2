// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/vap"
)

// TestWebhookExempt checks that a fallback rule says which protected
// resources kyvap's webhook never receives for it.
func TestWebhookExempt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds []string
		want  []string
	}{
		{"every kind", []string{"*"}, []string{"events", "nodes", "authentication.k8s.io/tokenreviews", "authorization.k8s.io/localsubjectaccessreviews", "authorization.k8s.io/selfsubjectaccessreviews", "authorization.k8s.io/subjectaccessreviews", "coordination.k8s.io/leases", "events.k8s.io/events"}},
		{"node status", []string{"Node/status"}, []string{"nodes"}},
		{"leases and config maps", []string{"Lease", "ConfigMap"}, []string{"coordination.k8s.io/leases"}},
		{"both Event kinds", []string{"Event"}, []string{"events", "events.k8s.io/events"}},
		{"nothing protected", []string{"ConfigMap", "Deployment"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := kyvernov1.Rule{
				Name:           "r",
				MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: tc.kinds}}}},
				Validation:     &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: "true"}}}},
			}
			policy := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{rule}}}
			plan, err := Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), Options{}) // generation off: the webhook
			if err != nil {
				t.Fatal(err)
			}
			fr := plan.Rules[0].Fallback
			if fr == nil {
				t.Fatalf("no fallback rule: %+v", plan.Rules[0])
			}
			if diff := cmp.Diff(tc.want, fr.WebhookExempt); diff != "" {
				t.Errorf("WebhookExempt (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWebhookLockOutConditionCompiles compiles the condition as the API
// server compiles a webhook match condition's expression (bool, with
// request).
func TestWebhookLockOutConditionCompiles(t *testing.T) {
	mc := WebhookLockOutCondition()
	spec := &admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConditions: []admissionregistrationv1.MatchCondition{mc},
		Validations:     []admissionregistrationv1.Validation{{Expression: "true"}},
	}
	if user, ours := vap.CheckExpressions(spec, vap.NewestCompatibilityVersion, map[string]bool{}); len(user)+len(ours) > 0 {
		t.Fatalf("%s does not compile: %s", mc.Expression, vap.ProblemsMessage(append(user, ours...)))
	}
}
