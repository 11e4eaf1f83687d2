// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhookcerts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/webhook"
	"github.com/kyvap/kyvap/webhook/certs"
)

// shippedRoleClient returns a client acting as a user that holds only the
// namespaced Roles of config/rbac/role.yaml (generated from
// webhook/certs/rbac.go), in the operator's namespace.
func shippedRoleClient(t *testing.T) client.Client {
	t.Helper()
	cp.EnsureNamespace(t, namespace, nil)
	data, err := os.ReadFile(controlplane.RepoPath(t, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const user = "webhookcerts-shipped-role"
	roles := 0
	for i, doc := range strings.Split(string(data), "\n---") {
		var role rbacv1.Role
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "Role" {
			continue
		}
		roles++
		role.Name = fmt.Sprintf("shipped-%d", i)
		role.Namespace = namespace
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		cp.Create(t, &role)
		cp.Create(t, binding)
	}
	if roles == 0 {
		t.Fatal("config/rbac/role.yaml has no Role")
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestShippedRoleIsEnough: with nothing but the shipped Role, the
// certificate Manager creates its Secret, reads it back and renews it,
// while the same credentials may not read, list or watch any other Secret
// of the namespace (so a Manager of another Secret fails, Forbidden).
func TestShippedRoleIsEnough(t *testing.T) {
	ctx := context.Background()
	c := shippedRoleClient(t)
	name := webhook.DefaultSecretName
	stale := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := cp.Client.Delete(ctx, stale); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), stale) })
	manager := func(secret string, now func() time.Time) *certs.Manager {
		return certs.NewManager(c, c, certs.Options{Namespace: namespace, SecretName: secret, DNSNames: dnsNames, IPs: ips, Now: now}, ctrl.Log.WithName(t.Name()))
	}

	mustSync(t, manager(name, nil))
	created := getSecret(t, name)
	// A second replica reads it (get by name).
	second := manager(name, nil)
	mustSync(t, second)
	if !bytes.Equal(served(t, second), leaf(t, created.Data[certs.TLSCertKey]).Raw) {
		t.Error("a second replica does not serve the Secret's certificate")
	}

	// Renewal rewrites it (update by name).
	var clk clock
	clk.Advance(300 * 24 * time.Hour)
	mustSync(t, manager(name, clk.Now))
	if renewed := getSecret(t, name); bytes.Equal(renewed.Data[certs.TLSCertKey], created.Data[certs.TLSCertKey]) {
		t.Error("the expiring certificate was not renewed")
	}

	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "webhookcerts-someone-elses"}, StringData: map[string]string{"password": "x"}}
	cp.Create(t, other)
	if err := manager(other.Name, nil).Sync(ctx); !apierrors.IsForbidden(err) {
		t.Errorf("a Manager of another Secret: %v, want Forbidden", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("get another Secret: %v, want Forbidden", err)
	}
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(namespace)); !apierrors.IsForbidden(err) {
		t.Errorf("list the namespace's Secrets: %v, want Forbidden", err)
	}
	if err := c.Delete(ctx, other); !apierrors.IsForbidden(err) {
		t.Errorf("delete another Secret: %v, want Forbidden", err)
	}
}
