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
