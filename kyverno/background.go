// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"fmt"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

// BackgroundUserInfoPath returns where a rule selects requests by their
// user (roles, clusterRoles or subjects in match or exclude), or "" when
// it does not. Kyverno refuses such a rule in a policy with background
// scans on ("only select variables are allowed in background mode",
// pkg/validation/policy/background.go hasUserMatchExclude): a background
// scan has no user to select by.
func BackgroundUserInfoPath(rule *kyvernov1.Rule) string {
	if path := userInfoDefined(rule.MatchResources.UserInfo); path != "" {
		return "match/" + path
	}
	for i, f := range rule.MatchResources.Any {
		if path := userInfoDefined(f.UserInfo); path != "" {
			return fmt.Sprintf("match/any[%d]/%s", i, path)
		}
	}
	for i, f := range rule.MatchResources.All {
		if path := userInfoDefined(f.UserInfo); path != "" {
			return fmt.Sprintf("match/all[%d]/%s", i, path)
		}
	}
	if ex := rule.ExcludeResources; ex != nil {
		if path := userInfoDefined(ex.UserInfo); path != "" {
			return "exclude/" + path
		}
		for i, f := range ex.All {
			if path := userInfoDefined(f.UserInfo); path != "" {
				return fmt.Sprintf("exclude/all[%d]/%s", i, path)
			}
		}
		for i, f := range ex.Any {
			if path := userInfoDefined(f.UserInfo); path != "" {
				return fmt.Sprintf("exclude/any[%d]/%s", i, path)
			}
		}
	}
	return ""
}

func userInfoDefined(ui kyvernov1.UserInfo) string {
	switch {
	case len(ui.Roles) > 0:
		return "roles"
	case len(ui.ClusterRoles) > 0:
		return "clusterRoles"
	case len(ui.Subjects) > 0:
		return "subjects"
	}
	return ""
}

// BackgroundOnly reports whether Kyverno applies a policy in background
// scans only: spec.admission is false and spec.background is on (the
// default). Kyverno's background scan (pkg/controllers/report/background)
// and its CLI evaluate such a policy's rules as at admission.
func BackgroundOnly(spec *kyvernov1.Spec) bool {
	return !spec.AdmissionEnabled() && spec.BackgroundEnabled()
}

// AsScanned returns the policy as a background scan evaluates it: with
// admission on, so that its rules translate as at admission. The policy is
// not modified.
func AsScanned(policy *kyvernov1.ClusterPolicy) *kyvernov1.ClusterPolicy {
	if policy.Spec.AdmissionEnabled() {
		return policy
	}
	scanned := policy.DeepCopy()
	on := true
	scanned.Spec.Admission = &on
	return scanned
}
