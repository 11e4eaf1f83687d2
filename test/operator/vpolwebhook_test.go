// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// hashedNoLatest refuses :latest images through Kyverno's hash library,
// which the API server does not have: no VAP can enforce it.
const hashedNoLatest = "object.spec.containers.all(c, sha256(c.image) != sha256('nginx:latest'))"

// waitForWebhookResources waits until kyvap's webhook configuration
// registers every one of resources.
func waitForWebhookResources(t *testing.T, resources ...string) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		got := registeredResources(vwc)
		for _, r := range resources {
			if !slices.Contains(got, r) {
				return false, fmt.Errorf("the configuration registers %v (err %w), want %v", got, err, resources)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestValidatingPolicyLibraryRuleEnforcedByTheWebhook: a ValidatingPolicy
// that uses a Kyverno CEL library kyvap's engine implements is enforced by
// kyvap's webhook, its pod-controller variants included, with Kyverno's
// denial message; a NamespacedValidatingPolicy's rules reach only its
// namespace there too.
func TestValidatingPolicyLibraryRuleEnforcedByTheWebhook(t *testing.T) {
	const nsA, nsB = "vpol-wh-a", "vpol-wh-b"
	cp.Namespace(t, nsA, nil)
	cp.Namespace(t, nsB, nil)
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))

	policy := validatingPolicy("hashed-no-latest", noLatestSpec(hashedNoLatest, nsA))
	cp.Create(t, policy)
	got, cond := waitForVPolCondition(t, policy, controllers.ReasonFallback)
	if !strings.Contains(cond.Message, "enforced by kyvap's webhook") || strings.Contains(cond.Message, "NOT ENFORCED") {
		// The status is re-reported once the configuration is in place.
		err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
			_, cond = waitForVPolCondition(t, policy, controllers.ReasonFallback)
			return !strings.Contains(cond.Message, "NOT ENFORCED"), fmt.Errorf("condition message %q", cond.Message)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if vpolStatus(got).Generated {
		t.Errorf("status.generated = true for a policy kyvap's webhook enforces: a running Kyverno would skip it")
	}
	waitForWebhookResources(t, "pods", "deployments", "cronjobs")
	// The gauges count ValidatingPolicies too: the policy and its two
	// pod-controller variants are rules on the webhook.
	if n := controlplane.MetricValue(t, "kyvap_rules", map[string]string{"verdict": "Fallback", "reason": "KyvernoLibrary"}); n < 3 {
		t.Errorf("kyvap_rules{verdict=Fallback,reason=KyvernoLibrary} = %v, want >= 3", n)
	}
	if n := controlplane.MetricValue(t, "kyvap_policies", map[string]string{"outcome": controllers.ReasonFallback}); n < 1 {
		t.Errorf("kyvap_policies{outcome=%s} = %v, want >= 1", controllers.ReasonFallback, n)
	}

	want := "Policy hashed-no-latest failed: " + latestMessage
	cp.WaitForDenial(t, pod(nsA, "latest", "nginx:latest"), want)
	cp.WaitForDenial(t, deploymentWithImage(nsA, "latest", "nginx:latest"), want)
	cp.WaitForDenial(t, cronJob(nsA, "latest", "nginx:latest"), want)
	if who, err := denierOf(context.Background(), pod(nsA, "latest", "nginx:latest")); who != "webhook" {
		t.Errorf("denied by %q (%v), want kyvap's webhook", who, err)
	}
	cp.MustAdmit(t, pod(nsA, "pinned", "nginx:1.27"))
	cp.MustAdmit(t, pod(nsB, "latest", "nginx:latest")) // outside the namespaceSelector

	// A namespaced policy, through the webhook, applies in its namespace only.
	spec := noLatestSpec(hashedNoLatest)
	spec.MatchConstraints.NamespaceSelector = nil
	nvpol := &policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "hashed-no-latest-b"}, Spec: spec}
	cp.Create(t, nvpol)
	waitForVPolCondition(t, nvpol, controllers.ReasonFallback)
	cp.WaitForDenial(t, pod(nsB, "latest", "nginx:latest"), "Policy hashed-no-latest-b failed: "+latestMessage)
	// In nsA only the cluster-wide policy denies.
	_, err := cp.DryRunCreate(context.Background(), pod(nsA, "latest", "nginx:latest"))
	if err == nil || strings.Contains(err.Error(), "hashed-no-latest-b") {
		t.Errorf("in %s: %v, want a denial by hashed-no-latest alone", nsA, err)
	}
}

