// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import kyvernov2 "github.com/kyvap/kyvap/api/v2"

// ExceptionContains reports whether one of a PolicyException's entries names
// the policy's rule, as Kyverno's api/kyverno/v2/policy_exception_types.go
// PolicyExceptionSpec.Contains: the policy name must be equal
// ("<namespace>/<name>" for a namespaced Policy), and one of the entry's
// ruleNames must match the rule name as a wildcard pattern (WildcardMatch).
// Rules Kyverno generates for pod controllers are named by
// AutogenRuleName/AutogenCronJobRuleName, and an entry naming only the
// original rule does not cover them.
func ExceptionContains(entries []kyvernov2.Exception, policy, rule string) bool {
	for _, e := range entries {
		if e.PolicyName == policy && CheckPatterns(e.RuleNames, rule) {
			return true
		}
	}
	return false
}
