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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// resourceVersions maps the policy and the VAPs and bindings it controls to
// their resourceVersions.
func resourceVersions(t testing.TB, policy *kyvernov1.ClusterPolicy) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	current := &kyvernov1.ClusterPolicy{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
		t.Fatal(err)
	}
	out["ClusterPolicy/"+current.Name] = current.ResourceVersion
	vaps, bindings, err := cp.GeneratedFor(ctx, current)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vaps {
		out["VAP/"+v.Name] = v.ResourceVersion
	}
	for _, b := range bindings {
		out["Binding/"+b.Name] = b.ResourceVersion
	}
	return out
}

// configMaps is the resource of the hand-written VAPs.
var configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")

func TestEnforcePolicyBecomesVAPAndDenies(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	cp.Namespace(t, "enforce", nil)
	policy := controlplane.ReplicasPolicy("enforce-replicas", kyvernov1.Enforce)
	cp.Create(t, policy)

	got := cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)
	if !got.Status.ValidatingAdmissionPolicy.Generated || got.Status.ValidatingAdmissionPolicy.Message != "" {
		t.Errorf("Kyverno status = %+v, want generated with an empty message", got.Status.ValidatingAdmissionPolicy)
	}
	vaps, bindings, err := cp.GeneratedFor(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if len(vaps) != 1 || len(bindings) != 1 {
		t.Fatalf("got %d VAPs and %d bindings owned by the policy, want 1 and 1", len(vaps), len(bindings))
	}
	if vaps[0].Labels[translate.LabelManagedBy] != translate.ManagedByValue {
		t.Errorf("VAP labels = %v, want managed-by kyvap", vaps[0].Labels)
	}
	if got := bindings[0].Spec.ValidationActions; len(got) != 1 || got[0] != admissionregistrationv1.Deny {
		t.Errorf("binding actions = %v, want [Deny]", got)
	}

	cp.WaitForDenial(t, controlplane.Deployment("enforce", "too-many", 10, nil), controlplane.ReplicasMessage)
	cp.MustAdmit(t, controlplane.Deployment("enforce", "just-right", 3, nil))
}

func TestAuditPolicyWarns(t *testing.T) {
	cp.StartOperator(t, generateOn)
	cp.Namespace(t, "audit", nil)
	policy := controlplane.ReplicasPolicy("audit-replicas", kyvernov1.Audit)
	cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	cp.WaitForWarning(t, controlplane.Deployment("audit", "too-many", 10, nil), controlplane.ReplicasMessage)
}

