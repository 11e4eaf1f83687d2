// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// vpolSpec is a ValidatingPolicy matching creates of the resource
// (group/version/resource) in the namespace only, with one validation,
// background scans off, that opts into Kyverno's own VAP generator when
// optIn is set.
func vpolSpec(namespace, group, version, resource, expression, message string, optIn bool) policiesv1.ValidatingPolicySpec {
	off := false
	spec := policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
				},
			}},
		},
		Validations:             []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		EvaluationConfiguration: &policiesv1.EvaluationConfiguration{Background: &policiesv1.BackgroundConfiguration{Enabled: &off}},
	}
	if optIn {
		on := true
		spec.AutogenConfiguration = &policiesv1.ValidatingPolicyAutogenConfiguration{
			ValidatingAdmissionPolicy: &policiesv1.VapGenerationConfiguration{Enabled: &on},
		}
	}
	return spec
}

// kyvapVAPsOf lists kyvap's VAPs and bindings of the ValidatingPolicy.
func kyvapVAPsOf(ctx context.Context, name string) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	sel := client.MatchingLabels{translate.LabelPolicyKind: string(model.KindValidatingPolicy), translate.LabelPolicy: name}
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := cp.Client.List(ctx, &vaps, sel); err != nil {
		return nil, nil, err
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := cp.Client.List(ctx, &bindings, sel); err != nil {
		return nil, nil, err
	}
	return vaps.Items, bindings.Items, nil
}

// waitForVPol waits until kyvap's condition on the ValidatingPolicy
// reflects its generation and check accepts the policy, and returns it.
func waitForVPol(t *testing.T, name string, check func(*policiesv1.ValidatingPolicy, *metav1.Condition) error) *policiesv1.ValidatingPolicy {
	t.Helper()
	got := &policiesv1.ValidatingPolicy{}
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.ConditionStatus.Conditions, controllers.ConditionType)
		if c == nil || c.ObservedGeneration != got.Generation {
			return false, fmt.Errorf("no kyvap condition for generation %d: status %+v", got.Generation, got.Status)
		}
		if err := check(got, c); err != nil {
			return false, fmt.Errorf("%w (status %+v)", err, got.Status)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("ValidatingPolicy %s: %v", name, err)
	}
	return got
}

// waitForDenialBy waits until the API server denies the object (a dry-run
// create) with an error containing every one of want.
func waitForDenialBy(t testing.TB, obj client.Object, want ...string) error {
	t.Helper()
	var last error
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, obj)
		if err == nil {
			return false, fmt.Errorf("%s was admitted", obj.GetName())
		}
		last = err
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the API server never denied %s %s with %q: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), want, err)
	}
	return last
}

// waitForKyvapVAPs waits until kyvap's VAPs of the policy are n, and no
// VAP of Kyverno's generator (vpol-<name>) exists, and returns them.
func waitForKyvapVAPs(t *testing.T, name string, n int) []admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	var vaps []admissionregistrationv1.ValidatingAdmissionPolicy
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
		var err error
		vaps, bindings, err = kyvapVAPsOf(ctx, name)
		if err != nil {
			return false, err
		}
		if len(vaps) != n || len(bindings) != n {
			return false, fmt.Errorf("kyvap has %d VAPs and %d bindings, want %d", len(vaps), len(bindings), n)
		}
		err = cp.Client.Get(ctx, client.ObjectKey{Name: "vpol-" + name}, &admissionregistrationv1.ValidatingAdmissionPolicy{})
		if err == nil {
			return false, fmt.Errorf("Kyverno's VAP vpol-%s exists beside kyvap's", name)
		}
		return apierrors.IsNotFound(err), err
	})
	if err != nil {
		t.Fatalf("ValidatingPolicy %s: %v", name, err)
	}
	for _, v := range vaps {
		if !strings.HasPrefix(v.Name, "kyvap-") || v.Labels[translate.LabelManagedBy] != translate.ManagedByValue {
			t.Errorf("VAP %s labelled %v is not kyvap's", v.Name, v.Labels)
		}
	}
	return vaps
}

