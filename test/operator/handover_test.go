// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

type staticResolvers struct{}

func (staticResolvers) Resolver() kyverno.KindResolver { return kyverno.NewStaticResolver() }

// TestNewLeaderKeepsTheConfigurationUntilItsEngineIsLoaded: a replica
// whose engine has not loaded every policy yet (a freshly elected leader)
// would compute an empty configuration and delete the one the other
// replica's rules need; it leaves it alone until its engine is loaded, and
// then reconciles as usual.
func TestNewLeaderKeepsTheConfigurationUntilItsEngineIsLoaded(t *testing.T) {
	ctx := context.Background()
	const name = "kyvap-handover-test"
	existing := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{translate.LabelManagedBy: translate.ManagedByValue}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "fail-10.fallback.kyvap.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate/fail/10")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kyvap-handover-test": "never"}},
		}},
	}
	cp.Create(t, existing)
	loaded := false
	r := &webhook.ConfigurationReconciler{
		Client: cp.Client, Engine: engine.New(), Resolvers: staticResolvers{},
		Options:      webhook.ConfigOptions{Name: name, URL: "https://127.0.0.1:1"},
		CABundle:     func() []byte { return []byte("ca") },
		EngineLoaded: func() bool { return loaded },
	}
	result, err := r.Reconcile(ctx, reconcile.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if result.RequeueAfter == 0 {
		t.Error("a reconcile waiting for the engine must look again")
	}
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatalf("the configuration was removed before the engine was loaded: %v", err)
	}
	if got.ResourceVersion != existing.ResourceVersion {
		t.Errorf("the configuration was written before the engine was loaded")
	}

	// Loaded, with no fallback rule: the configuration goes.
	loaded = true
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); !apierrors.IsNotFound(err) {
		t.Errorf("once loaded, an engine without rules removes the configuration; get: %v", err)
	}
}

// denierOf says who denied a dry-run create of obj: "vap", "webhook", or
// "" when it was admitted.
func denierOf(ctx context.Context, obj client.Object) (string, error) {
	_, err := cp.DryRunCreate(ctx, obj)
	switch {
	case err == nil:
		return "", nil
	case strings.Contains(err.Error(), "ValidatingAdmissionPolicy"):
		return "vap", nil
	case strings.Contains(err.Error(), "admission webhook"):
		return "webhook", nil
	}
	return "", err
}

// waitForDenier waits until obj is denied by who.
func waitForDenier(t *testing.T, obj client.Object, who string) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		got, err := denierOf(ctx, obj)
		return got == who, fmt.Errorf("denied by %q (%w), want %q", got, err, who)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHandOverNeverLeavesARuleUnenforced moves a rule from kyvap's webhook
// to a VAP and back while the new side cannot be put in place (a foreign
// object holds the VAP's name, then the webhook configuration's): the old
// side keeps enforcing, and lets go once the new one is in place.
func TestHandOverNeverLeavesARuleUnenforced(t *testing.T) {
	ctx := context.Background()
	const ns = "handover"
	cp.Namespace(t, ns, nil)
	op := cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	forbidden := controlplane.ConfigMap(ns, "forbidden", nil)
	policy := controlplane.ClusterPolicy("handover", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden", "ConfigMap", "object.metadata.name != 'forbidden'", "no forbidden config maps"))
	plan, err := translate.Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), generateOn)
	if err != nil || len(plan.ValidatingAdmissionPolicies) != 1 {
		t.Fatalf("plan: %v %+v", err, plan.Rules)
	}
	vapName := plan.ValidatingAdmissionPolicies[0].Name

	// Webhook → VAP, while a foreign VAP holds the name.
	policy.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, policy, controllers.ReasonFallback)
	waitForDenier(t, forbidden, "webhook")
	foreign := controlplane.VAP(vapName, corev1.SchemeGroupVersion.WithResource("secrets"), []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, admissionregistrationv1.Validation{Expression: "true"})
	cp.Create(t, foreign)
	current := &kyvernov1.ClusterPolicy{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
		t.Fatal(err)
	}
	current.Annotations = nil
	if err := cp.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	cp.WaitForStatus(t, current, controllers.ReasonNameConflict)
	if got, err := denierOf(ctx, forbidden); got != "webhook" {
		t.Fatalf("while the VAP cannot be created, the rule must stay in the webhook; denied by %q (%v)", got, err)
	}
	if err := cp.Client.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	waitForDenier(t, forbidden, "vap")
	err = controlplane.Eventually(ctx, time.Minute, func(context.Context) (bool, error) {
		for _, fr := range op.Engine.Rules() {
			if fr.Policy == policy.Name {
				return false, fmt.Errorf("the engine still holds %s", fr.Rule.Name)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("once the VAP exists the webhook lets the rule go: %v", err)
	}

	// VAP → webhook, while a foreign webhook configuration holds kyvap's
	// name. kyvap's own configuration goes once its engine holds no rule,
	// asynchronously: wait for that before taking the name.
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		return vwc == nil && err == nil, fmt.Errorf("kyvap's webhook configuration is still there (%w)", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	foreignVWC := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}}
	cp.Create(t, foreignVWC)
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
		t.Fatal(err)
	}
	current.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	if err := cp.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	cp.WaitForStatus(t, current, controllers.ReasonFallback)
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: vapName}, &admissionregistrationv1.ValidatingAdmissionPolicy{}); err != nil {
		t.Fatalf("while the webhook configuration cannot be written, the rule's VAP must stay: %v", err)
	}
	if got, err := denierOf(ctx, forbidden); got != "vap" {
		t.Fatalf("while the webhook does not cover the rule, its VAP must enforce it; denied by %q (%v)", got, err)
	}
	if err := cp.Client.Delete(ctx, foreignVWC); err != nil {
		t.Fatal(err)
	}
	waitForDenier(t, forbidden, "webhook")
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		err := cp.Client.Get(ctx, client.ObjectKey{Name: vapName}, &admissionregistrationv1.ValidatingAdmissionPolicy{})
		return apierrors.IsNotFound(err), fmt.Errorf("VAP %s still there: %w", vapName, err)
	})
	if err != nil {
		t.Errorf("once the webhook covers the rule its VAP goes: %v", err)
	}
}

