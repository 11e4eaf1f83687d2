// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

func rules(group, version string, resources ...string) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: resources}}}}}
}

func podRules() *admissionregistrationv1.MatchResources { return rules("", "v1", "pods") }
