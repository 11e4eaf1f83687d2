// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package model

// Expressions lists every CEL expression of the rule that an engine
// evaluates (exceptions' conditions included).
func (r *Rule) Expressions() []string {
	var out []string
	for _, mc := range r.MatchConditions {
		out = append(out, mc.Expression)
	}
	for _, v := range r.Variables {
		out = append(out, v.Expression)
	}
	for _, v := range r.Validations {
		out = append(out, v.Expression, v.MessageExpression)
	}
	for _, a := range r.AuditAnnotations {
		out = append(out, a.ValueExpression)
	}
	for _, ex := range r.Exceptions {
		for _, mc := range ex.MatchConditions {
			out = append(out, mc.Expression)
		}
	}
	return out
}
