package controlplane

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/internal/operator"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// Operator is kyvap's manager running in-process against the control plane,
// built by internal/operator exactly as cmd/manager builds it.
type Operator struct {
	Reconciler *controllers.ClusterPolicyReconciler
	// Engine is the fallback engine when the webhook runs, else nil.
	Engine *engine.Engine
	// Elected is closed once this manager leads (at once without election).
	Elected <-chan struct{}

	cancel context.CancelFunc
	done   chan error
}

// StartOperator starts the manager with the translation options; extra
// carries leader-election settings (the rest of it is ignored). Several
// operators may run in one process. Fallback rules are not enforced (no
// webhook); see StartOperatorWithWebhook.
func (cp *ControlPlane) StartOperator(opts translate.Options, extra ctrl.Options) (*Operator, error) {
	return cp.startOperator(operator.Options{Translate: opts}, extra)
}

// StartOperatorWithWebhook starts the manager as StartOperator does, plus
// the fallback webhook with wh (as cmd/manager does with --webhook). The
// API server reaches it through wh.URL, so its host must be this machine.
func (cp *ControlPlane) StartOperatorWithWebhook(opts translate.Options, extra ctrl.Options, wh webhook.Options) (*Operator, error) {
	return cp.startOperator(operator.Options{Translate: opts, Webhook: &wh}, extra)
}

func (cp *ControlPlane) startOperator(opts operator.Options, extra ctrl.Options) (*Operator, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	managerOptions := ctrl.Options{
		Scheme:                        cp.Scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4},
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
	running := &Operator{Reconciler: op.Controllers.Policies, Engine: op.Engine, Elected: op.Manager.Elected(), cancel: cancel, done: make(chan error, 1)}
	go func() { running.done <- op.Start(ctx) }()
	return running, nil
}

// Stop stops the manager and returns its error; later calls return nil.
func (op *Operator) Stop() error {
	if op.cancel == nil {
		return nil
	}
	op.cancel()
	op.cancel = nil
	return <-op.done
}

// WaitForPolicyStatus waits until kyvap's condition on the named
// ClusterPolicy reflects its current generation, and returns both.
func WaitForPolicyStatus(ctx context.Context, c client.Client, name string, timeout time.Duration) (*kyvernov1.ClusterPolicy, *metav1.Condition, error) {
	policy := &kyvernov1.ClusterPolicy{}
	var cond *metav1.Condition
	err := Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, policy); err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(policy.Status.Conditions, controllers.ConditionType)
		if cond == nil {
			return false, fmt.Errorf("no %s condition", controllers.ConditionType)
		}
		return cond.ObservedGeneration == policy.Generation, fmt.Errorf("condition at generation %d, policy at %d", cond.ObservedGeneration, policy.Generation)
	})
	return policy, cond, err
}
