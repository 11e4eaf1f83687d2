// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Kyverno's admission controller labels the webhook configurations it
// manages (pkg/controllers/webhook: kyverno.LabelWebhookManagedBy).
const (
	kyvernoWebhookLabel = "webhook.kyverno.io/managed-by"
	kyvernoWebhookValue = "kyverno"
)

var kyvernoDetected = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "kyvap_kyverno_admission_controller_detected",
	Help: "1 when Kyverno's admission controller runs in the cluster (its webhook configurations exist): the rules kyvap does not turn into VAPs are then left to it.",
})

func init() { metrics.Registry.MustRegister(kyvernoDetected) }

// The detector reads webhook configurations whether or not kyvap's own
// webhook runs.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch

// Kyverno detects Kyverno's admission controller from its validating webhook
// configurations, so that kyvap knows, instead of assuming, whether the
// rules it cannot turn into VAPs have another enforcer. It runs on every
// replica (each one decides what its own webhook serves).
type Kyverno struct {
	reader    client.Reader
	running   atomic.Bool
	listeners []func()
}

// Running implements controllers.KyvernoPresence.
func (k *Kyverno) Running() bool { return k.running.Load() }

// kyvernoKey is the single work item of the detector.
var kyvernoKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "kyverno"}}

func isKyvernoWebhook(o client.Object) bool {
	return o.GetLabels()[kyvernoWebhookLabel] == kyvernoWebhookValue
}

// SetupWithManager registers the detector.
func (k *Kyverno) SetupWithManager(mgr ctrl.Manager) error {
	k.reader = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named("kyverno").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{kyvernoKey}
		}), builder.WithPredicates(predicate.NewPredicateFuncs(isKyvernoWebhook)), builder.OnlyMetadata).
		Complete(k)
}

// Reconcile re-reads Kyverno's webhook configurations and, when Kyverno
// appeared or went away, logs it, sets the metric and tells the listeners.
func (k *Kyverno) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	// Metadata only, from the informer the watch started.
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfigurationList"))
	if err := k.reader.List(ctx, &list, client.MatchingLabels{kyvernoWebhookLabel: kyvernoWebhookValue}); err != nil {
		return reconcile.Result{}, err
	}
	running := len(list.Items) > 0
	if k.running.Swap(running) == running {
		return reconcile.Result{}, nil
	}
	if running {
		kyvernoDetected.Set(1)
		log.FromContext(ctx).Info("Kyverno's admission controller runs in this cluster: rules kyvap cannot turn into ValidatingAdmissionPolicies are left to it", "webhookConfigurations", len(list.Items))
	} else {
		kyvernoDetected.Set(0)
		log.FromContext(ctx).Info("Kyverno's admission controller no longer runs in this cluster: kyvap's webhook enforces the rules it cannot turn into ValidatingAdmissionPolicies")
	}
	for _, notify := range k.listeners {
		notify()
	}
	return reconcile.Result{}, nil
}
