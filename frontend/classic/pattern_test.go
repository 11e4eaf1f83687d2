// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/model"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestPatternGolden compiles every testdata/*.yaml pattern and compares the
// CEL (or the refusal) with testdata/*.cel. test/classic proves the
// verdicts; this pins the expressions, byte for byte.
func TestPatternGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, in := range inputs {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := yaml.YAMLToJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			show := func() (string, *model.Refusal) {
				v, fl := PatternVerdict(raw, "object")
				switch {
				case fl != nil:
					return "refused: " + string(fl.Reason) + ": " + fl.Message, fl
				case v.Skips == "false" && v.Fails == "false":
					return v.Passes, nil
				}
				return "passes: " + v.Passes + "\nskips: " + v.Skips + "\nfails: " + v.Fails, nil
			}
			got, fl := show()
			again, _ := show()
			if fl == nil && again != got {
				t.Fatal("the compilation is not deterministic")
			}
			golden := strings.TrimSuffix(in, ".yaml") + ".cel"
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if diff := cmp.Diff(strings.TrimSuffix(string(want), "\n"), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPatternRefusals: each construct not compiled yet is refused with a
// reason that names it and where it stands.
func TestPatternRefusals(t *testing.T) {
	for pattern, want := range map[string]string{
		`{"spec": {"^(containers)": [{"name": "x"}]}}`:                                                        `the existence anchor`,
		`{"spec": {"=(securityContext)": {"(privileged)": true, "runAsNonRoot": true}, "=(hostPID)": false}}`: `the conditional anchor "(privileged)" at /spec/securityContext/ under an equality anchor`,
		`{"spec": {"containers": [{"ports": [{"(name)": "http", "containerPort": 80}]}]}}`:                    `the conditional anchor "(name)" at /spec/containers/0/ports/0/ under nested lists`,
		`{"spec": {"containers": [{"securityContext": {"(privileged)": true, "runAsNonRoot": true}}]}}`:       `the conditional anchor "(privileged)" at /spec/containers/0/securityContext/ below a list's element`,
		`{"spec": {"containers": [{"(name)": "a"}], "initContainers": [{"(name)": "b"}]}}`:                    `the conditional anchor "(name)" at /spec/containers/0/ and at /spec/initContainers/0/`,
		`{"metadata": {"labels": {"app*": "x"}}}`:                                                             `a wildcard key at /metadata/labels/app*/`,
		`{"metadata": {"name": "{{request.namespace}}-x"}}`:                                                   `a variable in "{{request.namespace}}-x" at /metadata/name/`,
		`{"spec": {"replicas": 1e20}}`:                                                                        `the number 1e+20 at /spec/replicas/ (too large to compare exactly)`,
		`{"spec": {"x": [["a"]]}}`:                                                                            `a list of lists at /spec/x/`,
		`{"spec": {"x": "1*"}}`:                                                                               `the wildcard "1*" against a floating-point value`,
		`not json`:                                                                                            `the pattern is not JSON`,
	} {
		_, fl := PatternVerdict([]byte(pattern), "object")
		if fl == nil || !strings.Contains(fl.Message, want) || fl.Reason != "PatternNotExpressible" {
			t.Errorf("%s: got %+v, want a PatternNotExpressible refusal naming %q", pattern, fl, want)
		}
	}
}

// TestPatternBounds: a hostile pattern is refused at once, whatever its
// size.
func TestPatternBounds(t *testing.T) {
	var wide strings.Builder
	wide.WriteString(`{"data": {`)
	for i := range 10000 {
		if i > 0 {
			wide.WriteString(",")
		}
		wide.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `_` + time.Duration(i).String() + `": "v"`)
	}
	wide.WriteString(`}}`)
	deep := strings.Repeat(`{"a": `, 100) + `"v"` + strings.Repeat(`}`, 100)
	for name, pattern := range map[string]string{"10,000 keys": wide.String(), "100 levels": deep} {
		start := time.Now()
		_, fl := PatternVerdict([]byte(pattern), "object")
		if fl == nil {
			t.Errorf("%s: compiled", name)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("%s: took %s", name, elapsed)
		}
	}
}

// TestAnyPattern: the disjunction of the patterns, true for none, and a
// refusal naming the pattern that holds a refused construct.
func TestAnyPattern(t *testing.T) {
	for raw, want := range map[string]string{
		`[]`:                      "true",
		`[{"spec": {"x": true}}]`: `(type(object) == map && (has(object.spec) && (type(object.spec) == map && (has(object.spec.x) && (type(object.spec.x) == list ? dyn(object.spec.x).all(e1, (type(e1) == bool && e1 == true)) : (type(dyn(object.spec.x)) == bool && dyn(object.spec.x) == true))))))`,
	} {
		got, fl := AnyPattern([]byte(raw), "object")
		if fl != nil || got != want {
			t.Errorf("AnyPattern(%s) = %q, %v; want %q", raw, got, fl, want)
		}
	}
	two, fl := AnyPattern([]byte(`[{"a": true}, {"b": false}]`), "object")
	if fl != nil || !strings.HasPrefix(two, "((type(object) == map") || !strings.Contains(two, ") || (type(object) == map") {
		t.Errorf("two patterns: %q, %v; want their disjunction", two, fl)
	}
	for raw, want := range map[string]string{
		`{"spec": {}}`:                "anyPattern is not a list",
		`[{"a": true}, {"(b)": "x"}]`: `the conditional anchor "(b)" at anyPattern[1]/`,
		`[{"spec": {"^(x)": [{}]}}]`:  `the existence anchor "^(x)" at anyPattern[0]/spec/`,
	} {
		if _, fl := AnyPattern([]byte(raw), "object"); fl == nil || !strings.Contains(fl.Message, want) {
			t.Errorf("AnyPattern(%s): %+v, want a refusal naming %q", raw, fl, want)
		}
	}
}

// TestSubstituteConstants: a pattern value that is one variable naming a
// context variable whose value is a string known when compiling is that
// string (the later entry of a name wins); anything else is left as it is.
func TestSubstituteConstants(t *testing.T) {
	variables, fl := ParseContext([][]byte{
		[]byte(`{"name": "uids", "variable": {"value": "9999 | 4000"}}`),
		[]byte(`{"name": "shadowed", "variable": {"value": "a"}}`),
		[]byte(`{"name": "shadowed", "variable": {"jmesPath": "request.object.metadata.name"}}`),
		[]byte(`{"name": "number", "variable": {"value": 3}}`),
	})
	if fl != nil {
		t.Fatal(fl.Message)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"spec": {"runAsUser": "{{ uids }}", "n": 3}}`, `{"spec":{"n":3,"runAsUser":"9999 | 4000"}}`},
		{`{"a": "{{shadowed}}", "b": "{{ number }}", "c": "x-{{ uids }}"}`, `{"a": "{{shadowed}}", "b": "{{ number }}", "c": "x-{{ uids }}"}`},
		{`{"list": [{"=(u)": "{{uids}}"}]}`, `{"list":[{"=(u)":"9999 | 4000"}]}`},
	} {
		got, fl := SubstituteConstants([]byte(tc.in), variables)
		if fl != nil {
			t.Fatalf("%s: %s", tc.in, fl.Message)
		}
		if string(got) != tc.want {
			t.Errorf("SubstituteConstants(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestMessageOfConstants: a message variable known when compiling is
// written into the template as Kyverno writes it.
func TestMessageOfConstants(t *testing.T) {
	variables, fl := ParseContext([][]byte{
		[]byte(`{"name": "uids", "variable": {"value": "9999 | 4000"}}`),
		[]byte(`{"name": "limits", "variable": {"value": {"b": 1.5, "a": [true, null]}}}`),
	})
	if fl != nil {
		t.Fatal(fl.Message)
	}
	scope := RequestScope
	scope.Variables = variables
	got, fl := Message("IDs {{ uids }}, limits {{ limits }}", scope)
	if fl != nil {
		t.Fatal(fl.Message)
	}
	if want := `"IDs 9999 | 4000, limits {\"a\":[true,null],\"b\":1.5}"`; got != want {
		t.Errorf("Message = %s, want %s", got, want)
	}
}

// TestReadsVarying: only a variable whose value may depend on the request
// counts (a value holding no variable loads the same for any object).
func TestReadsVarying(t *testing.T) {
	variables, fl := ParseContext([][]byte{
		[]byte(`{"name": "allowed", "variable": {"value": ["a", "b"]}}`),
		[]byte(`{"name": "owner", "variable": {"value": {"name": "{{ request.object.metadata.name }}"}}}`),
		[]byte(`{"name": "picked", "variable": {"jmesPath": "request.object.metadata.labels"}}`),
	})
	if fl != nil {
		t.Fatal(fl.Message)
	}
	for text, want := range map[string]bool{
		`{"key": "{{ allowed }}"}`:      false,
		`{"key": "{{ owner.name }}"}`:   true,
		`{"key": "{{ picked.team }}"}`:  true,
		`{"key": "{{ request.name }}"}`: false,
	} {
		if got := ReadsVarying(variables, text); got != want {
			t.Errorf("ReadsVarying(%s) = %t, want %t", text, got, want)
		}
		if !Reads(variables, text) && want {
			t.Errorf("Reads(%s) = false where ReadsVarying holds", text)
		}
	}
}
