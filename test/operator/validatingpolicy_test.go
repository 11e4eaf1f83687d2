// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// latestMessage is the message of noLatestSpec's validation.
const latestMessage = "images must not use the latest tag"

// noLatestSpec is a Pod ValidatingPolicy refusing :latest images, confined
// by its namespaceSelector to the test's namespaces (a ValidatingPolicy is
// cluster-wide; other tests must not meet it while it goes).
func noLatestSpec(expression string, namespaces ...string) policiesv1.ValidatingPolicySpec {
	return policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces,
			}}},
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}},
		},
		Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: latestMessage}},
	}
}

const noLatest = "object.spec.containers.all(c, !c.image.endsWith(':latest'))"

func validatingPolicy(name string, spec policiesv1.ValidatingPolicySpec) *policiesv1.ValidatingPolicy {
	return &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func pod(namespace, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

func deploymentWithImage(namespace, name, image string) *appsv1.Deployment {
	d := controlplane.Deployment(namespace, name, 1, nil)
	d.Spec.Template.Spec.Containers[0].Image = image
	return d
}

func cronJob(namespace, name, image string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: image}}},
			}}},
		},
	}
}

// vpolStatus is the status of a policy of either policies.kyverno.io kind.
func vpolStatus(obj client.Object) *policiesv1.ValidatingPolicyStatus {
	switch p := obj.(type) {
	case *policiesv1.ValidatingPolicy:
		return &p.Status
	case *policiesv1.NamespacedValidatingPolicy:
		return &p.Status
	}
	panic(fmt.Sprintf("not a ValidatingPolicy: %T", obj))
}

// waitForVPolCondition waits until kyvap's condition on the policy reflects
// its current generation with the reason, and returns the policy and the
// condition as read then.
func waitForVPolCondition(t testing.TB, policy client.Object, reason string) (client.Object, *metav1.Condition) {
	t.Helper()
	current := policy.DeepCopyObject().(client.Object)
	var cond *metav1.Condition
	err := controlplane.Eventually(context.Background(), controlplane.StatusTimeout, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(vpolStatus(current).ConditionStatus.Conditions, controllers.ConditionType)
		if cond == nil {
			return false, fmt.Errorf("no %s condition yet", controllers.ConditionType)
		}
		if cond.ObservedGeneration != current.GetGeneration() || cond.Reason != reason {
			return false, fmt.Errorf("condition %s/%s at generation %d (policy generation %d): %s", cond.Status, cond.Reason, cond.ObservedGeneration, current.GetGeneration(), cond.Message)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s never reached reason %s: %v", policy.GetName(), reason, err)
	}
	return current, cond
}

// generatedForModel lists the VAPs and bindings generated for a policy of
// the policy model, found by kyvap's labels and annotations.
func generatedForModel(ctx context.Context, kind model.Kind, namespace, name string) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	sel := client.MatchingLabels{translate.LabelPolicyKind: string(kind), translate.LabelPolicy: name}
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := cp.Client.List(ctx, &vaps, sel); err != nil {
		return nil, nil, err
	}
	if err := cp.Client.List(ctx, &bindings, sel); err != nil {
		return nil, nil, err
	}
	ours := func(o metav1.Object) bool {
		return o.GetAnnotations()[translate.AnnotationPolicy] == name && o.GetAnnotations()[translate.AnnotationPolicyNamespace] == namespace
	}
	var outV []admissionregistrationv1.ValidatingAdmissionPolicy
	var outB []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, v := range vaps.Items {
		if ours(&v) {
			outV = append(outV, v)
		}
	}
	for _, b := range bindings.Items {
		if ours(&b) {
			outB = append(outB, b)
		}
	}
	return outV, outB, nil
}

// waitForNoneGenerated waits until nothing generated for the policy is left.
func waitForNoneGenerated(t testing.TB, kind model.Kind, namespace, name string) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		vaps, bindings, err := generatedForModel(ctx, kind, namespace, name)
		if err != nil {
			return false, err
		}
		return len(vaps)+len(bindings) == 0, fmt.Errorf("%d VAPs and %d bindings left", len(vaps), len(bindings))
	})
	if err != nil {
		t.Fatalf("the objects of %s %s/%s were not deleted: %v", kind, namespace, name, err)
	}
}