func TestOverridesGiveEachNamespaceItsAction(t *testing.T) {
	cp.StartOperator(t, generateOn)
	cp.Namespace(t, "override-prod", map[string]string{"env": "prod"})
	cp.Namespace(t, "override-dev", nil)
	cp.Namespace(t, "override-listed", nil)
	policy := controlplane.ReplicasPolicy("override-replicas", kyvernov1.Audit)
	policy.Spec.ValidationFailureActionOverrides = []kyvernov1.ValidationFailureActionOverride{
		{Action: kyvernov1.Enforce, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
		{Action: kyvernov1.Enforce, Namespaces: []string{"override-listed"}},
	}
	cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	cp.WaitForDenial(t, controlplane.Deployment("override-prod", "too-many", 10, nil), controlplane.ReplicasMessage)
	cp.WaitForDenial(t, controlplane.Deployment("override-listed", "too-many", 10, nil), controlplane.ReplicasMessage)
	cp.WaitForWarning(t, controlplane.Deployment("override-dev", "too-many", 10, nil), controlplane.ReplicasMessage)
}

func TestDriftIsReverted(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	policy := controlplane.ReplicasPolicy("drift-replicas", kyvernov1.Enforce)
	got := cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	vaps, bindings, err := cp.GeneratedFor(ctx, got)
	if err != nil || len(vaps) != 1 || len(bindings) != 1 {
		t.Fatalf("generated objects: %d VAPs, %d bindings, %v", len(vaps), len(bindings), err)
	}
	want := vaps[0].Spec.Validations[0].Expression

	// Edit the spec: reverted. Retried on conflict: kube-controller-manager
	// writes the VAP's type-checking status concurrently.
	edited := vaps[0].DeepCopy()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(edited), edited); err != nil {
			return err
		}
		edited.Spec.Validations[0].Expression = "true"
		return cp.Client.Update(ctx, edited)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(edited), &vap); err != nil {
			return false, err
		}
		return vap.Spec.Validations[0].Expression == want, fmt.Errorf("expression is %q", vap.Spec.Validations[0].Expression)
	})
	if err != nil {
		t.Fatalf("an edited VAP was not reverted: %v", err)
	}

	// Add a field kyvap does not set: removed too.
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(edited), &vap); err != nil {
			return err
		}
		vap.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "sneaky", ValueExpression: "'x'"}}
		return cp.Client.Update(ctx, &vap)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(edited), &vap); err != nil {
			return false, err
		}
		return len(vap.Spec.AuditAnnotations) == 0, fmt.Errorf("audit annotations %v", vap.Spec.AuditAnnotations)
	})
	if err != nil {
		t.Fatalf("a field added to a VAP was not removed: %v", err)
	}

	// Remove the owner reference and labels of the binding: restored.
	binding := bindings[0].DeepCopy()
	binding.OwnerReferences = nil
	delete(binding.Labels, "kyvap.io/rule")
	if err := cp.Client.Update(ctx, binding); err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(binding), &b); err != nil {
			return false, err
		}
		return metav1.GetControllerOf(&b) != nil && b.Labels["kyvap.io/rule"] != "", fmt.Errorf("owners %v labels %v", b.OwnerReferences, b.Labels)
	})
	if err != nil {
		t.Fatalf("a binding stripped of its owner reference was not restored: %v", err)
	}

	// Delete the binding: recreated.
	if err := cp.Client.Delete(ctx, &bindings[0]); err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		err := cp.Client.Get(ctx, client.ObjectKeyFromObject(&bindings[0]), &b)
		return err == nil && b.UID != bindings[0].UID, err
	})
	if err != nil {
		t.Fatalf("a deleted binding was not recreated: %v", err)
	}
}

func TestNoWritesWhenNothingChanges(t *testing.T) {
	op := cp.StartOperator(t, generateOn)
	policy := controlplane.ReplicasPolicy("noop-replicas", kyvernov1.Enforce)
	got := cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	// kube-controller-manager type-checks the VAP and writes its status (a
	// write that is not kyvap's); wait for it, then for a reconcile that
	// starts after it (any write kyvap makes in answer is done by then).
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		vaps, _, err := cp.GeneratedFor(ctx, got)
		return err == nil && len(vaps) == 1 && vaps[0].Status.ObservedGeneration == vaps[0].Generation, err
	})
	if err != nil {
		t.Fatalf("the VAP was never type-checked: %v", err)
	}
	op.Touch(t, policy)
	before := resourceVersions(t, policy)
	if len(before) != 3 {
		t.Fatalf("resource versions %v: want the policy, a VAP and a binding", before)
	}

	// Forced resync 1: an exception naming the policy but another rule.
	since := controlplane.Reconciles(t)
	exception := &kyvernov2.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Name: "noop-unrelated", Namespace: "default"},
		Spec: kyvernov2.PolicyExceptionSpec{
			Match:      kyvernov2.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}, Names: []string{"nothing"}}}}},
			Exceptions: []kyvernov2.Exception{{PolicyName: "noop-replicas", RuleNames: []string{"no-such-rule"}}},
		},
	}
	cp.Create(t, exception)
	op.WaitForReconcile(t, exception, since)
	// Forced resync 2: a restart; the new manager reconciles every policy.
	op.Stop()
	since = controlplane.Reconciles(t)
	cp.StartOperator(t, generateOn).WaitForReconcile(t, policy, since)
	after := resourceVersions(t, policy)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s was written: resourceVersion %s -> %s", k, v, after[k])
		}
	}
}

