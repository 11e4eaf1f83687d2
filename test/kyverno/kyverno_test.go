// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kyverno runs kyvap beside a real Kyverno admission controller
// (v1.19.1, built from its module by hack/build-kyverno.sh and run out of
// cluster against the test control plane), with Kyverno's VAP generator
// off as docs/install.md asks ("With Kyverno"), and checks who enforces
// what.
package kyverno

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/internal/handback"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true, AllKyvernoCRDs: true}, &cp))
}

// startBoth runs Kyverno (its VAP generator as given) and kyvap with its
// webhook, and stops them when the test ends; it returns kyvap's operator.
func startBoth(t *testing.T, kyvernoGenerator bool) *controlplane.Operator {
	t.Helper()
	startKyverno(t, kyvernoGenerator)
	return startKyvap(t)
}

// startKyvap starts kyvap's operator with its webhook, as deployed.
func startKyvap(t *testing.T) *controlplane.Operator {
	t.Helper()
	return cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: true}, controlplane.FreePort(t))
}

// startKyverno starts Kyverno's admission controller until the test ends.
func startKyverno(t testing.TB, kyvernoGenerator bool) *controlplane.Kyverno {
	t.Helper()
	ctx := context.Background()
	ensureAdminBinding(t)
	k, err := cp.StartKyverno(ctx, controlplane.KyvernoOptions{GenerateValidatingAdmissionPolicy: kyvernoGenerator})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Stop(context.Background(), cp); err != nil {
			t.Errorf("stopping Kyverno: %v", err)
		}
	})
	return k
}

// ensureAdminBinding binds cluster-admin to system:masters: Kyverno
// resolves the requester's roles from the bindings, and the test client
// (system:masters) gets cluster-admin through this one.
func ensureAdminBinding(t testing.TB) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:masters"}},
	}
	if err := cp.Client.Create(context.Background(), crb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// kyvernoRegisters reports whether Kyverno's resource webhook configuration
// registers the resource.
func kyvernoRegisters(ctx context.Context, resource string) (bool, error) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "kyverno-resource-validating-webhook-cfg"}, vwc); err != nil {
		return false, err
	}
	for _, w := range vwc.Webhooks {
		for _, r := range w.Rules {
			if slices.Contains(r.Resources, resource) {
				return true, nil
			}
		}
	}
	return false, nil
}

// waitForKyvernoDenial waits until Kyverno's webhook denies the object (a
// dry-run create) with the message.
func waitForKyvernoDenial(t *testing.T, obj client.Object, want string) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, obj)
		if err == nil {
			return false, fmt.Errorf("%s was admitted", obj.GetName())
		}
		return strings.Contains(err.Error(), `admission webhook "validate.kyverno.svc-fail" denied the request`) && strings.Contains(err.Error(), want), err
	})
	if err != nil {
		t.Fatalf("Kyverno never denied %s with %q: %v", obj.GetName(), want, err)
	}
}

