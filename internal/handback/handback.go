// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package handback returns a cluster's Kyverno policies to Kyverno when kyvap
// is uninstalled. A policy kyvap marked status.validatingadmissionpolicy
// generated: true is skipped entirely by a running Kyverno (its webhook, its
// CEL handler, its background scans); left so after kyvap is gone, it would
// be enforced only by VAPs nobody keeps in shape. Run it after the operator
// has stopped (a running operator would write the status again).
package handback

import (
	"context"
	"errors"
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/translate"
)

// Message is the status message a handed-back policy gets.
const Message = controllers.HandbackMessage

// Options say what to remove besides the policies' status.
type Options struct {
	// DeleteVAPs deletes kyvap's ValidatingAdmissionPolicies and bindings.
	// Without it they stay (owned by their policies, removed with them) and
	// keep enforcing beside Kyverno, with the same verdicts: there is no
	// moment where a rule is enforced by nobody. Delete them once Kyverno
	// has taken the policies (its webhook configuration registers them).
	DeleteVAPs bool
}

// Result says what was done.
type Result struct {
	// Policies are the ClusterPolicies whose status was handed back, sorted.
	Policies []string
	// WebhookConfiguration is true when kyvap's webhook configuration was
	// deleted.
	WebhookConfiguration bool
	// VAPs and Bindings count the deleted objects.
	VAPs, Bindings int
}

// Run hands every policy whose status kyvap wrote back to Kyverno
// (generated: false, kyvap's condition removed), deletes kyvap's webhook
// configuration and, with DeleteVAPs, its VAPs and bindings.
func Run(ctx context.Context, c client.Client, opts Options) (Result, error) {
	var res Result
	var policies kyvernov1.ClusterPolicyList
	if err := c.List(ctx, &policies); err != nil {
		return res, fmt.Errorf("listing ClusterPolicies: %w", err)
	}
	var errs []error
	for i := range policies.Items {
		name := policies.Items[i].Name
		changed, err := handBack(ctx, c, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("ClusterPolicy %s: %w", name, err))
			continue
		}
		if changed {
			res.Policies = append(res.Policies, name)
		}
	}
	sort.Strings(res.Policies)

	managed := client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}
	var webhooks admissionregistrationv1.ValidatingWebhookConfigurationList
	n, err := deleteListed(ctx, c, &webhooks, managed, func() []client.Object { return pointers(webhooks.Items) })
	res.WebhookConfiguration = n > 0
	errs = append(errs, err)
	if opts.DeleteVAPs {
		// Bindings first: a VAP is never left half-bound.
		var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
		res.Bindings, err = deleteListed(ctx, c, &bindings, managed, func() []client.Object { return pointers(bindings.Items) })
		errs = append(errs, err)
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		res.VAPs, err = deleteListed(ctx, c, &vaps, managed, func() []client.Object { return pointers(vaps.Items) })
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// handBack clears what kyvap wrote in one policy's status; changed is false
// when kyvap never wrote it.
func handBack(ctx context.Context, c client.Client, name string) (changed bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = false
		p := &kyvernov1.ClusterPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
			return client.IgnoreNotFound(err)
		}
		if meta.FindStatusCondition(p.Status.Conditions, controllers.ConditionType) == nil {
			return nil // not kyvap's: leave Kyverno's own status alone
		}
		meta.RemoveStatusCondition(&p.Status.Conditions, controllers.ConditionType)
		p.Status.ValidatingAdmissionPolicy = kyvernov1.ValidatingAdmissionPolicyStatus{Generated: false, Message: Message}
		changed = true
		return c.Status().Update(ctx, p)
	})
	return changed, err
}

// deleteListed lists kyvap's objects of a kind and deletes them; it returns
// how many it deleted.
func deleteListed(ctx context.Context, c client.Client, list client.ObjectList, selector client.MatchingLabels, items func() []client.Object) (int, error) {
	if err := c.List(ctx, list, selector); err != nil {
		return 0, err
	}
	deleted := 0
	var errs []error
	for _, obj := range items() {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		deleted++
	}
	return deleted, errors.Join(errs...)
}

// pointers returns pointers to the items, as client.Objects.
func pointers[T any, PT interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}
