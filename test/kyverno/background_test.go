// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// reportResults returns "policy/rule=result" of kyvap's report about obj
// ("" when there is none).
func reportResults(ctx context.Context, obj client.Object) (map[string]string, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(reports.APIVersion)
	u.SetKind(reports.KindPolicyReport)
	err := cp.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: reports.Name(obj.GetUID())}, u)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	out := map[string]string{}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	for _, r := range results {
		m := r.(map[string]any)
		out[fmt.Sprint(m["policy"], "/", m["rule"])] = fmt.Sprint(m["result"])
	}
	return out, nil
}

func waitForResult(t *testing.T, obj client.Object, key, want string) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		got, err := reportResults(ctx, obj)
		if err != nil {
			return false, err
		}
		return got[key] == want, fmt.Errorf("report results %v, want %s=%q", got, key, want)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBackgroundScanReportsExistingResources: a ConfigMap created before an
// Audit policy appears as fail in its namespace's report; fixing it turns
// the result to pass; a background: false policy is not scanned; deleting
// the policy removes its results.
func TestBackgroundScanReportsExistingResources(t *testing.T) {
	ctx := context.Background()
	const ns = "background"
	cp.EnsureNamespace(t, ns, nil)
	existing := controlplane.ConfigMap(ns, "existing", nil)
	cp.Create(t, existing)
	cp.StartOperatorWith(t, operator.Options{Translate: translate.Options{GenerateValidatingAdmissionPolicy: true}, BackgroundScanInterval: 2 * time.Second})

	rule := controlplane.CELRule("needs-team", "ConfigMap", "has(object.metadata.labels) && 'team' in object.metadata.labels", "a team label is required")
	rule.MatchResources.Any[0].Resources.Namespaces = []string{ns}
	scanned := controlplane.ClusterPolicy("bg-scanned", kyvernov1.Audit, rule)
	scanned.Spec.Background = nil // Kyverno's default: scanned
	notScanned := controlplane.ClusterPolicy("bg-off", kyvernov1.Audit, rule)
	notScanned.Spec.Background = ptr.To(false)
	cp.CreatePolicy(t, scanned, controllers.ReasonAllRulesTranslated)
	cp.CreatePolicy(t, notScanned, controllers.ReasonAllRulesTranslated)

	waitForResult(t, existing, "bg-scanned/needs-team", "fail")
	if got, err := reportResults(ctx, existing); err != nil || got["bg-off/needs-team"] != "" {
		t.Errorf("a background: false policy is reported: %v, %v", got, err)
	}
	failing := map[string]string{"policy": "bg-scanned", "result": "fail"}
	if got := controlplane.MetricValue(t, "kyvap_policy_results", failing); got != 1 {
		t.Errorf("kyvap_policy_results%v = %v, want 1", failing, got)
	}

	// A namespace change reaches no resource event: the periodic rescan
	// reports the resources a namespaceSelector now selects.
	selected := controlplane.CELRule("selected-namespaces", "ConfigMap", "false", "selected namespaces hold no ConfigMaps")
	selected.MatchResources.Any[0].Resources.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"scan": "yes"}}
	bySelector := controlplane.ClusterPolicy("bg-selector", kyvernov1.Audit, selected)
	bySelector.Spec.Background = nil
	cp.CreatePolicy(t, bySelector, controllers.ReasonAllRulesTranslated)
	namespace := &corev1.Namespace{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	namespace.Labels["scan"] = "yes"
	if err := cp.Client.Update(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	waitForResult(t, existing, "bg-selector/selected-namespaces", "fail")

	current := existing.DeepCopy()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(existing), current); err != nil {
		t.Fatal(err)
	}
	current.Labels = map[string]string{"team": "a"}
	if err := cp.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	waitForResult(t, existing, "bg-scanned/needs-team", "pass")
	if got := controlplane.MetricValue(t, "kyvap_policy_results", failing); got != 0 {
		t.Errorf("after the fix kyvap_policy_results%v = %v, want 0", failing, got)
	}

	if err := cp.Client.Delete(ctx, scanned); err != nil {
		t.Fatal(err)
	}
	waitForResult(t, existing, "bg-scanned/needs-team", "")

	// A cluster-scoped resource gets a ClusterPolicyReport.
	owned := controlplane.CELRule("namespaces-have-owner", "Namespace", "has(object.metadata.labels) && 'owner' in object.metadata.labels", "namespaces need an owner")
	owned.MatchResources.Any[0].Resources.Names = []string{ns}
	clusterScoped := controlplane.ClusterPolicy("bg-namespaces", kyvernov1.Audit, owned)
	clusterScoped.Spec.Background = nil
	cp.CreatePolicy(t, clusterScoped, controllers.ReasonAllRulesTranslated)
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(reports.APIVersion)
		u.SetKind(reports.KindClusterPolicyReport)
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: reports.Name(namespace.UID)}, u); err != nil {
			return false, err
		}
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		return len(results) == 1 && results[0].(map[string]any)["result"] == "fail", fmt.Errorf("results %v", results)
	})
	if err != nil {
		t.Errorf("no ClusterPolicyReport with the Namespace's fail: %v", err)
	}
}

