// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

// The test kit: testing.TB helpers every suite under test/ shares, so that
// no suite keeps its own copy of a port finder, an object builder or a wait.

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/webhook"
)

// StatusTimeout bounds WaitForStatus: a hang guard, not a goal. A policy
// of nine compiled classic rules took over the minute to reach its status
// under the race detector in a loaded CI (TestCompiledPatternsTypeCheck,
// 2026-11-28); policytest waits as long (PolicyStatusTimeout).
const StatusTimeout = 3 * time.Minute

// FreePort returns a TCP port on 127.0.0.1 that nobody listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// RepoPath joins elem to the root of the kyvap repository (see RepoRoot).
func RepoPath(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// Create creates obj (filling it in as the API server returns it) and
// deletes it when the test ends (it may be gone by then).
func (cp *ControlPlane) Create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := cp.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() {
		if err := cp.Client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
		}
	})
}

// Namespace creates a namespace for this test with the labels and deletes
// it when the test ends (the control plane runs no namespace controller: a
// deleted namespace stays Terminating, so each test needs its own name).
func (cp *ControlPlane) Namespace(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	cp.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}

// EnsureNamespace makes the namespace exist with exactly the labels (plus
// kubernetes.io/metadata.name), creating or relabelling it, for namespaces
// tests share: it is never deleted. It retries for 30s: the API server may
// still enforce, for a moment, a policy of an earlier test that matches
// Namespaces.
func (cp *ControlPlane) EnsureNamespace(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	want := map[string]string{corev1.LabelMetadataName: name}
	for k, v := range labels {
		want[k] = v
	}
	err := Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		ns := &corev1.Namespace{}
		err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, ns)
		if apierrors.IsNotFound(err) {
			return false, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		}
		if err != nil {
			return false, err
		}
		if fmt.Sprint(ns.Labels) == fmt.Sprint(want) {
			return true, nil
		}
		ns.Labels = want
		return false, cp.Client.Update(ctx, ns)
	})
	if err != nil {
		t.Fatalf("namespace %s with labels %v: %v", name, labels, err)
	}
}

// ClusterPolicy builds a ClusterPolicy with the failure action and rules,
// background scans off.
func ClusterPolicy(name string, action kyvernov1.ValidationFailureAction, rules ...kyvernov1.Rule) *kyvernov1.ClusterPolicy {
	return &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kyvernov1.Spec{ValidationFailureAction: action, Background: ptr.To(false), Rules: rules},
	}
}

// CELRule builds a rule with one CEL expression on CREATE and UPDATE of
// the kind.
func CELRule(name, kind, expression, message string) kyvernov1.Rule {
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

// ReplicasMessage is the message of ReplicasPolicy's rule.
const ReplicasMessage = "replicas must be at most 5"

// ReplicasPolicy builds the suites' usual policy: one rule, max-replicas,
// which translates into one VAP ("object.spec.replicas <= 5" on
// Deployments).
func ReplicasPolicy(name string, action kyvernov1.ValidationFailureAction) *kyvernov1.ClusterPolicy {
	return ClusterPolicy(name, action, CELRule("max-replicas", "Deployment", "object.spec.replicas <= 5", ReplicasMessage))
}

// Deployment builds a Deployment of pause containers; its pods carry the
// labels and app=name (its selector).
func Deployment(namespace, name string, replicas int32, labels map[string]string) *appsv1.Deployment {
	podLabels := map[string]string{"app": name}
	for k, v := range labels {
		podLabels[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// ConfigMap builds a ConfigMap.
func ConfigMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

// VAP builds a hand-written ValidatingAdmissionPolicy on the operations of
// one resource (e.g. appsv1.SchemeGroupVersion.WithResource("deployments")).
func VAP(name string, resource schema.GroupVersionResource, operations []admissionregistrationv1.OperationType, validations ...admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: operations,
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{resource.Group}, APIVersions: []string{resource.Version}, Resources: []string{resource.Resource}},
				},
			}}},
			Validations: validations,
		},
	}
}