// TestReplicasFollowTheLeadersOptions runs a leader with generation off
// and a second replica with generation on (a rollout that switches the
// flag): the leader writes no VAP, so the second replica's engine must
// still enforce the rule, following the leader's options; when it leads,
// its own apply.
func TestReplicasFollowTheLeadersOptions(t *testing.T) {
	election := ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              "kyvap-test-options",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(4 * time.Second),
		RenewDeadline:                 ptr.To(3 * time.Second),
		RetryPeriod:                   ptr.To(500 * time.Millisecond),
	}
	leader := cp.StartWebhookOperatorWithElection(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t), election)
	select {
	case <-leader.Elected:
	case <-time.After(30 * time.Second):
		t.Fatal("the first replica was never elected")
	}
	follower := cp.StartWebhookOperatorWithElection(t, generateOn, controlplane.FreePort(t), election)
	policy := controlplane.ClusterPolicy("follow-leader", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden", "ConfigMap", "object.metadata.name != 'forbidden'", "no forbidden config maps"))
	cp.CreatePolicy(t, policy, controllers.ReasonGenerationDisabled)
	enforces := func(op *controlplane.Operator) bool {
		for _, fr := range op.Engine.Rules() {
			if fr.Policy == policy.Name {
				return true
			}
		}
		return false
	}
	err := controlplane.Eventually(context.Background(), time.Minute, func(context.Context) (bool, error) {
		return enforces(follower), errors.New("the follower's engine does not hold the rule the leader left to the webhook")
	})
	if err != nil {
		t.Fatal(err)
	}

	// A follower also follows Kyverno's configuration (its watches run on
	// every replica, not only once elected).
	cp.EnsureNamespace(t, "kyverno", nil)
	cp.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kyverno", Name: "kyverno"}, Data: map[string]string{"excludeUsernames": "follower-test"}})
	err = controlplane.Eventually(context.Background(), time.Minute, func(context.Context) (bool, error) {
		cfg := follower.Engine.KyvernoConfig()
		return cfg != nil && len(cfg.Exclude.Usernames) == 1 && cfg.Exclude.Usernames[0] == "follower-test", fmt.Errorf("the follower's engine has %+v", cfg)
	})
	if err != nil {
		t.Fatal(err)
	}

	// The follower takes over: its own options apply, the rule becomes a VAP
	// and leaves its engine.
	leader.Stop()
	select {
	case <-follower.Elected:
	case <-time.After(30 * time.Second):
		t.Fatal("the second replica did not take over")
	}
	cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)
	err = controlplane.Eventually(context.Background(), time.Minute, func(context.Context) (bool, error) {
		return !enforces(follower), errors.New("the new leader's engine still holds a rule its VAP enforces")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStaleLeaderOptionsAreIgnoredByTheLeader: options an earlier leader
// published (generation on) do not change what a new leader with
// generation off enforces in its webhook.
func TestStaleLeaderOptionsAreIgnoredByTheLeader(t *testing.T) {
	cp.EnsureNamespace(t, controlplane.OperatorNamespace, nil)
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.OperatorNamespace, Name: "kyvap-translation-options"},
		Data: map[string]string{"generateValidatingAdmissionPolicy": "true", "celCompatibilityVersion": "", "respectGenerateField": "false"}}
	if err := cp.Client.Delete(context.Background(), stale.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	cp.Create(t, stale)
	op := cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t))
	policy := controlplane.ClusterPolicy("stale-options", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden", "ConfigMap", "object.metadata.name != 'forbidden'", "no forbidden config maps"))
	cp.CreatePolicy(t, policy, controllers.ReasonGenerationDisabled)
	cp.Namespace(t, "stale-options", nil)
	waitForDenier(t, controlplane.ConfigMap("stale-options", "forbidden", nil), "webhook")
	for _, fr := range op.Engine.Rules() {
		if fr.Policy == policy.Name {
			return
		}
	}
	t.Error("the leader's engine does not hold the rule its own options hand to the webhook")
}

