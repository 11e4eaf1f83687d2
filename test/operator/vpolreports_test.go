// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"testing"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/test/controlplane"
)

// reportedResults returns "policy=result (process)" of kyvap's report
// about obj, by policy.
func reportedResults(ctx context.Context, obj client.Object) (map[string]string, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(reports.APIVersion)
	u.SetKind(reports.KindPolicyReport)
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: reports.Name(obj.GetUID())}, u); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	out := map[string]string{}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	for _, r := range results {
		m := r.(map[string]any)
		props, _ := m["properties"].(map[string]any)
		out[fmt.Sprint(m["policy"])] = fmt.Sprintf("%v (%v)", m["result"], props["process"])
	}
	return out, nil
}

func waitForReported(t *testing.T, obj client.Object, want map[string]string) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		got, err := reportedResults(ctx, obj)
		if err != nil {
			return false, err
		}
		for policy, result := range want {
			if got[policy] != result {
				return false, fmt.Errorf("report results %v, want %v", got, want)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// configMapPolicySpec is an Audit policy on the ConfigMaps of namespaces
// requiring a team label, with expression.
func configMapPolicySpec(expression string, namespaces ...string) policiesv1.ValidatingPolicySpec {
	spec := policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}},
		},
		ValidationAction: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit},
		Validations:      []admissionregistrationv1.Validation{{Expression: expression, Message: "a team label is required"}},
	}
	if len(namespaces) > 0 {
		spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces,
		}}}
	}
	return spec
}

const needsTeam = "has(object.metadata.labels) && 'team' in object.metadata.labels"

// TestValidatingPoliciesAreScannedInTheBackground: existing resources get
// PolicyReport results for a ValidatingPolicy enforced by VAPs, for one
// enforced by kyvap's webhook (a Kyverno library), and for a
// NamespacedValidatingPolicy (reported as namespace/name, in its namespace
// only); a fix turns the result to pass; deleting the policy removes them.
func TestValidatingPoliciesAreScannedInTheBackground(t *testing.T) {
	ctx := context.Background()
	const ns, other = "vpol-scan", "vpol-scan-other"
	cp.EnsureNamespace(t, ns, nil)
	cp.EnsureNamespace(t, other, nil)
	cp.InstallPolicyReportCRDs(t)
	unlabelled := controlplane.ConfigMap(ns, "unlabelled", nil)
	cp.Create(t, unlabelled)
	elsewhere := controlplane.ConfigMap(other, "elsewhere", nil)
	cp.Create(t, elsewhere)
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))

	byVAP := validatingPolicy("scan-by-vap", configMapPolicySpec(needsTeam, ns, other))
	byWebhook := validatingPolicy("scan-by-webhook", configMapPolicySpec("has(object.metadata.labels) && 'team' in object.metadata.labels && sha256(object.metadata.labels.team) != ''", ns, other))
	namespaced := &policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scan-namespaced"}, Spec: configMapPolicySpec(needsTeam)}
	cp.Create(t, byVAP)
	cp.Create(t, byWebhook)
	cp.Create(t, namespaced)
	got, _ := waitForVPolCondition(t, byVAP, controllers.ReasonAllRulesTranslated)
	if !vpolStatus(got).Generated {
		t.Errorf("status.generated = false for a policy kyvap enforces and scans whole")
	}
	waitForVPolCondition(t, byWebhook, controllers.ReasonFallback)
	waitForVPolCondition(t, namespaced, controllers.ReasonAllRulesTranslated)

	fail := "fail (background scan)"
	waitForReported(t, unlabelled, map[string]string{"scan-by-vap": fail, "scan-by-webhook": fail, ns + "/scan-namespaced": fail})
	waitForReported(t, elsewhere, map[string]string{"scan-by-vap": fail, "scan-by-webhook": fail})
	if results, err := reportedResults(ctx, elsewhere); err != nil || results[ns+"/scan-namespaced"] != "" {
		t.Errorf("a NamespacedValidatingPolicy of %s reported on %s: %v (%v)", ns, other, results, err)
	}

	fixed := unlabelled.DeepCopy()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(unlabelled), fixed); err != nil {
		t.Fatal(err)
	}
	fixed.Labels = map[string]string{"team": "a"}
	if err := cp.Client.Update(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	pass := "pass (background scan)"
	waitForReported(t, unlabelled, map[string]string{"scan-by-vap": pass, "scan-by-webhook": pass, ns + "/scan-namespaced": pass})

	for _, p := range []client.Object{byVAP, byWebhook, namespaced} {
		if err := cp.Client.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := reportedResults(ctx, unlabelled)
		return err == nil && got["scan-by-vap"] == "" && got["scan-by-webhook"] == "" && got[ns+"/scan-namespaced"] == "", fmt.Errorf("results %v (%w)", got, err)
	})
	if err != nil {
		t.Errorf("results of deleted policies stay: %v", err)
	}
}
