// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// namespacedPolicy is a namespaced kyverno.io/v1 Policy with one CEL rule
// on every ConfigMap (its namespace confines it).
func namespacedPolicy(namespace, name string, background bool) *kyvernov1.Policy {
	rule := controlplane.CELRule("no-forbidden", "ConfigMap", "!has(object.data) || !('forbidden' in object.data)", "the key 'forbidden' is not allowed")
	return &kyvernov1.Policy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce, Background: ptr.To(background), Rules: []kyvernov1.Rule{rule}},
	}
}

// waitForPolicyCondition waits until kyvap's condition on the namespaced
// Policy reflects its generation with the reason.
func waitForPolicyCondition(t *testing.T, policy *kyvernov1.Policy, reason string) *kyvernov1.Policy {
	t.Helper()
	got := &kyvernov1.Policy{}
	err := controlplane.Eventually(context.Background(), controlplane.StatusTimeout, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionType)
		if c == nil || c.ObservedGeneration != got.Generation || c.Reason != reason {
			return false, fmt.Errorf("condition %+v, want reason %s", c, reason)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestNamespacedPolicyIsConfinedToItsNamespace: a kyverno.io/v1 Policy
// becomes VAPs that deny in its namespace only, labelled (no owner
// reference can cross scopes) and deleted with it; with generation off,
// kyvap's webhook enforces it, in its namespace only too.
func TestNamespacedPolicyIsConfinedToItsNamespace(t *testing.T) {
	ctx := context.Background()
	const nsA, nsB = "pol-a", "pol-b"
	cp.Namespace(t, nsA, nil)
	cp.Namespace(t, nsB, nil)
	port := controlplane.FreePort(t)
	op := cp.StartWebhookOperator(t, generateOn, port)

	policy := namespacedPolicy(nsA, "no-forbidden", false)
	cp.Create(t, policy)
	got := waitForPolicyCondition(t, policy, controllers.ReasonAllRulesTranslated)
	if !got.Status.ValidatingAdmissionPolicy.Generated {
		t.Errorf("status.validatingadmissionpolicy.generated = false for a policy enforced whole by VAPs without background scans: %s", got.Status.ValidatingAdmissionPolicy.Message)
	}
	vaps, bindings, err := generatedForModel(ctx, model.KindPolicy, nsA, policy.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(vaps) != 1 || len(bindings) != 1 {
		t.Fatalf("got %d VAPs and %d bindings, want 1 and 1", len(vaps), len(bindings))
	}
	if len(vaps[0].OwnerReferences) != 0 {
		t.Errorf("VAP %s has owner references %v", vaps[0].Name, vaps[0].OwnerReferences)
	}
	cp.WaitForDenial(t, controlplane.ConfigMap(nsA, "bad", map[string]string{"forbidden": "x"}), "the key 'forbidden' is not allowed")
	waitForDenier(t, controlplane.ConfigMap(nsA, "bad", map[string]string{"forbidden": "x"}), "vap")
	cp.MustAdmit(t, controlplane.ConfigMap(nsB, "bad", map[string]string{"forbidden": "x"}))

	// Generation off: the webhook takes the rule over, still in nsA only.
	op.Stop()
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, port)
	waitForPolicyCondition(t, policy, controllers.ReasonGenerationDisabled)
	waitForDenier(t, controlplane.ConfigMap(nsA, "bad", map[string]string{"forbidden": "x"}), "webhook")
	_, err = cp.DryRunCreate(ctx, controlplane.ConfigMap(nsA, "bad", map[string]string{"forbidden": "x"}))
	if err == nil || !strings.Contains(err.Error(), "Policy '"+nsA+"/no-forbidden' rule 'no-forbidden' denied request") {
		t.Errorf("denial %v, want the webhook's message naming Policy %s/no-forbidden", err, nsA)
	}
	cp.MustAdmit(t, controlplane.ConfigMap(nsB, "bad", map[string]string{"forbidden": "x"}))
	waitForNoneGenerated(t, model.KindPolicy, nsA, policy.Name)

	// Deleted: the webhook stops enforcing it.
	if err := cp.Client.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, controlplane.ConfigMap(nsA, "bad", map[string]string{"forbidden": "x"}))
		return err == nil, fmt.Errorf("still denied: %w", err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNamespacedPolicyIsScannedInTheBackground: kyvap scans a namespaced
// Policy with background scans on, in its namespace only, reporting it as
// namespace/name; enforced whole by VAPs, it is marked generated.
func TestNamespacedPolicyIsScannedInTheBackground(t *testing.T) {
	ctx := context.Background()
	const ns, other = "pol-background", "pol-background-other"
	cp.EnsureNamespace(t, ns, nil)
	cp.EnsureNamespace(t, other, nil)
	cp.InstallPolicyReportCRDs(t)
	inside := controlplane.ConfigMap(ns, "existing", map[string]string{"forbidden": "x"})
	outside := controlplane.ConfigMap(other, "existing", map[string]string{"forbidden": "x"})
	cp.Create(t, inside)
	cp.Create(t, outside)
	cp.StartOperator(t, generateOn)
	policy := namespacedPolicy(ns, "scanned", true)
	cp.Create(t, policy)
	got := waitForPolicyCondition(t, policy, controllers.ReasonAllRulesTranslated)
	if !got.Status.ValidatingAdmissionPolicy.Generated {
		t.Errorf("generated = false for a policy enforced whole by VAPs and scanned by kyvap: %s", got.Status.ValidatingAdmissionPolicy.Message)
	}
	waitForReported(t, inside, map[string]string{ns + "/scanned": "fail (background scan)"})
	if results, err := reportedResults(ctx, outside); err != nil || results[ns+"/scanned"] != "" {
		t.Errorf("the Policy of %s reported on %s: %v (%v)", ns, other, results, err)
	}
}