func TestPolicyDeletionGarbageCollects(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	policy := controlplane.ReplicasPolicy("gc-replicas", kyvernov1.Enforce)
	got := cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	vaps, bindings, _ := cp.GeneratedFor(ctx, got)
	if len(vaps) == 0 || len(bindings) == 0 {
		t.Fatal("nothing generated")
	}
	if err := cp.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	err := controlplane.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		err1 := cp.Client.Get(ctx, client.ObjectKeyFromObject(&vaps[0]), &admissionregistrationv1.ValidatingAdmissionPolicy{})
		err2 := cp.Client.Get(ctx, client.ObjectKeyFromObject(&bindings[0]), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
	})
	if err != nil {
		t.Fatalf("the generated objects outlived their policy: %v", err)
	}
}

func TestRemovedRuleObjectsAreDeleted(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	policy := controlplane.ClusterPolicy("two-rules", kyvernov1.Enforce,
		controlplane.CELRule("max-replicas", "Deployment", "object.spec.replicas <= 5", controlplane.ReplicasMessage),
		controlplane.CELRule("named", "ConfigMap", "object.metadata.name != 'forbidden'", "forbidden name"))
	got := cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	vaps, _, _ := cp.GeneratedFor(ctx, got)
	if len(vaps) != 2 {
		t.Fatalf("got %d VAPs for two CEL rules, want 2", len(vaps))
	}
	got.Spec.Rules = got.Spec.Rules[:1]
	if err := cp.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = cp.WaitForStatus(t, got, controllers.ReasonAllRulesTranslated)
	err := controlplane.Eventually(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		vaps, bindings, err := cp.GeneratedFor(ctx, got)
		return err == nil && len(vaps) == 1 && len(bindings) == 1, fmt.Errorf("%d VAPs, %d bindings", len(vaps), len(bindings))
	})
	if err != nil {
		t.Fatalf("the removed rule's objects remain: %v", err)
	}
}

func TestInvalidCELIsReportedAndNotApplied(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	policy := controlplane.ClusterPolicy("invalid-cel", kyvernov1.Enforce,
		controlplane.CELRule("broken", "Deployment", "object.spec.replicas <= ", "broken"))
	got := cp.CreatePolicy(t, policy, controllers.ReasonInvalidRules)
	if got.Status.ValidatingAdmissionPolicy.Generated {
		t.Error("generated = true for a rule that does not compile")
	}
	if !strings.Contains(got.Status.ValidatingAdmissionPolicy.Message, "broken") {
		t.Errorf("status message %q does not name the rule", got.Status.ValidatingAdmissionPolicy.Message)
	}
	vaps, _, _ := cp.GeneratedFor(ctx, got)
	if len(vaps) != 0 {
		t.Errorf("a VAP was generated for CEL that does not compile")
	}
	// The operator keeps working for other policies.
	good := controlplane.ReplicasPolicy("after-invalid", kyvernov1.Enforce)
	cp.CreatePolicy(t, good, controllers.ReasonAllRulesTranslated)
}

func TestForeignVAPIsNotAdopted(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	policy := controlplane.ReplicasPolicy("clash", kyvernov1.Enforce)
	plan, err := translate.Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), generateOn)
	if err != nil || len(plan.ValidatingAdmissionPolicies) != 1 {
		t.Fatalf("planning the clash: %v, %d VAPs", err, len(plan.ValidatingAdmissionPolicies))
	}
	foreign := controlplane.VAP(plan.ValidatingAdmissionPolicies[0].Name, configMaps, []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		admissionregistrationv1.Validation{Expression: "true"})
	foreign.Labels = map[string]string{"owner": "someone-else"}
	cp.Create(t, foreign)
	got := cp.CreatePolicy(t, policy, controllers.ReasonNameConflict)
	if !strings.Contains(got.Status.ValidatingAdmissionPolicy.Message, foreign.Name) {
		t.Errorf("status message %q does not name the clashing object", got.Status.ValidatingAdmissionPolicy.Message)
	}
	var after admissionregistrationv1.ValidatingAdmissionPolicy
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &after); err != nil {
		t.Fatal(err)
	}
	// Its status is written by kube-controller-manager's type checker; its
	// metadata and spec must not have been touched by kyvap.
	touched := after.Generation != foreign.Generation || metav1.GetControllerOf(&after) != nil ||
		after.Labels[translate.LabelManagedBy] != "" || len(after.Annotations) != 0
	for _, mf := range after.ManagedFields {
		touched = touched || mf.Manager == controllers.FieldManager
	}
	if touched {
		t.Errorf("the foreign VAP was modified: %+v", after.ObjectMeta)
	}
}

