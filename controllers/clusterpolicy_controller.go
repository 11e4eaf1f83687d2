// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	"github.com/kyvap/kyvap/translate"
)

// ResolverSource gives the current kind resolver; discovery changes (a CRD
// installed later) replace it.
type ResolverSource interface {
	Resolver() kyverno.KindResolver
}

// ClusterPolicyReconciler turns each ClusterPolicy into the VAPs and bindings
// its plan asks for and reports the outcome in the policy's status.
type ClusterPolicyReconciler struct {
	// Client reads from the cache (which holds only kyvap's generated
	// objects) and writes to the API server.
	client.Client
	// APIReader reads from the API server, to see objects the cache does not hold.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Resolvers ResolverSource
	Fallback  FallbackSink
	// Kyverno says whether Kyverno's admission controller runs in the
	// cluster; nil means it does not.
	Kyverno KyvernoPresence
	// Coverage says when kyvap's webhook configuration covers a rule; nil:
	// stale VAPs go at once (no webhook serves).
	Coverage WebhookCoverage
	// Options are the translation options (generation toggle, CEL version).
	Options translate.Options
	// Config returns Kyverno's global configuration in force; nil keeps
	// Options.KyvernoConfig.
	Config func() *kyverno.Config

	gauges *policyGauges
	// plans may be shared with the FallbackSyncReconciler (Setup does it):
	// on the leader both translate the same inputs.
	plans *planCache
	// kindsChanged re-queues every policy (requeueAll).
	kindsChanged chan event.TypedGenericEvent[*kyvernov1.ClusterPolicy]
}

// Reconcile gathers the policy's inputs, translates them, applies the plan
// and reports.
func (r *ClusterPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	policy := &kyvernov1.ClusterPolicy{}
	if err := r.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			// Generated objects go with the policy through their owner references.
			r.Fallback.SetFallbackRules(req.Name, nil)
			r.gauges.forget(req.Name)
			r.plans.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !policy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	input, err := r.gather(ctx, policy)
	if err != nil {
		return ctrl.Result{}, err
	}
	resolver, opts := r.Resolvers.Resolver(), translationOptions(r.Options, r.Config)
	plan, err := r.plans.translate(ctx, input, resolver, opts)
	if err != nil {
		return ctrl.Result{}, err
	}
	next := fallbackRules(&plan, kyvernoRunning(r.Kyverno))
	// The engine gets the rules before stale VAPs go, and keeps (or takes)
	// the rules of VAPs until those are active.
	rules, holding := handOver(ctx, r.Client, r.Fallback, policy.Name, &plan, next, bridgeFor(ctx, r.plans, input, resolver, opts, kyvernoRunning(r.Kyverno)))
	r.Fallback.SetFallbackRules(policy.Name, rules)
	outcomes := r.apply(ctx, policy, &plan, webhookRuleNames(next))
	pending := activating(ctx, r.Client, &plan, outcomes)
	status, err := r.report(ctx, policy, &plan, outcomes, pending)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.gauges.set(policy.Name, status.Condition.Reason, &plan)
	if err := outcomeError(outcomes); err != nil {
		return ctrl.Result{}, err
	}
	polling := holding || held(outcomes) || pending
	r.plans.hold(holderPolicies, policy.Name, polling)
	if polling {
		return ctrl.Result{RequeueAfter: handoverPoll}, nil
	}
	return ctrl.Result{}, nil
}

// gather reads the policy's exceptions: every PolicyException naming it.
func (r *ClusterPolicyReconciler) gather(ctx context.Context, policy *kyvernov1.ClusterPolicy) (clusterpolicy.Input, error) {
	var exceptions kyvernov2.PolicyExceptionList
	if err := r.List(ctx, &exceptions, client.MatchingFields{exceptionPolicyIndex: policy.Name}); err != nil {
		return clusterpolicy.Input{}, fmt.Errorf("listing PolicyExceptions: %w", err)
	}
	return clusterpolicy.Input{Policy: policy, Exceptions: exceptions.Items}, nil
}

// apply writes the plan's objects and deletes the ones no longer wanted.
func (r *ClusterPolicyReconciler) apply(ctx context.Context, policy *kyvernov1.ClusterPolicy, plan *translate.Plan, toWebhook map[string]bool) []objectOutcome {
	desired := desiredObjects(plan)
	outcomes := applyAll(r.Recorder, policy, desired, func(obj client.Object) objectOutcome { return r.applyOne(ctx, policy, obj) })
	return append(outcomes, r.deleteStale(ctx, policy, desired, toWebhook)...)
}

