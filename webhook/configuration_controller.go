// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

// ResolverSource gives the current kind resolver (discovery).
type ResolverSource interface {
	Resolver() kyverno.KindResolver
}

// ConfigurationReconciler keeps kyvap's ValidatingWebhookConfiguration equal
// to what the engine's rules need: created when the first fallback rule
// appears, narrowed or widened as rules come and go, deleted when none is
// left, and restored when someone edits it. It runs on the leader only.
type ConfigurationReconciler struct {
	Client    client.Client
	Engine    *engine.Engine
	Resolvers ResolverSource
	Options   ConfigOptions
	// CABundle returns the current CA; nil when cert-manager injects it.
	CABundle func() []byte
	// EngineLoaded reports whether the engine holds every policy that
	// existed when the replica started; nil means always. Until then an
	// existing configuration is left as it is: built from a partly loaded
	// engine it would drop rules another replica still enforces (a freshly
	// elected leader would otherwise narrow or delete it).
	EngineLoaded func() bool
	// Namespace is the operator's namespace, which owns the configuration
	// (ConfigOptions.Owner); "" gives it no owner. While the namespace is
	// being deleted, the configuration is deleted and not recreated: the
	// webhook is going away with it.
	Namespace string
	// OwnerClusterRole, when set, owns the configuration instead of the
	// Namespace (the Helm chart's ClusterRole: helm uninstall deletes it and
	// keeps the namespace). While it is being deleted or is gone, the
	// configuration is deleted and not recreated, as for the namespace. It
	// is read with APIReader: a single named GET, no cache of every
	// ClusterRole.
	OwnerClusterRole string
	APIReader        client.Reader

	trigger chan event.TypedGenericEvent[*admissionregistrationv1.ValidatingWebhookConfiguration]
	// covered are the "policy/rule" pairs the configuration last written (or
	// found up to date) sends to the webhook.
	covered atomic.Pointer[map[string]bool]
}

// Covers implements controllers.WebhookCoverage: the configuration the API
// server has sends the rule's requests to the webhook.
func (r *ConfigurationReconciler) Covers(policy, rule string) bool {
	covered := r.covered.Load()
	return covered != nil && (*covered)[policy+"/"+rule]
}

// Covers implements controllers.WebhookCoverage (false until Setup and the
// first configuration are done).
func (w *Webhook) Covers(policy, rule string) bool {
	return w.config != nil && w.config.Covers(policy, rule)
}

// coveredRules are the "policy/rule" pairs of the rules a configuration
// built by DesiredConfiguration registers.
func coveredRules(rules []translate.FallbackRule, models []engine.ModelPolicy, resolver kyverno.KindResolver, caps translate.EngineCapabilities) map[string]bool {
	out := map[string]bool{}
	for _, mp := range models {
		for i := range mp.Rules {
			if translate.ModelRuleNotEnforcedWith(&mp.Rules[i], caps) == "" {
				out[mp.Source.String()+"/"+mp.Rules[i].ID] = true
			}
		}
	}
	for i := range rules {
		fr := &rules[i]
		all := append([]kyvernov1.Rule{fr.Rule}, fr.AdditionalRules...)
		if fr.NotEnforced != "" {
			continue
		}
		if _, err := clusterpolicy.WebhookRules(resolver, all...); err != nil {
			continue
		}
		for _, rule := range all {
			out[fr.Policy+"/"+rule.Name] = true
		}
	}
	return out
}

// Trigger asks for a reconcile: the rules, the CA or discovery changed (a
// new or removed CRD changes which resources the rules' kinds name, even
// when the rules stay the same). It never blocks.
func (r *ConfigurationReconciler) Trigger() {
	select {
	case r.trigger <- event.TypedGenericEvent[*admissionregistrationv1.ValidatingWebhookConfiguration]{Object: r.placeholder()}:
	default: // a reconcile is already pending
	}
}

func (r *ConfigurationReconciler) placeholder() *admissionregistrationv1.ValidatingWebhookConfiguration {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	vwc.Name = r.Options.Name
	return vwc
}

// SetupWithManager registers the reconciler and subscribes it to the
// engine's changes.
func (r *ConfigurationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Options.Name == "" {
		return errors.New("webhook configuration name is empty")
	}
	if r.Options.Service == nil && r.Options.URL == "" {
		return errNoClientConfig
	}
	r.trigger = make(chan event.TypedGenericEvent[*admissionregistrationv1.ValidatingWebhookConfiguration], 1)
	r.Engine.OnChange(r.Trigger)
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.Options.Name })
	b := ctrl.NewControllerManagedBy(mgr).
		Named("webhookconfiguration").
		For(&admissionregistrationv1.ValidatingWebhookConfiguration{}, builder.WithPredicates(ours)).
		WatchesRawSource(source.Channel(r.trigger, &handler.TypedEnqueueRequestForObject[*admissionregistrationv1.ValidatingWebhookConfiguration]{}))
	if r.Namespace != "" {
		own := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.Namespace })
		b = b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.Options.Name}}}
		}), builder.WithPredicates(own))
	}
	return b.Complete(r)
}

// engineLoadPoll is how often a reconcile waiting for the engine to load
// looks again.
const engineLoadPoll = 500 * time.Millisecond

