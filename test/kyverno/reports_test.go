// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/test/controlplane"
)

// TestReportsFitKyvernosCRDs: the PolicyReport and ClusterPolicyReport
// reports builds are accepted by the wgpolicyk8s.io CRDs of the
// pinned Kyverno module and read back unchanged (the schema prunes no
// field kyvap writes).
func TestReportsFitKyvernosCRDs(t *testing.T) {
	ctx := context.Background()
	cp.EnsureNamespace(t, "reports", nil)
	cm := controlplane.ConfigMap("reports", "settings", nil)
	cp.Create(t, cm)
	policy := &metav1.ObjectMeta{Name: "require-labels", Annotations: map[string]string{reports.AnnotationCategory: "Best Practices", reports.AnnotationSeverity: "high"}}
	now := time.Unix(1700000000, 0)
	built := reports.For(reports.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID}, []reports.Result{
		reports.ResultFor(policy, "check-team", reports.StatusFail, "a team label is required", "background scan", now),
		reports.ResultFor(policy, "check-owner", reports.StatusPass, "", "background scan", now),
	})
	ns := &corev1.Namespace{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "reports"}, ns); err != nil {
		t.Fatal(err)
	}
	cluster := reports.For(reports.Resource{APIVersion: "v1", Kind: "Namespace", Name: "reports", UID: ns.UID}, []reports.Result{
		reports.ResultFor(policy, "check-team", reports.StatusError, "params missing", "background scan", now),
	})
	for _, report := range []*reports.PolicyReport{built, cluster} {
		data, err := json.Marshal(report)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		if err := cp.Client.Create(ctx, u); err != nil {
			t.Fatalf("the API server refused the %s: %v", report.Kind, err)
		}
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), u) })
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(u.GroupVersionKind())
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(u), stored); err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{"scope", "summary", "results"} {
			want, got := u.Object[field], stored.Object[field]
			if wj, gj := mustJSON(t, want), mustJSON(t, got); wj != gj {
				t.Errorf("%s %s stored as %s, want %s", report.Kind, field, gj, wj)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