// applyAll applies each desired object with applyOne, counting drift
// reverts (with an Event on the policy) and failed writes.
//
// The bindings of a VAP that could not be written are not written either
// (desired lists VAPs first): the VAP and binding stored before stay a
// consistent pair (actions, parameters) until both can change.
func applyAll(recorder events.EventRecorder, policy runtime.Object, desired []client.Object, applyOne func(client.Object) objectOutcome) []objectOutcome {
	var outcomes []objectOutcome
	failedVAPs := map[string]objectOutcome{}
	for _, obj := range desired {
		if b, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
			if vap, failed := failedVAPs[b.Spec.PolicyName]; failed {
				outcomes = append(outcomes, objectOutcome{Kind: kindBinding, Name: b.Name, Action: actionFailed, Previous: vap.Previous,
					Err: fmt.Errorf("%s %q was not written because its ValidatingAdmissionPolicy %q was not", kindBinding, b.Name, vap.Name)})
				continue
			}
		}
		o := applyOne(obj)
		if o.Kind == kindVAP && (o.Action == actionFailed || o.Action == actionConflict) {
			failedVAPs[o.Name] = o
		}
		if o.Drift && o.Err == nil {
			driftReverts.WithLabelValues(o.Kind).Inc()
			recorder.Eventf(policy, nil, corev1.EventTypeNormal, EventDriftReverted, "Revert",
				"%s %s was changed or deleted outside kyvap and has been restored", o.Kind, o.Name)
		}
		if o.Err != nil {
			applyErrors.WithLabelValues(o.Kind, string(o.Action)).Inc()
		}
		outcomes = append(outcomes, o)
	}
	return outcomes
}

// report writes the status when it changed, and emits an Event when the
// condition changes.
func (r *ClusterPolicyReconciler) report(ctx context.Context, policy *kyvernov1.ClusterPolicy, plan *translate.Plan, outcomes []objectOutcome, pending bool) (policyStatus, error) {
	warnings, err := generatedTypeWarnings(ctx, r.Client, plan)
	if err != nil {
		return policyStatus{}, err
	}
	var status policyStatus
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current := &kyvernov1.ClusterPolicy{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
			return err
		}
		status = computeStatus(statusInput{
			Generation:       current.Generation,
			Plan:             plan,
			Outcomes:         outcomes,
			GenerateEnabled:  r.Options.GenerateValidatingAdmissionPolicy,
			FallbackEnforced: r.Fallback.Enforcing(),
			KyvernoRunning:   kyvernoRunning(r.Kyverno),
			TypeWarnings:     warnings,
			Activating:       pending,
		})
		if foreignVAPStatus(current) {
			status = yieldToGenerator(status, current.Status.ValidatingAdmissionPolicy)
		}
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
			return nil // nothing changed: no write
		}
		if err := r.Status().Patch(ctx, updated, statusPatch{updated.ResourceVersion, &updated.Status}); err != nil {
			return err
		}
		if eventType, ok := transitionEvent(previous, status.Condition); ok {
			r.Recorder.Eventf(updated, nil, eventType, status.Condition.Reason, "Translate", "%s", truncate(status.Condition.Message, 1024))
		}
		return nil
	})
	return status, err
}

// outcomeError makes failed writes retried (with backoff). Name conflicts
// are not retried: they wait for the foreign object to change.
func outcomeError(outcomes []objectOutcome) error {
	var errs []error
	for _, o := range outcomes {
		if o.Action == actionFailed {
			errs = append(errs, o.Err)
		}
	}
	return errors.Join(errs...)
}

// transitionEvent says whether a condition change deserves an Event, and of
// which type: a Warning whenever the policy is not fully enforced by VAPs
// and its condition changed (or appeared), a Normal one when it becomes so
// after having been otherwise. A policy translated at first sight gets no
// Event: its status says it, and 1,000 new policies need not mean 1,000 Events.
func transitionEvent(previous *metav1.Condition, next metav1.Condition) (string, bool) {
	if previous != nil && previous.Reason == next.Reason && previous.Status == next.Status {
		return "", false
	}
	if next.Status != metav1.ConditionTrue {
		return corev1.EventTypeWarning, true
	}
	return corev1.EventTypeNormal, previous != nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// exceptionPolicyIndex indexes PolicyExceptions by the policies they name.
const exceptionPolicyIndex = ".spec.exceptions.policyName"

func exceptionPolicies(obj client.Object) []string {
	ex, ok := obj.(*kyvernov2.PolicyException)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range ex.Spec.Exceptions {
		if !seen[e.PolicyName] {
			seen[e.PolicyName] = true
			out = append(out, e.PolicyName)
		}
	}
	return out
}

// SetupWithManager registers the controller and its watches (Setup adds
// the indexes it reads).
func (r *ClusterPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.gauges = newPolicyGauges()
	if r.plans == nil {
		r.plans = &planCache{}
	}
	r.kindsChanged = make(chan event.TypedGenericEvent[*kyvernov1.ClusterPolicy], 1)
	// Whether fallback rules are enforced is part of every such policy's
	// status: re-report them when it changes.
	enforcingChanged := make(chan event.TypedGenericEvent[*kyvernov1.ClusterPolicy], 1)
	r.Fallback.OnEnforcingChange(func() { signal(enforcingChanged) })
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterpolicy").
		For(&kyvernov1.ClusterPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, foreignStatusWritten))).
		Owns(&admissionregistrationv1.ValidatingAdmissionPolicy{}).
		Owns(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}).
		Watches(&kyvernov2.PolicyException{}, handler.EnqueueRequestsFromMapFunc(exceptionRequests)).
		WatchesRawSource(source.Channel(enforcingChanged, handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *kyvernov1.ClusterPolicy) []reconcile.Request {
			return r.policiesWithFallback()
		}))).
		WatchesRawSource(source.Channel(r.kindsChanged, handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *kyvernov1.ClusterPolicy) []reconcile.Request {
			return allPolicies(ctx, r.Client)
		}))).
		Complete(r)
}

