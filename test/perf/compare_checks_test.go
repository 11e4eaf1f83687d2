// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest/vapsim"
	"github.com/kyvap/kyvap/translate"
)

// translateAll translates the policies as the benchmark's manager does
// (VAPs on, specialized to typed objects) and fails unless every rule is
// enforced by VAPs alone: the VAP columns measure nothing of kyvap's
// webhook.
func translateAll(t *testing.T, policies []*kyvernov1.ClusterPolicy) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var (
		vaps     []admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	)
	for _, p := range policies {
		plan, err := translate.Translate(clusterpolicy.InputFor(p, nil), kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true, TypedObjects: true})
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		for _, r := range plan.Rules {
			if r.Verdict != translate.VerdictTranslated || r.Fallback != nil {
				t.Errorf("%s/%s: %s (%s) %s: every rule of the benchmark must be a VAP", p.Name, r.Rule, r.Verdict, r.Reason, r.Message)
			}
		}
		vaps = append(vaps, plan.ValidatingAdmissionPolicies...)
		bindings = append(bindings, plan.Bindings...)
	}
	return vaps, bindings
}

// mixRequest is a request of the mix as the API server sends it to
// admission: a dry-run CREATE.
func mixRequest(t testing.TB, obj client.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	obj = obj.DeepCopyObject().(client.Object)
	var kind metav1.GroupVersionKind
	var resource metav1.GroupVersionResource
	switch o := obj.(type) {
	case *corev1.Pod:
		kind, resource = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
		o.APIVersion, o.Kind = "v1", "Pod"
	case *appsv1.Deployment:
		kind, resource = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		o.APIVersion, o.Kind = "apps/v1", "Deployment"
	case *corev1.ConfigMap:
		kind, resource = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		o.APIVersion, o.Kind = "v1", "ConfigMap"
	case *corev1.Namespace:
		kind, resource = metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
		o.APIVersion, o.Kind = "v1", "Namespace"
	default:
		t.Fatalf("no request for a %T", obj)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	dryRun := true
	return &admissionv1.AdmissionRequest{
		UID: "uid", Kind: kind, Resource: resource, RequestKind: &kind, RequestResource: &resource,
		Name: obj.GetName(), Namespace: obj.GetNamespace(), Operation: admissionv1.Create, DryRun: &dryRun,
		Object: runtime.RawExtension{Raw: raw},
	}
}

// simulatedDenials are the requests of the mix the VAPs deny, evaluated as
// kube-apiserver evaluates them.
func simulatedDenials(t *testing.T, vaps []admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding) []string {
	t.Helper()
	sim := vapsim.New(vaps, bindings)
	if notes := sim.Notes(); len(notes) > 0 {
		t.Errorf("the simulator notes: %v", notes)
	}
	namespaces := []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: compareNamespace}}}
	var denied []string
	for _, req := range compareMix() {
		resp, err := sim.Evaluate(context.Background(), vapsim.Request{Admission: mixRequest(t, req.obj), Namespaces: namespaces})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed {
			denied = append(denied, fmt.Sprintf("%T %s", req.obj, req.obj.GetName()))
		}
	}
	sort.Strings(denied)
	return denied
}

// TestCompareChecksAgree checks, before the benchmark spends minutes on
// them, that the three forms of its checks (CEL ClusterPolicies, Kyverno's
// classic language, hand-written VAPs) are all VAPs and deny exactly the
// requests of the mix that compareMix says are denied, under the API
// server's VAP evaluation. On the cluster, BenchmarkCompare checks every
// answer again, Kyverno's too.
func TestCompareChecksAgree(t *testing.T) {
	var want []string
	for _, req := range compareMix() {
		if req.denied {
			want = append(want, fmt.Sprintf("%T %s", req.obj, req.obj.GetName()))
		}
	}
	sort.Strings(want)
	patterns, err := comparePatternPolicies()
	if err != nil {
		t.Fatal(err)
	}
	handVAPs, handBindings := handWrittenVAPs()
	forms := map[string]func(t *testing.T) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding){
		"CEL ClusterPolicies": func(t *testing.T) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			return translateAll(t, compareClusterPolicies())
		},
		"pattern ClusterPolicies": func(t *testing.T) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			return translateAll(t, patterns)
		},
		"hand-written VAPs": func(*testing.T) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			var vaps []admissionregistrationv1.ValidatingAdmissionPolicy
			var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
			for i := range handVAPs {
				vaps, bindings = append(vaps, *handVAPs[i]), append(bindings, *handBindings[i])
			}
			return vaps, bindings
		},
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			vaps, bindings := form(t)
			if diff := cmp.Diff(want, simulatedDenials(t, vaps, bindings)); diff != "" {
				t.Errorf("denied requests of the mix (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadAndScanPatternPoliciesCompile checks that the pattern policies of
// the memory and scan measures compile whole: the load's as VAPs, the
// scan's as rules kyvap's scanner evaluates.
func TestLoadAndScanPatternPoliciesCompile(t *testing.T) {
	translateAll(t, []*kyvernov1.ClusterPolicy{loadPatternPolicy(7)})
	for i := range scanPolicies {
		translateAll(t, []*kyvernov1.ClusterPolicy{scanPatternPolicy(i, "compare-scan")})
	}
}
