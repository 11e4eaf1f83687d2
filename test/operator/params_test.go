// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// paramRule is a rule on the kind matched whose parameters are of kind, which
// the shipped RBAC does not grant.
func paramRule(name, matched, kind string) kyvernov1.Rule {
	r := controlplane.CELRule(name, matched, "params != null && object.metadata.name != 'forbidden'", "forbidden by "+name)
	r.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: kind}
	r.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "params"}
	return r
}

// TestParamKindsNeedOneGrant runs kyvap with exactly the shipped RBAC. A
// policy whose paramKind is not granted cannot become a VAP (the API server
// requires its creator to read every object of the kind): the status says
// which permission is missing and how to grant it; once a ClusterRole
// labelled for aggregation grants it, the VAP is created. kyvap's webhook,
// for a fallback rule on another ungranted kind, answers at once with the
// same advice instead of waiting for an informer that can never sync.
func TestParamKindsNeedOneGrant(t *testing.T) {
	ctx := context.Background()
	cfg := cp.ManagerUserConfig(t, "kyvap-params-test")
	cp.StartWebhookOperatorAs(t, cfg, generateOn, controlplane.FreePort(t))
	cp.EnsureNamespace(t, "params", nil)

	policy := controlplane.ClusterPolicy("params-limitrange", kyvernov1.Enforce, paramRule("limits", "ConfigMap", "LimitRange"))
	got := cp.CreatePolicy(t, policy, controllers.ReasonApplyFailed)
	msg := got.Status.ValidatingAdmissionPolicy.Message
	for _, want := range []string{"LimitRange (v1)", webhook.ParamsReaderLabel, "get, list and watch"} {
		if !strings.Contains(msg, want) {
			t.Errorf("status message %q does not contain %q", msg, want)
		}
	}

	cp.Create(t, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kyvap-params-limitranges", Labels: map[string]string{webhook.ParamsReaderLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"limitranges"}, Verbs: []string{"get", "list", "watch"}}},
	})
	cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)

	// A fallback rule whose parameters kyvap may not read, on Secrets (the
	// VAP above denies every ConfigMap of the namespace, its parameter
	// being absent).
	fallback := controlplane.ClusterPolicy("params-podtemplate", kyvernov1.Enforce, paramRule("templates", "Secret", "PodTemplate"))
	fallback.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, fallback, controllers.ReasonFallback)
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "params", Name: "any"}})
		if err == nil {
			return false, nil
		}
		return strings.Contains(err.Error(), "may not list and watch podtemplates") && strings.Contains(err.Error(), webhook.ParamsReaderLabel), err
	})
	if err != nil {
		t.Fatalf("kyvap's webhook never explained the missing permission: %v", err)
	}
}
