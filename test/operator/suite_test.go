// Package operator tests kyvap's reconciler end to end against the real
// control plane (kube-apiserver, etcd and kube-controller-manager's garbage
// collector): the API server enforces what the operator generates.
package operator

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

// operator is a running kyvap manager.
type operator struct {
	reconciler *controllers.ClusterPolicyReconciler
	stop       func()
	// elected is closed once this manager leads (at once without election).
	elected <-chan struct{}
}

// startOperator runs the manager in-process, as cmd/manager does, until the
// test ends or stop is called.
func startOperator(t testing.TB, opts translate.Options) *operator {
	t.Helper()
	return startOperatorWith(t, opts, ctrl.Options{})
}

// startOperatorWith is startOperator with manager options (leader election).
func startOperatorWith(t testing.TB, opts translate.Options, extra ctrl.Options) *operator {
	t.Helper()
	op, err := cp.StartOperator(opts, extra)
	if err != nil {
		t.Fatal(err)
	}
	stop := func() {
		if err := op.Stop(); err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	}
	t.Cleanup(stop)
	return &operator{reconciler: op.Reconciler, stop: stop, elected: op.Elected}
}

var generateOn = translate.Options{GenerateValidatingAdmissionPolicy: true}

func celRule(name, kind, expression, message string) kyvernov1.Rule {
	return kyvernov1.Rule{
		Name: name,
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{
			Resources: kyvernov1.ResourceDescription{Kinds: []string{kind}, Operations: []kyvernov1.AdmissionOperation{kyvernov1.Create, kyvernov1.Update}},
		}}},
		Validation: &kyvernov1.Validation{CEL: &kyvernov1.CEL{
			Expressions: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		}},
	}
}

func clusterPolicy(name string, action kyvernov1.ValidationFailureAction, rules ...kyvernov1.Rule) *kyvernov1.ClusterPolicy {
	return &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kyvernov1.Spec{ValidationFailureAction: action, Background: ptr.To(false), Rules: rules},
	}
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := cp.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), obj) })
}

func namespace(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}

// generatedFor lists the VAPs and bindings controlled by the policy.
func generatedFor(ctx context.Context, policy *kyvernov1.ClusterPolicy) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := cp.Client.List(ctx, &vaps); err != nil {
		return nil, nil, err
	}
	if err := cp.Client.List(ctx, &bindings); err != nil {
		return nil, nil, err
	}
	owned := func(obj metav1.Object) bool {
		ref := metav1.GetControllerOf(obj)
		return ref != nil && ref.UID == policy.UID
	}
	var outV []admissionregistrationv1.ValidatingAdmissionPolicy
	var outB []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, v := range vaps.Items {
		if owned(&v) {
			outV = append(outV, v)
		}
	}
	for _, b := range bindings.Items {
		if owned(&b) {
			outB = append(outB, b)
		}
	}
	return outV, outB, nil
}

// waitForStatus waits until the policy's kyvap condition has the reason and
// reflects the current generation, and returns the policy.
func waitForStatus(t testing.TB, policy *kyvernov1.ClusterPolicy, reason string) *kyvernov1.ClusterPolicy {
	t.Helper()
	got := &kyvernov1.ClusterPolicy{}
	err := controlplane.Eventually(context.Background(), 60*time.Second, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionType)
		if c == nil {
			return false, fmt.Errorf("no %s condition yet", controllers.ConditionType)
		}
		if c.ObservedGeneration != got.Generation || c.Reason != reason {
			return false, fmt.Errorf("condition %s/%s at generation %d (policy generation %d): %s", c.Status, c.Reason, c.ObservedGeneration, got.Generation, c.Message)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("policy %s never reached reason %s: %v", policy.Name, reason, err)
	}
	return got
}

func deployment(namespace, name string, replicas int32, labels map[string]string) *appsv1.Deployment {
	selector := map[string]string{"app": name}
	podLabels := map[string]string{"app": name}
	for k, v := range labels {
		podLabels[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// dryRunCreate asks the API server to admit obj without storing it, and
// returns the error and the warnings it sent.
func dryRunCreate(ctx context.Context, obj client.Object) ([]string, error) {
	var warnings []string
	cfg := *cp.Config
	cfg.WarningHandlerWithContext = warningCollector{&warnings}
	c, err := client.New(&cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return nil, err
	}
	err = c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
	return warnings, err
}

type warningCollector struct{ into *[]string }

func (w warningCollector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	*w.into = append(*w.into, text)
}

// waitForDenial waits until the API server denies obj with a message
// containing want (VAPs are picked up asynchronously).
func waitForDenial(t testing.TB, obj client.Object, want string) {
	t.Helper()
	err := controlplane.WaitForVAPEnforcement(context.Background(), func(ctx context.Context) (bool, error) {
		_, err := dryRunCreate(ctx, obj)
		if err == nil {
			return false, fmt.Errorf("%s was admitted", obj.GetName())
		}
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), want), err
	})
	if err != nil {
		t.Fatalf("the API server never denied %s with %q: %v", obj.GetName(), want, err)
	}
}

// waitForWarning waits until the API server admits obj with a warning
// containing want.
func waitForWarning(t testing.TB, obj client.Object, want string) {
	t.Helper()
	err := controlplane.WaitForVAPEnforcement(context.Background(), func(ctx context.Context) (bool, error) {
		warnings, err := dryRunCreate(ctx, obj)
		if err != nil {
			return false, err
		}
		for _, w := range warnings {
			if strings.Contains(w, want) {
				return true, nil
			}
		}
		return false, fmt.Errorf("admitted with warnings %q", warnings)
	})
	if err != nil {
		t.Fatalf("the API server never warned about %s with %q: %v", obj.GetName(), want, err)
	}
}

func mustAdmit(t testing.TB, obj client.Object) {
	t.Helper()
	if _, err := dryRunCreate(context.Background(), obj); err != nil {
		t.Fatalf("%s was refused: %v", obj.GetName(), err)
	}
}
