// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// PolicyReportListGVK is the kind of a list of wgpolicyk8s.io PolicyReports.
var PolicyReportListGVK = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReportList"}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// InstallPolicyReportCRDs installs the wgpolicyk8s.io PolicyReport and
// ClusterPolicyReport CRDs of the pinned Kyverno module into a running
// control plane, waits until they are served, and uninstalls them when the
// test ends (waiting until they, and every report, are gone), so that the
// suite's other tests see the control plane as Options made it. A running
// manager notices CRDs installed after it started. When
// the control plane already has them (Options.PolicyReportCRDs), it does
// nothing.
func (cp *ControlPlane) InstallPolicyReportCRDs(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	crdDir, err := KyvernoCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	opts := envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(filepath.Dir(crdDir), "policyreport")},
		ErrorIfPathMissing: true,
		MaxTime:            2 * time.Minute,
	}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		t.Fatal(err)
	}
	if len(opts.CRDs) == 0 {
		t.Fatalf("no CRDs in %v", opts.Paths)
	}
	var absent []string // the CRDs to remove at the end
	for _, crd := range opts.CRDs {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(crdGVK)
		err := cp.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			absent = append(absent, crd.Name)
		case err != nil:
			t.Fatal(err)
		case obj.DeletionTimestamp != nil:
			t.Fatalf("CRD %s is being deleted", crd.Name)
		}
	}
	if len(absent) == 0 {
		return // installed with the control plane: not ours to remove
	}
	crds, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: opts.Paths, ErrorIfPathMissing: true, MaxTime: opts.MaxTime})
	t.Cleanup(func() {
		var ours []*apiextensionsv1.CustomResourceDefinition
		for _, crd := range crds {
			if slices.Contains(absent, crd.Name) {
				ours = append(ours, crd)
			}
		}
		if err := envtest.UninstallCRDs(cp.Config, envtest.CRDInstallOptions{CRDs: ours}); err != nil {
			t.Errorf("uninstalling the PolicyReport CRDs: %v", err)
			return
		}
		// The API server deletes every report before the CRD goes.
		err := Eventually(context.Background(), 5*time.Minute, func(ctx context.Context) (bool, error) {
			for _, crd := range ours {
				obj := &metav1.PartialObjectMetadata{}
				obj.SetGroupVersionKind(crdGVK)
				if err := cp.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, obj); !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("CRD %s still there (%w)", crd.Name, err)
				}
			}
			return true, nil
		})
		if err != nil {
			t.Errorf("uninstalling the PolicyReport CRDs: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("installing the PolicyReport CRDs: %v", err)
	}
	// InstallCRDs waited for discovery; the suite's client must list them too.
	err = Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(PolicyReportListGVK)
		err := cp.Client.List(ctx, list, client.Limit(1))
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("the PolicyReport CRDs are not served: %v", err)
	}
}

// WithoutPoliciesCRDs uninstalls the policies.kyverno.io CRDs kyvap reads
// (PoliciesCRDFiles) and waits until they are gone; the returned function
// installs them again and waits until they are served. It runs when the
// test ends too (once), so that the suite's other tests see the control
// plane as Start made it.
func (cp *ControlPlane) WithoutPoliciesCRDs(t testing.TB) (reinstall func()) {
	t.Helper()
	files, err := PoliciesCRDFiles()
	if err != nil {
		t.Fatal(err)
	}
	opts := envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		t.Fatal(err)
	}
	if err := envtest.UninstallCRDs(cp.Config, envtest.CRDInstallOptions{CRDs: opts.CRDs}); err != nil {
		t.Fatalf("uninstalling the policies.kyverno.io CRDs: %v", err)
	}
	err = Eventually(context.Background(), 5*time.Minute, func(ctx context.Context) (bool, error) {
		for _, crd := range opts.CRDs {
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(crdGVK)
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, obj); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("CRD %s still there (%w)", crd.Name, err)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("uninstalling the policies.kyverno.io CRDs: %v", err)
	}
	var once sync.Once
	reinstall = func() {
		once.Do(func() {
			if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}); err != nil {
				t.Errorf("installing the policies.kyverno.io CRDs again: %v", err)
			}
		})
	}
	t.Cleanup(reinstall)
	return reinstall
}