func TestGenerationToggle(t *testing.T) {
	op := cp.StartOperator(t, generateOn)
	ctx := context.Background()
	policy := controlplane.ReplicasPolicy("toggle-replicas", kyvernov1.Enforce)
	got := cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)

	op.Stop()
	off := cp.StartOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false})
	got = cp.WaitForStatus(t, got, controllers.ReasonGenerationDisabled)
	if got.Status.ValidatingAdmissionPolicy.Generated {
		t.Error("generated = true with generation off")
	}
	if msg := got.Status.ValidatingAdmissionPolicy.Message; !strings.Contains(msg, "NOT ENFORCED") {
		t.Errorf("status message %q does not say the rule is not enforced", msg)
	}
	err := controlplane.Eventually(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		vaps, bindings, err := cp.GeneratedFor(ctx, got)
		return err == nil && len(vaps) == 0 && len(bindings) == 0, fmt.Errorf("%d VAPs, %d bindings", len(vaps), len(bindings))
	})
	if err != nil {
		t.Fatalf("VAPs remain with generation off: %v", err)
	}

	off.Stop()
	cp.StartOperator(t, generateOn)
	got = cp.WaitForStatus(t, got, controllers.ReasonAllRulesTranslated)
	if !got.Status.ValidatingAdmissionPolicy.Generated {
		t.Error("generated = false after switching generation back on")
	}
}

func TestDefaultingMatchesTheAPIServer(t *testing.T) {
	op := cp.StartOperator(t, generateOn)
	ctx := context.Background()
	policy := controlplane.ReplicasPolicy("defaults", kyvernov1.Enforce)
	policy.Spec.Rules[0].MatchResources.Any[0].Resources.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	policy.Spec.Rules[0].MatchResources.Any[0].Resources.Namespaces = []string{"x"}
	policy.Spec.FailurePolicy = ptr.To(kyvernov1.Ignore)
	got := cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	// A second reconcile after defaulting must not write: the VAP's generation stays 1.
	op.Touch(t, policy)
	vaps, bindings, _ := cp.GeneratedFor(ctx, got)
	for _, v := range vaps {
		if v.Generation != 1 {
			t.Errorf("VAP %s was rewritten (generation %d): kyvap's defaulting differs from the API server's", v.Name, v.Generation)
		}
	}
	for _, b := range bindings {
		if b.Generation != 1 {
			t.Errorf("binding %s was rewritten (generation %d)", b.Name, b.Generation)
		}
	}
}

func TestLeaderElectionOneReplicaWrites(t *testing.T) {
	election := ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              "kyvap-test-leader",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(4 * time.Second),
		RenewDeadline:                 ptr.To(3 * time.Second),
		RetryPeriod:                   ptr.To(500 * time.Millisecond),
	}
	first := cp.StartOperatorWithElection(t, generateOn, election)
	select {
	case <-first.Elected:
	case <-time.After(30 * time.Second):
		t.Fatal("the first replica was never elected")
	}
	second := cp.StartOperatorWithElection(t, generateOn, election)
	policy := controlplane.ReplicasPolicy("leader-replicas", kyvernov1.Enforce)
	cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	select {
	case <-second.Elected:
		t.Fatal("both replicas lead at once")
	default:
	}

	// The leader steps down on shutdown; the other takes over and writes.
	first.Stop()
	select {
	case <-second.Elected:
	case <-time.After(30 * time.Second):
		t.Fatal("the second replica did not take over")
	}
	next := controlplane.ReplicasPolicy("after-handover", kyvernov1.Enforce)
	cp.CreatePolicy(t, next, controllers.ReasonAllRulesTranslated)
}

