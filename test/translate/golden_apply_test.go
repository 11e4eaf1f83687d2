// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package translate_test checks that the real API server accepts everything
// the translator emits for its golden cases: the translator type-checks CEL
// itself, but only kube-apiserver's validation is the final word on a
// ValidatingAdmissionPolicy or binding.
package translate_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/translate/translatetest"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{}, &cp))
}

// fakePolicyUID stands in for the UID a ClusterPolicy gets in a cluster, so
// that owner references are complete; the API server does not check that
// the owner exists.
const fakePolicyUID = "00000000-0000-0000-0000-000000000001"

// Floors on what the test checks, below the current counts, so that it
// cannot pass by finding nothing (a moved testdata directory, a translator
// that stops emitting).
const (
	minGoldenCases    = 40
	minObjectsChecked = 100
)

// casesCreatedForReal are applied without dry run (and deleted), to prove
// the policies and their bindings are stored together, not just validated.
var casesCreatedForReal = []string{"overrides", "multi-rule", "params"}

// TestAPIServerAcceptsGoldenPlans dry-run creates every VAP and binding of
// every golden case.
func TestAPIServerAcceptsGoldenPlans(t *testing.T) {
	cases := loadGoldenCases(t)
	if len(cases) < minGoldenCases {
		t.Fatalf("found %d golden cases, want at least %d", len(cases), minGoldenCases)
	}
	ctx := context.Background()
	checked := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, obj := range planObjects(translateCase(t, c)) {
				if err := cp.Client.Create(ctx, obj, client.DryRunAll); err != nil {
					t.Errorf("case %s: the API server rejects %s %s: %v", c.name, kindOf(obj), obj.GetName(), err)
				}
				checked++
			}
		})
	}
	t.Logf("%d objects of %d golden cases checked", checked, len(cases))
	if checked < minObjectsChecked {
		t.Errorf("checked %d objects, want at least %d", checked, minObjectsChecked)
	}
}

// TestAPIServerStoresGoldenPlans creates a few cases' VAPs and bindings for
// real, reads them back and deletes them.
func TestAPIServerStoresGoldenPlans(t *testing.T) {
	byName := map[string]goldenCase{}
	for _, c := range loadGoldenCases(t) {
		byName[c.name] = c
	}
	ctx := context.Background()
	for _, name := range casesCreatedForReal {
		t.Run(name, func(t *testing.T) {
			c, ok := byName[name]
			if !ok {
				t.Fatalf("golden case %s is gone; pick another", name)
			}
			plan := translateCase(t, c)
			if len(plan.ValidatingAdmissionPolicies) == 0 || len(plan.Bindings) == 0 {
				t.Fatalf("case %s emits %d VAPs and %d bindings, want both", name, len(plan.ValidatingAdmissionPolicies), len(plan.Bindings))
			}
			for _, obj := range planObjects(plan) {
				cp.Create(t, obj)
			}
			for _, b := range plan.Bindings {
				var vap admissionregistrationv1.ValidatingAdmissionPolicy
				if err := cp.Client.Get(ctx, client.ObjectKey{Name: b.Spec.PolicyName}, &vap); err != nil {
					t.Errorf("binding %s names VAP %s, which is not stored: %v", b.Name, b.Spec.PolicyName, err)
				}
			}
		})
	}
}

// goldenCase is one directory of translate/testdata with a policy.yaml.
type goldenCase struct {
	name  string
	input clusterpolicy.Input
	opts  translate.Options
}

// loadGoldenCases reads the cases with the translator's own golden loader.
func loadGoldenCases(t *testing.T) []goldenCase {
	t.Helper()
	var cases []goldenCase
	for _, c := range translatetest.LoadGoldenCases(t, controlplane.RepoPath(t, "translate", "testdata")) {
		c.Policy.UID = fakePolicyUID
		cases = append(cases, goldenCase{
			name:  c.Name,
			input: clusterpolicy.InputFor(c.Policy, c.Exceptions),
			opts: translate.Options{
				GenerateValidatingAdmissionPolicy: c.Options.GenerateVAP(),
				CompatibilityVersion:              c.Options.CompatibilityVersion,
				RespectGenerateField:              c.Options.RespectGenerateField,
			},
		})
	}
	return cases
}

// goldenCRDs are the CRDs the golden plans were made with
// (translate/testdata/crds.yaml): without them the Widget and Gadget cases
// would emit nothing to check.
func goldenCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var set manifest.Set
	if err := set.ReadPath(controlplane.RepoPath(t, "translate", "testdata", "crds.yaml"), nil, manifest.AcceptAll); err != nil {
		t.Fatal(err)
	}
	if len(set.CRDs) != 2 {
		t.Fatalf("%d test CRDs, want 2", len(set.CRDs))
	}
	return set.CRDs
}

func translateCase(t *testing.T, c goldenCase) translate.Plan {
	t.Helper()
	plan, err := translate.Translate(c.input, kyverno.NewStaticResolver(goldenCRDs(t)...), c.opts)
	if err != nil {
		t.Fatalf("case %s: translating: %v", c.name, err)
	}
	return plan
}

// planObjects lists a plan's VAPs, then its bindings, as fresh objects a
// client may fill in.
func planObjects(plan translate.Plan) []client.Object {
	var objs []client.Object
	for i := range plan.ValidatingAdmissionPolicies {
		objs = append(objs, plan.ValidatingAdmissionPolicies[i].DeepCopy())
	}
	for i := range plan.Bindings {
		objs = append(objs, plan.Bindings[i].DeepCopy())
	}
	return objs
}

func kindOf(obj client.Object) string {
	t := fmt.Sprintf("%T", obj)
	return t[strings.LastIndex(t, ".")+1:]
}
