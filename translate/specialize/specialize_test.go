// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func withOperations(m *admissionregistrationv1.MatchResources, ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	m.ResourceRules[0].Operations = ops
	return m
}

func TestShapeOfRefusesWhatIsNotKnown(t *testing.T) {
	for name, m := range map[string]*admissionregistrationv1.MatchResources{
		"no rules":          {},
		"a wildcard":        withOperations(rules("*", "v1", "pods"), admissionregistrationv1.Create),
		"a custom resource": withOperations(rules("example.com", "v1", "widgets"), admissionregistrationv1.Create),
		"any operation":     withOperations(podRules(), admissionregistrationv1.OperationAll),
		"no operation":      podRules(),
		"a subresource":     withOperations(rules("apps", "v1", "deployments/scale"), admissionregistrationv1.Update),
	} {
		if s := ShapeOf(m); s != nil {
			t.Errorf("%s: a shape for objects nothing is known of", name)
		}
	}
}

func TestExpressionFoldsWhatTheTypeDecides(t *testing.T) {
	createPods := withOperations(podRules(), admissionregistrationv1.Create, admissionregistrationv1.Update)
	withDelete := withOperations(podRules(), admissionregistrationv1.Create, admissionregistrationv1.Delete)
	workloads := withOperations(rules("apps", "v1", "deployments", "statefulsets"), admissionregistrationv1.Create)
	for _, tc := range []struct {
		name        string
		constraints *admissionregistrationv1.MatchResources
		in, want    string
	}{
		{"a present bool field", createPods,
			`has(object.spec) && has(object.spec.hostPID) && type(object.spec.hostPID) == bool && object.spec.hostPID`,
			`has(object.spec) && has(object.spec.hostPID) && object.spec.hostPID`},
		{"a field not known present may fail to evaluate: kept", createPods,
			`type(object.spec.hostPID) == bool`, `type(object.spec.hostPID) == bool`},
		{"object is never null without DELETE", createPods,
			`type(object) == map && has(object.spec)`, `has(object.spec)`},
		{"object is null on a DELETE", withDelete,
			`type(object) == map && has(object.spec)`, `type(object) == map && has(object.spec)`},
		{"oldObject is null on a CREATE", createPods,
			`type(oldObject) == map`, `type(oldObject) == map`},
		{"a list that may be null keeps its test", createPods,
			`has(object.spec) && has(object.spec.containers) && type(object.spec.containers) == list`,
			`has(object.spec) && has(object.spec.containers) && type(object.spec.containers) == list`},
		{"elements of a list of structs are maps", createPods,
			`has(object.spec) && has(object.spec.containers) && object.spec.containers.all(c, type(c) == map && (!has(c.image) || type(c.image) != list))`,
			`has(object.spec) && has(object.spec.containers) && object.spec.containers.all(c, true)`},
		{"a test inside a guard decided by a fold", createPods,
			`object.spec.containers.all(e, [type(e) != map ? null : (has(e.image) ? dyn(e.image) : null)].all(k, k == null || type(k) == string))`,
			`object.spec.containers.all(e, [has(e.image) ? dyn(e.image) : null].all(k, true))`},
		{"a label is a string", createPods,
			`has(object.metadata) && has(object.metadata.labels) && has(object.metadata.labels.team) && type(object.metadata.labels.team) == string`,
			`has(object.metadata) && has(object.metadata.labels) && has(object.metadata.labels.team)`},
		{"an unknown field is never folded", createPods,
			`has(object.spec) && has(object.spec.nope) && type(object.spec.nope) == bool`,
			`has(object.spec) && has(object.spec.nope) && type(object.spec.nope) == bool`},
		{"an IntOrString stays open", withOperations(rules("", "v1", "services"), admissionregistrationv1.Create),
			`has(object.spec) && has(object.spec.ports) && object.spec.ports.all(p, !has(p.targetPort) || type(p.targetPort) == int)`,
			`has(object.spec) && has(object.spec.ports) && object.spec.ports.all(p, !has(p.targetPort) || type(p.targetPort) == int)`},
		{"two kinds share the template's shape", workloads,
			`has(object.spec) && has(object.spec.template) && type(object.spec.template) == map`,
			`has(object.spec) && has(object.spec.template)`},
		{"no type test: untouched", createPods, `object.spec.hostPID == true`, `object.spec.hostPID == true`},
	} {
		got := ShapeOf(tc.constraints).Expression(tc.in, nil)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
