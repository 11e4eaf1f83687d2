// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// TestReportsStartWhenTheirCRDsAppear: kyvap started without the
// wgpolicyk8s.io CRDs enforces as usual, and writes the reports once the
// CRDs are installed, without a restart.
func TestReportsStartWhenTheirCRDsAppear(t *testing.T) {
	ctx := context.Background()
	const ns = "reports-later"
	cp.EnsureNamespace(t, ns, nil)
	existing := controlplane.ConfigMap(ns, "existing", nil)
	cp.Create(t, existing)
	cp.StartOperatorWith(t, operator.Options{Translate: translate.Options{GenerateValidatingAdmissionPolicy: true}})
	rule := controlplane.CELRule("needs-team", "ConfigMap", "has(object.metadata.labels) && 'team' in object.metadata.labels", "a team label is required")
	rule.MatchResources.Any[0].Resources.Namespaces = []string{ns}
	policy := controlplane.ClusterPolicy("reports-later", kyvernov1.Audit, rule)
	policy.Spec.Background = nil
	cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)

	cp.InstallPolicyReportCRDs(t)
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(reports.APIVersion)
		u.SetKind(reports.KindPolicyReport)
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: reports.Name(existing.UID)}, u); err != nil {
			return false, err
		}
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		return len(results) == 1 && results[0].(map[string]any)["result"] == "fail", fmt.Errorf("results %v", results)
	})
	if err != nil {
		t.Fatalf("no report after the CRDs were installed: %v", err)
	}
}

// TestBackgroundScanMetadataOnly: with --background-scan-metadata-only the
// scan caches only metadata and reads each resource when it evaluates it:
// the report of an existing resource is written, and a change of the
// resource's content (not of its metadata's generation: ConfigMaps have
// none) is evaluated as the API server has it, not as a cache had it.
func TestBackgroundScanMetadataOnly(t *testing.T) {
	ctx := context.Background()
	const ns = "reports-metadata-only"
	cp.EnsureNamespace(t, ns, nil)
	cp.InstallPolicyReportCRDs(t)
	existing := controlplane.ConfigMap(ns, "existing", map[string]string{"team": ""})
	cp.Create(t, existing)
	cp.StartOperatorWith(t, operator.Options{
		Translate:                  translate.Options{GenerateValidatingAdmissionPolicy: true},
		BackgroundScanMetadataOnly: true,
	})
	rule := controlplane.CELRule("team-set", "ConfigMap", "has(object.data) && 'team' in object.data && object.data.team != ''", "data.team must be set")
	rule.MatchResources.Any[0].Resources.Namespaces = []string{ns}
	policy := controlplane.ClusterPolicy("reports-metadata-only", kyvernov1.Audit, rule)
	policy.Spec.Background = nil
	cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	waitForResult(t, ns, existing.UID, "fail")

	existing.Data = map[string]string{"team": "platform"}
	if err := cp.Client.Update(ctx, existing); err != nil {
		t.Fatal(err)
	}
	waitForResult(t, ns, existing.UID, "pass")
}

// waitForResult waits until the resource's PolicyReport holds one result,
// want.
func waitForResult(t *testing.T, ns string, uid types.UID, want string) {
	t.Helper()
	var results []any
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(reports.APIVersion)
		u.SetKind(reports.KindPolicyReport)
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: reports.Name(uid)}, u); err != nil {
			return false, err
		}
		results, _, _ = unstructured.NestedSlice(u.Object, "results")
		return len(results) == 1 && results[0].(map[string]any)["result"] == want, fmt.Errorf("results %v, want one %s", results, want)
	})
	if err != nil {
		t.Fatal(err)
	}
}
