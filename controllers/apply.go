// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/vap"
)

// AnnotationAppliedHash records a digest of the object kyvap last applied, so
// that a difference can be told apart: same digest means someone else edited
// the object (drift); another digest means the policy changed.
const AnnotationAppliedHash = "kyvap.io/applied-hash"

// ownerIndex indexes generated objects by the UID of their controlling owner.
const ownerIndex = ".metadata.controllerUID"

// action is what applying one object did.
type action string

const (
	actionUnchanged action = "Unchanged"
	actionCreated   action = "Created"
	actionUpdated   action = "Updated"
	actionDeleted   action = "Deleted"
	actionConflict  action = "Conflict"
	actionFailed    action = "Failed"
	// actionHeld: a stale object kept until the webhook covers its rule.
	actionHeld action = "Held"
)

// objectOutcome is the result of applying (or deleting) one generated object.
type objectOutcome struct {
	Kind   string
	Name   string
	Action action
	// Drift is true when the object was restored after someone else changed
	// or deleted it.
	Drift bool
	// Previous is true when an object was stored before the write: if the
	// write failed, that version still enforces the rule.
	Previous bool
	Err      error
}

// desiredObjects returns the plan's objects, each with the applied-hash
// annotation, VAPs first (a binding must not precede its policy).
func desiredObjects(plan *translate.Plan) []client.Object {
	var out []client.Object
	for i := range plan.ValidatingAdmissionPolicies {
		vap := plan.ValidatingAdmissionPolicies[i].DeepCopy()
		vap.TypeMeta = metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"}
		stampHash(vap, vap.Spec)
		out = append(out, vap)
	}
	for i := range plan.Bindings {
		b := plan.Bindings[i].DeepCopy()
		b.TypeMeta = metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"}
		stampHash(b, b.Spec)
		out = append(out, b)
	}
	return out
}

func stampHash(obj client.Object, spec any) {
	data, _ := json.Marshal(struct {
		Labels, Annotations map[string]string
		Owners              []metav1.OwnerReference
		Spec                any
	}{obj.GetLabels(), obj.GetAnnotations(), obj.GetOwnerReferences(), spec})
	sum := sha256.Sum256(data)
	annotations := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		annotations[k] = v
	}
	annotations[AnnotationAppliedHash] = hex.EncodeToString(sum[:8])
	obj.SetAnnotations(annotations)
}

// isOwnedBy reports whether obj was generated for the policy: it is
// controlled by it, or carries kyvap's labels and annotation naming it (an
// edit may have removed one of the two marks; it is still ours to restore).
func isOwnedBy(obj client.Object, policy *kyvernov1.ClusterPolicy) bool {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.UID == policy.UID {
		return true
	}
	// Objects of the policy model's kinds carry their kind: a
	// ValidatingPolicy may share a ClusterPolicy's name.
	kind := obj.GetAnnotations()[translate.AnnotationPolicyKind]
	return obj.GetLabels()[translate.LabelManagedBy] == translate.ManagedByValue &&
		obj.GetAnnotations()[translate.AnnotationPolicy] == policy.Name &&
		(kind == "" || kind == "ClusterPolicy")
}

// objectOwner is the policy generated objects are applied for: the apply
// logic is the same whatever its kind.
type objectOwner interface {
	// owns reports whether obj was generated for the policy (never adopt
	// another's object).
	owns(obj client.Object) bool
	// converged reports whether kyvap already reported the policy's current
	// generation fully enforced, so that a missing object was deleted by
	// someone (drift) rather than not yet created.
	converged() bool
}

// clusterPolicyOwner is a ClusterPolicy as an objectOwner.
type clusterPolicyOwner struct{ policy *kyvernov1.ClusterPolicy }

func (o clusterPolicyOwner) owns(obj client.Object) bool { return isOwnedBy(obj, o.policy) }

func (o clusterPolicyOwner) converged() bool {
	c := meta.FindStatusCondition(o.policy.Status.Conditions, ConditionType)
	return c != nil && c.ObservedGeneration == o.policy.Generation && c.Reason == ReasonAllRulesTranslated
}

// applier writes generated objects: Client reads from the cache (which
// holds only kyvap's objects) and writes; APIReader reads from the API
// server, to see a foreign object holding a generated name.
type applier struct {
	client.Client
	APIReader client.Reader
}

