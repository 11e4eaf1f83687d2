// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/manifest"
)

// writeFiles creates files (path relative to dir → content) and returns dir.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const okPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: team
spec:
  validationFailureAction: Enforce
  rules:
  - name: team-label
    match:
      any:
      - resources:
          kinds: [ConfigMap]
    validate:
      cel:
        expressions:
        - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
          message: "a team label is required"
`

const okResources = `apiVersion: v1
kind: ConfigMap
metadata: {name: good, labels: {team: a}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: bad}
---
apiVersion: v1
kind: Namespace
metadata: {name: ns}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: bad}
`

const okTest = `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata:
  name: team
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: team, rule: team-label, kind: ConfigMap, resources: [good], result: pass}
- {policy: team, rule: team-label, kind: ConfigMap, resources: [bad], result: fail}
`

func TestLoad(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a/kyverno-test.yaml": okTest,
		"a/policy.yaml":       okPolicy,
		"a/resources.yaml":    okResources,
		"b/other.yaml":        okTest, // not a test file name
	})
	suites, err := Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(suites) != 1 {
		t.Fatalf("got %d suites, want 1", len(suites))
	}
	s := suites[0]
	if s.Name != "team" || len(s.Policies) != 1 || len(s.Test.Results) != 2 {
		t.Errorf("suite = %q, %d policies, %d results", s.Name, len(s.Policies), len(s.Test.Results))
	}
	// The duplicate ConfigMap "bad" is dropped with a warning, as Kyverno does.
	if len(s.Resources) != 3 {
		t.Errorf("got %d resources, want 3 (duplicate dropped)", len(s.Resources))
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "duplicated resource ConfigMap default/bad") {
		t.Errorf("warnings = %q", s.Warnings)
	}
	// Namespaced kinds get "default", cluster-scoped ones nothing.
	for _, r := range s.Resources {
		want := "default"
		if r.Object.GetKind() == "Namespace" {
			want = ""
		}
		if got := r.Object.GetNamespace(); got != want {
			t.Errorf("%s namespace = %q, want %q", r.Key(), got, want)
		}
	}

	// --file-name, and a file path instead of a directory.
	if suites, err := LoadNamed(dir, "other.yaml"); err == nil || len(suites) != 0 {
		t.Errorf("LoadNamed(other.yaml) = %d suites, %v; want an error (policy.yaml is not next to it)", len(suites), err)
	}
	if suites, err := Load(filepath.Join(dir, "a", "kyverno-test.yaml")); err != nil || len(suites) != 1 {
		t.Errorf("Load(file) = %d suites, %v", len(suites), err)
	}
}

func TestLoadConformanceCorpus(t *testing.T) {
	suites, err := Load("../test/conformance")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(suites) < 25 {
		t.Errorf("got %d suites, want at least 25", len(suites))
	}
	for _, s := range suites {
		if len(s.Test.Results) == 0 {
			t.Errorf("%s: no results", s.Path)
		}
		if len(s.Policies) == 0 && len(s.ValidatingPolicies) == 0 {
			t.Errorf("%s: no ClusterPolicy nor ValidatingPolicy", s.Path)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// want is a substring of the error; file and line are checked too.
		want     string
		wantFile string
		wantLine int
	}{
		{
			name:     "invalid YAML",
			files:    map[string]string{"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\npolicies: [a\n"},
			want:     "invalid YAML",
			wantFile: "kyverno-test.yaml", wantLine: 3,
		},
		{
			name:     "unknown field",
			files:    map[string]string{"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: x}\npolices: [policy.yaml]\n"},
			want:     `unknown field "polices"`,
			wantFile: "kyverno-test.yaml", wantLine: 4,
		},
		{
			name:     "wrong type, located by its path",
			files:    map[string]string{"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nresources: [r.yaml]\nresults:\n- policy: p\n  result: pass\n  resources: [yes]\n"},
			want:     "field results.resources: cannot use a JSON bool as string",
			wantFile: "kyverno-test.yaml", wantLine: 7,
		},
		{
			name:     "deprecated schema without apiVersion",
			files:    map[string]string{"kyverno-test.yaml": "name: old\npolicies: [p.yaml]\n"},
			want:     "apiVersion and kind are required",
			wantFile: "kyverno-test.yaml",
		},
		{
			name:     "deprecated top-level name",
			files:    map[string]string{"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nname: old\n"},
			want:     "use metadata.name",
			wantFile: "kyverno-test.yaml", wantLine: 3,
		},
		{
			name:     "invalid result",
			files:    map[string]string{"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nresults:\n- policy: p\n  result: maybe\n"},
			want:     `result "maybe": want pass, fail, skip, warn or error`,
			wantFile: "kyverno-test.yaml", wantLine: 5,
		},
		{
			name:     "invalid operation",
			files:    map[string]string{"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nresults:\n- policy: p\n  result: pass\n  operation: PATCH\n"},
			want:     `operation "PATCH"`,
			wantFile: "kyverno-test.yaml", wantLine: 6,
		},
		{
			name:     "missing policy file",
			files:    map[string]string{"kyverno-test.yaml": okTest},
			want:     "no such file or directory",
			wantFile: "policy.yaml",
		},
		{
			name: "unsupported kind in a policy file",
			files: map[string]string{
				"kyverno-test.yaml": okTest, "resources.yaml": okResources,
				"policy.yaml": okPolicy + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			},
			want:     "unsupported kind v1 ConfigMap in a policy file",
			wantFile: "policy.yaml", wantLine: 19,
		},
		{
			name: "policy field of the wrong type",
			files: map[string]string{
				"kyverno-test.yaml": okTest, "resources.yaml": okResources,
				"policy.yaml": "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec:\n  rules: nope\n",
			},
			want:     `ClusterPolicy "p": field spec.rules: cannot use a JSON string`,
			wantFile: "policy.yaml", wantLine: 1,
		},
		{
			name: "resource without a name",
			files: map[string]string{
				"kyverno-test.yaml": okTest, "policy.yaml": okPolicy,
				"resources.yaml": "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
			},
			want:     "metadata.name is required",
			wantFile: "resources.yaml", wantLine: 1,
		},
		{
			name: "values with an invalid operation",
			files: map[string]string{
				"kyverno-test.yaml": okTest + "variables: values.yaml\n", "policy.yaml": okPolicy, "resources.yaml": okResources,
				"values.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Values\nglobalValues:\n  request.operation: PATCH\n",
			},
			want:     `globalValues: invalid request.operation value "PATCH"`,
			wantFile: "values.yaml", wantLine: 4,
		},
		{
			name: "values with an unknown field",
			files: map[string]string{
				"kyverno-test.yaml": okTest + "variables: values.yaml\n", "policy.yaml": okPolicy, "resources.yaml": okResources,
				"values.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Values\nnamespaceSelectors: []\n",
			},
			want:     `unknown field "namespaceSelectors"`,
			wantFile: "values.yaml", wantLine: 3,
		},
		{
			name: "user info of the wrong kind",
			files: map[string]string{
				"kyverno-test.yaml": okTest + "userinfo: user.yaml\n", "policy.yaml": okPolicy, "resources.yaml": okResources,
				"user.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Values\n",
			},
			want:     "want cli.kyverno.io/v1alpha1 UserInfo",
			wantFile: "user.yaml", wantLine: 1,
		},
		{
			name: "role without a namespace",
			files: map[string]string{
				"kyverno-test.yaml": okTest + "userinfo: user.yaml\n", "policy.yaml": okPolicy, "resources.yaml": okResources,
				"user.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: UserInfo\nroles: [admin]\nuserInfo: {username: a}\n",
			},
			want: `role "admin": want namespace:name`,
		},
		{
			name: "exception of the wrong kind",
			files: map[string]string{
				"kyverno-test.yaml": okTest + "exceptions: [ex.yaml]\n", "policy.yaml": okPolicy, "resources.yaml": okResources,
				"ex.yaml": okPolicy,
			},
			want: "in an exceptions file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			_, err := Load(dir)
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
			var me *manifest.Error
			if !errors.As(err, &me) {
				t.Fatalf("error %v is not a *manifest.Error", err)
			}
			if tt.wantFile != "" && filepath.Base(me.File) != tt.wantFile {
				t.Errorf("file = %s, want %s", me.File, tt.wantFile)
			}
			if tt.wantLine != 0 && me.Line != tt.wantLine {
				t.Errorf("line = %d, want %d (%v)", me.Line, tt.wantLine, err)
			}
		})
	}
}

func TestLoadIgnoredPolicies(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kyverno-test.yaml": okTest,
		"resources.yaml":    okResources,
		"policy.yaml": okPolicy + `---
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: local, namespace: team-a}
spec: {rules: []}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: vap}
spec: {}
`,
	})
	suites, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := suites[0].Ignored
	if len(got) != 1 || got[0].Kind != "ValidatingAdmissionPolicy" {
		t.Errorf("ignored = %+v", got)
	}
	// A namespaced Policy is read, carried as a ClusterPolicy of kind Policy.
	var local *kyvernov1.ClusterPolicy
	for i := range suites[0].Policies {
		if suites[0].Policies[i].Name == "local" {
			local = &suites[0].Policies[i]
		}
	}
	if local == nil || local.Kind != "Policy" || local.Namespace != "team-a" {
		t.Errorf("the namespaced Policy was not loaded: %+v", suites[0].Policies)
	}
}

func TestIsLocal(t *testing.T) {
	for host, want := range map[string]bool{
		"https://127.0.0.1:6443": true, "https://[::1]:443": true, "https://localhost:8443": true, "127.0.0.1:6443": true,
		"https://10.0.0.1:6443": false, "https://api.example.com": false, "https://localhost.example.com": false,
	} {
		if got := IsLocal(&rest.Config{Host: host}); got != want {
			t.Errorf("IsLocal(%q) = %v, want %v", host, got, want)
		}
	}
}
