// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// NamespacedPolicyReconciler is the ClusterPolicyReconciler of Kyverno's
// namespaced kyverno.io/v1 Policy: the same translation (clusterpolicy.PolicyInput
// confines every VAP to the policy's namespace), the same fallback rules
// (keyed namespace/name) and the same status. Its generated objects are
// cluster-scoped, so they carry labels instead of owner references, and
// the reconciler deletes them itself, as for a NamespacedValidatingPolicy.
type NamespacedPolicyReconciler struct {
	client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Resolvers ResolverSource
	Fallback  FallbackSink
	Kyverno   KyvernoPresence
	Coverage  WebhookCoverage
	Options   translate.Options
	Config    func() *kyverno.Config

	requeue chan event.GenericEvent
	gauges  *policyGauges
	// plans may be shared with the other policy reconcilers (Setup does
	// it).
	plans *planCache
}

// Reconcile gathers the policy and its exceptions, translates them, hands
// the fallback rules over, applies the plan and reports.
func (r *NamespacedPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := clusterpolicy.PolicyKey(req.Namespace, req.Name)
	policy := &kyvernov1.Policy{}
	if err := r.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.Fallback.SetFallbackRules(key, nil)
			r.gauges.forget("Policy/" + key)
			r.plans.forget(key)
			outcomes := deleteGeneratedOf(ctx, r.Client, model.KindPolicy, req.NamespacedName, func(obj client.Object, _ string) bool {
				return generatedFrom(obj, model.KindPolicy, req.NamespacedName)
			}, nil)
			return ctrl.Result{}, outcomeError(outcomes)
		}
		return ctrl.Result{}, err
	}
	if !policy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var exceptions kyvernov2.PolicyExceptionList
	if err := r.List(ctx, &exceptions, client.MatchingFields{exceptionPolicyIndex: key}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing PolicyExceptions: %w", err)
	}
	input, resolver, opts := clusterpolicy.PolicyInput(policy, exceptions.Items), r.Resolvers.Resolver(), translationOptions(r.Options, r.Config)
	plan, err := r.plans.translate(ctx, input, resolver, opts)
	if err != nil {
		return ctrl.Result{}, err
	}
	running := kyvernoRunning(r.Kyverno)
	next := fallbackRules(&plan, running)
	rules, holding := handOver(ctx, r.Client, r.Fallback, key, &plan, next, bridgeFor(ctx, r.plans, input, resolver, opts, running))
	r.Fallback.SetFallbackRules(key, rules)
	outcomes := r.apply(ctx, policy, &plan, webhookRuleNames(next))
	pending := activating(ctx, r.Client, &plan, outcomes)
	reason, err := r.report(ctx, policy, &plan, outcomes, pending)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.gauges.set("Policy/"+key, reason, &plan)
	if err := outcomeError(outcomes); err != nil {
		return ctrl.Result{}, err
	}
	polling := holding || held(outcomes) || pending
	r.plans.hold(holderPolicies, key, polling)
	if polling {
		return ctrl.Result{RequeueAfter: handoverPoll}, nil
	}
	return ctrl.Result{}, nil
}

// apply writes the plan's objects and deletes the policy's objects the plan
// no longer wants, holding those whose rule the webhook does not cover yet.
func (r *NamespacedPolicyReconciler) apply(ctx context.Context, policy *kyvernov1.Policy, plan *translate.Plan, toWebhook map[string]bool) []objectOutcome {
	key := types.NamespacedName{Namespace: policy.Namespace, Name: policy.Name}
	owner := namespacedPolicyOwner{key: key, policy: policy}
	writer := applier{Client: r.Client, APIReader: r.APIReader}
	desired := desiredObjects(plan)
	outcomes := applyAll(r.Recorder, policy, desired, func(obj client.Object) objectOutcome { return writer.applyOne(ctx, owner, obj) })
	wanted := map[string]bool{}
	for _, d := range desired {
		wanted[kindOf(d)+"/"+d.GetName()] = true
	}
	return append(outcomes, deleteGeneratedOf(ctx, r.Client, model.KindPolicy, key, func(obj client.Object, kind string) bool {
		return !wanted[kind+"/"+obj.GetName()] && owner.owns(obj)
	}, func(obj client.Object) bool {
		return holdStale(obj, plan.Policy, toWebhook, r.Coverage)
	})...)
}

