package controllers

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/translate"
)

// FallbackSyncReconciler feeds the fallback rules of every policy to the
// local webhook on every replica. Admission needs no leader: each replica
// serves the webhook, so each one translates the policies itself (the
// translation is deterministic, so all replicas enforce the same rules).
// It writes nothing to the API server.
type FallbackSyncReconciler struct {
	client.Client
	Resolvers ResolverSource
	Sink      FallbackSink
	Options   translate.Options

	// plans is shared with the ClusterPolicyReconciler of the same manager
	// (Setup does it): on the leader both translate the same inputs, and a
	// shared cache makes the second translation free.
	plans *planCache
}

// Reconcile translates one policy and hands its fallback rules to the sink.
func (r *FallbackSyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	policy := &kyvernov1.ClusterPolicy{}
	if err := r.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.Sink.SetFallbackRules(req.Name, nil)
			r.plans.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	var exceptions kyvernov2.PolicyExceptionList
	if err := r.List(ctx, &exceptions, client.MatchingFields{exceptionPolicyIndex: policy.Name}); err != nil {
		return ctrl.Result{}, err
	}
	plan, err := r.plans.translate(translate.Input{Policy: policy, Exceptions: exceptions.Items}, r.Resolvers.Resolver(), r.Options)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.Sink.SetFallbackRules(policy.Name, fallbackRules(&plan))
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler; it runs on every replica. The
// PolicyException index is registered by the ClusterPolicyReconciler, which
// must be set up first.
func (r *FallbackSyncReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.plans == nil {
		r.plans = &planCache{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("fallbacksync").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		For(&kyvernov1.ClusterPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&kyvernov2.PolicyException{}, handler.EnqueueRequestsFromMapFunc(exceptionRequests)).
		// Kinds that did not resolve may resolve now; on a replica that is not
		// the leader, this is the only refresh of discovery.
		Watches(&apiextensionsv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return refreshAndRequeueAll(ctx, r.Client, r.Resolvers)
		}), builder.OnlyMetadata).
		Complete(r)
}
