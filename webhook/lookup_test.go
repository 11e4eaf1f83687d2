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
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyvap/kyvap/engine"
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

func TestClusterLookupParams(t *testing.T) {
	cm := func(ns, name string, lbls map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
	}
	ns := func(name string, lbls map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	}
	blue := map[string]string{"color": "blue"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	c := fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(
		cm("team-a", "b", blue), cm("team-a", "a", blue), cm("team-a", "c", nil), cm("team-b", "a", blue),
		ns("n2", blue), ns("n1", blue), ns("n3", nil),
	).Build()
	l := &ClusterLookup{Reader: c, Writer: c}
	configMaps := &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	namespaces := &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "Namespace"}
	selector := &metav1.LabelSelector{MatchLabels: blue}
	tests := []struct {
		name      string
		kind      *admissionregistrationv1.ParamKind
		ref       *admissionregistrationv1.ParamRef
		namespace string
		want      paramsResult
	}{
		{name: "name in the request's namespace", kind: configMaps, ref: &admissionregistrationv1.ParamRef{Name: "a"}, namespace: "team-b", want: paramsResult{Objects: []string{"team-b/a"}}},
		{name: "name in paramRef.namespace", kind: configMaps, ref: &admissionregistrationv1.ParamRef{Name: "a", Namespace: "team-a"}, namespace: "team-b", want: paramsResult{Objects: []string{"team-a/a"}}},
		{name: "name not found", kind: configMaps, ref: &admissionregistrationv1.ParamRef{Name: "zz"}, namespace: "team-a"},
		{name: "selector, sorted by name", kind: configMaps, ref: &admissionregistrationv1.ParamRef{Selector: selector}, namespace: "team-a", want: paramsResult{Objects: []string{"team-a/a", "team-a/b"}}},
		{name: "namespaced kind, cluster-scoped request", kind: configMaps, ref: &admissionregistrationv1.ParamRef{Selector: selector}, want: paramsResult{Err: "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"}},
		{name: "cluster-scoped kind", kind: namespaces, ref: &admissionregistrationv1.ParamRef{Selector: selector}, namespace: "team-a", want: paramsResult{Objects: []string{"/n1", "/n2"}}},
		{name: "cluster-scoped kind by name", kind: namespaces, ref: &admissionregistrationv1.ParamRef{Name: "n3"}, namespace: "team-a", want: paramsResult{Objects: []string{"/n3"}}},
		{name: "cluster-scoped kind with a namespace", kind: namespaces, ref: &admissionregistrationv1.ParamRef{Name: "n1", Namespace: "team-a"}, want: paramsResult{Err: engine.ErrClusterScopedParamNamespace.Error()}},
		{name: "unknown kind", kind: &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Nope"}, ref: &admissionregistrationv1.ParamRef{Name: "x"}, want: paramsResult{Err: `paramKind example.com/v1, Kind=Nope: no matches for kind "Nope" in version "example.com/v1"`}},
	}
	for _, tt := range tests {
		objs, err := l.Params(context.Background(), tt.kind, tt.ref, tt.namespace)
		var got paramsResult
		if err != nil {
			got.Err = err.Error()
		}
		for _, o := range objs {
			m, err := meta.Accessor(o)
			if err != nil {
				t.Fatal(err)
			}
			got.Objects = append(got.Objects, m.GetNamespace()+"/"+m.GetName())
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Params (-want +got):\n%s", tt.name, diff)
		}
	}
}

// paramsResult is what Params returned: objects as namespace/name, and the
// error's message.
type paramsResult struct {
	Objects []string
	Err     string
}