func TestTypeCheckingWarningsReachTheStatus(t *testing.T) {
	cp.StartOperator(t, generateOn)
	// Compiles (object is dynamic to the CEL compiler), but the API server's
	// type checker knows Deployments have no spec.replicaz.
	policy := controlplane.ClusterPolicy("typo-replicas", kyvernov1.Enforce,
		controlplane.CELRule("max-replicas", "Deployment", "!has(object.spec.replicaz) || object.spec.replicaz <= 5", controlplane.ReplicasMessage))
	cp.Create(t, policy)
	err := controlplane.Eventually(context.Background(), 60*time.Second, func(ctx context.Context) (bool, error) {
		var got kyvernov1.ClusterPolicy
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), &got); err != nil {
			return false, err
		}
		msg := got.Status.ValidatingAdmissionPolicy.Message
		return strings.Contains(msg, "type checking") && strings.Contains(msg, "replicaz"), fmt.Errorf("status message %q", msg)
	})
	if err != nil {
		var got kyvernov1.ClusterPolicy
		_ = cp.Client.Get(context.Background(), client.ObjectKeyFromObject(policy), &got)
		vaps, _, _ := cp.GeneratedFor(context.Background(), &got)
		for _, v := range vaps {
			t.Logf("VAP %s status: %+v", v.Name, v.Status)
		}
		t.Fatalf("the VAP's type-checking warning never reached the policy's status: %v", err)
	}
}

