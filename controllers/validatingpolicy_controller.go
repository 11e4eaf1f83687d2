// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
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

	"github.com/kyvap/kyvap/frontend/validatingpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// ValidatingPolicyReconciler turns each policies.kyverno.io ValidatingPolicy
// (or, with Kind NamespacedValidatingPolicy, each NamespacedValidatingPolicy)
// into the VAPs and bindings of its plan, hands the rules that cannot be
// VAPs to kyvap's webhook (Sink) when its engine can evaluate them, and
// reports in the policy's status. A rule moving between a VAP and the
// webhook is handed over as a ClusterPolicy's is (handover.go).
type ValidatingPolicyReconciler struct {
	// Client reads from the cache (which holds only kyvap's generated VAPs
	// and bindings) and writes to the API server.
	client.Client
	// APIReader reads from the API server, to see objects the cache does not hold.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Resolvers ResolverSource
	// Kyverno says whether Kyverno's admission controller runs in the
	// cluster; nil means it does not.
	Kyverno KyvernoPresence
	// Options are the translation options (generation toggle, CEL version).
	Options translate.Options
	// Config returns Kyverno's global configuration in force; nil keeps
	// Options.KyvernoConfig.
	Config func() *kyverno.Config
	// Kind is model.KindValidatingPolicy or model.KindNamespacedValidatingPolicy.
	Kind model.Kind
	// Now is the clock exceptions expire by; nil is time.Now.
	Now func() time.Time
	// Sink receives the rules kyvap's webhook enforces (a FallbackStore
	// when no webhook serves).
	Sink FallbackSink
	// Coverage says when the webhook configuration covers a rule; nil: no
	// webhook, stale VAPs go at once.
	Coverage WebhookCoverage

	// requeue re-queues every policy of the kind (requeueAll).
	requeue chan event.GenericEvent
	gauges  *policyGauges
}

// expiryMargin is how long after an exception's expiry its policy is
// translated again: at the expiry itself the exception still applies.
const expiryMargin = time.Second