// Binding builds a binding of the VAP policyName with the actions.
func Binding(name, policyName string, actions ...admissionregistrationv1.ValidationAction) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policyName, ValidationActions: actions},
	}
}

// WaitForStatus waits (up to StatusTimeout) until kyvap's condition on the
// policy reflects its current generation with the reason ("" accepts any),
// and returns the policy as read then.
func (cp *ControlPlane) WaitForStatus(t testing.TB, policy *kyvernov1.ClusterPolicy, reason string) *kyvernov1.ClusterPolicy {
	t.Helper()
	got, _, err := policyStatus(context.Background(), cp.Client, policy.Name, reason, StatusTimeout)
	if err != nil {
		t.Fatalf("policy %s never reached reason %q: %v", policy.Name, reason, err)
	}
	return got
}

// CreatePolicy creates the policy (deleted when the test ends, see Create)
// and waits for its status with the reason (see WaitForStatus).
func (cp *ControlPlane) CreatePolicy(t testing.TB, policy *kyvernov1.ClusterPolicy, reason string) *kyvernov1.ClusterPolicy {
	t.Helper()
	cp.Create(t, policy)
	return cp.WaitForStatus(t, policy, reason)
}

// WaitForPolicyStatus waits until kyvap's condition on the named
// ClusterPolicy reflects its current generation, and returns both.
func WaitForPolicyStatus(ctx context.Context, c client.Client, name string, timeout time.Duration) (*kyvernov1.ClusterPolicy, *metav1.Condition, error) {
	return policyStatus(ctx, c, name, "", timeout)
}

func policyStatus(ctx context.Context, c client.Client, name, reason string, timeout time.Duration) (*kyvernov1.ClusterPolicy, *metav1.Condition, error) {
	policy := &kyvernov1.ClusterPolicy{}
	var cond *metav1.Condition
	err := Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, policy); err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(policy.Status.Conditions, controllers.ConditionType)
		if cond == nil {
			return false, fmt.Errorf("no %s condition yet", controllers.ConditionType)
		}
		if cond.ObservedGeneration != policy.Generation || (reason != "" && cond.Reason != reason) {
			return false, fmt.Errorf("condition %s/%s at generation %d (policy generation %d): %s", cond.Status, cond.Reason, cond.ObservedGeneration, policy.Generation, cond.Message)
		}
		return true, nil
	})
	return policy, cond, err
}

// GeneratedFor lists the VAPs and bindings the policy controls.
func (cp *ControlPlane) GeneratedFor(ctx context.Context, policy *kyvernov1.ClusterPolicy) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
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

// WebhookConfiguration returns kyvap's ValidatingWebhookConfiguration, or
// nil when there is none.
func (cp *ControlPlane) WebhookConfiguration(ctx context.Context) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, vwc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return vwc, err
}

// DryRunCreate asks the API server to admit obj without storing it, and
// returns the warnings it sent and its error.
func (cp *ControlPlane) DryRunCreate(ctx context.Context, obj client.Object) ([]string, error) {
	var warnings []string
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandlerWithContext = warningCollector{&warnings}
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
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

// WaitForDenial waits until the API server denies obj (a dry-run create)
// as Invalid with a message containing want: VAPs and webhook
// configurations take effect asynchronously.
func (cp *ControlPlane) WaitForDenial(t testing.TB, obj client.Object, want string) {
	t.Helper()
	err := WaitForVAPEnforcement(context.Background(), func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, obj)
		if err == nil {
			return false, fmt.Errorf("%s was admitted", obj.GetName())
		}
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), want), err
	})
	if err != nil {
		t.Fatalf("the API server never denied %s with %q: %v", obj.GetName(), want, err)
	}
}