// namespacedPolicyOwner is a namespaced Policy as an objectOwner.
type namespacedPolicyOwner struct {
	key    types.NamespacedName
	policy *kyvernov1.Policy
}

func (o namespacedPolicyOwner) owns(obj client.Object) bool {
	return generatedFrom(obj, model.KindPolicy, o.key)
}

func (o namespacedPolicyOwner) converged() bool {
	c := meta.FindStatusCondition(o.policy.Status.Conditions, ConditionType)
	return c != nil && c.ObservedGeneration == o.policy.Generation && c.Reason == ReasonAllRulesTranslated
}

// report writes kyvap's status fields when they changed; generated, as
// for a ClusterPolicy, when VAPs enforce every rule (kyvap scans the policy
// in the background, internal/scan).
func (r *NamespacedPolicyReconciler) report(ctx context.Context, policy *kyvernov1.Policy, plan *translate.Plan, outcomes []objectOutcome, pending bool) (reason string, err error) {
	warnings, err := generatedTypeWarnings(ctx, r.Client, plan)
	if err != nil {
		return "", err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current := &kyvernov1.Policy{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
			return err
		}
		status := computeStatus(statusInput{
			Generation:       current.Generation,
			Plan:             plan,
			Outcomes:         outcomes,
			GenerateEnabled:  r.Options.GenerateValidatingAdmissionPolicy,
			FallbackEnforced: r.Fallback.Enforcing(),
			KyvernoRunning:   kyvernoRunning(r.Kyverno),
			TypeWarnings:     warnings,
			Activating:       pending,
		})
		reason = status.Condition.Reason
		previous := meta.FindStatusCondition(current.Status.Conditions, ConditionType)
		updated := current.DeepCopy()
		updated.Status.ValidatingAdmissionPolicy = status.VAP
		meta.SetStatusCondition(&updated.Status.Conditions, status.Condition)
		if !kyvernoRunning(r.Kyverno) {
			// Kyverno writes Ready when it runs; otherwise the CRD's READY
			// column would stay empty.
			meta.SetStatusCondition(&updated.Status.Conditions, readyCondition(status))
		}
		if equality.Semantic.DeepEqual(current.Status, updated.Status) {
			return nil
		}
		if err := r.Status().Patch(ctx, updated, statusPatch{updated.ResourceVersion, &updated.Status}); err != nil {
			return err
		}
		if eventType, ok := transitionEvent(previous, status.Condition); ok {
			r.Recorder.Eventf(updated, nil, eventType, status.Condition.Reason, "Translate", "%s", truncate(status.Condition.Message, 1024))
		}
		return nil
	})
	return reason, err
}

// SetupWithManager registers the controller and its watches.
func (r *NamespacedPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.requeue = make(chan event.GenericEvent, 1)
	r.gauges = newPolicyGauges()
	if r.plans == nil {
		r.plans = &planCache{}
	}
	r.Fallback.OnEnforcingChange(r.requeueAll)
	ofKind := builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetLabels()[translate.LabelPolicyKind] == string(model.KindPolicy)
	}))
	toPolicy := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		a := obj.GetAnnotations()
		if a[translate.AnnotationPolicyKind] != string(model.KindPolicy) || a[translate.AnnotationPolicy] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: a[translate.AnnotationPolicyNamespace], Name: a[translate.AnnotationPolicy]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("policy").
		For(&kyvernov1.Policy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicy{}, toPolicy, ofKind).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, toPolicy, ofKind).
		Watches(&kyvernov2.PolicyException{}, handler.EnqueueRequestsFromMapFunc(namespacedExceptionRequests)).
		WatchesRawSource(source.Channel(r.requeue, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return allNamespacedPolicies(ctx, r.Client)
		}))).
		Complete(r)
}

// requeueAll re-queues every namespaced Policy. It never blocks.
func (r *NamespacedPolicyReconciler) requeueAll() {
	if r.requeue == nil {
		return
	}
	select {
	case r.requeue <- event.GenericEvent{Object: &kyvernov1.Policy{}}:
	default:
	}
}

// allNamespacedPolicies lists every namespaced Policy for a re-queue.
func allNamespacedPolicies(ctx context.Context, c client.Reader) []reconcile.Request {
	var policies kyvernov1.PolicyList
	if err := c.List(ctx, &policies); err != nil {
		log.FromContext(ctx).Error(err, "listing Policies to re-queue them")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(policies.Items))
	for _, p := range policies.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}
