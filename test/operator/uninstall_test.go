// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// TestUninstallRemovesTheWebhookConfiguration: kyvap's webhook
// configuration is owned by the operator's Namespace, so removing kyvap
// (kubectl delete -k deletes the namespace; or deleting it by hand) never
// leaves requests to a failurePolicy Fail webhook nobody serves. First the
// owner reference is restored when someone removes it; then, with the
// operator already gone (its pods die first), deleting its namespace has
// the garbage collector delete the configuration, and the request the
// fallback rule denied — and the dead webhook refused — is admitted.
// Second, with the operator running, it deletes the configuration itself as
// soon as its namespace is being deleted.
func TestUninstallRemovesTheWebhookConfiguration(t *testing.T) {
	ctx := context.Background()
	ns := "uninstall-target"
	cp.EnsureNamespace(t, ns, nil)
	rule := controlplane.CELRule("no-forbidden", "ConfigMap", "object.metadata.name != 'forbidden'", "forbidden is forbidden")
	policy := controlplane.ClusterPolicy("uninstall-webhook", kyvernov1.Enforce, rule)
	cp.Create(t, policy)
	forbidden := controlplane.ConfigMap(ns, "forbidden", nil)

	for _, round := range []struct {
		namespace       string
		operatorRunning bool
	}{{"kyvap-uninstall-gc", false}, {"kyvap-uninstall-live", true}} {
		t.Run(round.namespace, func(t *testing.T) {
			op := cp.StartWebhookOperatorWith(t, operator.Options{
				Translate: translate.Options{GenerateValidatingAdmissionPolicy: false},
				Webhook:   &webhook.Options{Namespace: round.namespace},
			}, controlplane.FreePort(t))
			cp.WaitForStatus(t, policy, controllers.ReasonGenerationDisabled)
			cp.WaitForDenial(t, forbidden, "forbidden is forbidden")
			owner := &corev1.Namespace{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: round.namespace}, owner); err != nil {
				t.Fatal(err)
			}
			vwc := waitForOwner(t, owner)

			// Someone drops the owner reference: the operator restores it.
			vwc.OwnerReferences = nil
			if err := cp.Client.Update(ctx, vwc); err != nil {
				t.Fatal(err)
			}
			waitForOwner(t, owner)

			if !round.operatorRunning {
				// The pods are gone; the configuration stays and the
				// API server refuses what the rule covers.
				op.Stop()
				err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
					_, err := cp.DryRunCreate(ctx, controlplane.ConfigMap(ns, "anything", nil))
					return err != nil && strings.Contains(err.Error(), "failed calling webhook"), fmt.Errorf("want a refusal by the unreachable webhook, got %w", err)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := cp.Client.Delete(ctx, owner); err != nil {
				t.Fatal(err)
			}
			err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
				err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
				return apierrors.IsNotFound(err), fmt.Errorf("the webhook configuration is still there (%w)", err)
			})
			if err != nil {
				t.Fatal(err)
			}
			if round.operatorRunning {
				// The namespace is gone and the operator still runs: a
				// change of its rules makes it reconcile the
				// configuration again, which must not bring it back.
				reconciles := controlplane.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": "webhookconfiguration"})
				more := controlplane.ClusterPolicy("uninstall-webhook-more", kyvernov1.Enforce, controlplane.CELRule("more", "Secret", "true", "never"))
				cp.Create(t, more)
				err := controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) {
					n := controlplane.MetricValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": "webhookconfiguration"})
					return n > reconciles, fmt.Errorf("no reconcile after the rules changed (%v)", n)
				})
				if err != nil {
					t.Fatal(err)
				}
				err = cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
				if !apierrors.IsNotFound(err) {
					t.Fatalf("the operator recreated its webhook configuration after its namespace was deleted (%v)", err)
				}
				op.Stop()
			}
			// Nothing refuses the request any more: the rule is enforced by
			// nobody, as the uninstall asked.
			err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				_, err := cp.DryRunCreate(ctx, forbidden)
				return err == nil, fmt.Errorf("still refused: %w", err)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// waitForOwner waits until kyvap's webhook configuration is owned by the
// namespace, and returns it.
func waitForOwner(t *testing.T, owner *corev1.Namespace) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, vwc); err != nil {
			return false, err
		}
		for _, ref := range vwc.OwnerReferences {
			if ref.Kind == "Namespace" && ref.Name == owner.Name && ref.UID == owner.UID {
				return true, nil
			}
		}
		return false, fmt.Errorf("owner references %v", vwc.OwnerReferences)
	})
	if err != nil {
		t.Fatalf("the webhook configuration is not owned by namespace %s: %v", owner.Name, err)
	}
	return vwc
}