// TestValidatingPoliciesWithKyvernosGenerator runs Kyverno with its VAP
// generator on (its default) beside kyvap, and checks who makes the VAPs of
// policies.kyverno.io ValidatingPolicies: Kyverno's generator those that
// opt in (spec.autogen.validatingAdmissionPolicy.enabled) and have no
// pod-controller variants, kyvap all the others; never both. One Kyverno
// start serves all cases: it costs tens of seconds.
func TestValidatingPoliciesWithKyvernosGenerator(t *testing.T) {
	kyverno := startKyverno(t, true)
	startKyvap(t)
	t.Run("OptedInDeploymentsPolicyIsKyvernos", func(t *testing.T) {
		ctx := context.Background()
		const ns = "vpol-kyverno-deploy"
		cp.EnsureNamespace(t, ns, nil)
		const name = "kyv-deploy-replicas"
		const message = "at most 3 replicas"
		policy := &policiesv1.ValidatingPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       vpolSpec(ns, "apps", "v1", "deployments", "object.spec.replicas <= 3", message, true),
		}
		cp.Create(t, policy)

		// kyvap leaves the policy to Kyverno's generator and says so.
		got := waitForVPol(t, name, func(_ *policiesv1.ValidatingPolicy, c *metav1.Condition) error {
			if c.Reason != controllers.ReasonNotForKyvap || !strings.Contains(c.Message, string(model.ReasonKyvernoGeneratesVAP)) {
				return fmt.Errorf("condition %s/%s: %q does not leave the policy to Kyverno's generator", c.Status, c.Reason, c.Message)
			}
			return nil
		})
		c := meta.FindStatusCondition(got.Status.ConditionStatus.Conditions, controllers.ConditionType)
		t.Logf("kyvap's condition: %s/%s: %s", c.Status, c.Reason, c.Message)

		// Kyverno's generator makes vpol-<name>, owned by the policy.
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			err := cp.Client.Get(ctx, client.ObjectKey{Name: "vpol-" + name}, vap)
			return err == nil, err
		})
		if err != nil {
			t.Fatalf("Kyverno's generator never made vpol-%s: %v; Kyverno's log ends with:\n%s", name, err, kyverno.LogTail())
		}
		// Its status write (generated: true) races the other writers of
		// a new policy's status (its policy status controller, kyvap's
		// condition) and is not retried on conflict (updatePolicyStatus in
		// pkg/controllers/admissionpolicygenerator/controller.go): it
		// may be lost. Deleting its VAP makes it reconcile the policy
		// again, with nobody writing beside it: it recreates the VAP and
		// marks the policy generated, and kyvap leaves that field alone.
		// The wait is a hang guard, not a timing goal: beside the corpus
		// tests of a loaded CI, Kyverno's generator once took more than a
		// minute to reconcile the deletion.
		if err := cp.Client.Delete(ctx, vap); err != nil {
			t.Fatal(err)
		}
		err = controlplane.Eventually(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
			recreated := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: "vpol-" + name}, recreated); err != nil {
				return false, err
			}
			if recreated.UID == vap.UID {
				return false, fmt.Errorf("vpol-%s not recreated yet", name)
			}
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
				return false, err
			}
			vap = recreated
			return got.Status.Generated, fmt.Errorf("status.generated is false: %+v", got.Status)
		})
		if err != nil {
			t.Fatalf("Kyverno's generator never marked its policy generated: %v; Kyverno's log ends with:\n%s", err, kyverno.LogTail())
		}
		if ref := metav1.GetControllerOf(vap); ref == nil || ref.Kind != "ValidatingPolicy" || ref.Name != name {
			if len(vap.OwnerReferences) != 1 || vap.OwnerReferences[0].Name != name {
				t.Errorf("vpol-%s owners %+v, want the ValidatingPolicy", name, vap.OwnerReferences)
			}
		}
		if vap.Labels[translate.LabelManagedBy] == translate.ManagedByValue {
			t.Errorf("vpol-%s is labelled as kyvap's: %v", name, vap.Labels)
		}

		// kyvap made none.
		vaps, bindings, err := kyvapVAPsOf(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(vaps)+len(bindings) != 0 {
			t.Errorf("kyvap generated %d VAPs and %d bindings for a policy Kyverno's generator takes", len(vaps), len(bindings))
		}

		// A bad Deployment is denied, by Kyverno's VAP (or its webhook).
		// kyvap enforced the policy itself until Kyverno's generator made
		// its VAP (a policy is never enforced by nobody), and the API
		// server may still hold kyvap's deleted VAP in its cache for a
		// moment (it reports the first denying VAP of its map): kyvap's
		// VAPs are gone from storage (above), so the denial must come to
		// name Kyverno's.
		deployment := controlplane.Deployment(ns, "too-many", 5, nil)
		var denial error
		err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			denial = waitForDenialBy(t, deployment, message)
			return !strings.Contains(denial.Error(), "kyvap-"), denial
		})
		if err != nil {
			t.Errorf("the API server still denies with kyvap's VAP a minute after kyvap deleted it: %v", err)
		}
		if !strings.Contains(denial.Error(), "vpol-"+name) && !strings.Contains(denial.Error(), name) {
			t.Errorf("denial %q does not name the policy", denial)
		}
		t.Logf("denial: %v", denial)
		cp.MustAdmit(t, controlplane.Deployment(ns, "few", 2, nil))

		// Still none of kyvap's, and Kyverno's status stands.
		vaps, bindings, err = kyvapVAPsOf(ctx, name)
		if err != nil || len(vaps)+len(bindings) != 0 {
			t.Errorf("kyvap generated %d VAPs and %d bindings (%v)", len(vaps), len(bindings), err)
		}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil || !got.Status.Generated {
			t.Errorf("status %+v (%v), want Kyverno's generated: true", got.Status, err)
		}
	})

	// podPolicy checks a Pod policy with background scans off: it has
	// pod-controller variants, so Kyverno's generator skips it (opted in or
	// not) and kyvap makes its VAPs; kyvap marks it generated and keeps it
	// so when Kyverno's generator rewrites the field.
	podPolicy := func(t *testing.T, ns, name string, optIn bool, kyvernosMessage string) {
		ctx := context.Background()
		cp.EnsureNamespace(t, ns, nil)
		const message = "images must not use the latest tag"
		policy := &policiesv1.ValidatingPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       vpolSpec(ns, "", "v1", "pods", "object.spec.containers.all(c, !c.image.endsWith(':latest'))", message, optIn),
		}
		cp.Create(t, policy)

		// Kyverno has written the autogen status (so its generator skips
		// the policy), and kyvap marks it generated. Kyverno's generator
		// message may be missing yet: its first writes race the other
		// writers of a new policy's status and are not retried.
		got := waitForVPol(t, name, func(p *policiesv1.ValidatingPolicy, c *metav1.Condition) error {
			if c.Reason != controllers.ReasonAllRulesTranslated || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("condition %s/%s: %s", c.Status, c.Reason, c.Message)
			}
			if len(p.Status.Autogen.Configs) == 0 {
				return fmt.Errorf("Kyverno has not written the autogen status yet")
			}
			if !p.Status.Generated {
				return fmt.Errorf("status.generated is false")
			}
			return nil
		})
		t.Logf("status after the first round: generated=%v, message %q, autogen %d configs", got.Status.Generated, got.Status.ConditionStatus.Message, len(got.Status.Autogen.Configs))
		// The Pod policy, its Deployment/... variant and its CronJob variant.
		vaps := waitForKyvapVAPs(t, name, 3)

		// Delete one of kyvap's VAPs: kyvap restores it, which makes
		// Kyverno's generator reconcile the policy again (it owns the VAP)
		// and write generated: false; kyvap writes it back. A watch sees
		// both writes.
		wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		w, err := wc.Watch(ctx, &policiesv1.ValidatingPolicyList{}, client.MatchingFields{"metadata.name": name})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// The watch starts with the current object (ADDED).
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("first watch event %s", ev.Type)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no initial watch event")
		}
		victim := vaps[0]
		if err := cp.Client.Delete(ctx, &victim); err != nil {
			t.Fatal(err)
		}
		err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			restored := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(&victim), restored); err != nil {
				return false, err
			}
			return restored.UID != victim.UID, fmt.Errorf("VAP %s not recreated yet", victim.Name)
		})
		if err != nil {
			t.Fatalf("kyvap never restored its VAP: %v", err)
		}
		// generated goes false (Kyverno) and back to true (kyvap).
		var sawFalse bool
		deadline := time.After(time.Minute)
	watching:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch ended")
				}
				p, isPolicy := ev.Object.(*policiesv1.ValidatingPolicy)
				if !isPolicy {
					t.Fatalf("watch event %s %T", ev.Type, ev.Object)
				}
				t.Logf("watch: %s rv %s generated=%v message %q", ev.Type, p.ResourceVersion, p.Status.Generated, p.Status.ConditionStatus.Message)
				switch {
				case !p.Status.Generated && p.Status.ConditionStatus.Message == kyvernosMessage:
					sawFalse = true
				case p.Status.Generated && sawFalse:
					break watching
				case p.Status.Generated && p.Status.ConditionStatus.Message == kyvernosMessage && ev.Type == watch.Modified:
					// Kyverno's generator reconciled the policy and left
					// generated as kyvap wrote it (its status write raced
					// kyvap's and kept the field): nothing to restore.
					break watching
				}
			case <-deadline:
				t.Fatalf("within a minute of the VAP's restoration, Kyverno's generator did not reconcile the policy (message %q) leaving generated true, or set it false and kyvap back to true: saw false = %v", kyvernosMessage, sawFalse)
			}
		}
		got = waitForVPol(t, name, func(p *policiesv1.ValidatingPolicy, c *metav1.Condition) error {
			if !p.Status.Generated || c.Reason != controllers.ReasonAllRulesTranslated {
				return fmt.Errorf("generated %v, condition %s/%s", p.Status.Generated, c.Status, c.Reason)
			}
			return nil
		})
		if got.Status.ConditionStatus.Message != kyvernosMessage {
			t.Errorf("Kyverno's generator message %q, want %q", got.Status.ConditionStatus.Message, kyvernosMessage)
		}
		waitForKyvapVAPs(t, name, 3)

		// kyvap's VAPs deny a bad Pod and a bad Deployment.
		bad := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "latest"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:latest"}}},
		}
		denial := waitForDenialBy(t, bad, message, "ValidatingAdmissionPolicy 'kyvap-")
		t.Logf("Pod denial: %v", denial)
		d := controlplane.Deployment(ns, "latest", 1, nil)
		d.Spec.Template.Spec.Containers[0].Image = "nginx:latest"
		denial = waitForDenialBy(t, d, message, "ValidatingAdmissionPolicy 'kyvap-")
		t.Logf("Deployment denial: %v", denial)
		if strings.Contains(denial.Error(), "vpol-"+name) {
			t.Errorf("Kyverno's VAP denied too: %q", denial)
		}
	}

	t.Run("OptedInPodPolicyIsKyvaps", func(t *testing.T) {
		podPolicy(t, "vpol-kyverno-pod", "kyv-pod-latest", true, "skip generating ValidatingAdmissionPolicy: pod controllers autogen is enabled.")
	})
	t.Run("NotOptedInPodPolicyIsKyvaps", func(t *testing.T) {
		podPolicy(t, "vpol-kyverno-pod-own", "kyv-pod-latest-own", false, "skip generating ValidatingAdmissionPolicy: not enabled.")
	})
}