// upToDate reports whether existing already is what desired asks for: the
// labels and annotations kyvap sets, the exact owner references, and the
// spec once defaulted as the API server defaults it.
func upToDate(desired, existing client.Object) bool {
	for k, v := range desired.GetLabels() {
		if got, ok := existing.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range desired.GetAnnotations() {
		if got, ok := existing.GetAnnotations()[k]; !ok || got != v {
			return false
		}
	}
	if !equality.Semantic.DeepEqual(desired.GetOwnerReferences(), existing.GetOwnerReferences()) {
		return false
	}
	return specEqual(desired, existing)
}

func specEqual(desired, existing client.Object) bool {
	switch d := desired.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		e, ok := existing.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		if !ok {
			return false
		}
		want := d.DeepCopy()
		vap.DefaultPolicy(want)
		return equality.Semantic.DeepEqual(want.Spec, e.Spec)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		e, ok := existing.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		if !ok {
			return false
		}
		want := d.DeepCopy()
		vap.DefaultBinding(want)
		return equality.Semantic.DeepEqual(want.Spec, e.Spec)
	}
	return false
}

func kindOf(obj client.Object) string {
	return obj.GetObjectKind().GroupVersionKind().Kind
}

func newEmpty(obj client.Object) client.Object {
	switch obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		return &admissionregistrationv1.ValidatingAdmissionPolicy{}
	default:
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	}
}

// applyOne brings one generated object to its desired state, writing only
// when it differs, and never touching an object kyvap does not own.
func (r *ClusterPolicyReconciler) applyOne(ctx context.Context, policy *kyvernov1.ClusterPolicy, desired client.Object) objectOutcome {
	return applier{Client: r.Client, APIReader: r.APIReader}.applyOne(ctx, clusterPolicyOwner{policy}, desired)
}

// applyOne brings one generated object of owner to its desired state,
// writing only when it differs, and never touching an object owner does
// not own.
//
// An existing object is replaced with an update (a PUT carrying the
// resourceVersion read), never merged with a server-side apply: the sets
// and maps of a VAP and a binding (validationActions, resource rules,
// validations, variables, selectors) must shrink when the policy asks for
// less, whoever wrote the object before (kyvap's own create, an older kyvap
// that applied, a user's kubectl edit). An apply merges a set with the
// entries another field manager owns, so Audit → Enforce asked the API
// server for [Audit, Warn, Deny], which it refuses.
func (r applier) applyOne(ctx context.Context, owner objectOwner, desired client.Object) objectOutcome {
	out := objectOutcome{Kind: kindOf(desired), Name: desired.GetName()}
	existing := newEmpty(desired)
	key := types.NamespacedName{Name: desired.GetName()}
	err := r.Get(ctx, key, existing) // the cache holds only kyvap's objects
	if apierrors.IsNotFound(err) {
		// Not one of ours: create it. The API server refuses if the name is
		// taken, by a foreign object or by ours with its labels edited away.
		created := desired.DeepCopyObject().(client.Object)
		err = r.Create(ctx, created, client.FieldOwner(FieldManager))
		if err == nil {
			vapWrites.wrote(out.Kind, created)
			// Missing although this policy generation had converged: it was deleted.
			out.Action, out.Drift = actionCreated, owner.converged()
			return out
		}
		if apierrors.IsAlreadyExists(err) {
			err = r.APIReader.Get(ctx, key, existing)
		}
	}
	if err != nil {
		out.Action, out.Err = actionFailed, fmt.Errorf("reading or creating %s %q: %w", out.Kind, out.Name, explainApplyError(desired, err))
		return out
	}
	// An object is stored: if this write fails, its previous version keeps
	// enforcing the rule.
	out.Previous = true
	for attempt := 1; ; attempt++ {
		if !owner.owns(existing) {
			out.Action = actionConflict
			out.Err = fmt.Errorf("%s %q already exists and was not generated by kyvap for this policy; it was left alone", out.Kind, out.Name)
			return out
		}
		if upToDate(desired, existing) {
			if out.Action == "" {
				out.Action = actionUnchanged
			}
			return out // a retry found it done (another replica wrote it)
		}
		// Same digest as what kyvap applied, yet different: someone edited it.
		out.Drift = existing.GetAnnotations()[AnnotationAppliedHash] == desired.GetAnnotations()[AnnotationAppliedHash]
		out.Action = actionUpdated
		replacement := replacementFor(desired, existing)
		err = r.Update(ctx, replacement, client.FieldOwner(FieldManager))
		if err == nil {
			vapWrites.wrote(out.Kind, replacement)
			return out
		}
		if !apierrors.IsConflict(err) || attempt == maxReplaceAttempts {
			out.Action, out.Err = actionFailed, fmt.Errorf("updating %s %q: %w", out.Kind, out.Name, explainApplyError(desired, err))
			return out
		}
		// The cache lagged behind a write (ours, or someone's), so the
		// resourceVersion was old: judge the server's copy again.
		existing = newEmpty(desired)
		if err := r.APIReader.Get(ctx, key, existing); err != nil {
			out.Action, out.Err = actionFailed, fmt.Errorf("reading %s %q: %w", out.Kind, out.Name, err)
			return out
		}
	}
}

