// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kyvap/kyvap/translate"
)

// shippedRBAC are the files of config/rbac whose ClusterRoles and Roles
// the manager's ServiceAccount is bound to.
var shippedRBAC = []string{"role.yaml", "params_reader_role.yaml", "leader_election_role.yaml"}

// ManagerUserConfig creates a user holding exactly kyvap's shipped RBAC
// (config/rbac: the manager's ClusterRole, its Role in OperatorNamespace,
// the aggregated params-reader ClusterRole and the leader election Role),
// each role renamed after the user, and returns its client configuration.
// The roles and bindings are deleted when the test ends.
func (cp *ControlPlane) ManagerUserConfig(t testing.TB, user string) *rest.Config {
	t.Helper()
	cp.EnsureNamespace(t, OperatorNamespace, nil)
	subject := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}
	for _, file := range shippedRBAC {
		data, err := os.ReadFile(RepoPath(t, "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := decoder.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("config/rbac/%s: %v", file, err)
			}
			var obj client.Object
			switch u.GetKind() {
			case "ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "Role":
				obj = &rbacv1.Role{}
			default:
				continue // bindings of the ServiceAccount are replaced by the user's
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				t.Fatal(err)
			}
			switch o := obj.(type) {
			case *rbacv1.ClusterRole:
				o.Name = user + "-" + o.Name
				cp.Create(t, o)
				cp.Create(t, &rbacv1.ClusterRoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: o.Name},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: o.Name},
					Subjects:   []rbacv1.Subject{subject},
				})
			case *rbacv1.Role:
				o.Name, o.Namespace = user+"-"+o.Name, OperatorNamespace
				cp.Create(t, o)
				cp.Create(t, &rbacv1.RoleBinding{
					ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: o.Name},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: o.Name},
					Subjects:   []rbacv1.Subject{subject},
				})
			}
		}
	}
	u, err := cp.Env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	return cfg
}

// StartWebhookOperatorAs is StartWebhookOperator with the manager's client
// configuration cfg (for example ManagerUserConfig's).
func (cp *ControlPlane) StartWebhookOperatorAs(t testing.TB, cfg *rest.Config, opts translate.Options, port int) *Operator {
	t.Helper()
	return cp.startWebhookOperator(t, cfg, opts, port, ctrl.Options{})
}