// WaitForWarning waits until the API server admits obj (a dry-run create)
// with a warning containing want.
func (cp *ControlPlane) WaitForWarning(t testing.TB, obj client.Object, want string) {
	t.Helper()
	err := WaitForVAPEnforcement(context.Background(), func(ctx context.Context) (bool, error) {
		warnings, err := cp.DryRunCreate(ctx, obj)
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

// MustAdmit fails the test unless the API server admits obj (a dry-run
// create) at once, and returns the warnings it sent.
func (cp *ControlPlane) MustAdmit(t testing.TB, obj client.Object) []string {
	t.Helper()
	warnings, err := cp.DryRunCreate(context.Background(), obj)
	if err != nil {
		t.Fatalf("%s was refused: %v", obj.GetName(), err)
	}
	return warnings
}

// MetricValue sums the samples (counters and gauges) of a metric in
// controller-runtime's registry, which in-process operators share, whose
// labels include want.
func MetricValue(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue samples
				}
			}
			total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return total
}

// policyController is the name of kyvap's ClusterPolicy controller in
// controller-runtime's metrics.
var policyController = map[string]string{"controller": "clusterpolicy"}

// Reconciles returns how many reconciles the ClusterPolicy controllers of
// this process have finished, whatever their result
// (controller_runtime_reconcile_total{controller="clusterpolicy"}). Read it
// before a change, then WaitForReconcile.
func Reconciles(t testing.TB) float64 {
	t.Helper()
	return MetricValue(t, "controller_runtime_reconcile_total", policyController)
}

// WaitForReconcile waits until the operator has reconciled since obj last
// changed (or since it started): its cache holds obj at the resourceVersion
// the API server has now (or a later one), more reconciles than since (read
// with Reconciles before the change or the start) have finished, and none
// is running. The count is the process's: with several policies being
// reconciled, another one's reconcile can count, so a test that proves
// "nothing was written" keeps to one policy.
func (op *Operator) WaitForReconcile(t testing.TB, obj client.Object, since float64) {
	t.Helper()
	ctx := context.Background()
	current := obj.DeepCopyObject().(client.Object)
	if err := op.cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		t.Fatal(err)
	}
	cached := obj.DeepCopyObject().(client.Object)
	err := Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := op.Reconciler.Get(ctx, client.ObjectKeyFromObject(obj), cached); err != nil {
			return false, err
		}
		if !atLeast(cached.GetResourceVersion(), current.GetResourceVersion()) {
			return false, fmt.Errorf("the operator's cache holds %s at resourceVersion %s, the API server %s", obj.GetName(), cached.GetResourceVersion(), current.GetResourceVersion())
		}
		done, active := Reconciles(t), MetricValue(t, "controller_runtime_active_workers", policyController)
		return done > since && active == 0, fmt.Errorf("%v reconciles finished (%v before), %v running", done, since, active)
	})
	if err != nil {
		t.Fatalf("the operator did not reconcile after %T %s changed: %v", obj, obj.GetName(), err)
	}
}

// atLeast compares resourceVersions, which the API server makes from etcd's
// revision: opaque to clients, but ordered in this test control plane.
func atLeast(got, want string) bool {
	g, err1 := strconv.ParseUint(got, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return got == want
	}
	return g >= w
}

// TouchAnnotation is the annotation Touch changes; kyvap gives it no meaning.
const TouchAnnotation = "kyvap.test/touched"

// Touch makes the operator reconcile the policy although nothing it reads
// changed: it sets TouchAnnotation to a new value (annotation changes are
// reconciled) and waits until the operator has reconciled (WaitForReconcile).
// A test that shows nothing is written touches, then compares
// resourceVersions.
func (op *Operator) Touch(t testing.TB, policy *kyvernov1.ClusterPolicy) {
	t.Helper()
	since := Reconciles(t)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, TouchAnnotation, strconv.FormatInt(time.Now().UnixNano(), 10))
	touched := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy.Name}}
	if err := op.cp.Client.Patch(context.Background(), touched, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("touching policy %s: %v", policy.Name, err)
	}
	op.WaitForReconcile(t, touched, since)
}
