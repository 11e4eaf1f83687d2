// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate/translatetest"
	"github.com/kyvap/kyvap/vap"
)

var update = flag.Bool("update", false, "rewrite the golden plan.yaml files")

// goldenCase is one testdata directory with a policy.yaml, as the
// translator takes it.
type goldenCase struct {
	name  string
	dir   string
	input clusterpolicy.Input
	opts  Options
}

// loadGoldenCases finds every directory under testdata with a policy.yaml.
func loadGoldenCases(t testing.TB) []goldenCase {
	var cases []goldenCase
	for _, c := range translatetest.LoadGoldenCases(t, "testdata") {
		cases = append(cases, goldenCase{
			name:  c.Name,
			dir:   c.Dir,
			input: clusterpolicy.InputFor(c.Policy, c.Exceptions),
			opts: Options{
				GenerateValidatingAdmissionPolicy: c.Options.GenerateVAP(),
				CompatibilityVersion:              c.Options.CompatibilityVersion,
				RespectGenerateField:              c.Options.RespectGenerateField,
			},
		})
	}
	return cases
}

// marshalPlan is the deterministic serialisation golden files hold.
func marshalPlan(t testing.TB, p Plan) []byte {
	out, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGolden(t *testing.T) {
	cases := loadGoldenCases(t)
	if len(cases) < 40 {
		t.Fatalf("found only %d golden cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.input.Policy.DeepCopy()
			plan, err := Translate(c.input, kyverno.NewStaticResolver(testCRDs()...), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, c.input.Policy); diff != "" {
				t.Fatalf("input mutated (-before +after):\n%s", diff)
			}
			got := marshalPlan(t, plan)
			again, _ := Translate(c.input, kyverno.NewStaticResolver(testCRDs()...), c.opts)
			if !bytes.Equal(got, marshalPlan(t, again)) {
				t.Fatal("translation is not deterministic")
			}
			assertCompiles(t, plan)
			path := filepath.Join(c.dir, "plan.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./translate -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// assertCompiles checks every emitted VAP compiles at the newest version
// and that every rule has a result with a reason unless translated.
func assertCompiles(t testing.TB, plan Plan) {
	t.Helper()
	for i := range plan.ValidatingAdmissionPolicies {
		policy := &plan.ValidatingAdmissionPolicies[i]
		user, ours := vap.CheckExpressions(&policy.Spec, vap.NewestCompatibilityVersion, map[string]bool{})
		if len(user)+len(ours) > 0 {
			t.Errorf("VAP %s does not compile: %s", policy.Name, vap.ProblemsMessage(append(user, ours...)))
		}
	}
	for _, r := range plan.Rules {
		if r.Verdict != VerdictTranslated && r.Reason == "" {
			t.Errorf("rule %s: verdict %s without reason", r.Rule, r.Verdict)
		}
	}
}
