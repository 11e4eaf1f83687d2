// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func apiextensionsJSON(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

func TestRolesOf(t *testing.T) {
	rb := func(ns, name, kind, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: rbacv1.RoleRef{Kind: kind, Name: role}, Subjects: subjects}
	}
	crb := func(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}, Subjects: subjects}
	}
	user := rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}
	group := rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "devs"}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder"} // namespace from the binding
	rbs := []rbacv1.RoleBinding{
		rb("team-a", "r1", "Role", "editor", user),
		rb("team-b", "r2", "Role", "viewer", group),
		rb("team-a", "r3", "ClusterRole", "admin", user), // counts only for requests in team-a
		rb("team-c", "r4", "Role", "builder", sa),        // system:serviceaccount:team-c:builder
		rb("team-a", "r5", "Role", "other", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}),
	}
	crbs := []rbacv1.ClusterRoleBinding{crb("cluster-viewer", group), crb("nobody", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"})}

	tests := []struct {
		name             string
		user             authenticationv1.UserInfo
		namespace        string
		roles, clusterRs []string
	}{
		{"user in team-a", authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}}, "team-a", []string{"team-a:editor", "team-b:viewer"}, []string{"admin", "cluster-viewer"}},
		{"user elsewhere", authenticationv1.UserInfo{Username: "alice"}, "team-b", []string{"team-a:editor"}, nil},
		{"service account", authenticationv1.UserInfo{Username: "system:serviceaccount:team-c:builder"}, "team-c", []string{"team-c:builder"}, nil},
		{"same name, other namespace", authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:builder"}, "team-a", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			roles, clusterRoles := RolesOf(rbs, crbs, tt.user, tt.namespace)
			if diff := cmp.Diff(tt.roles, roles); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.clusterRs, clusterRoles); diff != "" {
				t.Errorf("clusterRoles (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamedParamMissingFromTheCacheIsReadFromTheAPIServer: a parameter
// created a moment ago is not in the manager's cache yet; as the API
// server does for a VAP, kyvap's webhook reads it from the API server
// before it counts as missing ("no params found" would deny where the VAP
// admits). Missing from both, it is missing.
func TestNamedParamMissingFromTheCacheIsReadFromTheAPIServer(t *testing.T) {
	limits := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "params", Name: "limits"}, Data: map[string]string{"max": "5"}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	cached := fake.NewClientBuilder().WithRESTMapper(mapper).Build()
	server := fake.NewClientBuilder().WithObjects(limits).Build()
	kind := &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	for _, tc := range []struct {
		name      string
		apiReader client.Reader
		ref       string
		want      int
	}{
		{"in the API server only", server, "limits", 1},
		{"without an API reader, the cache alone", nil, "limits", 0},
		{"missing everywhere", server, "absent", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &ClusterLookup{Reader: cached, Writer: cached, APIReader: tc.apiReader}
			l.access.allowed = map[schema.GroupVersionResource]bool{corev1.SchemeGroupVersion.WithResource("configmaps"): true}
			got, err := l.Params(context.Background(), kind, &admissionregistrationv1.ParamRef{Name: tc.ref, Namespace: "params"}, "default")
			if err != nil || len(got) != tc.want {
				t.Fatalf("Params = %d objects, %v; want %d", len(got), err, tc.want)
			}
		})
	}
}
