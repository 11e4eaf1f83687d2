// Package smoke proves the test control plane is real: kube-apiserver serves
// Kyverno's CRDs, enforces ValidatingAdmissionPolicies, and, with
// kube-controller-manager beside it, garbage-collects dependents.
package smoke

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

func TestControlPlaneIsTheBuiltVersion(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := "v" + controlplane.DefaultKubeVersion; os.Getenv("KUBE_VERSION") == "" && info.GitVersion != want {
		t.Errorf("server version = %s, want %s", info.GitVersion, want)
	}
}

func TestClusterPolicyCreateAndStatus(t *testing.T) {
	ctx := context.Background()
	policy := &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-replicas"},
		Spec: kyvernov1.Spec{
			ValidationFailureAction: kyvernov1.Enforce,
			Rules: []kyvernov1.Rule{{
				Name: "replicas",
				MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{
					Resources: kyvernov1.ResourceDescription{Kinds: []string{"Deployment"}},
				}}},
				Validation: &kyvernov1.Validation{CEL: &kyvernov1.CEL{
					Expressions: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5", Message: "at most 5 replicas"}},
				}},
			}},
		},
	}
	if err := cp.Client.Create(ctx, policy); err != nil {
		t.Fatalf("creating a ClusterPolicy: %v", err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), policy) })

	policy.Status.ValidatingAdmissionPolicy = kyvernov1.ValidatingAdmissionPolicyStatus{Generated: true, Message: "smoke"}
	if err := cp.Client.Status().Update(ctx, policy); err != nil {
		t.Fatalf("writing the status subresource: %v", err)
	}
	var got kyvernov1.ClusterPolicy
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Status.ValidatingAdmissionPolicy.Generated || got.Status.ValidatingAdmissionPolicy.Message != "smoke" {
		t.Errorf("status not persisted: %+v", got.Status.ValidatingAdmissionPolicy)
	}
	if got.Spec.Rules[0].Validation.CEL.Expressions[0].Expression != "object.spec.replicas <= 5" {
		t.Errorf("spec not round-tripped: %+v", got.Spec.Rules[0])
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

func TestHandWrittenVAPDeniesDeployment(t *testing.T) {
	ctx := context.Background()
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5", Message: "smoke: at most 5 replicas"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{vap, binding} {
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), obj) })
	}

	// The admission plugin loads policies asynchronously: probe with dry runs.
	err := controlplane.WaitForVAPEnforcement(ctx, func(ctx context.Context) (bool, error) {
		err := cp.Client.Create(ctx, deployment("too-many", 10), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "smoke: at most 5 replicas"), err
	})
	if err != nil {
		t.Fatalf("the API server never denied a Deployment with 10 replicas: %v", err)
	}
	err = cp.Client.Create(ctx, deployment("too-many", 10))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "smoke: at most 5 replicas") {
		t.Fatalf("creating a Deployment with 10 replicas: got %v, want an Invalid error with the policy's message", err)
	}
	if err := cp.Client.Create(ctx, deployment("just-right", 3)); err != nil {
		t.Fatalf("a compliant Deployment was refused: %v", err)
	}
}

func TestGarbageCollectorDeletesDependents(t *testing.T) {
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "smoke-owner", Namespace: "default"}}
	if err := cp.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "smoke-dependent", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	if err := cp.Client.Create(ctx, dependent); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	err := controlplane.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		err := cp.Client.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), err
	})
	if err != nil {
		t.Fatalf("the dependent was not garbage-collected: %v", err)
	}
}
