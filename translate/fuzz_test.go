// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
)

// FuzzTranslate feeds arbitrary policies (YAML or JSON) to Translate: it
// must not panic, must be deterministic, must not mutate its input, and
// everything it emits must compile and carry valid names and labels.
func FuzzTranslate(f *testing.F) {
	for _, c := range loadGoldenCases(f) {
		if data, err := os.ReadFile(filepath.Join(c.dir, "policy.yaml")); err == nil {
			f.Add(data)
		}
	}
	resolver := kyverno.NewStaticResolver(testCRDs()...)
	f.Fuzz(func(t *testing.T, data []byte) {
		var policy kyvernov1.ClusterPolicy
		if err := yaml.Unmarshal(data, &policy); err != nil {
			return
		}
		before := policy.DeepCopy()
		in := clusterpolicy.Input{Policy: &policy}
		opts := Options{GenerateValidatingAdmissionPolicy: true}
		first, err := Translate(in, resolver, opts)
		if err != nil {
			t.Fatal(err)
		}
		second, _ := Translate(in, resolver, opts)
		// JSON, not the golden files' YAML: the same bytes for the same
		// plan, at a fifth of the cost (every exec counts, see
		// docs/performance.md on fuzzing).
		if !bytes.Equal(marshalJSON(t, first), marshalJSON(t, second)) {
			t.Fatal("translation is not deterministic")
		}
		if !reflect.DeepEqual(before, &policy) {
			t.Fatal("input mutated")
		}
		if rules := rulesOf(first, &policy); len(rules) != len(policy.Spec.Rules) {
			t.Fatalf("%d results for %d rules", len(rules), len(policy.Spec.Rules))
		}
		assertCompiles(t, first)
		// Rules sharing a name are Invalid and generate nothing, so names
		// are unique whatever the input.
		seen := map[string]bool{}
		for _, vap := range first.ValidatingAdmissionPolicies {
			if seen[vap.Name] {
				t.Fatalf("two VAPs named %s", vap.Name)
			}
			seen[vap.Name] = true
			if !strings.HasPrefix(vap.Name, VAPNamePrefix(policy.Name)) {
				t.Fatalf("VAP %s does not start with %s", vap.Name, VAPNamePrefix(policy.Name))
			}
		}
		seenBindings := map[string]bool{} // another kind: may share a VAP's name
		for _, b := range first.Bindings {
			if seenBindings[b.Name] {
				t.Fatalf("two bindings named %s", b.Name)
			}
			seenBindings[b.Name] = true
		}
		for _, vap := range first.ValidatingAdmissionPolicies {
			assertMeta(t, vap.Name, vap.Labels)
		}
		for _, b := range first.Bindings {
			assertMeta(t, b.Name, b.Labels)
		}
	})
}

func marshalJSON(t *testing.T, v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertMeta(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Fatalf("invalid name %q: %v", name, errs)
	}
	if name == "cpol-"+labels[LabelPolicy] || name == "cpol-"+labels[LabelPolicy]+"-binding" {
		t.Fatalf("name %q collides with Kyverno's generator", name)
	}
	for k, v := range labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("invalid label %s=%q: %v", k, v, errs)
		}
	}
}
