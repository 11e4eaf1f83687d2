// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kyvap/kyvap/model"
)

// MaxMatchConditions is the API server's limit on matchConditions.
const MaxMatchConditions = 64

// CheckFields applies the API server's non-CEL validation of the fields
// kyvap copies from the rule, which Kyverno does not enforce.
func CheckFields(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec) *model.Refusal {
	for i, v := range spec.Validations {
		if len(v.Message) > 0 && containsLineBreak(v.Message) {
			return model.Refuse(model.ReasonVAPFieldInvalid, "validations[%d].message contains a line break", i)
		}
		if v.Reason != nil {
			switch *v.Reason {
			case metav1.StatusReasonUnauthorized, metav1.StatusReasonForbidden, metav1.StatusReasonInvalid, metav1.StatusReasonRequestEntityTooLarge:
			default:
				return model.Refuse(model.ReasonVAPFieldInvalid, "validations[%d].reason %q is not one the API server accepts", i, *v.Reason)
			}
		}
		if v.Expression == "" {
			return model.Refuse(model.ReasonVAPFieldInvalid, "validations[%d].expression is empty", i)
		}
	}
	seen := map[string]bool{}
	for i, mc := range spec.MatchConditions {
		if errs := validation.IsQualifiedName(mc.Name); len(errs) > 0 {
			return model.Refuse(model.ReasonVAPFieldInvalid, "matchConditions[%d].name %q: %s", i, mc.Name, errs[0])
		}
		if seen[mc.Name] {
			return model.Refuse(model.ReasonVAPFieldInvalid, "matchConditions[%d].name %q is duplicated", i, mc.Name)
		}
		seen[mc.Name] = true
	}
	vars := map[string]bool{}
	for i, v := range spec.Variables {
		if !celIdentifier(v.Name) || vars[v.Name] {
			return model.Refuse(model.ReasonVAPFieldInvalid, "variables[%d].name %q is not a unique CEL identifier", i, v.Name)
		}
		vars[v.Name] = true
	}
	keys := map[string]bool{}
	for i, aa := range spec.AuditAnnotations {
		if errs := validation.IsQualifiedName("x/" + aa.Key); len(errs) > 0 || aa.Key == "" || keys[aa.Key] || len(aa.Key) > 63 {
			return model.Refuse(model.ReasonVAPFieldInvalid, "auditAnnotations[%d].key %q is invalid or duplicated", i, aa.Key)
		}
		keys[aa.Key] = true
	}
	return nil
}

// JoinMessageLines rewrites every validation message that has line breaks
// (Kyverno accepts them; the API server refuses them in a VAP, and drops a
// multi-line messageExpression result) into one line: the lines, trimmed,
// without the empty ones, joined by single spaces. It returns the indexes of
// the messages it changed.
func JoinMessageLines(validations []admissionregistrationv1.Validation) []int {
	var changed []int
	for i := range validations {
		if !containsLineBreak(validations[i].Message) {
			continue
		}
		var lines []string
		for _, line := range strings.FieldsFunc(validations[i].Message, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if line = strings.TrimSpace(line); line != "" {
				lines = append(lines, line)
			}
		}
		validations[i].Message = strings.Join(lines, " ")
		changed = append(changed, i)
	}
	return changed
}

func containsLineBreak(s string) bool {
	for _, r := range s {
		if r == '\n' || r == '\r' {
			return true
		}
	}
	return false
}

// celIdentifier reports a valid CEL identifier ([_a-zA-Z][_a-zA-Z0-9]*).
func celIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

var notQualifiedChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// QualifiedConditionName turns a celPrecondition name into a qualified name
// ("Label should be red" → "Label-should-be-red"), or a positional one when
// nothing usable is left or the result is taken.
func QualifiedConditionName(name string, i int, taken map[string]bool) string {
	candidate := strings.Trim(notQualifiedChars.ReplaceAllString(name, "-"), "-_.")
	if len(candidate) > 63 {
		candidate = strings.Trim(candidate[:63], "-_.")
	}
	if candidate == "" || len(validation.IsQualifiedName(candidate)) > 0 || taken[candidate] {
		candidate = fmt.Sprintf("celprecondition-%d", i)
	}
	return candidate
}

// AndLabelSelectors returns a selector matching what both select: Kyverno's
// webhook selector and the binding's own. Labels become expressions so
// that equal keys with different values do not overwrite each other.
func AndLabelSelectors(a, b *metav1.LabelSelector) *metav1.LabelSelector {
	if b == nil {
		return a
	}
	if a == nil || (len(a.MatchLabels) == 0 && len(a.MatchExpressions) == 0) {
		return b.DeepCopy()
	}
	out := a.DeepCopy()
	keys := make([]string, 0, len(b.MatchLabels))
	for k := range b.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := out.MatchLabels[k]; ok && v == b.MatchLabels[k] {
			continue
		}
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{b.MatchLabels[k]}})
	}
	out.MatchExpressions = append(out.MatchExpressions, b.MatchExpressions...)
	return out
}

// ConditionPolicyNamespace is the match condition kyvap adds to keep the
// VAP of a namespaced policy's rule to the policy's namespace.
const ConditionPolicyNamespace = "kyvap-policy-namespace"
