// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/translate/specialize"
)

// admittedBases are valid objects of each resource with admitted facts,
// by group/resource: a pod spec with one container and one init
// container.
var admittedBases = map[string]string{
	"pods": `apiVersion: v1
kind: Pod
metadata: {name: admitted, namespace: default}
spec: POD`,
	"podtemplates": `apiVersion: v1
kind: PodTemplate
metadata: {name: admitted, namespace: default}
template: {metadata: {labels: {app: a}}, spec: POD}`,
	"replicationcontrollers": `apiVersion: v1
kind: ReplicationController
metadata: {name: admitted, namespace: default}
spec: {selector: {app: a}, template: {metadata: {labels: {app: a}}, spec: POD}}`,
	"deployments.apps": `apiVersion: apps/v1
kind: Deployment
metadata: {name: admitted, namespace: default}
spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: POD}}`,
	"replicasets.apps": `apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: admitted, namespace: default}
spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: POD}}`,
	"statefulsets.apps": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: admitted, namespace: default}
spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: POD}}`,
	"daemonsets.apps": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: admitted, namespace: default}
spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: POD}}`,
	"jobs.batch": `apiVersion: batch/v1
kind: Job
metadata: {name: admitted, namespace: default}
spec: {template: {metadata: {labels: {app: a}}, spec: POD_NEVER}}`,
	"cronjobs.batch": `apiVersion: batch/v1
kind: CronJob
metadata: {name: admitted, namespace: default}
spec: {schedule: "0 * * * *", jobTemplate: {spec: {template: {metadata: {labels: {app: a}}, spec: POD_NEVER}}}}`,
}

const (
	admittedPod      = `{containers: [{name: c, image: "busybox:1.36"}], initContainers: [{name: i, image: "busybox:1.36"}]}`
	admittedPodNever = `{restartPolicy: Never, containers: [{name: c, image: "busybox:1.36"}], initContainers: [{name: i, image: "busybox:1.36"}]}`
)

// TestAPIServerRequiresAdmittedFacts proves the facts the VAP
// specialization adds to the Go types' shapes (specialize.AdmittedFacts):
// for every resource that has them, a valid object is admitted, and the
// same object without any one fact's value is refused as invalid by the
// API server's validation, before any admission policy could see it.
func TestAPIServerRequiresAdmittedFacts(t *testing.T) {
	ctx := context.Background()
	refused := 0
	for _, gr := range specialize.AdmittedResources() {
		base, ok := admittedBases[gr.String()]
		if !ok {
			t.Errorf("%s has admitted facts and no base object here", gr)
			continue
		}
		base = strings.ReplaceAll(strings.ReplaceAll(base, "POD_NEVER", admittedPodNever), "POD", admittedPod)
		valid := decodeUnstructured(t, base)
		if _, err := cp.DryRunCreate(ctx, valid); err != nil {
			t.Errorf("%s: the base object is refused: %v", gr, err)
			continue
		}
		facts := specialize.AdmittedFacts(gr.Group, gr.Resource)
		if len(facts) == 0 {
			t.Errorf("%s: no facts", gr)
		}
		// The facts hold on UPDATE too: the stored object, updated to lack
		// one, is refused.
		stored := valid.DeepCopy()
		stored.SetName("admitted-update")
		if err := cp.Client.Create(ctx, stored); err != nil {
			t.Fatalf("%s: %v", gr, err)
		}
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), stored) })
		for _, fact := range facts {
			path := strings.Split(strings.NewReplacer("[]", ".[]", "[0]", ".[0]", "{}", ".{}").Replace(fact), ".")
			obj := valid.DeepCopy()
			if !removeAt(obj.Object, path) {
				t.Errorf("%s: the base object has nothing at %s", gr, fact)
				continue
			}
			if _, err := cp.DryRunCreate(ctx, obj); !apierrors.IsInvalid(err) {
				t.Errorf("%s without %s: want the API server to refuse it as invalid, got %v", gr, fact, err)
				continue
			}
			refused++
			updated := stored.DeepCopy()
			removeAt(updated.Object, path)
			if err := cp.Client.Update(ctx, updated, client.DryRunAll); !apierrors.IsInvalid(err) {
				t.Errorf("%s updated without %s: want the API server to refuse it as invalid, got %v", gr, fact, err)
				continue
			}
			refused++
		}
	}
	t.Logf("%d objects without an admitted fact refused", refused)
	if refused < 140 {
		t.Errorf("only %d refusals checked", refused)
	}
}

func decodeUnstructured(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// removeAt deletes the value at path ("[]": the first element of a list;
// a last "[0]": every element, leaving the list empty; a last "{}": a
// map's values are label values, and one that is not is added); false
// when there is none.
func removeAt(v any, path []string) bool {
	switch v := v.(type) {
	case []any:
		return len(path) > 0 && path[0] == "[]" && len(v) > 0 && removeAt(v[0], path[1:])
	case map[string]any:
		if len(path) == 2 && path[1] == "[0]" {
			l, ok := v[path[0]].([]any)
			v[path[0]] = []any{}
			return ok && len(l) > 0
		}
		if len(path) == 2 && path[1] == "{}" {
			// A value that is no label value ('*': a wildcard).
			m, ok := v[path[0]].(map[string]any)
			if !ok {
				m = map[string]any{}
				v[path[0]] = m
			}
			m["kyvap-test"] = "sandbox*"
			return true
		}
		if len(path) == 1 {
			_, ok := v[path[0]]
			delete(v, path[0])
			return ok
		}
		next, ok := v[path[0]]
		return ok && removeAt(next, path[1:])
	}
	return false
}
