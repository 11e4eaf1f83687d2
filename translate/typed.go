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
	spec.MatchConditions = append([]admissionregistrationv1.MatchCondition(nil), spec.MatchConditions...)
	for i := range spec.MatchConditions {
		spec.MatchConditions[i].Expression = shape.Expression(spec.MatchConditions[i].Expression, v)
	}
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
