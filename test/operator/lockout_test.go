// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// TestWebhookDownNeverLocksOut registers kyvap's webhook (failurePolicy
// Fail) for every kind with a rule that denies everything, stops the
// operator, and shows that what a cluster needs to keep running is still
// admitted: node heartbeats (Leases in kube-node-lease), Nodes, Events,
// authorization reviews, the control plane's namespaces and every request
// of a node; while an ordinary request is refused because the webhook is
// down.
func TestWebhookDownNeverLocksOut(t *testing.T) {
	const ns = "lockout"
	ctx := context.Background()
	cp.Namespace(t, ns, nil)
	// A node may create ConfigMaps in the namespace (granted before the
	// policy denies every write).
	cp.Create(t, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}},
	})
	cp.Create(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "node-configmaps"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: translate.WebhookProtectedUserGroup}},
	})

	op := cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t))
	rule := controlplane.CELRule("nothing", "*", "false", "nothing is allowed")
	rule.MatchResources.Any[0].Resources.Operations = nil // every operation
	policy := controlplane.ClusterPolicy("lockout-everything", kyvernov1.Enforce, rule)
	cp.Create(t, policy)
	got := cp.WaitForStatus(t, policy, controllers.ReasonGenerationDisabled)
	for _, protected := range []string{"nodes", "coordination.k8s.io/leases", "events", "authorization.k8s.io/subjectaccessreviews"} {
		if msg := got.Status.ValidatingAdmissionPolicy.Message; !strings.Contains(msg, protected) {
			t.Errorf("the status does not report that %s never reach the webhook: %q", protected, msg)
		}
	}
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "denied", nil), "nothing is allowed")

	// The webhook goes away; its configuration stays, as when its pods are down.
	op.Stop()
	err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, controlplane.ConfigMap(ns, "refused", nil))
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), fmt.Errorf("want a refusal by the unreachable webhook, got %w", err)
	})
	if err != nil {
		t.Fatal(err)
	}

	renew := int32(40)
	admitted := map[string]client.Object{
		"a node heartbeat (Lease in kube-node-lease)": &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: "lockout-node"}, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &renew}},
		"a leader-election Lease":                     &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"}},
		"a Node":                                      &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lockout-node"}},
		"an Event":                                    &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evt"}, InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "x"}},
		"a ConfigMap in kube-system":                  controlplane.ConfigMap("kube-system", "lockout", nil),
		"a ConfigMap in kube-public":                  controlplane.ConfigMap("kube-public", "lockout", nil),
		"a ConfigMap in the operator's namespace":     controlplane.ConfigMap(controlplane.OperatorNamespace, "lockout", nil),
	}
	for what, obj := range admitted {
		if _, err := cp.DryRunCreate(ctx, obj); err != nil {
			t.Errorf("%s was refused with the webhook down: %v", what, err)
		}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "someone", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "configmaps"},
	}}
	if err := cp.Client.Create(ctx, sar); err != nil {
		t.Errorf("a SubjectAccessReview was refused with the webhook down: %v", err)
	}

	// A node's own request, in an ordinary namespace.
	nodeConfig := rest.CopyConfig(cp.Config)
	nodeConfig.Impersonate = rest.ImpersonationConfig{UserName: "system:node:lockout-node", Groups: []string{translate.WebhookProtectedUserGroup, "system:authenticated"}}
	nodeClient, err := client.New(nodeConfig, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodeClient.Create(ctx, controlplane.ConfigMap(ns, "from-a-node", nil), client.DryRunAll); err != nil {
		t.Errorf("a request of a node was refused with the webhook down: %v", err)
	}

	// Remove the configuration and wait until the API server no longer calls
	// the webhook, so that the cleanups (deleting the policy) are admitted.
	vwc, err := cp.WebhookConfiguration(ctx)
	if err != nil || vwc == nil {
		t.Fatalf("webhook configuration %s: %v, %v", webhook.DefaultConfigurationName, vwc, err)
	}
	if err := cp.Client.Delete(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, controlplane.ConfigMap(ns, "after", nil))
		return err == nil, fmt.Errorf("the removed webhook still refuses: %w", err)
	})
	if err != nil {
		t.Fatal(err)
	}
}