// TestWithKyverno runs the cases in one Kyverno and kyvap start: starting
// Kyverno costs tens of seconds.
func TestWithKyverno(t *testing.T) {
	op := startBoth(t, false)
	ctx := context.Background()
	cp.EnsureNamespace(t, "with-kyverno", nil)

	// A fully translated policy: kyvap marks it generated, so Kyverno leaves
	// it out of its webhook; the VAP enforces it.
	secrets := controlplane.ClusterPolicy("kyverno-full", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden-secret", "Secret", "object.metadata.name != 'forbidden'", "no forbidden secrets"))
	got := cp.CreatePolicy(t, secrets, controllers.ReasonAllRulesTranslated)
	if !got.Status.ValidatingAdmissionPolicy.Generated {
		t.Fatalf("a fully translated policy is not generated: %+v", got.Status.ValidatingAdmissionPolicy)
	}

	// A classic pattern policy, compiled to CEL: a VAP, marked generated,
	// so Kyverno skips it (it registers no secrets) and the API server
	// denies.
	classicRule := kyvernov1.Rule{
		Name:           "team-label",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Secret"}, Namespaces: []string{"with-kyverno"}}}}},
		Validation:     &kyvernov1.Validation{Message: "a team label is required", RawPattern: &apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"labels":{"team":"?*"}}}`)}},
	}
	classic := cp.CreatePolicy(t, controlplane.ClusterPolicy("kyverno-classic", kyvernov1.Enforce, classicRule), controllers.ReasonAllRulesTranslated)
	if !classic.Status.ValidatingAdmissionPolicy.Generated {
		t.Fatalf("a compiled pattern policy is not generated: %+v", classic.Status.ValidatingAdmissionPolicy)
	}

	// A mixed policy: its CEL rule is a VAP, its pattern rule (a wildcard
	// key, which the classic compiler refuses) only Kyverno enforces, so it
	// is not generated and Kyverno enforces all of it.
	pattern := kyvernov1.Rule{
		Name:           "team-label",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}, Namespaces: []string{"with-kyverno"}}}}},
		Validation:     &kyvernov1.Validation{Message: "a team label is required", RawPattern: &apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"labels":{"tea?":"?*"}}}`)}},
	}
	cel := controlplane.CELRule("no-forbidden-configmap", "ConfigMap", "object.metadata.name != 'forbidden'", "no forbidden config maps")
	mixed := controlplane.ClusterPolicy("kyverno-mixed", kyvernov1.Enforce, cel, pattern)
	got = cp.CreatePolicy(t, mixed, controllers.ReasonAllRulesTranslated)
	if got.Status.ValidatingAdmissionPolicy.Generated || !strings.Contains(got.Status.ValidatingAdmissionPolicy.Message, `rule "team-label": left to Kyverno`) {
		t.Errorf("mixed policy status %+v, want generated false and the pattern rule left to Kyverno", got.Status.ValidatingAdmissionPolicy)
	}

	// Kyverno registers the mixed policy's kind, and (having seen both
	// policies by then) not the generated one's.
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		cm, err := kyvernoRegisters(ctx, "configmaps")
		return cm, fmt.Errorf("Kyverno does not register configmaps yet (%w)", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := kyvernoRegisters(ctx, "secrets"); err != nil || s {
		t.Errorf("Kyverno registers secrets for a policy kyvap marked generated (%v)", err)
	}
	forbiddenSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "with-kyverno", Name: "forbidden", Labels: map[string]string{"team": "shop"}}}
	cp.WaitForDenial(t, forbiddenSecret, "ValidatingAdmissionPolicy 'kyvap-kyverno-full.no-forbidden-secret'")
	cp.WaitForDenial(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "with-kyverno", Name: "no-team"}}, "ValidatingAdmissionPolicy 'kyvap-kyverno-classic.team-label'")
	// The pattern rule: Kyverno's webhook denies.
	waitForKyvernoDenial(t, controlplane.ConfigMap("with-kyverno", "no-team", nil), "a team label is required")
	// The CEL rule: the VAP denies first (the API server runs VAPs before webhooks).
	labelled := controlplane.ConfigMap("with-kyverno", "forbidden", nil)
	labelled.Labels = map[string]string{"team": "shop"}
	cp.WaitForDenial(t, labelled, "ValidatingAdmissionPolicy 'kyvap-kyverno-mixed.no-forbidden-configmap'")

	// A rule no VAP can express (clusterRoles): kyvap detects the running
	// Kyverno, leaves the rule to it and serves no webhook for it.
	roles := controlplane.CELRule("admins-small", "ConfigMap", "!has(object.data) || size(object.data) <= 1", "at most one key for cluster admins")
	roles.MatchResources.Any[0].ClusterRoles = []string{"cluster-admin"}
	roles.MatchResources.Any[0].Resources.Namespaces = []string{"with-kyverno"}
	rolesPolicy := controlplane.ClusterPolicy("kyverno-roles", kyvernov1.Enforce, roles)
	got = cp.CreatePolicy(t, rolesPolicy, controllers.ReasonFallback)
	if msg := got.Status.ValidatingAdmissionPolicy.Message; !strings.Contains(msg, "left to Kyverno, whose admission controller runs in this cluster") {
		t.Errorf("roles policy status message %q, want the rule left to Kyverno", msg)
	}
	// No webhook configuration of kyvap's stays beside Kyverno. One may
	// exist for a few seconds after the operator starts: a new policy's
	// rule (kyverno-full's) is bridged through kyvap's webhook until its
	// VAP is active when it is reconciled before kyvap has seen Kyverno.
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		if err != nil {
			return false, err
		}
		if vwc == nil {
			return true, nil
		}
		return false, fmt.Errorf("kyvap's webhook configuration exists beside Kyverno: %v", vwc.Webhooks)
	})
	if err != nil {
		t.Error(err)
	}
	twoKeys := controlplane.ConfigMap("with-kyverno", "two-keys", map[string]string{"a": "1", "b": "2"})
	twoKeys.Labels = map[string]string{"team": "shop"}
	waitForKyvernoDenial(t, twoKeys, "at most one key for cluster admins")

	// Uninstalling kyvap: the operator stops, then kyvap handback returns
	// the generated policy to Kyverno while its VAP keeps enforcing.
	op.Stop()
	res, err := handback.Run(ctx, cp.Client, handback.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Policies, "kyverno-full") {
		t.Errorf("handed back %v, want kyverno-full among them", res.Policies)
	}
	full := &kyvernov1.ClusterPolicy{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(secrets), full); err != nil {
		t.Fatal(err)
	}
	if full.Status.ValidatingAdmissionPolicy.Generated || meta.FindStatusCondition(full.Status.Conditions, controllers.ConditionType) != nil {
		t.Errorf("after handback the policy's status is %+v", full.Status)
	}
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		s, err := kyvernoRegisters(ctx, "secrets")
		return s, fmt.Errorf("Kyverno does not take the handed-back policy (%w)", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Labelled, so that kyverno-classic's VAP admits it: where two VAPs
	// deny, the API server reports one in an order that changes with its
	// list of policies (a map's): a stop's CI saw kyverno-classic's.
	forbidden := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "with-kyverno", Name: "forbidden", Labels: map[string]string{"team": "shop"}}}
	cp.WaitForDenial(t, forbidden, "ValidatingAdmissionPolicy 'kyvap-kyverno-full.no-forbidden-secret'")

	// Then the VAPs go, and Kyverno alone enforces the CEL rule.
	res, err = handback.Run(ctx, cp.Client, handback.Options{DeleteVAPs: true})
	if err != nil || res.VAPs == 0 {
		t.Fatalf("handback --delete-vaps: %+v, %v", res, err)
	}
	waitForKyvernoDenial(t, forbidden, "no forbidden secrets")
	var left admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := cp.Client.List(ctx, &left, client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}); err != nil || len(left.Items) != 0 {
		t.Errorf("%d of kyvap's VAPs left (%v)", len(left.Items), err)
	}
}