// foreignStatusWritten lets through the status updates of someone other
// than kyvap (Kyverno's VAP generator), so that the condition says so.
var foreignStatusWritten = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldPolicy, ok1 := e.ObjectOld.(*kyvernov1.ClusterPolicy)
		newPolicy, ok2 := e.ObjectNew.(*kyvernov1.ClusterPolicy)
		return ok1 && ok2 && oldPolicy.Status.ValidatingAdmissionPolicy != newPolicy.Status.ValidatingAdmissionPolicy && foreignVAPStatus(newPolicy)
	},
}

// requeueAll re-queues every policy (discovery changed). It never blocks.
func (r *ClusterPolicyReconciler) requeueAll() { signal(r.kindsChanged) }

// signal sends a placeholder event without blocking: a pending one already
// stands for it. Sending on a nil channel (a controller not set up) is a
// no-op.
func signal(ch chan event.TypedGenericEvent[*kyvernov1.ClusterPolicy]) {
	select {
	case ch <- event.TypedGenericEvent[*kyvernov1.ClusterPolicy]{Object: &kyvernov1.ClusterPolicy{}}:
	default:
	}
}

// allPolicies lists every policy for a re-queue.
func allPolicies(ctx context.Context, c client.Reader) []reconcile.Request {
	var policies kyvernov1.ClusterPolicyList
	if err := c.List(ctx, &policies); err != nil {
		log.FromContext(ctx).Error(err, "listing ClusterPolicies to re-queue them")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(policies.Items))
	for _, p := range policies.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
	}
	return reqs
}

// policiesWithFallback lists the policies that have fallback rules.
func (r *ClusterPolicyReconciler) policiesWithFallback() []reconcile.Request {
	seen := map[string]bool{}
	var reqs []reconcile.Request
	for _, fr := range r.Fallback.Rules() {
		if isPolicyKey(fr.Policy) {
			continue // a namespaced Policy's: NamespacedPolicyReconciler's
		}
		if !seen[fr.Policy] {
			seen[fr.Policy] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: fr.Policy}})
		}
	}
	return reqs
}

// exceptionRequests maps a PolicyException to the policies it names.
func exceptionRequests(_ context.Context, obj client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, name := range exceptionPolicies(obj) {
		if isPolicyKey(name) {
			continue // namespace/name: a namespaced Policy
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}

// isPolicyKey reports whether a policy key (clusterpolicy.PolicyKey) names a
// namespaced Policy: namespace/name, where a ClusterPolicy's name has no
// "/".
func isPolicyKey(key string) bool { return strings.Contains(key, "/") }

// namespacedExceptionRequests maps a PolicyException to the namespaced
// Policies it names (policyName namespace/name).
func namespacedExceptionRequests(_ context.Context, obj client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, key := range exceptionPolicies(obj) {
		if ns, name, ok := strings.Cut(key, "/"); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return reqs
}

// statusPatch is a JSON merge patch of kyvap's status fields only: the whole
// validatingadmissionpolicy object (the CRD requires both of its fields),
// the conditions list (which carries the other controllers' conditions
// unchanged), and the resourceVersion, so that a concurrent write fails with
// a conflict instead of being overwritten.
type statusPatch struct {
	resourceVersion string
	status          *kyvernov1.PolicyStatus
}

func (p statusPatch) Type() types.PatchType { return types.MergePatchType }

func (p statusPatch) Data(client.Object) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": p.resourceVersion},
		"status": map[string]any{
			"validatingadmissionpolicy": p.status.ValidatingAdmissionPolicy,
			"conditions":                p.status.Conditions,
		},
	})
}