func TestValidatingPolicyBecomesVAPsForPodsAndControllers(t *testing.T) {
	op := cp.StartOperator(t, generateOn)
	ctx := context.Background()
	const ns = "vpol-latest"
	cp.Namespace(t, ns, nil)
	policy := validatingPolicy("no-latest", noLatestSpec(noLatest, ns))
	cp.Create(t, policy)

	got, cond := waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	if cond.Status != metav1.ConditionTrue {
		t.Errorf("condition = %+v, want True", cond)
	}
	status := vpolStatus(got)
	// Every rule is a VAP, and kyvap scans the policy in the background
	// (vpolreports_test.go): generated, so a running Kyverno skips it.
	if !status.Generated {
		t.Errorf("status.generated = false, want true: %s", cond.Message)
	}
	// Ready once the API server enforces the VAPs just written (Kyverno
	// does not run here, so kyvap writes it).
	waitReady(t, policy)

	vaps, bindings, err := generatedForModel(ctx, model.KindValidatingPolicy, "", policy.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The policy itself, its Deployment/StatefulSet/... variant and its
	// CronJob variant.
	if len(vaps) != 3 || len(bindings) != 3 {
		t.Fatalf("got %d VAPs and %d bindings, want 3 and 3", len(vaps), len(bindings))
	}
	for _, v := range vaps {
		ref := metav1.GetControllerOf(&v)
		if ref == nil || ref.UID != got.GetUID() || ref.Kind != "ValidatingPolicy" {
			t.Errorf("VAP %s controller = %+v, want the ValidatingPolicy", v.Name, ref)
		}
	}

	cp.WaitForDenial(t, pod(ns, "latest", "nginx:latest"), latestMessage)
	cp.WaitForDenial(t, deploymentWithImage(ns, "latest", "nginx:latest"), latestMessage)
	cp.WaitForDenial(t, cronJob(ns, "latest", "nginx:latest"), latestMessage)
	cp.MustAdmit(t, pod(ns, "pinned", "nginx:1.27"))
	cp.MustAdmit(t, deploymentWithImage(ns, "pinned", "nginx:1.27"))
	cp.MustAdmit(t, cronJob(ns, "pinned", "nginx:1.27"))

	// Deleting a generated VAP is drift: it comes back.
	victim := vaps[0].DeepCopy()
	if err := cp.Client.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var back admissionregistrationv1.ValidatingAdmissionPolicy
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(victim), &back); err != nil {
			return false, err
		}
		return back.UID != victim.UID, nil
	})
	if err != nil {
		t.Fatalf("VAP %s deleted by hand was not restored: %v", victim.Name, err)
	}

	// A new operator reconciles the converged policy and writes nothing.
	// (Once every VAP is type-checked: kube-controller-manager writes that.)
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		vaps, _, err := generatedForModel(ctx, model.KindValidatingPolicy, "", policy.Name)
		if err != nil {
			return false, err
		}
		for _, v := range vaps {
			if v.Status.ObservedGeneration != v.Generation {
				return false, fmt.Errorf("VAP %s not type-checked yet", v.Name)
			}
		}
		return len(vaps) == 3, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := modelResourceVersions(t, got, model.KindValidatingPolicy)
	op.Stop()
	since := vpolReconciles(t)
	cp.StartOperator(t, generateOn)
	waitForVPolReconcile(t, since)
	if after := modelResourceVersions(t, got, model.KindValidatingPolicy); !maps.Equal(before, after) {
		t.Errorf("a restart wrote: resourceVersions %v, then %v", before, after)
	}
}

// vpolReconciles is how many reconciles the ValidatingPolicy controllers of
// this process have finished.
func vpolReconciles(t testing.TB) float64 {
	t.Helper()
	return controlplane.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": "validatingpolicy"})
}

