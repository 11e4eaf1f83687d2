// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"context"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/reporter"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
	"github.com/kyvap/kyvap/webhook/certs"
)

// Operator is kyvap's manager running in-process against the control plane,
// built by operator exactly as cmd/manager builds it. The kit's
// StartOperator* functions return it; it is stopped when the test ends.
type Operator struct {
	Reconciler *controllers.ClusterPolicyReconciler
	// Engine is the fallback engine when the webhook runs, else nil.
	Engine *engine.Engine
	// Reports writes the PolicyReports; nil with scans disabled.
	Reports *reporter.Reporter
	// Elected is closed once this manager leads (at once without election).
	Elected <-chan struct{}
	// Draining reports whether the webhook is shutting down (its readiness
	// fails; a Service would stop sending it connections).
	Draining func() bool

	cancel context.CancelFunc
	done   chan error
	// t is the test that started the operator, cp its control plane.
	t  testing.TB
	cp *ControlPlane
}

// StartOperator runs kyvap's manager in-process with the translation
// options until the test ends (or Stop). Fallback rules are not enforced
// (no webhook); see StartWebhookOperator. Several operators may run in one
// process.
func (cp *ControlPlane) StartOperator(t testing.TB, opts translate.Options) *Operator {
	t.Helper()
	return cp.startForTest(t, operator.Options{Translate: opts}, ctrl.Options{})
}

// StartOperatorWith runs the manager with the operator options opts (no
// webhook unless opts.Webhook is set) until the test ends.
func (cp *ControlPlane) StartOperatorWith(t testing.TB, opts operator.Options) *Operator {
	t.Helper()
	return cp.startForTest(t, opts, ctrl.Options{})
}

// StartOperatorWithElection is StartOperator with leader election: election
// carries the LeaderElection* settings, LeaseDuration, RenewDeadline and
// RetryPeriod (the rest of it is ignored).
func (cp *ControlPlane) StartOperatorWithElection(t testing.TB, opts translate.Options, election ctrl.Options) *Operator {
	t.Helper()
	return cp.startForTest(t, operator.Options{Translate: opts}, election)
}

// OperatorNamespace is the namespace StartWebhookOperator runs the operator
// "in": the webhook excludes it and keeps its certificate Secret there.
const OperatorNamespace = "kyvap-system"

// StartWebhookOperator runs the manager as StartOperator does, plus the
// fallback webhook on 127.0.0.1:port (as cmd/manager does with --webhook and
// --webhook-url), which the API server calls over TLS with kyvap's own CA.
// It creates OperatorNamespace if needed. When the test ends the manager
// stops and then kyvap's webhook configuration is deleted, so that later
// tests never meet a configuration pointing at a dead port; Stop alone
// leaves the configuration, as when the webhook's pods are down.
func (cp *ControlPlane) StartWebhookOperator(t testing.TB, opts translate.Options, port int) *Operator {
	t.Helper()
	return cp.startWebhookOperator(t, cp.Config, opts, port, ctrl.Options{})
}

// StartWebhookOperatorWithElection is StartWebhookOperator with leader
// election (see StartOperatorWithElection): several replicas share one
// webhook configuration, which only the leader writes.
func (cp *ControlPlane) StartWebhookOperatorWithElection(t testing.TB, opts translate.Options, port int, election ctrl.Options) *Operator {
	t.Helper()
	return cp.startWebhookOperator(t, cp.Config, opts, port, election)
}

// StartWebhookReplica is StartWebhookOperatorWithElection for a replica
// that the API server reaches at url, a load balancer in front of several
// replicas (as the webhook's Service is in a cluster): every replica
// writes url into the configuration and serves on 127.0.0.1:port.
func (cp *ControlPlane) StartWebhookReplica(t testing.TB, opts translate.Options, port int, url string, election ctrl.Options, certificates certs.Options) *Operator {
	t.Helper()
	return cp.startWebhookOperatorAt(t, cp.Config, operator.Options{Translate: opts}, port, url, election, replicaDrain, certificates)
}

// replicaDrain is the shutdown drain of StartWebhookReplica's replicas, as
// cmd/manager's --shutdown-drain, shorter.
const replicaDrain = 2 * time.Second

func (cp *ControlPlane) startWebhookOperator(t testing.TB, cfg *rest.Config, opts translate.Options, port int, election ctrl.Options) *Operator {
	t.Helper()
	return cp.startWebhookOperatorAt(t, cfg, operator.Options{Translate: opts}, port, fmt.Sprintf("https://127.0.0.1:%d", port), election, 0, certs.Options{})
}

