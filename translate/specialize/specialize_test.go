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
			`has(object.spec.hostPID) && object.spec.hostPID`},
		{"a field not known present may fail to evaluate: kept", createPods,
			`type(object.spec.hostPID) == bool`, `type(object.spec.hostPID) == bool`},
		{"object is never null without DELETE", createPods,
			`type(object) == map && has(object.spec)`, `true`},
		{"object is null on a DELETE", withDelete,
			`type(object) == map && has(object.spec)`, `type(object) == map`},
		{"oldObject is null on a CREATE", createPods,
			`type(oldObject) == map`, `type(oldObject) == map`},
		{"a list that may be null keeps its test (oldObject has no admitted facts)", createPods,
			`type(oldObject) == map && has(oldObject.spec) && has(oldObject.spec.containers) && type(oldObject.spec.containers) == list`,
			`type(oldObject) == map && type(oldObject.spec.containers) == list`},
		{"an admitted fact: a Pod's containers are a list, each with an image", createPods,
			`has(object.spec.containers) && type(object.spec.containers) == list && object.spec.containers.all(c, has(c.image) && c.image != "")`,
			`object.spec.containers.all(c, c.image != "")`},
		{"a fact about every element says nothing of the list", createPods,
			`has(object.spec.initContainers) && object.spec.initContainers.all(c, has(c.image))`,
			`has(object.spec.initContainers)`},
		{"admitted facts through pods/ephemeralcontainers", withOperations(rules("", "v1", "pods/ephemeralcontainers"), admissionregistrationv1.Update),
			`type(object.spec.containers) == list`, `true`},
		{"admitted facts of a CronJob's pod template", withOperations(rules("batch", "v1", "cronjobs"), admissionregistrationv1.Create),
			`object.spec.jobTemplate.spec.template.spec.containers.all(c, has(c.image))`, `true`},
		{"elements of a list of structs are maps", createPods,
			`has(object.spec) && has(object.spec.containers) && object.spec.containers.all(c, type(c) == map && (!has(c.image) || type(c.image) != list))`,
			`true`},
		{"a test inside a guard decided by a fold", createPods,
			`object.spec.containers.all(e, [type(e) != map ? null : (has(e.image) ? dyn(e.image) : null)].all(k, k == null || type(k) == string))`,
			`object.spec.containers.all(e, [e.image].all(k, true))`},
		{"a label is a string", createPods,
			`has(object.metadata) && has(object.metadata.labels) && has(object.metadata.labels.team) && type(object.metadata.labels.team) == string`,
			`has(object.metadata.labels) && has(object.metadata.labels.team)`},
		{"an unknown field is never folded", createPods,
			`has(object.spec) && has(object.spec.nope) && type(object.spec.nope) == bool`,
			`has(object.spec.nope) && type(object.spec.nope) == bool`},
		{"an IntOrString stays open (and, a struct, is always written)", withOperations(rules("", "v1", "services"), admissionregistrationv1.Create),
			`has(object.spec) && has(object.spec.ports) && object.spec.ports.all(p, !has(p.targetPort) || type(p.targetPort) == int)`,
			`has(object.spec.ports) && object.spec.ports.all(p, type(p.targetPort) == int)`},
		{"two kinds share the template's shape", workloads,
			`has(object.spec) && has(object.spec.template) && type(object.spec.template) == map`,
			`true`},
		{"no type test: untouched", createPods, `object.spec.hostPID == true`, `object.spec.hostPID == true`},
		{"an operation the VAP does not match", createPods,
			`request.operation != 'DELETE' && (request.operation == 'DELETE' ? oldObject : object).spec.hostPID`,
			`object.spec.hostPID`},
		{"one of the operations it matches: kept", createPods,
			`request.operation == 'CREATE'`, `request.operation == 'CREATE'`},
		{"the only operation it matches", withOperations(podRules(), admissionregistrationv1.Update),
			`request.operation == 'UPDATE'`, `true`},
		{"dyn() of a path from object changes no type", createPods,
			`has(object.spec) && type(object.spec) == map && dyn(object.spec.hostPID) && [object].all(o, dyn(o.kind) == "Pod")`,
			`object.spec.hostPID && object.kind == "Pod"`},
		{"a binding over a conditional with a literal branch is distributed", createPods,
			`[has(object.metadata) && has(object.metadata.name) ? object.metadata.name : ""].all(k, k != "" && k.startsWith("x"))`,
			`has(object.metadata.name) ? (object.metadata.name != "" && object.metadata.name.startsWith("x")) : false`},
		{"a binding over a present path read a few times is inlined", createPods,
			`has(object.spec.hostname) && [object.spec.hostname].all(k, k < "a" || k > "b")`,
			`has(object.spec.hostname) && (object.spec.hostname < "a" || object.spec.hostname > "b")`},
		{"a binding over a present path read many times is kept", createPods,
			`has(object.spec.hostname) && [object.spec.hostname].all(k, k<"a"||k<"b"||k<"c"||k<"d"||k<"e"||k<"f"||k<"g"||k<"h"||k<"i")`,
			`has(object.spec.hostname) && [object.spec.hostname].all(k, k<"a"||k<"b"||k<"c"||k<"d"||k<"e"||k<"f"||k<"g"||k<"h"||k<"i")`},
		{"a binding over a present path read once is inlined", createPods,
			`has(object.metadata) && has(object.metadata.name) && [object.metadata.name].all(k, k.startsWith("x"))`,
			`has(object.metadata.name) && object.metadata.name.startsWith("x")`},
		{"a binding over a path that may be absent is kept", createPods,
			`[object.metadata.name].all(k, k.startsWith("x"))`,
			`[object.metadata.name].all(k, k.startsWith("x"))`},
		{"a binding over another expression is kept", createPods,
			`[object.metadata.name].all(k, k == "x" || k == "y")`,
			`[object.metadata.name].all(k, k == "x" || k == "y")`},
		{"an identifier a binding's body rebinds is not captured", createPods,
			`[object].all(o, o.spec.containers.all(object, object.name != o.kind))`,
			`[object].all(o, o.spec.containers.all(object, object.name != o.kind))`},
		{"a body that is not a bool is kept", createPods,
			`[object].all(o, dyn(o.spec))`,
			`[object].all(o, o.spec)`},
		{"dyn() of a typed variable stays", createPods,
			`type(object) == map && dyn(namespaceObject.metadata.name) == "x" && dyn(request.name) == "y" && [request.name].all(n, dyn(n) == "y")`,
			`dyn(namespaceObject.metadata.name) == "x" && dyn(request.name) == "y" && [request.name].all(n, dyn(n) == "y")`},
		{"exists() of false over a list known to evaluate is false", createPods,
			`has(object.spec) && (object.spec.containers.exists(c, false) || object.spec.hostPID)`, `object.spec.hostPID`},
		{"exists() of true is a size test", createPods,
			`has(object.spec.initContainers) && object.spec.initContainers.exists(c, true)`, `has(object.spec.initContainers) && size(object.spec.initContainers) > 0`},
		{"all() of false is a size test", createPods,
			`has(object.spec.initContainers) && object.spec.initContainers.all(c, false)`, `has(object.spec.initContainers) && size(object.spec.initContainers) == 0`},
		{"an admitted fact: a Pod has a container", createPods,
			`has(object.spec) && object.spec.containers.exists(c, true) && !object.spec.containers.all(c, false)`, `true`},
		{"oldObject's containers may be empty", createPods,
			`oldObject != null && has(oldObject.spec.containers) && type(oldObject.spec.containers) == list && oldObject.spec.containers.exists(c, true)`,
			`oldObject != null && type(oldObject.spec.containers) == list && size(oldObject.spec.containers) > 0`},
		{"a quantifier over a list that may be null is kept", createPods,
			`has(object.spec) && object.spec.initContainers.exists(c, false)`, `object.spec.initContainers.exists(c, false)`},
		{"a choice of one value where the condition evaluates", createPods,
			`has(object.spec) && object.spec.containers.exists(c, c.image.endsWith(":latest") ? false : false)`, `false`},
		{"a choice of one value where the condition may fail is kept", createPods,
			`has(object.spec) && object.spec.containers.exists(c, c.workingDir.endsWith(":latest") ? false : false)`, `object.spec.containers.exists(c, c.workingDir.endsWith(":latest") ? false : false)`},
		{"a choice of one value on a condition that may not be a bool is kept", createPods,
			`object.spec.containers.exists(c, dyn(c.image) ? false : false)`, `object.spec.containers.exists(c, c.image ? false : false)`},
	} {
		got := ShapeOf(tc.constraints).Expression(tc.in, nil)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