// TestKyvernoGeneratorOn runs Kyverno with its own VAP generator on (its
// default): it rewrites status.validatingadmissionpolicy of every policy.
// kyvap does not fight over the field: it keeps Kyverno's value and says so,
// with the way out, in its condition; Kyverno then enforces the policy too.
// TestKyvernoGeneratorOn checks that kyvap notices the status Kyverno's
// generator writes. Kyverno's generator reconciles a policy when its spec
// changes and when a VAP the policy owns is added, deleted or changed, and
// writes with its informer's copy without retrying a conflict: when kyvap
// writes the status at the same moment, Kyverno's write is lost. The test
// therefore waits for kyvap's report, then deletes kyvap's VAP (kyvap
// restores it without writing the status) so that Kyverno reconciles the
// policy again with nobody writing beside it. The order "Kyverno first" is
// the unit test's "Kyverno's generator before kyvap's first report".
func TestKyvernoGeneratorOn(t *testing.T) {
	startBoth(t, true)
	ctx := context.Background()
	cp.EnsureNamespace(t, "generator-on", nil)
	policy := controlplane.ClusterPolicy("kyverno-generator-on", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden-service-account", "ServiceAccount", "object.metadata.name != 'forbidden'", "no forbidden service accounts"))
	cp.Create(t, policy)
	got := &kyvernov1.ClusterPolicy{}
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionType)
		return c != nil && c.ObservedGeneration == got.Generation, fmt.Errorf("status %+v", got.Status)
	})
	if err != nil {
		t.Fatalf("kyvap never reported: %v", err)
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kyvap-kyverno-generator-on.no-forbidden-service-account"}}
	if err := cp.Client.Delete(ctx, vap); err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionType)
		vap := got.Status.ValidatingAdmissionPolicy
		return c != nil && c.ObservedGeneration == got.Generation && strings.HasPrefix(c.Message, "Kyverno's ValidatingAdmissionPolicy generator also writes") &&
			strings.HasPrefix(vap.Message, "skip generating ValidatingAdmissionPolicy"), fmt.Errorf("status %+v", got.Status)
	})
	if err != nil {
		t.Fatalf("kyvap never reported Kyverno's generator: %v", err)
	}
	if got.Status.ValidatingAdmissionPolicy.Generated {
		t.Errorf("generated = true while Kyverno's generator owns the field")
	}
	// Kyverno enforces the policy (not generated), and so does kyvap's VAP.
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		sa, err := kyvernoRegisters(ctx, "serviceaccounts")
		return sa, fmt.Errorf("Kyverno does not register serviceaccounts (%w)", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	cp.WaitForDenial(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "generator-on", Name: "forbidden"}}, "ValidatingAdmissionPolicy 'kyvap-kyverno-generator-on.no-forbidden-service-account'")
}