// maxReplaceAttempts bounds the updates one reconcile sends for one object
// whose resourceVersion keeps changing; past it the reconcile is retried
// with backoff.
const maxReplaceAttempts = 3

// replacementFor is desired as an update of existing: kyvap's spec, labels,
// annotations and owner references replace existing's, while the labels,
// annotations and finalizers other tools added stay.
func replacementFor(desired, existing client.Object) client.Object {
	replacement := desired.DeepCopyObject().(client.Object)
	replacement.SetResourceVersion(existing.GetResourceVersion())
	replacement.SetLabels(mergeMaps(existing.GetLabels(), desired.GetLabels()))
	replacement.SetAnnotations(mergeMaps(existing.GetAnnotations(), desired.GetAnnotations()))
	replacement.SetFinalizers(existing.GetFinalizers())
	return replacement
}

func mergeMaps(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// deleteStale deletes the objects generated for the policy that the plan no
// longer wants (rule removed, rule now on fallback, generation switched off).
func (r *ClusterPolicyReconciler) deleteStale(ctx context.Context, policy *kyvernov1.ClusterPolicy, desired []client.Object, toWebhook map[string]bool) []objectOutcome {
	wanted := map[string]bool{}
	for _, d := range desired {
		wanted[kindOf(d)+"/"+d.GetName()] = true
	}
	var outcomes []objectOutcome
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	var existing []client.Object
	for _, list := range []client.ObjectList{&bindings, &vaps} {
		if err := r.List(ctx, list, client.MatchingFields{ownerIndex: string(policy.UID)}); err != nil {
			return append(outcomes, objectOutcome{Action: actionFailed, Err: fmt.Errorf("listing generated objects: %w", err)})
		}
	}
	for i := range bindings.Items {
		existing = append(existing, &bindings.Items[i])
	}
	for i := range vaps.Items {
		existing = append(existing, &vaps.Items[i])
	}
	for _, obj := range existing {
		kind := "ValidatingAdmissionPolicyBinding"
		if _, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			kind = "ValidatingAdmissionPolicy"
		}
		if wanted[kind+"/"+obj.GetName()] || !isOwnedBy(obj, policy) {
			continue
		}
		if r.replacementPending(ctx, policy, obj, desired) {
			continue // the old object enforces the rule until the new ones do
		}
		if holdStale(obj, policy.Name, toWebhook, r.Coverage) {
			outcomes = append(outcomes, objectOutcome{Kind: kind, Name: obj.GetName(), Action: actionHeld})
			continue
		}
		out := objectOutcome{Kind: kind, Name: obj.GetName(), Action: actionDeleted}
		uid := obj.GetUID()
		err := r.Delete(ctx, obj, client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) {
			out.Action, out.Err = actionFailed, fmt.Errorf("deleting %s %q: %w", kind, obj.GetName(), err)
		}
		outcomes = append(outcomes, out)
	}
	return outcomes
}

// controllerUID is the index function for ownerIndex.
func controllerUID(obj client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.Kind == "ClusterPolicy" {
		return []string{string(ref.UID)}
	}
	return nil
}