// TestValidatingPolicyHandOverBetweenWebhookAndVAP: with generation off
// kyvap's webhook enforces a ValidatingPolicy; switched on, the VAP takes
// it over, and the policy is denied all along.
func TestValidatingPolicyHandOverBetweenWebhookAndVAP(t *testing.T) {
	const ns = "vpol-handover"
	cp.Namespace(t, ns, nil)
	port := controlplane.FreePort(t)
	off := cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, port)
	policy := validatingPolicy("handed-over", noLatestSpec(noLatest, ns))
	cp.Create(t, policy)
	waitForVPolCondition(t, policy, controllers.ReasonGenerationDisabled)
	waitForDenier(t, pod(ns, "latest", "nginx:latest"), "webhook")
	cp.MustAdmit(t, pod(ns, "pinned", "nginx:1.27"))

	off.Stop()
	cp.StartWebhookOperator(t, generateOn, port)
	waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	waitForDenier(t, pod(ns, "latest", "nginx:latest"), "vap")
}

// TestResourceLibraryReadsWithTheFlag: with --resource-library-reads, a
// ValidatingPolicy calling resource.Get is enforced by kyvap's webhook,
// which reads from the API server (a ConfigMap must name a Secret that
// exists); without it, the rule is NOT ENFORCED by kyvap and says so.
func TestResourceLibraryReadsWithTheFlag(t *testing.T) {
	const ns = "vpol-resource"
	cp.Namespace(t, ns, nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "present"}}
	cp.Create(t, secret)
	spec := configMapPolicySpec("!has(object.data) || !('secret' in object.data) || type(resource.Get('v1', 'secrets', object.metadata.namespace, object.data.secret)) != type(null)", ns)
	spec.ValidationAction = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	spec.Validations[0].Message = "the referenced Secret must exist"
	policy := validatingPolicy("secret-must-exist", spec)
	port := controlplane.FreePort(t)

	without := cp.StartWebhookOperator(t, generateOn, port)
	cp.Create(t, policy)
	_, cond := waitForVPolCondition(t, policy, controllers.ReasonFallback)
	if !strings.Contains(cond.Message, "NOT ENFORCED by kyvap") || !strings.Contains(cond.Message, "resource") {
		t.Errorf("without the flag the condition says %q, want NOT ENFORCED naming the resource library", cond.Message)
	}
	cp.MustAdmit(t, controlplane.ConfigMap(ns, "dangling", map[string]string{"secret": "absent"}))
	without.Stop()

	cp.StartWebhookOperatorWith(t, operator.Options{Translate: generateOn, ResourceReads: true}, port)
	err := controlplane.Eventually(context.Background(), controlplane.StatusTimeout, func(ctx context.Context) (bool, error) {
		_, cond = waitForVPolCondition(t, policy, controllers.ReasonFallback)
		return !strings.Contains(cond.Message, "NOT ENFORCED"), fmt.Errorf("condition message %q", cond.Message)
	})
	if err != nil {
		t.Fatal(err)
	}
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "dangling", map[string]string{"secret": "absent"}), "Policy secret-must-exist failed: the referenced Secret must exist")
	cp.MustAdmit(t, controlplane.ConfigMap(ns, "pointing", map[string]string{"secret": "present"}))
}

