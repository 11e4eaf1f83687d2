// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

// DeepCopy returns a copy of the rule sharing no memory with it.
func (r *Rule) DeepCopy() *Rule {
	out := *r
	out.MatchConstraints = *r.MatchConstraints.DeepCopy()
	out.MatchConditions = copyEach(r.MatchConditions, func(x admissionregistrationv1.MatchCondition) admissionregistrationv1.MatchCondition {
		return *x.DeepCopy()
	})
	out.Variables = copyEach(r.Variables, func(x admissionregistrationv1.Variable) admissionregistrationv1.Variable { return *x.DeepCopy() })
	out.Validations = copyEach(r.Validations, func(x admissionregistrationv1.Validation) admissionregistrationv1.Validation { return *x.DeepCopy() })
	out.AuditAnnotations = copyEach(r.AuditAnnotations, func(x admissionregistrationv1.AuditAnnotation) admissionregistrationv1.AuditAnnotation {
		return *x.DeepCopy()
	})
	out.Actions = append([]admissionregistrationv1.ValidationAction(nil), r.Actions...)
	out.Targets = append([]string(nil), r.Targets...)
	out.Libraries = append([]string(nil), r.Libraries...)
	out.ParamKind = r.ParamKind.DeepCopy()
	out.ParamRef = r.ParamRef.DeepCopy()
	out.Bindings = copyEach(r.Bindings, func(b Binding) Binding {
		b.Scope = b.Scope.DeepCopy()
		b.Actions = append([]admissionregistrationv1.ValidationAction(nil), b.Actions...)
		return b
	})
	if r.TimeoutSeconds != nil {
		timeout := *r.TimeoutSeconds
		out.TimeoutSeconds = &timeout
	}
	out.Exceptions = copyEach(r.Exceptions, func(x Exception) Exception {
		x.MatchConditions = copyEach(x.MatchConditions, func(m admissionregistrationv1.MatchCondition) admissionregistrationv1.MatchCondition { return m })
		x.Images = append([]string(nil), x.Images...)
		x.AllowedValues = append([]string(nil), x.AllowedValues...)
		if x.ExpiresAt != nil {
			at := *x.ExpiresAt
			x.ExpiresAt = &at
		}
		return x
	})
	return &out
}

func copyEach[T any](in []T, f func(T) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}