// TestCompiledPatternsTypeCheck: the API server's type checker (the
// validatingadmissionpolicy-status controller) accepts the expressions a
// classic pattern compiles to, for the Pod rule and its pod-controller
// variants, against each kind's schema. A policy with a known type error
// (Deployments have no spec.replicaz) shows first that the checker reads
// the schemas; the pattern policy is created after it.
func TestCompiledPatternsTypeCheck(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	// The checker reads each group-version's schema when it needs it: one
	// known type error per kind the pattern's VAPs match.
	typo := "!has(object.spec.replicaz) || object.spec.replicaz <= 5"
	sentinel := controlplane.ClusterPolicy("typecheck-sentinel", kyvernov1.Enforce,
		controlplane.CELRule("pods", "Pod", typo, controlplane.ReplicasMessage),
		controlplane.CELRule("deployments", "Deployment", typo, controlplane.ReplicasMessage),
		controlplane.CELRule("cronjobs", "CronJob", typo, controlplane.ReplicasMessage))
	sentinel.Annotations = map[string]string{kyvernov1.AutogenControllersAnnotation: "none"}
	cp.Create(t, sentinel)
	for _, rule := range []string{"pods", "deployments", "cronjobs"} {
		err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: "kyvap-typecheck-sentinel." + rule}, vap); err != nil {
				return false, err
			}
			return vap.Status.TypeChecking != nil && len(vap.Status.TypeChecking.ExpressionWarnings) > 0, fmt.Errorf("no type-checking warning yet: %+v", vap.Status)
		})
		if err != nil {
			t.Fatalf("the type checker never read the schema for %s: %v", rule, err)
		}
	}
	pattern := kyvernov1.Rule{
		Name:           "privileged",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
		Validation: &kyvernov1.Validation{Message: "privileged mode is disallowed", RawPattern: &apiextensionsv1.JSON{Raw: []byte(
			`{"spec":{"=(initContainers)":[{"=(securityContext)":{"=(privileged)":"false"}}],"containers":[{"=(securityContext)":{"=(privileged)":"false"}, "image": "!*:latest"}]}}`)}},
	}
	// A deny rule with the JMESPath forms the compiler takes: typed
	// fields, projections, flatten and length(), defaults, the request's
	// user, a context variable, a message variable.
	deny := kyvernov1.Rule{
		Name:           "deny-checks",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
		Context:        []apiextensionsv1.JSON{{Raw: []byte(`{"name":"hostNetwork","variable":{"jmesPath":"request.object.spec.hostNetwork","default":false}}`)}},
		// allowExistingViolations off: with context variables Kyverno
		// judges the old object with the new one's values (refused).
		Validation: &kyvernov1.Validation{Message: "Pod {{ request.object.metadata.name }} is refused", AllowExistingViolations: ptr.To(false), Deny: &apiextensionsv1.JSON{Raw: []byte(`{"conditions":{"any":[
			{"key":"{{ request.object.spec.containers[].image }}","operator":"AnyNotIn","value":["nginx:*"]},
			{"key":"{{ request.object.spec.containers[] | length(@) }}","operator":"GreaterThan","value":"3"},
			{"key":"{{ request.object.metadata.labels.team || '' }}","operator":"Equals","value":""},
			{"key":"{{ request.object.spec.containers[0].securityContext.privileged || ` + "`false`" + ` }}","operator":"Equals","value":true},
			{"key":"{{ request.userInfo.groups || ` + "`[]`" + ` }}","operator":"AnyIn","value":["blocked"]},
			{"key":"{{ hostNetwork }}","operator":"Equals","value":true}]}}`)}},
	}
	// Conditional and global anchors (the outcome codes of the pattern,
	// in the precondition and the validation) and comparisons (a duration
	// parsed, quantities, ranges) on typed fields.
	anchors := kyvernov1.Rule{
		Name:           "anchors",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
		Validation: &kyvernov1.Validation{Message: "web containers need a readiness probe", RawPattern: &apiextensionsv1.JSON{Raw: []byte(
			`{"metadata":{"(labels)":{"(tier)":"frontend"}},"spec":{"<(hostNetwork)":false,"=(terminationGracePeriodSeconds)":"<=30","containers":[{"(name)":"web-*","=(imagePullPolicy)":"Always","X(command)":"null","readinessProbe":{"periodSeconds":">0","=(timeoutSeconds)":"1-10"},"resources":{"limits":{"memory":"<=2Gi","cpu":"!0"}}}]}}`)}},
	}
	cp.CreatePolicy(t, controlplane.ClusterPolicy("typecheck-pattern", kyvernov1.Enforce, pattern, deny, anchors), controllers.ReasonAllRulesTranslated)
	for _, rule := range []string{"privileged", "autogen-privileged", "autogen-cronjob-privileged", "deny-checks", "autogen-deny-checks", "autogen-cronjob-deny-checks", "anchors", "autogen-anchors", "autogen-cronjob-anchors"} {
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: "kyvap-typecheck-pattern." + rule}, vap); err != nil {
				return false, err
			}
			return vap.Status.TypeChecking != nil && vap.Status.ObservedGeneration == vap.Generation, fmt.Errorf("not type-checked yet: %+v", vap.Status)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range vap.Status.TypeChecking.ExpressionWarnings {
			t.Errorf("%s: type checking: %s: %s", vap.Name, w.FieldRef, w.Warning)
		}
	}
}