// Reconcile gathers the policy and the exceptions, translates them, applies
// the plan and reports.
func (r *ValidatingPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	policy := r.newPolicy()
	if err := r.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			gone := model.Source{Kind: r.Kind, Namespace: req.Namespace, Name: req.Name}
			r.Sink.SetModelRules(gone, nil)
			r.gauges.forget(gone.String())
			return ctrl.Result{}, r.deleteOrphans(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !policy.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	lowered, err := r.gather(ctx, policy)
	if err != nil {
		return ctrl.Result{}, err
	}
	opts := translationOptions(r.Options, r.Config)
	// A running Kyverno makes the VAPs of the policies that opt into its
	// own generator: those are left to it, never generated twice.
	opts.KyvernoGeneratesVAPs = kyvernoRunning(r.Kyverno)
	plan := translate.TranslatePolicy(lowered, r.Resolvers.Resolver(), opts)
	next := webhookModelRules(&lowered, &plan, kyvernoRunning(r.Kyverno))
	// The engine gets the rules before stale VAPs go, and keeps (or takes)
	// the rules of VAPs until those are active.
	rules, holding := handOverModel(ctx, r.Client, r.Sink, lowered.Source, &plan, next, bridgeModel(&lowered, kyvernoRunning(r.Kyverno)))
	r.Sink.SetModelRules(lowered.Source, rules)
	outcomes := r.apply(ctx, policy, lowered.Source, &plan, webhookModelRuleIDs(next))
	pending := activating(ctx, r.Client, &plan, outcomes)
	reason, err := r.report(ctx, policy, &plan, outcomes, pending)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.gauges.set(lowered.Source.String(), reason, &plan)
	if err := outcomeError(outcomes); err != nil {
		return ctrl.Result{}, err
	}
	return modelRequeue(&lowered, holding || held(outcomes) || pending), nil
}

// modelRequeue is when a policy of the policy model is reconciled again: at
// handoverPoll while a hand-over is held, at the next expiry of one of its
// exceptions (the VAPs must stop honouring it then).
func modelRequeue(p *model.Policy, holding bool) ctrl.Result {
	var after time.Duration
	if p.NextExpiry != nil {
		after = max(time.Until(*p.NextExpiry)+expiryMargin, expiryMargin)
	}
	if holding && (after == 0 || handoverPoll < after) {
		after = handoverPoll
	}
	return ctrl.Result{RequeueAfter: after}
}

func (r *ValidatingPolicyReconciler) newPolicy() client.Object { return newModelPolicy(r.Kind) }

// newModelPolicy is an empty policy of a policies.kyverno.io kind.
func newModelPolicy(kind model.Kind) client.Object {
	if kind == model.KindNamespacedValidatingPolicy {
		return &policiesv1.NamespacedValidatingPolicy{}
	}
	return &policiesv1.ValidatingPolicy{}
}

// statusOf is the status of a policy of either kind (they share its type).
func statusOf(policy client.Object) *policiesv1.ValidatingPolicyStatus {
	switch p := policy.(type) {
	case *policiesv1.ValidatingPolicy:
		return &p.Status
	case *policiesv1.NamespacedValidatingPolicy:
		return &p.Status
	}
	return nil
}

// gather lowers the policy with every policies.kyverno.io PolicyException
// of the cluster (the model keeps those naming it, unexpired).
func (r *ValidatingPolicyReconciler) gather(ctx context.Context, policy client.Object) (model.Policy, error) {
	return LowerModelPolicy(ctx, r.Client, policy, r.Now)
}

// LowerModelPolicy gathers the CEL PolicyExceptions reader lists and lowers
// a policies.kyverno.io policy with them (the front-end reads no cluster);
// clock is the time exceptions expire by (nil: time.Now).
func LowerModelPolicy(ctx context.Context, reader client.Reader, policy client.Object, clock func() time.Time) (model.Policy, error) {
	var exceptions policiesv1.PolicyExceptionList
	if err := reader.List(ctx, &exceptions); err != nil {
		return model.Policy{}, fmt.Errorf("listing policies.kyverno.io PolicyExceptions: %w", err)
	}
	now := time.Now()
	if clock != nil {
		now = clock()
	}
	return validatingpolicy.LowerObject(policy, exceptions.Items, now)
}

// modelOwner is a policy-model source as the owner of generated objects.
type modelOwner struct {
	source model.Source
	policy client.Object
}

// owns: controlled by the policy, or carrying kyvap's label and the
// annotations naming the policy's kind, namespace and name (an edit may
// have removed one of the two marks; it is still ours to restore).
func (o modelOwner) owns(obj client.Object) bool {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.UID == o.source.UID && ref.Kind == string(o.source.Kind) {
		return true
	}
	return generatedFrom(obj, o.source.Kind, types.NamespacedName{Namespace: o.source.Namespace, Name: o.source.Name})
}

func (o modelOwner) converged() bool {
	c := meta.FindStatusCondition(statusOf(o.policy).ConditionStatus.Conditions, ConditionType)
	return c != nil && c.ObservedGeneration == o.policy.GetGeneration() && c.Reason == ReasonAllRulesTranslated
}

// generatedFrom reports whether obj carries kyvap's marks naming the policy
// of kind at key.
func generatedFrom(obj client.Object, kind model.Kind, key types.NamespacedName) bool {
	annotations := obj.GetAnnotations()
	return obj.GetLabels()[translate.LabelManagedBy] == translate.ManagedByValue &&
		annotations[translate.AnnotationPolicyKind] == string(kind) &&
		annotations[translate.AnnotationPolicy] == key.Name &&
		annotations[translate.AnnotationPolicyNamespace] == key.Namespace
}

// generatedSelector selects the objects generated for the policy of kind at
// key by their labels; generatedFrom then checks the full names in the
// annotations (a label holds a hashed form of a name too long for it).
func generatedSelector(kind model.Kind, key types.NamespacedName) client.MatchingLabels {
	sel := client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue, translate.LabelPolicyKind: string(kind)}
	if len(validation.IsValidLabelValue(key.Name)) == 0 {
		sel[translate.LabelPolicy] = key.Name // the label is the name itself then
	}
	if key.Namespace != "" {
		sel[translate.LabelPolicyNamespace] = key.Namespace // a namespace is always a valid label value
	}
	return sel
}