// StartWebhookOperatorWith is StartWebhookOperator with the operator
// options base (its Webhook and ShutdownDrain are set here; a Webhook
// Namespace, when given, is the operator's namespace instead of
// OperatorNamespace).
func (cp *ControlPlane) StartWebhookOperatorWith(t testing.TB, base operator.Options, port int) *Operator {
	t.Helper()
	return cp.startWebhookOperatorAt(t, cp.Config, base, port, fmt.Sprintf("https://127.0.0.1:%d", port), ctrl.Options{}, 0, certs.Options{})
}

// StartWebhookOperatorAsWith is StartWebhookOperatorWith with the
// credentials of cfg (a ServiceAccount's, to test shipped RBAC).
func (cp *ControlPlane) StartWebhookOperatorAsWith(t testing.TB, cfg *rest.Config, base operator.Options, port int) *Operator {
	t.Helper()
	return cp.startWebhookOperatorAt(t, cfg, base, port, fmt.Sprintf("https://127.0.0.1:%d", port), ctrl.Options{}, 0, certs.Options{})
}

func (cp *ControlPlane) startWebhookOperatorAt(t testing.TB, cfg *rest.Config, base operator.Options, port int, url string, election ctrl.Options, drain time.Duration, certificates certs.Options) *Operator {
	t.Helper()
	namespace := OperatorNamespace
	if base.Webhook != nil && base.Webhook.Namespace != "" {
		namespace = base.Webhook.Namespace // the operator's own namespace
	}
	cp.EnsureNamespace(t, namespace, nil)
	t.Cleanup(func() {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}}
		if err := cp.Client.Delete(context.Background(), vwc); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the webhook configuration: %v", err)
		}
	})
	wh := webhook.Options{Host: "127.0.0.1", Port: port, Namespace: namespace, URL: url, Certificates: certificates}
	if base.Webhook != nil {
		wh.OwnerClusterRole, wh.ForceFailurePolicyIgnore = base.Webhook.OwnerClusterRole, base.Webhook.ForceFailurePolicyIgnore
	}
	base.Webhook, base.ShutdownDrain = &wh, drain
	op, err := cp.startOperatorAs(cfg, base, election)
	if err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	op.t, op.cp = t, cp
	t.Cleanup(op.Stop)
	return op
}

// startForTest starts the operator, failing t if it cannot, and stops it
// when t ends.
func (cp *ControlPlane) startForTest(t testing.TB, opts operator.Options, extra ctrl.Options) *Operator {
	t.Helper()
	op, err := cp.startOperator(opts, extra)
	if err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	op.t, op.cp = t, cp
	t.Cleanup(op.Stop)
	return op
}

func (cp *ControlPlane) startOperator(opts operator.Options, extra ctrl.Options) (*Operator, error) {
	return cp.startOperatorAs(cp.Config, opts, extra)
}

func (cp *ControlPlane) startOperatorAs(cfg *rest.Config, opts operator.Options, extra ctrl.Options) (*Operator, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	managerOptions := ctrl.Options{
		Scheme:                 cp.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4},
		// A hang guard, as StatusTimeout is: on a loaded CI machine under
		// the race detector, work in flight at shutdown (compiling a large
		// compiled policy) took more than the default 30 s to end.
		GracefulShutdownTimeout:       ptr.To(StatusTimeout),
		LeaderElection:                extra.LeaderElection,
		LeaderElectionID:              extra.LeaderElectionID,
		LeaderElectionNamespace:       extra.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: extra.LeaderElectionReleaseOnCancel,
		LeaseDuration:                 extra.LeaseDuration,
		RenewDeadline:                 extra.RenewDeadline,
		RetryPeriod:                   extra.RetryPeriod,
	}
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, cfg, managerOptions, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	running := &Operator{Reconciler: op.Controllers.Policies, Engine: op.Engine, Reports: op.Reports, Elected: op.Manager.Elected(), Draining: op.Draining, cancel: cancel, done: make(chan error, 1)}
	go func() { running.done <- op.Start(ctx) }()
	return running, nil
}

// Stop stops the manager and fails the test if it stopped with an error.
// Later calls do nothing.
func (op *Operator) Stop() {
	if op.cancel == nil {
		return
	}
	op.cancel()
	op.cancel = nil
	if err := <-op.done; err != nil {
		op.t.Errorf("manager stopped with an error: %v", err)
	}
}

// DeleteWebhookSecret deletes the webhook's certificate Secret in
// OperatorNamespace, so that the next operator issues a new one.
func (cp *ControlPlane) DeleteWebhookSecret(t testing.TB) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: webhook.DefaultSecretName}}
	if err := cp.Client.Delete(context.Background(), secret); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// WebhookSecretCA returns the current CA (the first certificate of ca.crt)
// of the webhook's certificate Secret.
func (cp *ControlPlane) WebhookSecretCA(t testing.TB) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: OperatorNamespace, Name: webhook.DefaultSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(secret.Data[certs.CACertKey])
	if block == nil {
		t.Fatalf("no CA in the webhook Secret")
	}
	return string(block.Bytes)
}
