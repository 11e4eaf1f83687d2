// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// registeredResources lists the resources the webhook configuration
// registers (none for nil).
func registeredResources(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) []string {
	var out []string
	if vwc == nil {
		return nil
	}
	for _, w := range vwc.Webhooks {
		for _, r := range w.Rules {
			out = append(out, r.Resources...)
		}
	}
	return out
}

func TestWebhookEnforcesWhenGenerationIsOff(t *testing.T) {
	ns := "wh-off"
	cp.Namespace(t, ns, nil)
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t))

	enforce := controlplane.ClusterPolicy("wh-off-enforce", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden", "ConfigMap", "!has(object.data) || !('forbidden' in object.data)", "the key 'forbidden' is not allowed"))
	audit := controlplane.ClusterPolicy("wh-off-audit", kyvernov1.Audit,
		controlplane.CELRule("no-audited", "ConfigMap", "!has(object.data) || !('audited' in object.data)", "the key 'audited' is reported"))
	cp.Create(t, enforce)
	cp.Create(t, audit)
	cp.WaitForStatus(t, enforce, controllers.ReasonGenerationDisabled)
	// The status says NOT ENFORCED until the webhook configuration is in
	// place, and is re-reported when it is.
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &kyvernov1.ClusterPolicy{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(enforce), got); err != nil {
			return false, err
		}
		msg := got.Status.ValidatingAdmissionPolicy.Message
		return !strings.Contains(msg, "NOT ENFORCED") && strings.Contains(msg, "enforced by kyvap's webhook"), fmt.Errorf("status message %q", msg)
	})
	if err != nil {
		t.Errorf("the status never said the webhook enforces the rule: %v", err)
	}

	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "bad", map[string]string{"forbidden": "x"}), "the key 'forbidden' is not allowed")
	cp.WaitForWarning(t, controlplane.ConfigMap(ns, "audited", map[string]string{"audited": "x"}), "the key 'audited' is reported")
	cp.MustAdmit(t, controlplane.ConfigMap(ns, "good", map[string]string{"fine": "x"}))
	// The operator's own namespace never reaches the webhook.
	cp.MustAdmit(t, controlplane.ConfigMap(controlplane.OperatorNamespace, "bad-but-exempt", map[string]string{"forbidden": "x"}))

	vwc, err := cp.WebhookConfiguration(context.Background())
	if err != nil || vwc == nil {
		t.Fatalf("webhook configuration: %v, %v", vwc, err)
	}
	if got := registeredResources(vwc); strings.Join(got, ",") != "configmaps" {
		t.Errorf("the webhook is registered for %v, want exactly configmaps", got)
	}
}

func TestWebhookAndVAPShareACluster(t *testing.T) {
	ns := "wh-mixed"
	cp.Namespace(t, ns, nil)
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))

	// Roles need RBAC look-ups at admission: no VAP can express them.
	roles := controlplane.CELRule("admins-only-small", "ConfigMap", "!has(object.data) || size(object.data) <= 1", "at most one key for cluster admins")
	roles.MatchResources.Any[0].ClusterRoles = []string{"cluster-admin"}
	fallback := controlplane.ClusterPolicy("wh-mixed-roles", kyvernov1.Enforce, roles)
	native := controlplane.ClusterPolicy("wh-mixed-native", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden-name", "ConfigMap", "object.metadata.name != 'forbidden'", "the name 'forbidden' is not allowed"))
	cp.Create(t, fallback)
	cp.Create(t, native)
	cp.WaitForStatus(t, fallback, controllers.ReasonFallback)
	cp.WaitForStatus(t, native, controllers.ReasonAllRulesTranslated)

	// The test client is a cluster admin (system:masters binds cluster-admin).
	ensureClusterAdminBinding(t)
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "two-keys", map[string]string{"a": "1", "b": "2"}), "at most one key for cluster admins")
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")
	cp.MustAdmit(t, controlplane.ConfigMap(ns, "one-key", map[string]string{"a": "1"}))
}

