// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import (
	"slices"
	"sort"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Kyverno's evaluation modes (policies.kyverno.io EvaluationMode).
const (
	ModeKubernetes = "Kubernetes"
	ModeJSON       = "JSON"
)

// RuleIDPolicy is the ID of the rule a ValidatingPolicy is as written.
const RuleIDPolicy = "policy"

// FromValidatingPolicy lowers a ValidatingPolicy with the CEL
// PolicyExceptions of the cluster (those that do not name it are ignored,
// as are those expired at now).
func FromValidatingPolicy(p *policiesv1.ValidatingPolicy, exceptions []policiesv1.PolicyException, now time.Time) Policy {
	src := Source{Kind: KindValidatingPolicy, APIVersion: policiesv1.GroupVersion.String(), Name: p.Name, UID: p.UID, Generation: p.Generation}
	return lowerValidating(src, &p.Spec, exceptions, now)
}

// FromNamespacedValidatingPolicy lowers a NamespacedValidatingPolicy: every
// rule is confined to the policy's namespace.
func FromNamespacedValidatingPolicy(p *policiesv1.NamespacedValidatingPolicy, exceptions []policiesv1.PolicyException, now time.Time) Policy {
	src := Source{Kind: KindNamespacedValidatingPolicy, APIVersion: policiesv1.GroupVersion.String(), Namespace: p.Namespace, Name: p.Name, UID: p.UID, Generation: p.Generation}
	return lowerValidating(src, &p.Spec, exceptions, now)
}

func lowerValidating(src Source, spec *policiesv1.ValidatingPolicySpec, exceptions []policiesv1.PolicyException, now time.Time) Policy {
	spec = spec.DeepCopy()
	out := Policy{Source: src}
	folded, next := ExceptionsFor(src, exceptions, now)
	out.NextExpiry = next
	base := Rule{
		ID:               RuleIDPolicy,
		MatchConditions:  spec.MatchConditions,
		Variables:        spec.Variables,
		Validations:      spec.Validations,
		AuditAnnotations: spec.AuditAnnotations,
		FailurePolicy:    admissionregistrationv1.Fail,
		Actions:          slices.Clone(spec.ValidationActions()),
		Namespace:        src.Namespace,
		Exceptions:       folded,
		Admission:        spec.AdmissionEnabled() && spec.EvaluationMode() != ModeJSON,
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
	base.Libraries = KyvernoLibraries(base.Expressions()...)
	out.Rules = append(out.Rules, base)
	if spec.EvaluationMode() == ModeJSON {
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
		out.Rules[i].Libraries = KyvernoLibraries(out.Rules[i].Expressions()...)
	}
	return out
}

// ExceptionsFor returns the exceptions that name the source (policyRefs by
// kind and name, as Kyverno's ListExceptions: the exception's namespace is
// not compared), unexpired at now, sorted by namespace/name, and the
// earliest future expiry among them.
func ExceptionsFor(src Source, exceptions []policiesv1.PolicyException, now time.Time) ([]Exception, *time.Time) {
	var out []Exception
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
		out = append(out, Exception{
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

func namesPolicy(ex *policiesv1.PolicyException, src Source) bool {
	for _, ref := range ex.Spec.PolicyRefs {
		if ref.Name == src.Name && ref.Kind == string(src.Kind) {
			return true
		}
	}
	return false
}
