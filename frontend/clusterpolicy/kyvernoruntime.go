// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"regexp"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// readsRequestNamespace finds `request.namespace` (or request['namespace'])
// in an expression. A match inside a string literal is a false positive,
// which only costs a fallback.
var readsRequestNamespace = regexp.MustCompile(`\brequest\s*(\.\s*namespace\b|\[\s*['"]namespace['"]\s*\])`)

// readsParams finds the `params` variable in an expression (conservatively,
// as above).
var readsParams = regexp.MustCompile(`\bparams\b`)

// ruleExpressions are every CEL source of a rule's validate.cel part and
// its celPreconditions.
func ruleExpressions(rule *kyvernov1.Rule) []string {
	var out []string
	for _, mc := range rule.CELPreconditions {
		out = append(out, mc.Expression)
	}
	cel := rule.Validation.CEL
	for _, v := range cel.Variables {
		out = append(out, v.Expression)
	}
	for _, v := range cel.Expressions {
		out = append(out, v.Expression, v.MessageExpression)
	}
	return out
}

// mayMatchNamespaceObjects reports whether one of the kind sets selects
// Namespace objects themselves.
func mayMatchNamespaceObjects(kinds []kyverno.KindSet) bool {
	for _, k := range kinds {
		if k.Everything || k.TopLevel {
			return true
		}
		for _, r := range k.Resources {
			if r.Group == "" && r.Resource == "namespaces" {
				return true
			}
		}
	}
	return false
}

// kyvernoRuntimeDifferences finds what Kyverno's CEL handler gives a rule
// at run time that a VAP cannot reproduce (pkg/engine/handlers/validation
// validate_cel.go and pkg/admissionpolicy CollectParams, v1.19.1).
func kyvernoRuntimeDifferences(resolver kyverno.KindResolver, rule *kyvernov1.Rule, kinds []kyverno.KindSet) *model.Refusal {
	if mayMatchNamespaceObjects(kinds) {
		for _, x := range ruleExpressions(rule) {
			if readsRequestNamespace.MatchString(x) {
				// Kyverno clears the namespace of a Namespace object's
				// request; the API server sets it to the Namespace's name.
				return model.Refuse(model.ReasonRequestNamespaceOfNamespace, "the rule can match Namespace objects and reads request.namespace, which Kyverno leaves empty for them while the API server sets it to the Namespace's own name")
			}
		}
	}
	cel := rule.Validation.CEL
	if cel.ParamKind == nil || cel.ParamRef == nil {
		return nil
	}
	if cel.ParamRef.Selector != nil {
		for _, mc := range rule.CELPreconditions {
			if readsParams.MatchString(mc.Expression) {
				// Kyverno evaluates the parameters one after another and skips
				// the whole rule at the first one that leaves a precondition
				// false; the API server evaluates every parameter on its own.
				return model.Refuse(model.ReasonParamsNotExpressible, "celPrecondition %q reads params while paramRef.selector may select several parameters: Kyverno skips the rule as soon as one parameter fails the preconditions, a ValidatingAdmissionPolicy evaluates the others", mc.Name)
			}
		}
	}
	resolved, err := resolver.Resolve(cel.ParamKind.APIVersion + "/" + cel.ParamKind.Kind)
	if err != nil || len(resolved) == 0 {
		return nil // the API server reports an unknown paramKind itself
	}
	switch namespaced := resolved[0].Namespaced; {
	case !namespaced && cel.ParamRef.Namespace != "":
		return model.Refuse(model.ReasonParamsNotExpressible, "paramRef.namespace is set for the cluster-scoped paramKind %s %s: Kyverno refuses to collect the parameters and reports an error for every request the rule matches", cel.ParamKind.APIVersion, cel.ParamKind.Kind)
	case namespaced && cel.ParamRef.Namespace == "" && mayMatchNamespaceObjects(kinds):
		// Kyverno looks parameters up in the request's namespace, which it
		// clears for Namespace objects (an error); the API server looks in
		// the Namespace itself.
		return model.Refuse(model.ReasonRequestNamespaceOfNamespace, "the rule can match Namespace objects and takes namespaced parameters from the request's namespace, which Kyverno leaves empty for them (an error) while the API server uses the Namespace's own name")
	}
	return nil
}
