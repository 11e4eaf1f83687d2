// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// configProbe is one request, made by a user, whose verdict the test takes
// from Kyverno and from kyvap's VAP.
type configProbe struct {
	what      string
	namespace string
	name      string
	user      string
	groups    []string
}

// TestGlobalConfigMatchesKyverno runs Kyverno with its chart's default
// configuration plus a few entries, and checks that kyvap's VAP for the
// same policy admits and denies exactly what Kyverno's webhook admits and
// denies: resource filters (kube-system, kube-public, kyverno's namespace,
// a name pattern), excluded groups (system:nodes) and usernames, and the
// webhook namespace selector. Then a change of Kyverno's ConfigMap reaches
// the VAP.
func TestGlobalConfigMatchesKyverno(t *testing.T) {
	ctx := context.Background()
	data := kyverno.ChartDefaultsConfigMap().Data
	data["resourceFilters"] += " [ConfigMap,cfg-*,skip-*]"
	data["excludeUsernames"] = "robot-*"
	setKyvernoConfig(t, data)
	t.Cleanup(func() { setKyvernoConfig(t, nil) })
	startBoth(t, false)
	cp.EnsureNamespace(t, "cfg-a", nil)

	probes := []configProbe{
		{what: "an ordinary request", namespace: "cfg-a", name: "plain"},
		{what: "a resource filter on the name", namespace: "cfg-a", name: "skip-1"},
		{what: "the same name elsewhere", namespace: "default", name: "skip-1"},
		{what: "kube-system (resource filter and namespace selector)", namespace: "kube-system", name: "plain"},
		{what: "kube-public (resource filter)", namespace: "kube-public", name: "plain"},
		{what: "kube-node-lease (resource filter)", namespace: "kube-node-lease", name: "plain"},
		{what: "Kyverno's namespace", namespace: controlplane.KyvernoNamespace, name: "plain"},
		{what: "an excluded username", namespace: "cfg-a", name: "plain", user: "robot-1", groups: []string{"system:masters"}},
		{what: "an excluded group", namespace: "cfg-a", name: "plain", user: "node-agent", groups: []string{"system:masters", "system:nodes"}},
		{what: "a user that is not excluded", namespace: "cfg-a", name: "plain", user: "carol", groups: []string{"system:masters"}},
	}
	rule := controlplane.CELRule("no-config-maps", "ConfigMap", "false", "config maps are refused")

	// Kyverno's verdicts: the policy opted out of VAP generation, so with
	// Kyverno running kyvap leaves it to Kyverno's webhook.
	byKyverno := controlplane.ClusterPolicy("cfg-by-kyverno", kyvernov1.Enforce, rule)
	byKyverno.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, byKyverno, controllers.ReasonFallback)
	waitForKyvernoDenial(t, controlplane.ConfigMap("cfg-a", "plain", nil), "config maps are refused")
	kyvernoVerdicts := verdicts(t, probes)
	if err := cp.Client.Delete(ctx, byKyverno); err != nil {
		t.Fatal(err)
	}
	waitForAdmission(t, controlplane.ConfigMap("cfg-a", "plain", nil))

	// kyvap's verdicts: the same rule as a VAP.
	byVAP := controlplane.ClusterPolicy("cfg-by-vap", kyvernov1.Enforce, rule)
	cp.CreatePolicy(t, byVAP, controllers.ReasonAllRulesTranslated)
	cp.WaitForDenial(t, controlplane.ConfigMap("cfg-a", "plain", nil), "config maps are refused")
	vapVerdicts := verdicts(t, probes)

	denied := 0
	for i, p := range probes {
		if kyvernoVerdicts[i] != vapVerdicts[i] {
			t.Errorf("%s (%s/%s by %q): Kyverno denied=%v, kyvap's VAP denied=%v", p.what, p.namespace, p.name, p.user, kyvernoVerdicts[i], vapVerdicts[i])
		}
		if kyvernoVerdicts[i] {
			denied++
		}
	}
	if denied != 3 {
		t.Errorf("Kyverno denied %d probes, want 3 (the ordinary request, the filtered name in another namespace, the user not excluded): %v", denied, kyvernoVerdicts)
	}

	// A new filter in Kyverno's ConfigMap re-translates the VAP.
	data["resourceFilters"] += " [ConfigMap,cfg-a,later-*]"
	setKyvernoConfig(t, data)
	waitForAdmission(t, controlplane.ConfigMap("cfg-a", "later-1", nil))
	if _, err := cp.DryRunCreate(ctx, controlplane.ConfigMap("cfg-a", "plain", nil)); err == nil {
		t.Error("the VAP no longer denies the ordinary request after the configuration changed")
	}
}

// setKyvernoConfig writes the data of Kyverno's `kyverno` ConfigMap, which
// Kyverno and kyvap both watch.
func setKyvernoConfig(t *testing.T, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controlplane.KyvernoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.KyvernoNamespace, Name: "kyverno"}}
	err := cp.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = data
		err = cp.Client.Create(ctx, cm)
	case err == nil:
		cm.Data = data
		err = cp.Client.Update(ctx, cm)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// verdicts returns, per probe, whether a dry-run create of its ConfigMap
// was denied by a policy (Kyverno's webhook or a ValidatingAdmissionPolicy).
func verdicts(t *testing.T, probes []configProbe) []bool {
	t.Helper()
	out := make([]bool, len(probes))
	for i, p := range probes {
		cfg := rest.CopyConfig(cp.Config)
		if p.user != "" {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
		}
		c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Create(context.Background(), controlplane.ConfigMap(p.namespace, p.name, nil), client.DryRunAll)
		switch {
		case err == nil:
		case strings.Contains(err.Error(), "config maps are refused"):
			out[i] = true
		default:
			t.Fatalf("%s: %v", p.what, err)
		}
	}
	return out
}

// waitForAdmission waits until a dry-run create of obj is admitted.
func waitForAdmission(t *testing.T, obj client.Object) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, obj)
		if err != nil {
			return false, fmt.Errorf("%s/%s still denied: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