// Reconcile implements reconcile.Reconciler.
func (r *ConfigurationReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	opts := r.Options
	if r.CABundle != nil {
		opts.CABundle = r.CABundle()
		if len(opts.CABundle) == 0 {
			// No certificate yet: configuring the API server now would only
			// make it fail TLS. The certificate manager triggers us when ready.
			return ctrl.Result{}, nil
		}
	}
	opts.Kyverno = r.Engine.KyvernoConfig()
	opts.Engine = r.Engine.Capabilities()
	owner, terminating, err := r.owner(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	opts.Owner = owner
	rules, models, resolver := r.Engine.Rules(), r.Engine.ModelRules(), r.Resolvers.Resolver()
	desired, problems := DesiredConfiguration(rules, models, resolver, opts)
	for _, p := range problems {
		logger.Info("fallback rule left out of the webhook configuration", "problem", p.Error())
	}
	if terminating {
		// A --webhook-configuration-owner-clusterrole that names no
		// ClusterRole looks the same: the message says which to check.
		logger.Info("the operator's namespace or the configuration's owner ClusterRole is being deleted or gone: the webhook configuration is deleted and not written again; the rules only the webhook enforced are NOT ENFORCED",
			"namespace", r.Namespace, "ownerClusterRole", r.OwnerClusterRole)
		desired = nil
	}
	current := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err = r.Client.Get(ctx, types.NamespacedName{Name: opts.Name}, current)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if current != nil && !terminating && r.EngineLoaded != nil && !r.EngineLoaded() {
		logger.V(1).Info("the fallback engine has not loaded every policy yet; the webhook configuration is left as it is")
		return ctrl.Result{RequeueAfter: engineLoadPoll}, nil
	}
	if err := r.apply(ctx, current, desired); err != nil {
		return ctrl.Result{}, err
	}
	covered := coveredRules(rules, models, resolver, opts.Engine)
	if desired == nil {
		// No configuration: no rule reaches the webhook, and the policies'
		// status must not say otherwise.
		covered = map[string]bool{}
	}
	r.covered.Store(&covered)
	r.Engine.SetEnforcing(true)
	return ctrl.Result{}, nil
}

// owner is the owner reference to the configuration's owner (the
// operator's Namespace, or OwnerClusterRole), and whether the namespace or
// that owner is being deleted or gone (kyvap is being uninstalled: no
// configuration may be written that would outlive it); nil without a
// namespace.
func (r *ConfigurationReconciler) owner(ctx context.Context) (*metav1.OwnerReference, bool, error) {
	if r.Namespace == "" {
		return nil, false, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.Namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("reading the operator's namespace %s: %w", r.Namespace, err)
	}
	if r.OwnerClusterRole == "" {
		return &metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID}, ns.DeletionTimestamp != nil, nil
	}
	role := &rbacv1.ClusterRole{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: r.OwnerClusterRole}, role); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("reading ClusterRole %s, the webhook configuration's owner: %w", r.OwnerClusterRole, err)
	}
	ref := &metav1.OwnerReference{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole", Name: role.Name, UID: role.UID}
	return ref, ns.DeletionTimestamp != nil || role.DeletionTimestamp != nil, nil
}

func (r *ConfigurationReconciler) apply(ctx context.Context, current, desired *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	switch {
	case desired == nil && current == nil:
		return nil
	case desired == nil:
		if current.Labels[translate.LabelManagedBy] != translate.ManagedByValue {
			return nil // not ours: never delete someone else's configuration
		}
		err := r.Client.Delete(ctx, current, client.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ValidatingWebhookConfiguration %s: %w", current.Name, err)
		}
		return nil
	case current == nil:
		if err := r.Client.Create(ctx, desired, client.FieldOwner(fieldManager)); err != nil {
			return fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", desired.Name, err)
		}
		return nil
	}
	if current.Labels[translate.LabelManagedBy] != translate.ManagedByValue {
		return fmt.Errorf("ValidatingWebhookConfiguration %s exists and is not managed by kyvap; remove it or choose another name", current.Name)
	}
	if r.CABundle == nil {
		// cert-manager's CA injector owns the bundle.
		for i := range desired.Webhooks {
			if i < len(current.Webhooks) {
				desired.Webhooks[i].ClientConfig.CABundle = current.Webhooks[i].ClientConfig.CABundle
			}
		}
	}
	_, injected := current.Annotations[AnnotationInjectCAFrom]
	owners := current.OwnerReferences
	if len(desired.OwnerReferences) > 0 {
		owners = desired.OwnerReferences
	}
	if equality.Semantic.DeepEqual(current.Webhooks, desired.Webhooks) &&
		equality.Semantic.DeepEqual(current.Labels, desired.Labels) &&
		equality.Semantic.DeepEqual(current.OwnerReferences, owners) &&
		annotationsContain(current.Annotations, desired.Annotations) &&
		(r.CABundle == nil || !injected) {
		return nil // nothing changed: no write
	}
	updated := current.DeepCopy()
	updated.Webhooks = desired.Webhooks
	updated.Labels = desired.Labels
	updated.OwnerReferences = owners
	if r.CABundle != nil {
		// Back from cert-manager to self-managed: its injector must stop.
		delete(updated.Annotations, AnnotationInjectCAFrom)
	}
	for k, v := range desired.Annotations {
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[k] = v
	}
	if err := r.Client.Update(ctx, updated, client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("updating ValidatingWebhookConfiguration %s: %w", updated.Name, err)
	}
	return nil
}

func annotationsContain(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// AnnotationInjectCAFrom asks cert-manager's CA injector to fill in the
// configuration's CA bundle from a Certificate.
const AnnotationInjectCAFrom = "cert-manager.io/inject-ca-from"

// fieldManager is kyvap's field manager, as for its VAPs.
const fieldManager = "kyvap"
