// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

func TestBackgroundUserInfoPath(t *testing.T) {
	roles := kyvernov1.UserInfo{Roles: []string{"ns:dev"}}
	subjects := kyvernov1.UserInfo{Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}}
	for _, tc := range []struct {
		name string
		rule kyvernov1.Rule
		want string
	}{
		{"resources only", kyvernov1.Rule{MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}}}, ""},
		{"legacy match", kyvernov1.Rule{MatchResources: kyvernov1.MatchResources{UserInfo: roles}}, "match/roles"},
		{"match any", kyvernov1.Rule{MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{}, {UserInfo: subjects}}}}, "match/any[1]/subjects"},
		{"match all", kyvernov1.Rule{MatchResources: kyvernov1.MatchResources{All: kyvernov1.ResourceFilters{{UserInfo: kyvernov1.UserInfo{ClusterRoles: []string{"admin"}}}}}}, "match/all[0]/clusterRoles"},
		{"exclude", kyvernov1.Rule{ExcludeResources: &kyvernov1.MatchResources{UserInfo: subjects}}, "exclude/subjects"},
		{"exclude all", kyvernov1.Rule{ExcludeResources: &kyvernov1.MatchResources{All: kyvernov1.ResourceFilters{{UserInfo: roles}}}}, "exclude/all[0]/roles"},
		{"exclude any", kyvernov1.Rule{ExcludeResources: &kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{UserInfo: roles}}}}, "exclude/any[0]/roles"},
	} {
		if got := BackgroundUserInfoPath(&tc.rule); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
