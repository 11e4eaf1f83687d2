// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

// TestKyvernoConfigSkipsRequests: with Kyverno's configuration set, the
// engine evaluates no rule for a request Kyverno's admission controller
// skips, and evaluates the others.
func TestKyvernoConfigSkipsRequests(t *testing.T) {
	cfg, problems := kyverno.ParseConfig(map[string]string{
		"resourceFilters":  "[ConfigMap,team,skip-*] [Pod/exec,*,*] [ConfigMap,*,old-name]",
		"excludeGroups":    "system:nodes,!ops",
		"excludeUsernames": "robot-*",
		"excludeRoles":     "team:auditor",
	})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	e := New()
	e.SetFallbackRules("p", []translate.FallbackRule{
		{Policy: "p", Rule: rule("cm", "ConfigMap", "false")},
		{Policy: "p", Rule: rule("exec", "Pod/exec", "false")},
	})
	if e.NeedsRoles() {
		t.Fatal("NeedsRoles before the configuration")
	}
	e.SetKyvernoConfig(&cfg)
	if !e.NeedsRoles() {
		t.Error("a configuration that excludes by role needs the requester's roles")
	}
	podKind := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	named := func(name string) *admissionv1.AdmissionRequest {
		r := request("ConfigMap", "configmaps", "", admissionv1.Create, configMap(name))
		r.Name = name
		return r
	}
	by := func(r *admissionv1.AdmissionRequest, user string, groups ...string) *admissionv1.AdmissionRequest {
		r.UserInfo = authenticationv1.UserInfo{Username: user, Groups: groups}
		return r
	}
	update := named("x")
	update.Operation = admissionv1.Update
	update.OldObject = request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("old-name")).Object
	for _, tt := range []struct {
		name string
		req  Request
		want string
	}{
		{"evaluated", Request{Admission: by(named("x"), "alice")}, "cm=fail"},
		{"filtered by name", Request{Admission: by(named("skip-1"), "alice")}, ""},
		{"filtered by the object's name (request without a name)", Request{Admission: by(request("ConfigMap", "configmaps", "", admissionv1.Create, configMap("skip-2")), "alice")}, ""},
		{"filtered by the old object's name", Request{Admission: by(update, "alice")}, ""},
		{"excluded group", Request{Admission: by(named("x"), "n", "system:nodes")}, ""},
		{"inclusion wins", Request{Admission: by(named("x"), "n", "system:nodes", "ops")}, "cm=fail"},
		{"excluded username", Request{Admission: by(named("x"), "robot-3")}, ""},
		{"excluded role", Request{Admission: by(named("x"), "bob"), Roles: []string{"team:auditor"}}, ""},
		{"subresource filtered by the resource's kind", Request{Admission: by(request("PodExecOptions", "pods", "exec", admissionv1.Connect, map[string]any{"kind": "PodExecOptions"}), "alice"), ResourceKind: &podKind}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Evaluate(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if results(got) != tt.want {
				t.Errorf("outcomes %q, want %q", results(got), tt.want)
			}
		})
	}
	e.SetKyvernoConfig(nil)
	if got, _ := e.Evaluate(context.Background(), Request{Admission: by(named("skip-1"), "robot-1")}); results(got) != "cm=fail" {
		t.Errorf("without a configuration: outcomes %q, want cm=fail", results(got))
	}
}
