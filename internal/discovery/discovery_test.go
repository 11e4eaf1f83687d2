// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyvap/kyvap/kyverno"
)

// TestResources: discovery lists become served resources; "pods/exec" is
// the exec subresource of pods, with the parent's kind (Kyverno spells it
// Pod/exec); an unparsable group version is skipped.
func TestResources(t *testing.T) {
	lists := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Namespaced: true},
			{Name: "pods/exec", Kind: "PodExecOptions", Namespaced: true},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{{Name: "gizmoz", Kind: "Gizmo"}}},
		{GroupVersion: "a/b/c", APIResources: []metav1.APIResource{{Name: "broken", Kind: "Broken"}}},
	}
	want := []kyverno.Resource{
		{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true},
		{Version: "v1", Resource: "pods", Subresource: "exec", Kind: "Pod", Namespaced: true},
		{Group: "example.com", Version: "v1", Resource: "gizmoz", Kind: "Gizmo"},
	}
	if diff := cmp.Diff(want, Resources(lists)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	resolved, err := kyverno.NewResolver(Resources(lists)).Resolve("Pod/exec")
	if err != nil || len(resolved) != 1 || resolved[0].Subresource != "exec" {
		t.Errorf("Pod/exec resolves to %v, %v", resolved, err)
	}
}