// waitForVPolReconcile waits until more ValidatingPolicy reconciles than
// since have finished and none runs.
func waitForVPolReconcile(t testing.TB, since float64) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(context.Context) (bool, error) {
		done := vpolReconciles(t)
		active := controlplane.MetricValue(t, "controller_runtime_active_workers", map[string]string{"controller": "validatingpolicy"})
		return done > since && active == 0, fmt.Errorf("%v reconciles (%v before), %v running", done, since, active)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// modelResourceVersions maps the policy and its generated objects to their
// resourceVersions.
func modelResourceVersions(t testing.TB, policy client.Object, kind model.Kind) map[string]string {
	t.Helper()
	ctx := context.Background()
	current := policy.DeepCopyObject().(client.Object)
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"policy": current.GetResourceVersion()}
	vaps, bindings, err := generatedForModel(ctx, kind, policy.GetNamespace(), policy.GetName())
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

func TestNamespacedValidatingPolicyOnlyInItsNamespace(t *testing.T) {
	op := cp.StartOperator(t, generateOn)
	ctx := context.Background()
	const nsA, nsB = "nvpol-a", "nvpol-b"
	cp.Namespace(t, nsA, nil)
	cp.Namespace(t, nsB, nil)
	spec := noLatestSpec(noLatest, nsA, nsB)
	spec.MatchConstraints.NamespaceSelector = nil // the policy's namespace confines it
	// Without background scans kyvap enforces all of the policy: generated.
	off := false
	spec.EvaluationConfiguration = &policiesv1.EvaluationConfiguration{Background: &policiesv1.BackgroundConfiguration{Enabled: &off}}
	policy := &policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "no-latest"}, Spec: spec}
	cp.Create(t, policy)

	got, _ := waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	if !vpolStatus(got).Generated {
		t.Errorf("status.generated = false, want true")
	}
	vaps, bindings, err := generatedForModel(ctx, model.KindNamespacedValidatingPolicy, nsA, policy.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(vaps) != 3 || len(bindings) != 3 {
		t.Fatalf("got %d VAPs and %d bindings, want 3 and 3", len(vaps), len(bindings))
	}
	for _, v := range vaps {
		if len(v.OwnerReferences) != 0 {
			t.Errorf("VAP %s has owner references %v: a namespaced policy cannot own a cluster-scoped object", v.Name, v.OwnerReferences)
		}
	}

	cp.WaitForDenial(t, pod(nsA, "latest", "nginx:latest"), latestMessage)
	cp.WaitForDenial(t, deploymentWithImage(nsA, "latest", "nginx:latest"), latestMessage)
	cp.MustAdmit(t, pod(nsB, "latest", "nginx:latest"))
	cp.MustAdmit(t, deploymentWithImage(nsB, "latest", "nginx:latest"))

	// Deleted: its objects, which no garbage collector would delete, go.
	if err := cp.Client.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	waitForNoneGenerated(t, model.KindNamespacedValidatingPolicy, nsA, policy.Name)

	// Deleted while kyvap is down: the next operator finds the orphans.
	again := &policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "orphaned"}, Spec: spec}
	cp.Create(t, again)
	waitForVPolCondition(t, again, controllers.ReasonAllRulesTranslated)
	op.Stop()
	if err := cp.Client.Delete(ctx, again); err != nil {
		t.Fatal(err)
	}
	if vaps, _, err := generatedForModel(ctx, model.KindNamespacedValidatingPolicy, nsA, again.Name); err != nil || len(vaps) == 0 {
		t.Fatalf("the stopped operator's objects are gone already (%d, %v)", len(vaps), err)
	}
	cp.StartOperator(t, generateOn)
	waitForNoneGenerated(t, model.KindNamespacedValidatingPolicy, nsA, again.Name)
}

func TestPolicyExceptionExemptsThroughTheVAP(t *testing.T) {
	cp.StartOperator(t, generateOn)
	const ns = "vpol-exception"
	cp.Namespace(t, ns, nil)
	policy := validatingPolicy("no-latest-but", noLatestSpec(noLatest, ns))
	cp.Create(t, policy)
	waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	cp.WaitForDenial(t, pod(ns, "exempt", "nginx:latest"), latestMessage)

	// The exception arrives after the policy: its watch re-translates it.
	exception := &policiesv1.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exempt-by-name"},
		Spec: policiesv1.PolicyExceptionSpec{
			PolicyRefs:      []policiesv1.PolicyRef{{Name: policy.Name, Kind: "ValidatingPolicy"}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "exempt", Expression: "object.metadata.name == 'exempt'"}},
		},
	}
	cp.Create(t, exception)
	err := controlplane.WaitForVAPEnforcement(context.Background(), func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, pod(ns, "exempt", "nginx:latest"))
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("the exception never exempted the pod: %v", err)
	}
	cp.WaitForDenial(t, pod(ns, "other", "nginx:latest"), latestMessage)
	// The autogen variants honour it too.
	cp.MustAdmit(t, deploymentWithImage(ns, "exempt", "nginx:latest"))
	cp.WaitForDenial(t, deploymentWithImage(ns, "other", "nginx:latest"), latestMessage)

	// An exception that expires stops exempting then: the policy is
	// translated again at its expiry.
	expiring := &policiesv1.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "expiring"},
		Spec: policiesv1.PolicyExceptionSpec{
			PolicyRefs:      []policiesv1.PolicyRef{{Name: policy.Name, Kind: "ValidatingPolicy"}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "soon", Expression: "object.metadata.name == 'soon'"}},
			ExpiresAt:       &metav1.Time{Time: time.Now().Add(5 * time.Second)},
		},
	}
	cp.Create(t, expiring)
	err = controlplane.WaitForVAPEnforcement(context.Background(), func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, pod(ns, "soon", "nginx:latest"))
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("the expiring exception never exempted the pod: %v", err)
	}
	cp.WaitForDenial(t, pod(ns, "soon", "nginx:latest"), latestMessage)
}

