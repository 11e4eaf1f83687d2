// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package validatingpolicy

import (
	"fmt"
	"slices"
	"sort"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
)

// Lower lowers a ValidatingPolicy with the CEL
// PolicyExceptions of the cluster (those that do not name it are ignored,
// as are those expired at now).
func Lower(p *policiesv1.ValidatingPolicy, exceptions []policiesv1.PolicyException, now time.Time) model.Policy {
	src := model.Source{Kind: model.KindValidatingPolicy, APIVersion: policiesv1.GroupVersion.String(), Name: p.Name, UID: p.UID, Generation: p.Generation}
	return lowerValidating(src, &p.Spec, exceptions, now)
}

// LowerNamespaced lowers a NamespacedValidatingPolicy: every
// rule is confined to the policy's namespace.
func LowerNamespaced(p *policiesv1.NamespacedValidatingPolicy, exceptions []policiesv1.PolicyException, now time.Time) model.Policy {
	src := model.Source{Kind: model.KindNamespacedValidatingPolicy, APIVersion: policiesv1.GroupVersion.String(), Namespace: p.Namespace, Name: p.Name, UID: p.UID, Generation: p.Generation}
	return lowerValidating(src, &p.Spec, exceptions, now)
}

func lowerValidating(src model.Source, spec *policiesv1.ValidatingPolicySpec, exceptions []policiesv1.PolicyException, now time.Time) model.Policy {
	spec = spec.DeepCopy()
	out := model.Policy{Source: src}
	folded, next := ExceptionsFor(src, exceptions, now)
	out.NextExpiry = next
	base := model.Rule{
		ID:               model.RuleIDPolicy,
		MatchConditions:  spec.MatchConditions,
		Variables:        spec.Variables,
		Validations:      spec.Validations,
		AuditAnnotations: spec.AuditAnnotations,
		FailurePolicy:    admissionregistrationv1.Fail,
		Actions:          slices.Clone(spec.ValidationActions()),
		Namespace:        src.Namespace,
		Exceptions:       folded,
		Admission:        spec.AdmissionEnabled() && spec.EvaluationMode() != model.ModeJSON,
		Background:       spec.BackgroundEnabled(),
		Mode:             spec.EvaluationMode(),
	}
	if spec.FailurePolicy != nil {
		base.FailurePolicy = *spec.FailurePolicy
	}
	if spec.WebhookConfiguration != nil && spec.WebhookConfiguration.TimeoutSeconds != nil {
		t := *spec.WebhookConfiguration.TimeoutSeconds
		base.TimeoutSeconds = &t
	}
	if spec.MatchConstraints != nil {
		base.MatchConstraints = *spec.MatchConstraints
	}
	base.Libraries = cellib.Used(base.Expressions()...)
	out.Rules = append(out.Rules, base)
	if spec.EvaluationMode() == model.ModeJSON {
		out.Rules[0].KyvernoGenerates = false
		return out // Kyverno generates no pod-controller variants for JSON payloads
	}
	var controllers []string
	if spec.AutogenConfiguration != nil && spec.AutogenConfiguration.PodControllers != nil && spec.AutogenConfiguration.PodControllers.Controllers != nil {
		controllers = spec.AutogenConfiguration.PodControllers.Controllers
	} else {
		controllers = DefaultPodControllers()
	}
	out.Rules = append(out.Rules, podControllerVariants(&base, controllers)...)
	// Kyverno's generator takes cluster-wide policies that opt in and skips
	// every policy with pod-controller variants.
	out.Rules[0].KyvernoGenerates = src.Namespace == "" && spec.GenerateValidatingAdmissionPolicyEnabled() && len(out.Rules) == 1
	for i := range out.Rules {
		out.Rules[i].Libraries = cellib.Used(out.Rules[i].Expressions()...)
	}
	return out
}

// ExceptionsFor returns the exceptions that name the source (policyRefs by
// kind and name, as Kyverno's ListExceptions: the exception's namespace is
// not compared), unexpired at now, sorted by namespace/name, and the
// earliest future expiry among them.
func ExceptionsFor(src model.Source, exceptions []policiesv1.PolicyException, now time.Time) ([]model.Exception, *time.Time) {
	var out []model.Exception
	var next *time.Time
	for i := range exceptions {
		ex := &exceptions[i]
		if !namesPolicy(ex, src) {
			continue
		}
		var expires *time.Time
		if ex.Spec.ExpiresAt != nil {
			t := ex.Spec.ExpiresAt.Time
			if now.After(t) {
				continue // expired, as Kyverno's IsExpired says
			}
			expires = &t
			if next == nil || t.Before(*next) {
				next = &t
			}
		}
		out = append(out, model.Exception{
			Namespace:       ex.Namespace,
			Name:            ex.Name,
			MatchConditions: slices.Clone(ex.Spec.MatchConditions),
			Images:          slices.Clone(ex.Spec.Images),
			AllowedValues:   slices.Clone(ex.Spec.AllowedValues),
			ReportResult:    ex.Spec.ReportResult,
			ExpiresAt:       expires,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, next
}

func namesPolicy(ex *policiesv1.PolicyException, src model.Source) bool {
	for _, ref := range ex.Spec.PolicyRefs {
		if ref.Name == src.Name && ref.Kind == string(src.Kind) {
			return true
		}
	}
	return false
}

// LowerObject lowers a *ValidatingPolicy or a *NamespacedValidatingPolicy
// (the objects a client reads); any other type is an error.
func LowerObject(policy any, exceptions []policiesv1.PolicyException, now time.Time) (model.Policy, error) {
	switch p := policy.(type) {
	case *policiesv1.NamespacedValidatingPolicy:
		return LowerNamespaced(p, exceptions, now), nil
	case *policiesv1.ValidatingPolicy:
		return Lower(p, exceptions, now), nil
	}
	return model.Policy{}, fmt.Errorf("validatingpolicy: cannot lower a %T", policy)
}