// apply writes the plan's objects and deletes the policy's objects the plan
// no longer wants (rule gone, translation now fails, generation off).
func (r *ValidatingPolicyReconciler) apply(ctx context.Context, policy client.Object, src model.Source, plan *translate.Plan, toWebhook map[string]bool) []objectOutcome {
	owner := modelOwner{source: src, policy: policy}
	writer := applier{Client: r.Client, APIReader: r.APIReader}
	desired := desiredObjects(plan)
	outcomes := applyAll(r.Recorder, policy, desired, func(obj client.Object) objectOutcome { return writer.applyOne(ctx, owner, obj) })
	wanted := map[string]bool{}
	for _, d := range desired {
		wanted[kindOf(d)+"/"+d.GetName()] = true
	}
	key := types.NamespacedName{Namespace: src.Namespace, Name: src.Name}
	return append(outcomes, r.deleteGenerated(ctx, key, func(obj client.Object, kind string) bool {
		return !wanted[kind+"/"+obj.GetName()] && owner.owns(obj)
	}, func(obj client.Object) bool {
		return holdStale(obj, src.String(), toWebhook, r.Coverage)
	})...)
}

// deleteOrphans deletes what was generated for a NamespacedValidatingPolicy
// that no longer exists: its objects have no owner reference (a
// cluster-scoped object cannot be owned by a namespaced one), so the garbage
// collector leaves them. A ValidatingPolicy's objects go with it through
// their owner references.
func (r *ValidatingPolicyReconciler) deleteOrphans(ctx context.Context, key types.NamespacedName) error {
	if r.Kind != model.KindNamespacedValidatingPolicy {
		return nil
	}
	outcomes := r.deleteGenerated(ctx, key, func(obj client.Object, _ string) bool {
		return generatedFrom(obj, r.Kind, key)
	}, nil)
	return outcomeError(outcomes)
}

// deleteGenerated deletes the policy's generated objects that stale says
// must go, bindings before their VAPs (a binding without its VAP is an
// error the API server reports), except those hold keeps (nil keeps none).
func (r *ValidatingPolicyReconciler) deleteGenerated(ctx context.Context, key types.NamespacedName, stale func(obj client.Object, kind string) bool, hold func(obj client.Object) bool) []objectOutcome {
	return deleteGeneratedOf(ctx, r.Client, r.Kind, key, stale, hold)
}

// deleteGeneratedOf deletes the objects generated for the policy of kind at
// key (found by their labels) that stale says must go, bindings first,
// except those hold keeps (nil keeps none).
func deleteGeneratedOf(ctx context.Context, c client.Client, kind model.Kind, key types.NamespacedName, stale func(obj client.Object, kind string) bool, hold func(obj client.Object) bool) []objectOutcome {
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	sel := generatedSelector(kind, key)
	var existing []client.Object
	for _, list := range []client.ObjectList{&bindings, &vaps} {
		if err := c.List(ctx, list, sel); err != nil {
			return []objectOutcome{{Action: actionFailed, Err: fmt.Errorf("listing generated objects: %w", err)}}
		}
	}
	for i := range bindings.Items {
		existing = append(existing, &bindings.Items[i])
	}
	for i := range vaps.Items {
		existing = append(existing, &vaps.Items[i])
	}
	var outcomes []objectOutcome
	for _, obj := range existing {
		objKind := "ValidatingAdmissionPolicyBinding"
		if _, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			objKind = "ValidatingAdmissionPolicy"
		}
		if !stale(obj, objKind) {
			continue
		}
		if hold != nil && hold(obj) {
			outcomes = append(outcomes, objectOutcome{Kind: objKind, Name: obj.GetName(), Action: actionHeld})
			continue
		}
		out := objectOutcome{Kind: objKind, Name: obj.GetName(), Action: actionDeleted}
		uid := obj.GetUID()
		if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			out.Action, out.Err = actionFailed, fmt.Errorf("deleting %s %q: %w", objKind, obj.GetName(), err)
		}
		outcomes = append(outcomes, out)
	}
	return outcomes
}