func TestInvalidValidatingPolicyIsReportedOnce(t *testing.T) {
	cp.StartOperator(t, generateOn)
	ctx := context.Background()
	const ns = "vpol-invalid"
	cp.Namespace(t, ns, nil)
	policy := validatingPolicy("broken-cel", noLatestSpec("object.spec.containers.all(c, ", ns))
	cp.Create(t, policy)

	got, cond := waitForVPolCondition(t, policy, controllers.ReasonInvalidRules)
	if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, `rule "policy": not enforced`) || !strings.Contains(cond.Message, string(model.ReasonCELCompileError)) {
		t.Errorf("condition = %s %s %q, want False with the rule not enforced because of a CEL compile error", cond.Status, cond.Reason, cond.Message)
	}
	if vpolStatus(got).Generated {
		t.Errorf("status.generated = true for a policy kyvap does not enforce")
	}
	vaps, bindings, err := generatedForModel(ctx, model.KindValidatingPolicy, "", policy.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(vaps)+len(bindings) != 0 {
		t.Errorf("got %d VAPs and %d bindings for an invalid policy, want none", len(vaps), len(bindings))
	}

	// A reconcile that changes nothing writes nothing: an exception naming
	// the policy makes it reconcile, and the translation is still invalid.
	since := vpolReconciles(t)
	cp.Create(t, &policiesv1.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "touch"},
		Spec: policiesv1.PolicyExceptionSpec{
			PolicyRefs:      []policiesv1.PolicyRef{{Name: policy.Name, Kind: "ValidatingPolicy"}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "never", Expression: "false"}},
		},
	})
	waitForVPolReconcile(t, since)
	after := policy.DeepCopy()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != got.GetResourceVersion() {
		t.Errorf("the policy was written again (resourceVersion %s → %s): %+v", got.GetResourceVersion(), after.ResourceVersion, after.Status)
	}
}

// TestValidatingPoliciesStartWhenTheirCRDsAppear: kyvap started without the
// policies.kyverno.io CRDs runs as usual, and translates ValidatingPolicies
// once the CRDs are installed, without a restart.
func TestValidatingPoliciesStartWhenTheirCRDsAppear(t *testing.T) {
	reinstall := cp.WithoutPoliciesCRDs(t)
	cp.StartOperator(t, generateOn)
	cp.CreatePolicy(t, controlplane.ReplicasPolicy("without-vpol-crds", "Enforce"), controllers.ReasonAllRulesTranslated)

	reinstall()
	const ns = "vpol-later"
	cp.Namespace(t, ns, nil)
	policy := validatingPolicy("no-latest-later", noLatestSpec(noLatest, ns))
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		err := cp.Client.Create(ctx, policy) // the suite's client may not map the kind at once
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("creating the ValidatingPolicy once its CRD is back: %v", err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), policy) })
	waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	cp.WaitForDenial(t, pod(ns, "latest", "nginx:latest"), latestMessage)
}

// TestValidatingPolicyWithThousandsOfValidations: a policy with 3,000
// validations becomes one VAP the API server accepts and enforces (the
// last validation included); its status stays bounded.
func TestValidatingPolicyWithThousandsOfValidations(t *testing.T) {
	const ns = "vpol-many-validations"
	cp.Namespace(t, ns, nil)
	cp.StartOperator(t, generateOn)
	spec := configMapPolicySpec("true", ns)
	spec.ValidationAction = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	spec.Validations = nil
	for i := range 3000 {
		spec.Validations = append(spec.Validations, admissionregistrationv1.Validation{
			Expression: fmt.Sprintf("object.metadata.name != 'n%d'", i),
			Message:    fmt.Sprintf("not n%d", i),
		})
	}
	policy := validatingPolicy("many-validations", spec)
	cp.Create(t, policy)
	_, cond := waitForVPolCondition(t, policy, controllers.ReasonAllRulesTranslated)
	if len(cond.Message) > 4096 {
		t.Errorf("condition message of %d bytes", len(cond.Message))
	}
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "n2999", nil), "not n2999")
	cp.MustAdmit(t, controlplane.ConfigMap(ns, "n3000", nil))
}
