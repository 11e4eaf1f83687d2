// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kyvap/kyvap/translate/specialize"
	"github.com/kyvap/kyvap/vap"
)

// specializeSpec rewrites the expressions of a VAP spec for the objects
// of the built-in resources it matches (Options.TypedObjects). The spec
// is a copy the plan owns: the model rule keeps the general form, which
// kyvap's own engine evaluates.
func specializeSpec(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, compatibilityVersion string) {
	shape := specialize.ShapeOf(spec.MatchConstraints)
	if shape == nil {
		return
	}
	v, err := vap.CompatibilityVersion(compatibilityVersion)
	if err != nil {
		return
	}
	// A match condition that the objects decide to be true selects every
	// request (e.g. a pattern rule's kyvap-pattern-not-delete where the
	// VAP matches no DELETE): it is dropped, as the API server would
	// otherwise evaluate it on every request for nothing.
	var conditions []admissionregistrationv1.MatchCondition
	for _, mc := range spec.MatchConditions {
		mc.Expression = shape.Expression(mc.Expression, v)
		if mc.Expression != "true" {
			conditions = append(conditions, mc)
		}
	}
	spec.MatchConditions = conditions
	spec.Variables = append([]admissionregistrationv1.Variable(nil), spec.Variables...)
	for i := range spec.Variables {
		spec.Variables[i].Expression = shape.Expression(spec.Variables[i].Expression, v)
	}
	spec.Validations = append([]admissionregistrationv1.Validation(nil), spec.Validations...)
	for i := range spec.Validations {
		spec.Validations[i].Expression = shape.Expression(spec.Validations[i].Expression, v)
		if spec.Validations[i].MessageExpression != "" {
			spec.Validations[i].MessageExpression = shape.Expression(spec.Validations[i].MessageExpression, v)
		}
	}
}