// report writes kyvap's part of the status when it changed (a no-op
// reconcile writes nothing), and emits an Event when the condition changes.
func (r *ValidatingPolicyReconciler) report(ctx context.Context, policy client.Object, plan *translate.Plan, outcomes []objectOutcome, pending bool) (reason string, err error) {
	warnings, err := generatedTypeWarnings(ctx, r.Client, plan)
	if err != nil {
		return "", err
	}
	running := kyvernoRunning(r.Kyverno)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current := r.newPolicy()
		if err := r.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
			return err
		}
		status := computeStatus(statusInput{
			Generation:       current.GetGeneration(),
			Plan:             plan,
			Outcomes:         outcomes,
			GenerateEnabled:  r.Options.GenerateValidatingAdmissionPolicy,
			FallbackEnforced: r.Sink.Enforcing(),
			KyvernoRunning:   running,
			TypeWarnings:     warnings,
			Activating:       pending,
			Warnings:         plan.Warnings,
			PolicyModel:      true,
		})
		reason = status.Condition.Reason
		previous := meta.FindStatusCondition(statusOf(current).ConditionStatus.Conditions, ConditionType)
		updated := current.DeepCopyObject().(client.Object)
		st := statusOf(updated)
		// generated: true tells a running Kyverno to skip the whole policy,
		// its background scans included: kyvap scans it then (scan
		// package). A policy Kyverno's own generator takes is Kyverno's to
		// mark.
		if !leftToKyvernosGenerator(plan) {
			st.Generated = status.VAP.Generated
		}
		meta.SetStatusCondition(&st.ConditionStatus.Conditions, status.Condition)
		if !running {
			// Kyverno writes ready when it runs; otherwise it is kyvap's
			// to say whether the policy is enforced (the CRD's READY column).
			ready := status.ready()
			st.ConditionStatus.Ready = &ready
		}
		if equality.Semantic.DeepEqual(statusOf(current), st) {
			return nil // nothing changed: no write
		}
		if err := r.Status().Patch(ctx, updated, vpolStatusPatch{rv: current.GetResourceVersion(), status: st, ready: !running, generated: !leftToKyvernosGenerator(plan)}); err != nil {
			return err
		}
		if eventType, ok := transitionEvent(previous, status.Condition); ok {
			r.Recorder.Eventf(updated, nil, eventType, status.Condition.Reason, "Translate", "%s", truncate(status.Condition.Message, 1024))
		}
		return nil
	})
	return reason, err
}

// generatedTypeWarnings reads the type-checking warnings of the plan's VAPs.
func generatedTypeWarnings(ctx context.Context, c client.Reader, plan *translate.Plan) (map[string][]string, error) {
	var vaps []admissionregistrationv1.ValidatingAdmissionPolicy
	for _, want := range plan.ValidatingAdmissionPolicies {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		err := c.Get(ctx, types.NamespacedName{Name: want.Name}, &vap)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		vaps = append(vaps, vap)
	}
	return typeWarnings(vaps), nil
}

// vpolStatusPatch is a JSON merge patch of kyvap's status fields only:
// generated, the conditions list (which carries the other controllers'
// conditions unchanged), ready when kyvap owns it, and the
// resourceVersion, so that a concurrent write fails with a conflict
// instead of being overwritten.
type vpolStatusPatch struct {
	rv     string
	status *policiesv1.ValidatingPolicyStatus
	ready  bool
	// generated is whether kyvap writes status.generated (not for a policy
	// Kyverno's own generator takes).
	generated bool
}

// leftToKyvernosGenerator reports a plan whose policy Kyverno's own VAP
// generator turns into a VAP (KyvernoGeneratesVAP).
func leftToKyvernosGenerator(plan *translate.Plan) bool {
	for _, r := range plan.Rules {
		if r.Reason == model.ReasonKyvernoGeneratesVAP {
			return true
		}
	}
	return false
}

func (p vpolStatusPatch) Type() types.PatchType { return types.MergePatchType }

func (p vpolStatusPatch) Data(client.Object) ([]byte, error) {
	conditionStatus := map[string]any{"conditions": p.status.ConditionStatus.Conditions}
	if p.ready {
		conditionStatus["ready"] = p.status.ConditionStatus.Ready
	}
	status := map[string]any{"conditionStatus": conditionStatus}
	if p.generated {
		status["generated"] = p.status.Generated
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": p.rv},
		"status":   status,
	})
}

