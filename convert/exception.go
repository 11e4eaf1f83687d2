// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
)

// ConditionException is the match condition of a converted
// PolicyException: its kyverno.io match, in CEL.
const ConditionException = "kyvap-exception"

// ExceptionResult is the conversion of one kyverno.io PolicyException.
type ExceptionResult struct {
	// Source is namespace/name.
	Source string
	// Exception is nil when the exception is not converted on its own:
	// FoldedInto names the converted policies it is folded into (it has
	// podSecurity controls, see FoldedExceptions), or Reason says why it
	// is not converted.
	Exception  *policiesv1.PolicyException
	FoldedInto []string
	Reason     string
}

// Exception converts a kyverno.io PolicyException into a
// policies.kyverno.io PolicyException naming the policies converted from
// the rules it names (results, from Policy), with its match as a CEL match
// condition. Refused when the match has no CEL form (JMESPath conditions,
// podSecurity), when it applies only at admission (background: false,
// which a policies.kyverno.io exception cannot say), and when it names only
// part of a converted policy (a rule but not a pod-controller variant
// folded into the same policy).
func Exception(ex *kyvernov2.PolicyException, results []Result, opts Options) ExceptionResult {
	out := ExceptionResult{Source: ex.Namespace + "/" + ex.Name}
	if ex.Spec.Background != nil && !*ex.Spec.Background {
		out.Reason = "background: false makes it apply at admission only, which a policies.kyverno.io PolicyException cannot say"
		return out
	}
	if len(ex.Spec.PodSecurity) > 0 {
		// Policy folded it into the policies of the rules it names.
		for i := range results {
			for _, c := range results[i].Policies {
				if slices.Contains(c.Exceptions, out.Source) {
					out.FoldedInto = append(out.FoldedInto, c.Name())
				}
			}
		}
		if len(out.FoldedInto) == 0 {
			out.Reason = "it has podSecurity controls, which are folded into the converted policies of the rules it names (a policies.kyverno.io PolicyException, skipping a whole policy, cannot say them), and it names no rule of a converted policy"
		}
		return out
	}
	condition, err := clusterpolicy.ExceptionCondition(opts.Resolver, ex)
	if err != nil {
		out.Reason = err.Error()
		return out
	}
	var refs []policiesv1.PolicyRef
	// Where a named rule's preconditions fail, Kyverno reports the rule's
	// error before it looks at exceptions: the converted exception must
	// not apply there (one guard for every rule it names).
	guard, guarded := "", false
	for i := range results {
		res := &results[i]
		key := clusterpolicy.PolicyKey(res.Source.Namespace, res.Source.Name)
		for _, c := range res.Policies {
			rules := append([]string{c.Rule}, c.Variants...)
			var named, unnamed []string
			for _, r := range rules {
				if kyverno.ExceptionContains(ex.Spec.Exceptions, key, r) {
					named = append(named, r)
				} else {
					unnamed = append(unnamed, r)
				}
			}
			switch {
			case len(named) == 0:
			case len(unnamed) > 0:
				out.Reason = fmt.Sprintf("it names %s of %s but not %s, which %s evaluates too", strings.Join(named, ", "), res.Source, strings.Join(unnamed, ", "), c.Name())
				return out
			default:
				for _, r := range named {
					g := res.ExceptionGuards[r]
					if guarded && g != guard {
						out.Reason = fmt.Sprintf("the rules it names fail their preconditions on different requests (%s among them), where Kyverno reports their error before it looks at exceptions; one policies.kyverno.io PolicyException cannot say so", r)
						return out
					}
					guard, guarded = g, true
				}
				kind := "ValidatingPolicy"
				if c.NamespacedValidatingPolicy != nil {
					kind = "NamespacedValidatingPolicy"
				}
				refs = append(refs, policiesv1.PolicyRef{Name: c.Name(), Kind: kind})
			}
		}
	}
	if len(refs) == 0 {
		out.Reason = "it names no rule of a converted policy"
		return out
	}
	out.Exception = &policiesv1.PolicyException{
		TypeMeta: metav1.TypeMeta{APIVersion: "policies.kyverno.io/v1", Kind: "PolicyException"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ex.Name, Namespace: ex.Namespace,
			Annotations: map[string]string{AnnotationSource: "PolicyException/" + out.Source},
		},
		Spec: policiesv1.PolicyExceptionSpec{
			PolicyRefs:      refs,
			MatchConditions: exceptionConditions(condition, guard),
		},
	}
	return out
}

// exceptionConditions are a converted exception's match conditions: its
// match, and, where the rules it names have preconditions that can fail,
// that they do not (ConditionPreconditionsEvaluate).
func exceptionConditions(condition, guard string) []admissionregistrationv1.MatchCondition {
	out := []admissionregistrationv1.MatchCondition{{Name: ConditionException, Expression: condition}}
	if guard != "" {
		out = append(out, admissionregistrationv1.MatchCondition{Name: ConditionPreconditionsEvaluate, Expression: "!(" + guard + ")"})
	}
	return out
}

// ConditionPreconditionsEvaluate is the match condition of a converted
// exception that the preconditions of the rules it names evaluate: Kyverno
// checks them first, and where they fail the rule is an error, exempted or
// not.
const ConditionPreconditionsEvaluate = "kyvap-preconditions-evaluate"

// ExceptionYAML writes converted exceptions like YAML writes policies:
// refused ones as comments first.
func ExceptionYAML(results []ExceptionResult) ([]byte, error) {
	var buf bytes.Buffer
	for _, r := range results {
		switch {
		case len(r.FoldedInto) > 0:
			fmt.Fprintf(&buf, "# PolicyException %s: its podSecurity controls are folded into %s\n", r.Source, strings.Join(r.FoldedInto, ", "))
		case r.Exception == nil:
			fmt.Fprintf(&buf, "# NOT CONVERTED: PolicyException %s: %s\n", r.Source, oneLine(r.Reason))
		}
	}
	for _, r := range results {
		if r.Exception == nil {
			continue
		}
		raw, err := json.Marshal(r.Exception)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		doc, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "---\n# Converted by kyvap convert from the kyverno.io PolicyException %s.\n", r.Source)
		buf.Write(doc)
	}
	return buf.Bytes(), nil
}
