// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

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
	policy := controlplane.ReplicasPolicy("smoke-replicas", kyvernov1.Enforce)
	cp.Create(t, policy)

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

func TestHandWrittenVAPDeniesDeployment(t *testing.T) {
	ctx := context.Background()
	vap := controlplane.VAP("smoke-max-replicas", appsv1.SchemeGroupVersion.WithResource("deployments"),
		[]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5", Message: "smoke: at most 5 replicas"})
	vap.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	cp.Create(t, vap)
	cp.Create(t, controlplane.Binding("smoke-max-replicas", vap.Name, admissionregistrationv1.Deny))

	// The admission plugin loads policies asynchronously: probe with dry runs.
	cp.WaitForDenial(t, controlplane.Deployment("default", "too-many", 10, nil), "smoke: at most 5 replicas")
	err := cp.Client.Create(ctx, controlplane.Deployment("default", "too-many", 10, nil))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "smoke: at most 5 replicas") {
		t.Fatalf("creating a Deployment with 10 replicas: got %v, want an Invalid error with the policy's message", err)
	}
	if err := cp.Client.Create(ctx, controlplane.Deployment("default", "just-right", 3, nil)); err != nil {
		t.Fatalf("a compliant Deployment was refused: %v", err)
	}
}

func TestGarbageCollectorDeletesDependents(t *testing.T) {
	ctx := context.Background()
	owner := controlplane.ConfigMap("default", "smoke-owner", nil)
	cp.Create(t, owner)
	dependent := controlplane.ConfigMap("default", "smoke-dependent", nil)
	dependent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	cp.Create(t, dependent)
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