// generatedRewritten lets through a change of status.generated: Kyverno's
// own VAP generator rewrites it (false, "not enabled") whenever a VAP owned
// by the policy changes, i.e. after kyvap applies its VAPs. kyvap writes it
// back once; Kyverno's generator reacts to spec and VAP changes only, not
// to status, so this does not loop.
var generatedRewritten = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := statusOf(e.ObjectOld), statusOf(e.ObjectNew)
		return before != nil && after != nil && before.Generated != after.Generated
	},
}

// SetupWithManager registers the controller and its watches.
func (r *ValidatingPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.requeue = make(chan event.GenericEvent, 1)
	r.gauges = newPolicyGauges()
	// Whether the webhook serves is part of the status of every policy
	// with rules for it.
	r.Sink.OnEnforcingChange(r.requeueAll)
	name := "validatingpolicy"
	if r.Kind == model.KindNamespacedValidatingPolicy {
		name = "namespacedvalidatingpolicy"
	}
	// Generated objects map back to their policy by their annotations, owner
	// reference or not: a namespaced policy's objects have none, and an
	// orphan (its policy deleted while kyvap was down) is found when the
	// cache first lists it.
	ofKind := builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetLabels()[translate.LabelPolicyKind] == string(r.Kind)
	}))
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(r.newPolicy(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, generatedRewritten))).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicy{}, handler.EnqueueRequestsFromMapFunc(r.generatedRequests), ofKind).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, handler.EnqueueRequestsFromMapFunc(r.generatedRequests), ofKind).
		Watches(&policiesv1.PolicyException{}, handler.EnqueueRequestsFromMapFunc(r.exceptionRequests)).
		WatchesRawSource(source.Channel(r.requeue, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return r.allPolicies(ctx)
		}))).
		Complete(r)
}

// generatedRequests maps a generated object to its policy.
func (r *ValidatingPolicyReconciler) generatedRequests(_ context.Context, obj client.Object) []reconcile.Request {
	annotations := obj.GetAnnotations()
	if annotations[translate.AnnotationPolicyKind] != string(r.Kind) || annotations[translate.AnnotationPolicy] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: annotations[translate.AnnotationPolicyNamespace], Name: annotations[translate.AnnotationPolicy]}}}
}

// exceptionRequests maps a PolicyException to the policies of the kind it
// names (exceptionRequestsOf).
func (r *ValidatingPolicyReconciler) exceptionRequests(ctx context.Context, obj client.Object) []reconcile.Request {
	return exceptionRequestsOf(ctx, r.Client, r.Kind, obj)
}

