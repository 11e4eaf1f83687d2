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
const Message = "kyvap is uninstalled: Kyverno enforces this policy"

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
	if err := c.List(ctx, &webhooks, managed); err != nil {
		errs = append(errs, fmt.Errorf("listing kyvap's webhook configurations: %w", err))
	}
	for i := range webhooks.Items {
		if err := c.Delete(ctx, &webhooks.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		res.WebhookConfiguration = true
	}
	if opts.DeleteVAPs {
		var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		if err := c.List(ctx, &bindings, managed); err != nil {
			errs = append(errs, err)
		}
		for i := range bindings.Items {
			if err := c.Delete(ctx, &bindings.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			res.Bindings++
		}
		if err := c.List(ctx, &vaps, managed); err != nil {
			errs = append(errs, err)
		}
		for i := range vaps.Items {
			if err := c.Delete(ctx, &vaps.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			res.VAPs++
		}
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
