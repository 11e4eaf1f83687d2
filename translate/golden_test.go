package translate

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
)

var update = flag.Bool("update", false, "rewrite the golden plan.yaml files")

// goldenOptions is the optional options.yaml of a golden case.
type goldenOptions struct {
	// Generate defaults to true.
	Generate             *bool  `json:"generateValidatingAdmissionPolicy,omitempty"`
	CompatibilityVersion string `json:"compatibilityVersion,omitempty"`
	RespectGenerateField bool   `json:"respectGenerateField,omitempty"`
}

// goldenCase is one testdata directory with a policy.yaml.
type goldenCase struct {
	name  string
	dir   string
	input Input
	opts  Options
}

// splitYAML splits a multi-document YAML stream.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}

// loadGoldenCases finds every directory under testdata with a policy.yaml.
func loadGoldenCases(t testing.TB) []goldenCase {
	var cases []goldenCase
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
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
		c := goldenCase{name: strings.TrimPrefix(filepath.ToSlash(dir), "testdata/"), dir: dir, opts: Options{GenerateValidatingAdmissionPolicy: true}}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var policy kyvernov1.ClusterPolicy
		if err := yaml.UnmarshalStrict(data, &policy); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		c.input.Policy = &policy
		if data, err := os.ReadFile(filepath.Join(dir, "exceptions.yaml")); err == nil {
			for _, doc := range splitYAML(data) {
				var ex kyvernov2.PolicyException
				if err := yaml.UnmarshalStrict(doc, &ex); err != nil {
					t.Fatalf("%s/exceptions.yaml: %v", dir, err)
				}
				c.input.Exceptions = append(c.input.Exceptions, ex)
			}
		}
		if data, err := os.ReadFile(filepath.Join(dir, "options.yaml")); err == nil {
			var o goldenOptions
			if err := yaml.UnmarshalStrict(data, &o); err != nil {
				t.Fatalf("%s/options.yaml: %v", dir, err)
			}
			if o.Generate != nil {
				c.opts.GenerateValidatingAdmissionPolicy = *o.Generate
			}
			c.opts.CompatibilityVersion = o.CompatibilityVersion
			c.opts.RespectGenerateField = o.RespectGenerateField
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
			plan, err := Translate(c.input, NewStaticResolver(testCRDs()...), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, c.input.Policy); diff != "" {
				t.Fatalf("input mutated (-before +after):\n%s", diff)
			}
			got := marshalPlan(t, plan)
			again, _ := Translate(c.input, NewStaticResolver(testCRDs()...), c.opts)
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
		vap := &plan.ValidatingAdmissionPolicies[i]
		user, ours := checkVAPExpressions(&vap.Spec, newestCompatibilityVersion, map[string]bool{})
		if len(user)+len(ours) > 0 {
			t.Errorf("VAP %s does not compile: %s", vap.Name, problemsMessage(append(user, ours...)))
		}
	}
	for _, r := range plan.Rules {
		if r.Verdict != VerdictTranslated && r.Reason == "" {
			t.Errorf("rule %s: verdict %s without reason", r.Rule, r.Verdict)
		}
	}
}