func TestMetrics(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	translatedBefore := controlplane.MetricValue(t, "kyvap_rules", map[string]string{"verdict": "Translated"})
	fallbackBefore := controlplane.MetricValue(t, "kyvap_rules", map[string]string{"verdict": "Fallback", "reason": "RolesOrClusterRoles"})
	driftBefore := controlplane.MetricValue(t, "kyvap_drift_reverts_total", map[string]string{"kind": "ValidatingAdmissionPolicy"})

	policy := controlplane.ReplicasPolicy("metrics-replicas", kyvernov1.Enforce)
	roles := controlplane.ReplicasPolicy("metrics-roles", kyvernov1.Enforce)
	roles.Spec.Rules[0].MatchResources.Any[0].ClusterRoles = []string{"cluster-admin"}
	cp.Create(t, policy)
	cp.Create(t, roles)
	got := cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)
	cp.WaitForStatus(t, roles, controllers.ReasonFallback)
	if d := controlplane.MetricValue(t, "kyvap_rules", map[string]string{"verdict": "Translated"}) - translatedBefore; d < 1 {
		t.Errorf("kyvap_rules{verdict=Translated} grew by %v, want >= 1", d)
	}
	if d := controlplane.MetricValue(t, "kyvap_rules", map[string]string{"verdict": "Fallback", "reason": "RolesOrClusterRoles"}) - fallbackBefore; d != 1 {
		t.Errorf("kyvap_rules{verdict=Fallback,reason=RolesOrClusterRoles} grew by %v, want 1", d)
	}
	if controlplane.MetricValue(t, "kyvap_policies", map[string]string{"outcome": controllers.ReasonFallback}) < 1 {
		t.Error("kyvap_policies{outcome=RulesOnFallback} is below 1")
	}

	vaps, _, _ := cp.GeneratedFor(ctx, got)
	if len(vaps) != 1 {
		t.Fatalf("%d VAPs", len(vaps))
	}
	edited := vaps[0].DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(edited), edited); err != nil {
			return err
		}
		edited.Spec.Validations[0].Expression = "true"
		return cp.Client.Update(ctx, edited)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) {
		d := controlplane.MetricValue(t, "kyvap_drift_reverts_total", map[string]string{"kind": "ValidatingAdmissionPolicy"}) - driftBefore
		return d >= 1, fmt.Errorf("drift reverts grew by %v", d)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCELCompatibilityVersionOfTheCluster: the operator translates for the
// CEL environment the API server compiles new VAPs with (one minor below
// its own version), discovered from /version. list.includes() arrived at
// compatibility 1.37: the 1.37 API server refuses it in a new VAP, so the
// rule goes to the fallback engine instead of failing to apply.
func TestCELCompatibilityVersionOfTheCluster(t *testing.T) {
	ctx := context.Background()
	expression := "['a', 'b'].includes(object.metadata.name) == false"
	// The API server itself refuses the expression in a VAP.
	vap := controlplane.VAP("kyvap-test-includes", configMaps, []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		admissionregistrationv1.Validation{Expression: expression})
	if err := cp.Client.Create(ctx, vap); err == nil {
		_ = cp.Client.Delete(ctx, vap)
		t.Fatal("the API server accepted list.includes() in a new VAP; this test needs an expression newer than its CEL compatibility version")
	} else if !apierrors.IsInvalid(err) {
		t.Fatalf("creating the VAP: %v", err)
	}

	op := cp.StartOperator(t, generateOn) // no CompatibilityVersion: discovered
	if got, want := op.Reconciler.Options.CompatibilityVersion, "1.36"; got != want {
		t.Errorf("CEL compatibility version discovered from the v1.37 API server = %q, want %q", got, want)
	}
	policy := controlplane.ClusterPolicy("cel-newer-than-cluster", kyvernov1.Enforce,
		controlplane.CELRule("includes", "ConfigMap", expression, "not a or b"))
	got := cp.CreatePolicy(t, policy, controllers.ReasonFallback)
	// Kyverno v1.19.1's CEL environment (1.36 libraries) lacks it too.
	if msg := got.Status.ValidatingAdmissionPolicy.Message; !strings.Contains(msg, string(model.ReasonCELNotInKyverno)) || !strings.Contains(msg, "1.36") {
		t.Errorf("status message %q does not say the expression needs a newer CEL environment than 1.36", msg)
	}
	if vaps, _, _ := cp.GeneratedFor(ctx, got); len(vaps) != 0 {
		t.Errorf("%d VAPs generated for an expression the API server refuses", len(vaps))
	}
}
