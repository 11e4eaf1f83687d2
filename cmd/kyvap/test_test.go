// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const passingCase = "../../test/conformance/kyverno/check-deployment-namespace-cel"

// failingCase writes a test whose expectation contradicts the policy.
func failingCase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: wrong}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: team, rule: team-label, kind: ConfigMap, resources: [bad], result: pass}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: team}
spec:
  rules:
  - name: team-label
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      cel:
        expressions: [{expression: "has(object.metadata.labels)", message: "labels"}]
`,
		"resources.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRunTestExitCodes(t *testing.T) {
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "kyverno-test.yaml"), []byte("apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\npolicies: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"passing suite", []string{"test", passingCase}, 0, "2 passed, 0 failed", ""},
		{"failing suite", []string{"test", failingCase(t)}, 1, "0 passed, 1 failed", ""},
		{"broken test file", []string{"test", broken}, 2, "", "kyverno-test.yaml:3: document 1: invalid YAML"},
		{"missing directory", []string{"test", filepath.Join(empty, "nope")}, 2, "", "no such file or directory"},
		{"no directory", []string{"test"}, 2, "", "no test directory given"},
		{"bad output", []string{"test", "-o", "yaml", passingCase}, 2, "", "-o yaml: want text, json or junit"},
		{"no tests found", []string{"test", empty}, 0, "0 passed, 0 failed", "no kyverno-test.yaml found"},
		{"no tests found, required", []string{"test", "--require-tests", empty}, 2, "", "no kyverno-test.yaml found"},
		{"other file name", []string{"test", "--file-name", "other.yaml", passingCase}, 0, "0 passed, 0 failed", "no other.yaml found"},
		{"flags after the directory", []string{"test", passingCase, "-o", "json"}, 0, `"passed": 2`, ""},
		{"help", []string{"test", "-h"}, 0, "kyvap test [flags] DIR...", ""},
		{"cluster flags without --cluster", []string{"test", "--kubeconfig", "x", passingCase}, 2, "", "need --cluster"},
		{"a remote cluster is refused", []string{"test", "--cluster", "--kubeconfig", remoteKubeconfig(t), passingCase}, 2, "", "is not on this machine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, strings.NewReader(""), &stdout, &stderr); code != tt.wantCode {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestRunTestJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"test", "-o", "json", failingCase(t)}, strings.NewReader(""), &stdout, &stderr); code != 1 {
		t.Fatalf("exit code = %d, want 1; stderr: %s", code, stderr.String())
	}
	var out struct {
		Tests []struct {
			Name string `json:"name"`
			Rows []struct {
				Expected string `json:"expected"`
				VAP      struct {
					Result string `json:"result"`
					Match  *bool  `json:"match"`
				} `json:"vap"`
				Engine struct {
					Result string `json:"result"`
				} `json:"engine"`
				Status string `json:"status"`
				Reason string `json:"reason"`
			} `json:"rows"`
		} `json:"tests"`
		Summary struct {
			Passed, Failed, Skipped int
		} `json:"summary"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if len(out.Tests) != 1 || len(out.Tests[0].Rows) != 1 || out.Summary.Failed != 1 {
		t.Fatalf("decoded = %+v", out)
	}
	row := out.Tests[0].Rows[0]
	if row.Expected != "pass" || row.VAP.Result != "fail" || row.Engine.Result != "fail" || row.Status != "fail" ||
		row.VAP.Match == nil || *row.VAP.Match || !strings.Contains(row.Reason, "VAP path: want pass, got fail") {
		t.Errorf("row = %+v", row)
	}
}

// remoteKubeconfig is a kubeconfig for a server that is not on this machine.
func remoteKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := `apiVersion: v1
kind: Config
clusters: [{name: remote, cluster: {server: "https://api.example.com:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: remote, context: {cluster: remote, user: u}}]
current-context: remote
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunTestAppliesNoKyvernoConfig checks that kyvap test, like kyverno
// test, applies none of Kyverno's global configuration (unlike kyvap
// translate's default, the chart defaults): resources that the chart's
// resource filters skip (anything in kube-system, a ReplicaSet) are still
// evaluated.
func TestRunTestAppliesNoKyvernoConfig(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: filtered-by-chart-defaults}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: team, rule: team-label, kind: ConfigMap, resources: [in-kube-system], result: fail}
- {policy: team, rule: team-label, kind: ReplicaSet, resources: [rs], result: fail}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: team}
spec:
  validationFailureAction: Enforce
  rules:
  - name: team-label
    match: {any: [{resources: {kinds: [ConfigMap, ReplicaSet]}}]}
    validate:
      cel:
        expressions: [{expression: "has(object.metadata.labels)", message: "labels"}]
`,
		"resources.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: in-kube-system, namespace: kube-system}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs, namespace: default}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: c, image: busybox}]}
`,
	})
	res := runCLI("", "test", dir)
	if res.code != 0 || !strings.Contains(res.stdout, "2 passed, 0 failed") {
		t.Errorf("exit code %d, want 0 and both results as expected\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
}

// TestRunTestJUnit: -o junit is JUnit XML a CI system reads: the failing
// case carries a failure with each path's result, the counts add up.
func TestRunTestJUnit(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"test", "-o", "junit", failingCase(t), "../../test/conformance/runtime-errors"}, strings.NewReader(""), &stdout, &stderr); code != 1 {
		t.Fatalf("exit code = %d, want 1; stderr: %s", code, stderr.String())
	}
	var out struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("stdout is not XML: %v\n%s", err, stdout.String())
	}
	if len(out.Suites) != 2 || out.Tests != 7 || out.Failures != 1 {
		t.Fatalf("decoded %+v\n%s", out, stdout.String())
	}
	failures := 0
	for _, s := range out.Suites {
		if len(s.Cases) != s.Tests {
			t.Errorf("suite %s: %d cases, tests=%d", s.Name, len(s.Cases), s.Tests)
		}
		for _, c := range s.Cases {
			if c.Failure != nil {
				failures++
				if !strings.Contains(c.Failure.Message, "VAP ") || !strings.Contains(c.Failure.Message, "engine ") {
					t.Errorf("failure of %s does not say what each path gave: %q", c.Name, c.Failure.Message)
				}
			}
		}
	}
	if failures != 1 {
		t.Errorf("%d failing cases, want 1", failures)
	}
}

// TestRunTestDetailedResults: --detailed-results adds each row's message.
func TestRunTestDetailedResults(t *testing.T) {
	var plain, detailed bytes.Buffer
	run([]string{"test", "../../test/conformance/runtime-errors"}, strings.NewReader(""), &plain, &bytes.Buffer{})
	if code := run([]string{"test", "--detailed-results", "../../test/conformance/runtime-errors"}, strings.NewReader(""), &detailed, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(plain.String(), "MESSAGE") || !strings.Contains(detailed.String(), "MESSAGE") || !strings.Contains(detailed.String(), "data.required must be yes") {
		t.Errorf("plain:\n%s\ndetailed:\n%s", plain.String(), detailed.String())
	}
}
