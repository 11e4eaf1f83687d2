// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"bytes"
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/internal/enforcement"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// TestStatusSaysWhoEnforcesEachRule: kyvap status reads back, from what
// the operator wrote, that a policy's CEL rule is a VAP (with its name), a
// rule with context entries is enforced by nobody (kyvap's webhook cannot
// run JMESPath; Kyverno does not run here), and an opted-out policy's rule
// is kyvap's webhook's; any rule enforced by nobody is what kyvap status's
// exit code reports.
func TestStatusSaysWhoEnforcesEachRule(t *testing.T) {
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: true}, controlplane.FreePort(t))
	contextRule := controlplane.CELRule("with-context", "ConfigMap", "true", "never")
	contextRule.Context = []apiextensionsv1.JSON{{Raw: []byte(`{"name":"cm","configMap":{"name":"x","namespace":"default"}}`)}}
	mixed := controlplane.ClusterPolicy("status-mixed", kyvernov1.Enforce,
		controlplane.CELRule("cel", "ConfigMap", "object.metadata.name != 'status-bad'", "status-bad is refused"), contextRule)
	cp.CreatePolicy(t, mixed, controllers.ReasonFallback)
	opted := controlplane.ClusterPolicy("status-webhook", kyvernov1.Enforce, controlplane.CELRule("secrets", "Secret", "true", "never"))
	opted.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, opted, controllers.ReasonFallback)
	// The webhook's configuration controller marks the webhook serving
	// after its first reconcile, which can come after the policy's: the
	// policy is then reconciled again (OnEnforcingChange) and Kyverno's
	// Ready condition, which kyvap writes, turns True. Wait for that, or the
	// status read below races it.
	if err := controlplane.Eventually(context.Background(), controlplane.StatusTimeout, func(ctx context.Context) (bool, error) {
		p := &kyvernov1.ClusterPolicy{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: opted.Name}, p); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionTrue, nil
	}); err != nil {
		t.Fatalf("the opted-out policy never reported kyvap's webhook enforcing it: %v", err)
	}

	policies, err := enforcement.ClusterStatus(context.Background(), cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]enforcement.Rule{}
	for _, p := range policies {
		if p.Kind == "ClusterPolicy" && strings.HasPrefix(p.Name, "status-") {
			if !p.Processed {
				t.Errorf("%s: not processed (%s)", p.Name, p.Reason)
			}
			for _, r := range p.Rules {
				got[p.Name+"/"+r.Name] = r
			}
		}
	}
	for key, want := range map[string]enforcement.Enforcer{
		"status-mixed/cel":          enforcement.ByVAP,
		"status-mixed/with-context": enforcement.ByNobody,
		"status-webhook/secrets":    enforcement.ByWebhook,
	} {
		if got[key].By != want {
			t.Errorf("%s: enforced by %q (%s), want %q", key, got[key].By, got[key].Detail, want)
		}
	}
	if vaps := got["status-mixed/cel"].VAPs; len(vaps) != 1 || !strings.HasPrefix(vaps[0], "kyvap-status-mixed") {
		t.Errorf("the VAP rule's VAPs: %v", vaps)
	}
	// Without Kyverno, kyvap writes Kyverno's Ready condition (the CRD's
	// READY column): false while a rule is enforced by nobody.
	for name, want := range map[string]metav1.ConditionStatus{"status-mixed": metav1.ConditionFalse, "status-webhook": metav1.ConditionTrue} {
		p := &kyvernov1.ClusterPolicy{}
		if err := cp.Client.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, "Ready"); c == nil || c.Status != want {
			t.Errorf("%s: Ready condition %+v, want status %s", name, c, want)
		}
	}
	if !enforcement.Unenforced(policies) {
		t.Error("a rule enforced by nobody does not make kyvap status fail")
	}
	var mine []enforcement.PolicyStatus
	for _, p := range policies {
		if p.Name == "status-webhook" {
			mine = append(mine, p)
		}
	}
	if len(mine) != 1 || enforcement.Unenforced(mine) {
		t.Errorf("a policy entirely enforced by kyvap's webhook counts as unenforced: %+v", mine)
	}
	var out bytes.Buffer
	if err := enforcement.Write(&out, "wide", policies); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ENFORCED BY", "status-mixed", "with-context", "nobody", "kyvap-status-mixed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("wide output lacks %q:\n%s", want, out.String())
		}
	}
}
