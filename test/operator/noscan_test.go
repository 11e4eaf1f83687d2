// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// TestBackgroundScanOff: with --background-scan=false the operator has no
// PolicyReport writer (so no cache of the scanned kinds), and enforces as
// before, by VAP and by its webhook.
func TestBackgroundScanOff(t *testing.T) {
	ns := "noscan"
	cp.EnsureNamespace(t, ns, nil)
	op := cp.StartWebhookOperatorWith(t, operator.Options{
		Translate:             translate.Options{GenerateValidatingAdmissionPolicy: true},
		DisableBackgroundScan: true,
	}, controlplane.FreePort(t))
	if op.Reports != nil {
		t.Fatal("the operator writes PolicyReports with background scans off")
	}
	vap := controlplane.ClusterPolicy("noscan-vap", kyvernov1.Enforce, controlplane.CELRule("named", "ConfigMap", "object.metadata.name != 'bad-noscan'", "bad-noscan is refused"))
	cp.CreatePolicy(t, vap, controllers.ReasonAllRulesTranslated)
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "bad-noscan", nil), "bad-noscan is refused")
	opted := controlplane.ClusterPolicy("noscan-webhook", kyvernov1.Enforce, controlplane.CELRule("named", "Secret", "object.metadata.name != 'bad-noscan'", "bad-noscan secrets are refused"))
	opted.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, opted, controllers.ReasonFallback)
	cp.WaitForDenial(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-noscan"}}, "bad-noscan secrets are refused")
}