// reportProcesses returns "policy/rule=process" of kyvap's report about obj.
func reportProcesses(ctx context.Context, obj client.Object) (map[string]string, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(reports.APIVersion)
	u.SetKind(reports.KindPolicyReport)
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: reports.Name(obj.GetUID())}, u); err != nil {
		return nil, err
	}
	out := map[string]string{}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	for _, r := range results {
		m := r.(map[string]any)
		process, _, _ := unstructured.NestedString(m, "properties", "process")
		out[fmt.Sprint(m["policy"], "/", m["rule"])] = process
	}
	return out, nil
}

// TestAdmissionResultsInReports: what kyvap's webhook finds on a request it
// admits goes into the resource's report (process "admission review") for a
// background: false policy, beside the background scan's results of a
// scanned policy; a rescan keeps it, and deleting its policy removes it.
func TestAdmissionResultsInReports(t *testing.T) {
	ctx := context.Background()
	const ns = "admission-reports"
	cp.EnsureNamespace(t, ns, nil)
	// Every rule on the webhook: the fallback path kyvap sees requests on.
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t))

	rule := controlplane.CELRule("needs-team", "ConfigMap", "has(object.metadata.labels) && 'team' in object.metadata.labels", "a team label is required")
	rule.MatchResources.Any[0].Resources.Namespaces = []string{ns}
	scanned := controlplane.ClusterPolicy("adm-scanned", kyvernov1.Audit, rule)
	scanned.Spec.Background = nil
	atAdmission := controlplane.ClusterPolicy("adm-only", kyvernov1.Audit, rule)
	atAdmission.Spec.Background = ptr.To(false)
	cp.CreatePolicy(t, scanned, controllers.ReasonGenerationDisabled)
	cp.CreatePolicy(t, atAdmission, controllers.ReasonGenerationDisabled)

	// The webhook must serve both policies before the request.
	cm := controlplane.ConfigMap(ns, "created-later", nil)
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		warnings, err := cp.DryRunCreate(ctx, cm)
		return err == nil && len(warnings) == 2, fmt.Errorf("warnings %v, error %w", warnings, err)
	})
	if err != nil {
		t.Fatalf("the webhook never warned for both policies: %v", err)
	}
	cp.Create(t, cm)
	waitForResult(t, cm, "adm-only/needs-team", "fail")
	waitForResult(t, cm, "adm-scanned/needs-team", "fail")
	processes, err := reportProcesses(ctx, cm)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"adm-only/needs-team": reports.ProcessAdmission, "adm-scanned/needs-team": reports.ProcessBackground}; fmt.Sprint(processes) != fmt.Sprint(want) {
		t.Errorf("processes %v, want %v", processes, want)
	}

	// Fixed: the scan and the webhook both report pass, in one report.
	current := cm.DeepCopy()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(cm), current); err != nil {
		t.Fatal(err)
	}
	current.Labels = map[string]string{"team": "a"}
	if err := cp.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	waitForResult(t, cm, "adm-scanned/needs-team", "pass")
	waitForResult(t, cm, "adm-only/needs-team", "pass")

	if err := cp.Client.Delete(ctx, atAdmission); err != nil {
		t.Fatal(err)
	}
	waitForResult(t, cm, "adm-only/needs-team", "")
	if got, err := reportResults(ctx, cm); err != nil || got["adm-scanned/needs-team"] != "pass" {
		t.Errorf("the scanned policy's result went with the other policy: %v, %v", got, err)
	}
}