// exceptionRequestsOf maps a PolicyException to the policies of kind it
// names. Its policyRefs carry a name only, so for the namespaced kind every
// policy with that name, in any namespace, is re-queued (the model decides
// which ones the exception applies to).
func exceptionRequestsOf(ctx context.Context, c client.Reader, kind model.Kind, obj client.Object) []reconcile.Request {
	ex, ok := obj.(*policiesv1.PolicyException)
	if !ok {
		return nil
	}
	names := map[string]bool{}
	for _, ref := range ex.Spec.PolicyRefs {
		if ref.Kind == string(kind) {
			names[ref.Name] = true
		}
	}
	if len(names) == 0 {
		return nil
	}
	if kind == model.KindValidatingPolicy {
		var reqs []reconcile.Request
		for name := range names {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
		return reqs
	}
	all, err := listModelPolicies(ctx, c, kind)
	if err != nil {
		log.FromContext(ctx).Error(err, "re-queueing the policies a PolicyException names")
		return nil
	}
	var reqs []reconcile.Request
	for _, req := range all {
		if names[req.Name] {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// allPolicies lists every policy of the kind from the cache.
func (r *ValidatingPolicyReconciler) allPolicies(ctx context.Context) []reconcile.Request {
	reqs, err := listModelPolicies(ctx, r.Client, r.Kind)
	if err != nil {
		log.FromContext(ctx).Error(err, "re-queueing policies")
	}
	return reqs
}

// requeueAll re-queues every policy of the kind (discovery, Kyverno's
// presence or its configuration changed). It never blocks.
func (r *ValidatingPolicyReconciler) requeueAll() {
	select {
	case r.requeue <- event.GenericEvent{Object: r.newPolicy()}:
	default: // one pending already stands for it
	}
}

// ValidatingPolicies runs the two policies.kyverno.io reconcilers once the
// cluster serves their CRDs (v1 of ValidatingPolicy,
// NamespacedValidatingPolicy and PolicyException): without them kyvap runs
// as before, and when they are installed later the CRD watch calls
// CRDsChanged, which starts the controllers without a restart.
type ValidatingPolicies struct {
	mgr      ctrl.Manager
	template ValidatingPolicyReconciler
	// newSync, when set (a webhook serves), makes the ModelSyncReconciler
	// of a kind, started with its controller, on every replica.
	newSync func(model.Kind) *ModelSyncReconciler

	mu          sync.Mutex
	started     []*ValidatingPolicyReconciler
	syncs       []*ModelSyncReconciler
	saidMissing bool
}

// Loaded reports whether every replica-local sync has loaded the policies
// that existed when it started (true before the CRDs are served).
func (v *ValidatingPolicies) Loaded() bool {
	return v.Checker(nil) == nil
}

// Checker is a readiness check: the ModelSyncReconcilers' (nil before the
// CRDs are served).
func (v *ValidatingPolicies) Checker(req *http.Request) error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	syncs := append([]*ModelSyncReconciler(nil), v.syncs...)
	v.mu.Unlock()
	for _, s := range syncs {
		if err := s.Checker(req); err != nil {
			return err
		}
	}
	return nil
}

// policyKindsServed are the kinds (at policies.kyverno.io/v1) the
// controllers read.
var policyKindsServed = []string{string(model.KindValidatingPolicy), string(model.KindNamespacedValidatingPolicy), "PolicyException"}

// CRDsChanged starts the controllers when the CRDs appear after kyvap
// started (the CRD watch calls it on every CRD change). It never blocks
// on the controllers.
func (v *ValidatingPolicies) CRDsChanged() {
	if err := v.start(); err != nil {
		ctrl.Log.WithName("validatingpolicies").Error(err, "starting the ValidatingPolicy controllers after their CRDs appeared")
	}
}

// start registers the controllers, once, if the CRDs are served.
func (v *ValidatingPolicies) start() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mgr == nil || v.started != nil {
		return nil
	}
	for _, kind := range policyKindsServed {
		if _, err := v.mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: policiesv1.GroupName, Kind: kind}, policiesv1.GroupVersion.Version); err != nil {
			if !v.saidMissing {
				v.saidMissing = true
				ctrl.Log.WithName("validatingpolicies").Info("the policies.kyverno.io v1 CRDs are not installed: kyvap translates no ValidatingPolicies until they are", "kind", kind, "error", err.Error())
			}
			return nil
		}
	}
	if v.saidMissing {
		ctrl.Log.WithName("validatingpolicies").Info("the policies.kyverno.io CRDs are installed: kyvap translates ValidatingPolicies")
	}
	var started []*ValidatingPolicyReconciler
	for _, kind := range []model.Kind{model.KindValidatingPolicy, model.KindNamespacedValidatingPolicy} {
		r := v.template // a copy
		r.Kind = kind
		if err := r.SetupWithManager(v.mgr); err != nil {
			return err
		}
		started = append(started, &r)
		if v.newSync != nil {
			s := v.newSync(kind)
			if err := s.SetupWithManager(v.mgr); err != nil {
				return err
			}
			v.syncs = append(v.syncs, s)
		}
	}
	v.started = started
	return nil
}

// requeueAll re-queues every policy of both kinds. It never blocks.
func (v *ValidatingPolicies) requeueAll() {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.started {
		r.requeueAll()
	}
	for _, s := range v.syncs {
		s.requeueAll()
	}
}

// Reconcilers returns the running reconcilers (none until the CRDs are served).
func (v *ValidatingPolicies) Reconcilers() []*ValidatingPolicyReconciler {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]*ValidatingPolicyReconciler(nil), v.started...)
}
