// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// RoleRefs computes Request.Roles and Request.ClusterRoles from the
// cluster's bindings as Kyverno does (pkg/userinfo/roleRef.go), so callers
// only list bindings: Roles bound by a RoleBinding as "namespace:name";
// ClusterRoles bound by a ClusterRoleBinding, or by a RoleBinding in the
// request's namespace. Subjects are compared exactly; a ServiceAccount
// subject without a namespace takes its RoleBinding's. Results are sorted
// and deduplicated, and nil when nothing is bound.
func RoleRefs(roleBindings []*rbacv1.RoleBinding, clusterRoleBindings []*rbacv1.ClusterRoleBinding,
	user authenticationv1.UserInfo, namespace string,
) (roles, clusterRoles []string) {
	for _, rb := range roleBindings {
		if rb == nil || !bindingSubjectsMatch(rb.Subjects, user, rb.Namespace) {
			continue
		}
		switch rb.RoleRef.Kind {
		case "Role":
			roles = append(roles, rb.Namespace+":"+rb.RoleRef.Name)
		case "ClusterRole":
			if rb.Namespace == namespace {
				clusterRoles = append(clusterRoles, rb.RoleRef.Name)
			}
		}
	}
	for _, crb := range clusterRoleBindings {
		if crb != nil && crb.RoleRef.Kind == "ClusterRole" && bindingSubjectsMatch(crb.Subjects, user, "") {
			clusterRoles = append(clusterRoles, crb.RoleRef.Name)
		}
	}
	if roles != nil {
		roles = sets.List(sets.New(roles...))
	}
	if clusterRoles != nil {
		clusterRoles = sets.List(sets.New(clusterRoles...))
	}
	return roles, clusterRoles
}

func bindingSubjectsMatch(subjects []rbacv1.Subject, user authenticationv1.UserInfo, namespace string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns != "" && user.Username == "system:serviceaccount:"+ns+":"+s.Name {
				return true
			}
		case rbacv1.GroupKind:
			for _, g := range user.Groups {
				if g == s.Name {
					return true
				}
			}
		case rbacv1.UserKind:
			if user.Username == s.Name {
				return true
			}
		}
	}
	return false
}