// policyReportResults returns "policy/rule=result" of the PolicyReport
// named name in the namespace, and whether it exists.
func policyReportResults(ctx context.Context, namespace, name string) (map[string]string, bool, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(reports.APIVersion)
	u.SetKind(reports.KindPolicyReport)
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	out := map[string]string{}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	for _, r := range results {
		m := r.(map[string]any)
		out[fmt.Sprint(m["policy"], "/", m["rule"])] = fmt.Sprint(m["source"], ":", m["result"])
	}
	return out, true, nil
}

// TestReportsNeverDuplicateKyvernos runs Kyverno's admission controller and
// its reports controller (its background scans) beside kyvap: a policy
// kyvap marks generated is reported by kyvap only (Kyverno skips it), a
// policy Kyverno enforces (a pattern rule makes it not generated) by
// Kyverno only, all its rules included. Each writes its own report about
// the resource; no rule is in both.
func TestReportsNeverDuplicateKyvernos(t *testing.T) {
	startBoth(t, false)
	ctx := context.Background()
	const ns = "dup-reports"
	cp.EnsureNamespace(t, ns, nil)
	existing := controlplane.ConfigMap(ns, "existing", nil)
	cp.Create(t, existing)

	celRule := func(name string) kyvernov1.Rule {
		r := controlplane.CELRule(name, "ConfigMap", "has(object.metadata.labels) && 'team' in object.metadata.labels", "a team label is required")
		r.MatchResources.Any[0].Resources.Namespaces = []string{ns}
		return r
	}
	translated := controlplane.ClusterPolicy("dup-translated", kyvernov1.Audit, celRule("cel-team"))
	translated.Spec.Background = nil
	pattern := kyvernov1.Rule{
		Name:           "pattern-team",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}, Namespaces: []string{ns}}}}},
		Validation:     &kyvernov1.Validation{Message: "a team label is required", RawPattern: &apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"labels":{"tea?":"?*"}}}`)}},
	}
	mixed := controlplane.ClusterPolicy("dup-mixed", kyvernov1.Audit, celRule("cel-team"), pattern)
	mixed.Spec.Background = nil
	if got := cp.CreatePolicy(t, translated, controllers.ReasonAllRulesTranslated); !got.Status.ValidatingAdmissionPolicy.Generated {
		t.Fatalf("the translated policy is not generated: %+v", got.Status.ValidatingAdmissionPolicy)
	}
	if got := cp.CreatePolicy(t, mixed, controllers.ReasonAllRulesTranslated); got.Status.ValidatingAdmissionPolicy.Generated {
		t.Fatalf("the mixed policy is generated: %+v", got.Status.ValidatingAdmissionPolicy)
	}
	// Kyverno's background scans start once the statuses are written, as
	// when Kyverno is installed on a cluster where kyvap runs. Otherwise
	// Kyverno may scan a policy in the moment before it is marked generated
	// (with its own generator too); it rescans every resource on each policy
	// update, status included, so such a result goes again, but the test
	// would have to wait for that.
	cp.StartKyvernoReports(t)

	// Kyverno's report is named by the resource's UID, kyvap's kyvap-<UID>.
	// Both settle: Kyverno rescans on every policy update, kyvap when
	// whether Kyverno runs changes.
	wantKyverno := map[string]string{"dup-mixed/cel-team": "kyverno:fail", "dup-mixed/pattern-team": "kyverno:fail"}
	wantKyvap := map[string]string{"dup-translated/cel-team": "kyvap:fail"}
	err := controlplane.Eventually(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		kyvernos, _, err := policyReportResults(ctx, ns, string(existing.UID))
		if err != nil {
			return false, err
		}
		kyvaps, _, err := policyReportResults(ctx, ns, reports.Name(existing.UID))
		if err != nil {
			return false, err
		}
		return fmt.Sprint(kyvernos) == fmt.Sprint(wantKyverno) && fmt.Sprint(kyvaps) == fmt.Sprint(wantKyvap),
			fmt.Errorf("Kyverno's report %v, want %v (no result of the generated policy); kyvap's %v, want %v (no result of the policy Kyverno scans)", kyvernos, wantKyverno, kyvaps, wantKyvap)
	})
	if err != nil {
		t.Fatal(err)
	}
}