// TestKyvernoRunningTakesTheValidatingPolicyWebhookRules: with Kyverno's
// admission controller detected, the rules of a ValidatingPolicy that
// kyvap's webhook enforced are left to Kyverno (the policy is not marked
// generated, so Kyverno enforces it whole), and kyvap's webhook lets them go.
func TestKyvernoRunningTakesTheValidatingPolicyWebhookRules(t *testing.T) {
	const ns = "vpol-kyverno-running"
	cp.Namespace(t, ns, nil)
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	policy := validatingPolicy("hashed-left-to-kyverno", noLatestSpec(hashedNoLatest, ns))
	cp.Create(t, policy)
	waitForCondition := func(want string) {
		t.Helper()
		err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
			got, cond := waitForVPolCondition(t, policy, controllers.ReasonFallback)
			return strings.Contains(cond.Message, want) && !vpolStatus(got).Generated, fmt.Errorf("condition message %q", cond.Message)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitForCondition("enforced by kyvap's webhook")
	waitForWebhookResources(t, "pods")
	cp.WaitForDenial(t, pod(ns, "latest", "nginx:latest"), "Policy hashed-left-to-kyverno failed")

	kyverno := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name: "kyverno-resource-validating-webhook-cfg", Labels: map[string]string{"webhook.kyverno.io/managed-by": "kyverno"},
	}}
	cp.Create(t, kyverno)
	waitForCondition("left to Kyverno, whose admission controller runs in this cluster")
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		return slices.Index(registeredResources(vwc), "pods") < 0, fmt.Errorf("kyvap's webhook still registers %v (%w)", registeredResources(vwc), err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUserLibraryIsEnforcedByAVAP: a ValidatingPolicy that reads the
// requesting service account with Kyverno's user library
// (parseServiceAccount) is a VAP: kyvap writes the call in the API
// server's CEL (translate/libforms). The API server, impersonating
// users, admits a service account of the ConfigMap's namespace and denies
// one of another namespace, a user that is no service account, and a
// malformed service account name (empty fields, as in Kyverno).
func TestUserLibraryIsEnforcedByAVAP(t *testing.T) {
	const ns = "vpol-user-lib"
	cp.Namespace(t, ns, nil)
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	spec := configMapPolicySpec("user.parseServiceAccount(request.userInfo.username).Namespace == object.metadata.namespace", ns)
	spec.ValidationAction = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	spec.Validations[0].Message = "only the namespace's service accounts"
	policy := validatingPolicy("own-namespace-accounts", spec)
	cp.Create(t, policy)
	got, cond := waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	if !vpolStatus(got).Generated {
		t.Errorf("status.generated = false: %s", cond.Message)
	}
	waitReady(t, policy)

	as := func(username string) client.Client {
		cfg := rest.CopyConfig(cp.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: username, Groups: []string{"system:masters", "system:authenticated"}}
		c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for username, admitted := range map[string]bool{
		"system:serviceaccount:" + ns + ":deployer":    true,
		"system:serviceaccount:" + ns + ":deployer:v2": true,
		"system:serviceaccount:other:deployer":         false,
		"alice":                                        false,
		"system:serviceaccount:" + ns:                  false, // no name: both fields empty
	} {
		err := as(username).Create(context.Background(), controlplane.ConfigMap(ns, "by-user", nil), client.DryRunAll)
		switch {
		case admitted && err != nil:
			t.Errorf("%s: refused: %v", username, err)
		case !admitted && (err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), "only the namespace's service accounts")):
			t.Errorf("%s: want a denial by the VAP, got %v", username, err)
		}
	}
}