// probeUntil dry-run creates obj in a loop until done says so, and fails
// the test when obj is admitted after its first denial: a rule moving
// between kyvap's webhook and a VAP must never be enforced by nobody, even
// for the second the API server takes to compile a new VAP. It returns
// who denied first.
func probeUntil(t *testing.T, obj client.Object, done func(denier string) bool) string {
	t.Helper()
	ctx := context.Background()
	first := ""
	deadline := time.Now().Add(2 * time.Minute)
	for probes := 0; ; probes++ {
		denier, err := denierOf(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case denier == "" && first != "":
			t.Fatalf("%s was admitted after its first denial (by %s), probe %d", obj.GetName(), first, probes)
		case first == "":
			first = denier
		}
		if first != "" && done(denier) {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d probes: last denied by %q", probes, denier)
		}
	}
}

// engineHolds reports whether the operator's engine enforces a rule of
// the policy.
func engineHolds(op *controlplane.Operator, policy string) bool {
	for _, fr := range op.Engine.Rules() {
		if fr.Policy == policy {
			return true
		}
	}
	return false
}

// TestNoGapWhileAVAPIsCompiled: a rule moving from kyvap's webhook to a VAP
// stays in the webhook until the API server enforces the VAP, and a new
// policy's rule is enforced by the webhook until its VAP is: in both
// cases, once a request is denied, none is admitted, and in the end only
// the VAP enforces the rule.
func TestNoGapWhileAVAPIsCompiled(t *testing.T) {
	ctx := context.Background()
	const ns = "no-gap"
	cp.Namespace(t, ns, nil)
	op := cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	forbidden := controlplane.ConfigMap(ns, "forbidden", nil)
	vapOnly := func(denier string) bool {
		return denier == "vap" && !engineHolds(op, "no-gap-move") && !engineHolds(op, "no-gap-new")
	}

	t.Run("webhook to VAP", func(t *testing.T) {
		policy := controlplane.ClusterPolicy("no-gap-move", kyvernov1.Enforce,
			controlplane.CELRule("no-forbidden", "ConfigMap", "object.metadata.name != 'forbidden'", "no forbidden config maps"))
		policy.Spec.Rules[0].MatchResources.Any[0].Resources.Namespaces = []string{ns}
		policy.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
		cp.CreatePolicy(t, policy, controllers.ReasonFallback)
		waitForDenier(t, forbidden, "webhook")
		current := &kyvernov1.ClusterPolicy{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
			t.Fatal(err)
		}
		current.Annotations = nil
		if err := cp.Client.Update(ctx, current); err != nil {
			t.Fatal(err)
		}
		probeUntil(t, forbidden, vapOnly)
		if err := cp.Client.Delete(ctx, current); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("new policy", func(t *testing.T) {
		other := controlplane.ConfigMap(ns, "also-forbidden", nil)
		policy := controlplane.ClusterPolicy("no-gap-new", kyvernov1.Enforce,
			controlplane.CELRule("no-also-forbidden", "ConfigMap", "object.metadata.name != 'also-forbidden'", "no also-forbidden config maps"))
		policy.Spec.Rules[0].MatchResources.Any[0].Resources.Namespaces = []string{ns}
		bridged := false
		cp.Create(t, policy)
		probeUntil(t, other, func(denier string) bool {
			bridged = bridged || engineHolds(op, "no-gap-new")
			return vapOnly(denier)
		})
		if !bridged {
			t.Error("the engine never enforced the new policy's rule while its VAP was compiled")
		}
	})
}