// ensureClusterAdminBinding binds cluster-admin to system:masters, as every
// real cluster does (envtest's API server does not bootstrap RBAC objects).
func ensureClusterAdminBinding(t testing.TB) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:masters"}},
	}
	err := cp.Client.Create(context.Background(), crb)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestGenerationToggleHandsRulesToVAPs(t *testing.T) {
	ns := "wh-toggle"
	cp.Namespace(t, ns, nil)
	port := controlplane.FreePort(t)
	off := cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, port)
	policy := controlplane.ClusterPolicy("wh-toggle", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden-name", "ConfigMap", "object.metadata.name != 'forbidden'", "the name 'forbidden' is not allowed"))
	cp.CreatePolicy(t, policy, controllers.ReasonGenerationDisabled)
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		return err == nil && len(registeredResources(vwc)) > 0, fmt.Errorf("configuration %v: %w", vwc, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")

	off.Stop()
	cp.StartWebhookOperator(t, generateOn, port)
	cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)
	err = controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		return err == nil && vwc == nil, fmt.Errorf("configuration still registers %v (err %w)", registeredResources(vwc), err)
	})
	if err != nil {
		t.Fatalf("handing the rule to a VAP must remove the webhook's rules: %v", err)
	}
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")
}

func TestWebhookDownFollowsFailurePolicy(t *testing.T) {
	ns := "wh-down"
	cp.Namespace(t, ns, nil)
	op := cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t))
	ignore := kyvernov1.Ignore
	failing := controlplane.ClusterPolicy("wh-down-fail", kyvernov1.Enforce,
		controlplane.CELRule("fail-closed", "ConfigMap", "object.metadata.name != 'closed'", "the name 'closed' is not allowed"))
	ignoring := controlplane.ClusterPolicy("wh-down-ignore", kyvernov1.Enforce,
		controlplane.CELRule("fail-open", "Secret", "object.metadata.name != 'open'", "the name 'open' is not allowed"))
	ignoring.Spec.FailurePolicy = &ignore
	cp.Create(t, failing)
	cp.Create(t, ignoring)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "open"}}
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "closed", nil), "the name 'closed' is not allowed")
	cp.WaitForDenial(t, secret, "the name 'open' is not allowed")

	// The webhook goes away; its configuration stays, as when its pods are down.
	op.Stop()
	if _, err := cp.DryRunCreate(context.Background(), secret); err != nil {
		t.Errorf("failurePolicy Ignore: with the webhook down the Secret must be admitted, got %v", err)
	}
	_, err := cp.DryRunCreate(context.Background(), controlplane.ConfigMap(ns, "anything", nil))
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("failurePolicy Fail: with the webhook down the ConfigMap must be refused, got %v", err)
	}
}

// TestKyvernoRunningTakesTheFallbackRules: kyvap detects Kyverno's admission
// controller from its webhook configurations (label
// webhook.kyverno.io/managed-by: kyverno) and then leaves the rules it cannot
// turn into VAPs to it: its own webhook configuration goes away and the
// status says who enforces the rule. When Kyverno goes away, kyvap's webhook
// takes the rules back.
func TestKyvernoRunningTakesTheFallbackRules(t *testing.T) {
	ctx := context.Background()
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	roles := controlplane.CELRule("admins-only", "ConfigMap", "true", "admins only")
	roles.MatchResources.Any[0].ClusterRoles = []string{"cluster-admin"}
	policy := controlplane.ClusterPolicy("kyverno-hand-over", kyvernov1.Enforce, roles)
	cp.Create(t, policy)
	waitForMessage := func(want string) {
		t.Helper()
		err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			got := &kyvernov1.ClusterPolicy{}
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
				return false, err
			}
			msg := got.Status.ValidatingAdmissionPolicy.Message
			return strings.Contains(msg, want) && !got.Status.ValidatingAdmissionPolicy.Generated, fmt.Errorf("status %+v", got.Status.ValidatingAdmissionPolicy)
		})
		if err != nil {
			t.Fatalf("the status never said %q: %v", want, err)
		}
	}
	waitForConfiguration := func(present bool) {
		t.Helper()
		err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			vwc, err := cp.WebhookConfiguration(ctx)
			return (vwc != nil) == present, fmt.Errorf("kyvap's webhook configuration present = %v, want %v (%w)", vwc != nil, present, err)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitForMessage("enforced by kyvap's webhook")
	waitForConfiguration(true)

	kyverno := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name: "kyverno-resource-validating-webhook-cfg", Labels: map[string]string{"webhook.kyverno.io/managed-by": "kyverno"},
	}}
	cp.Create(t, kyverno)
	waitForMessage("left to Kyverno, whose admission controller runs in this cluster")
	waitForConfiguration(false)
	if got := controlplane.MetricValue(t, "kyvap_kyverno_admission_controller_detected", nil); got != 1 {
		t.Errorf("kyvap_kyverno_admission_controller_detected = %v, want 1", got)
	}

	if err := cp.Client.Delete(ctx, kyverno); err != nil {
		t.Fatal(err)
	}
	waitForMessage("enforced by kyvap's webhook")
	waitForConfiguration(true)
}
