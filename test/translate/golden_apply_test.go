// Package translate_test checks that the real API server accepts everything
// the translator emits for its golden cases: the translator type-checks CEL
// itself, but only kube-apiserver's validation is the final word on a
// ValidatingAdmissionPolicy or binding.
package translate_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/internal/manifest"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
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
	input translate.Input
	opts  translate.Options
}

// goldenOptions mirrors the optional options.yaml of a golden case
// (translate/golden_test.go reads the same file).
type goldenOptions struct {
	Generate             *bool  `json:"generateValidatingAdmissionPolicy,omitempty"`
	CompatibilityVersion string `json:"compatibilityVersion,omitempty"`
	RespectGenerateField bool   `json:"respectGenerateField,omitempty"`
}

// loadGoldenCases reads the cases through the CLI's manifest reader, so the
// reader is exercised on every golden input too.
func loadGoldenCases(t *testing.T) []goldenCase {
	t.Helper()
	testdata := controlplane.RepoPath(t, "translate", "testdata")
	var cases []goldenCase
	err := filepath.WalkDir(testdata, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "fuzz" {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "policy.yaml" {
			return nil
		}
		dir := filepath.Dir(path)
		name, err := filepath.Rel(testdata, dir)
		if err != nil {
			return err
		}
		c, err := loadGoldenCase(filepath.ToSlash(name), dir)
		if err != nil {
			return err
		}
		cases = append(cases, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].name < cases[j].name })
	return cases
}

func loadGoldenCase(name, dir string) (goldenCase, error) {
	c := goldenCase{name: name, opts: translate.Options{GenerateValidatingAdmissionPolicy: true}}
	var set manifest.Set
	if err := set.ReadPath(filepath.Join(dir, "policy.yaml"), nil, manifest.AcceptAll); err != nil {
		return c, err
	}
	exceptions := filepath.Join(dir, "exceptions.yaml")
	if _, err := os.Stat(exceptions); err == nil {
		if err := set.ReadPath(exceptions, nil, manifest.AcceptAll); err != nil {
			return c, err
		}
	}
	if len(set.Policies) != 1 {
		return c, fmt.Errorf("%s: %d ClusterPolicies, want 1", dir, len(set.Policies))
	}
	c.input.Policy = &set.Policies[0]
	c.input.Policy.UID = fakePolicyUID
	c.input.Exceptions = set.Exceptions

	data, err := os.ReadFile(filepath.Join(dir, "options.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	var o goldenOptions
	if err := yaml.UnmarshalStrict(data, &o); err != nil {
		return c, fmt.Errorf("%s/options.yaml: %w", dir, err)
	}
	if o.Generate != nil {
		c.opts.GenerateValidatingAdmissionPolicy = *o.Generate
	}
	c.opts.CompatibilityVersion = o.CompatibilityVersion
	c.opts.RespectGenerateField = o.RespectGenerateField
	return c, nil
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
	plan, err := translate.Translate(c.input, translate.NewStaticResolver(goldenCRDs(t)...), c.opts)
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