// TestNamespaceReadIsEnforcedByAVAP: a ValidatingPolicy that reads the
// request's namespace with Kyverno's resource library
// (resource.Get("v1", "namespaces", "", object.metadata.namespace)) is a
// VAP reading namespaceObject (translate/libforms): the API server denies
// a ConfigMap in a namespace labelled frozen and admits one elsewhere,
// with no webhook; a ConfigMap in a namespace that does not exist is
// refused by the API server itself (not found) before any policy, which
// is why Kyverno's null for a missing namespace never reaches a cluster's
// admission.
func TestNamespaceReadIsEnforcedByAVAP(t *testing.T) {
	const open, frozen = "vpol-ns-open", "vpol-ns-frozen"
	cp.Namespace(t, open, map[string]string{"team": "a"})
	cp.Namespace(t, frozen, map[string]string{"state": "frozen"})
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	nsVariable := []admissionregistrationv1.Variable{{Name: "ns", Expression: "resource.Get('v1', 'namespaces', '', object.metadata.namespace)"}}
	deniedByItsVAP(t, "namespace-not-frozen", nsVariable, "variables.ns.metadata.?labels.?state.orValue('') != 'frozen'", "the namespace is frozen",
		controlplane.ConfigMap(frozen, "cm", nil), open, frozen)
	cp.MustAdmit(t, controlplane.ConfigMap(open, "cm", nil))

	// The request.namespace form, the call read in place.
	const noTeam = "vpol-ns-no-team"
	cp.Namespace(t, noTeam, nil)
	deniedByItsVAP(t, "namespace-has-team", nil, "resource.Get('v1', 'namespaces', '', request.namespace).metadata.?labels.?team.orValue('') != ''", "the namespace has no team",
		controlplane.ConfigMap(noTeam, "cm", nil), open, noTeam)
	cp.MustAdmit(t, controlplane.ConfigMap(open, "cm", nil))

	_, err := cp.DryRunCreate(context.Background(), controlplane.ConfigMap("vpol-ns-missing", "cm", nil))
	if !apierrors.IsNotFound(err) {
		t.Errorf("a ConfigMap in a missing namespace: %v, want the API server's not found", err)
	}
}

// TestParamReadIsEnforcedByAVAP: resource.Get of one named ConfigMap in
// the request's namespace is the VAP's parameter (translate/libforms), so
// the policy is a VAP: the API server denies by the object's data, admits
// where the object is missing (Kyverno's Get gives null, and the
// validation holds then), and follows an object created later.
func TestParamReadIsEnforcedByAVAP(t *testing.T) {
	const listed, unlisted = "vpol-param-listed", "vpol-param-unlisted"
	cp.Namespace(t, listed, nil)
	cp.Namespace(t, unlisted, nil)
	forbidden := func(ns string) *corev1.ConfigMap {
		return controlplane.ConfigMap(ns, "policy-cm", map[string]string{"forbidden": "bad"})
	}
	cp.Create(t, forbidden(listed))
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	cmVariable := []admissionregistrationv1.Variable{{Name: "cm", Expression: "resource.Get('v1', 'configmaps', object.metadata.namespace, 'policy-cm')"}}
	deniedByItsVAP(t, "forbidden-names", cmVariable, "type(variables.cm) == type(null) || !('forbidden' in variables.cm.?data.orValue({})) || object.metadata.name != variables.cm.data.forbidden", "the name is forbidden",
		controlplane.ConfigMap(listed, "bad", nil), listed, unlisted)
	cp.MustAdmit(t, controlplane.ConfigMap(listed, "good", nil))
	// The parameter missing: the binding allows, as Kyverno's rule passes.
	cp.MustAdmit(t, controlplane.ConfigMap(unlisted, "bad", nil))
	// Created later: the API server's informer follows it.
	cp.Create(t, forbidden(unlisted))
	cp.WaitForDenial(t, controlplane.ConfigMap(unlisted, "bad", nil), "the name is forbidden")
}

// deniedByItsVAP creates a ValidatingPolicy that denies ConfigMaps in the
// namespaces by one validation (expression, message) over the variables,
// checks that kyvap translates it entirely into VAPs, and waits until the
// API server denies denied with the message, by the VAP itself.
func deniedByItsVAP(t *testing.T, name string, variables []admissionregistrationv1.Variable, expression, message string, denied client.Object, namespaces ...string) {
	t.Helper()
	spec := configMapPolicySpec(expression, namespaces...)
	spec.ValidationAction = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	spec.Validations[0].Message = message
	spec.Variables = variables
	policy := validatingPolicy(name, spec)
	cp.Create(t, policy)
	got, cond := waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	if !vpolStatus(got).Generated {
		t.Errorf("%s: status.generated = false: %s", name, cond.Message)
	}
	waitReady(t, policy)
	cp.WaitForDenial(t, denied, message)
	if who, err := denierOf(context.Background(), denied); who != "vap" {
		t.Errorf("%s: denied by %q (%v), want the VAP", name, who, err)
	}
}
