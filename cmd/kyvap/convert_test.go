// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// patternPolicy has one CEL rule and one pattern rule, which is not
// converted.
const patternPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: mixed}
spec:
  validationFailureAction: Enforce
  rules:
  - name: cel
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {cel: {expressions: [{expression: "object.metadata.name != 'x'"}]}}
  - name: pattern
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {labels: {"tea?": "?*"}}}}
`

func TestConvertPolicies(t *testing.T) {
	dir := t.TempDir()
	replicas := filepath.Join(dir, "replicas.yaml")
	mixed := filepath.Join(dir, "mixed.yaml")
	exception := filepath.Join(dir, "exception.yaml")
	for path, data := range map[string]string{replicas: replicasPolicy, mixed: patternPolicy, exception: conditionalException} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		noStdout   bool
		outputFile string
	}{
		{name: "converted", args: []string{"-f", replicas}, code: 0,
			stdout: []string{"kind: ValidatingPolicy", "name: replicas-max-five", "kyvap.io/converted-from: ClusterPolicy/replicas", "- Deny", "object.spec.replicas <= 5"},
			stderr: []string{"ClusterPolicy/replicas, rule max-five: converted -> replicas-max-five"}},
		{name: "unconvertible rule", args: []string{"-f", mixed}, code: 1,
			stdout: []string{"# NOT CONVERTED: ClusterPolicy/mixed, rule pattern: PatternNotExpressible", "name: mixed-cel"},
			stderr: []string{"NOT CONVERTED: ClusterPolicy/mixed, rule pattern"}},
		{name: "skip unconvertible", args: []string{"-f", mixed, "--skip-unconvertible"}, code: 0,
			stdout: []string{"name: mixed-cel"}, stderr: []string{"NOT CONVERTED: ClusterPolicy/mixed, rule pattern"}},
		{name: "kyverno.io exception", args: []string{"-f", replicas, "-f", exception}, code: 1,
			stderr: []string{"NOT CONVERTED: PolicyException kyverno/big-ones"}},
		{name: "output directory", args: []string{"-f", replicas, "-o", filepath.Join(dir, "out")}, code: 0, noStdout: true,
			outputFile: filepath.Join(dir, "out", "clusterpolicy-replicas.yaml")},
		{name: "no input", args: []string{}, code: 2, stderr: []string{"no input"}},
		{name: "missing file", args: []string{"-f", filepath.Join(dir, "missing.yaml")}, code: 2, stderr: []string{"missing.yaml"}},
		{name: "no policy", args: []string{"-f", exception}, code: 2, stderr: []string{"no ClusterPolicy or Policy"}},
		{name: "tests need -o", args: []string{"-f", "../../test/conformance/pod-controllers"}, code: 2, stderr: []string{"give -o DIR"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"convert"}, c.args...), strings.NewReader(""), &stdout, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, stderr.String())
			}
			for _, want := range c.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
			for _, want := range c.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if c.noStdout && stdout.Len() > 0 {
				t.Errorf("stdout not empty:\n%s", stdout.String())
			}
			if c.outputFile != "" {
				data, err := os.ReadFile(c.outputFile)
				if err != nil || !bytes.Contains(data, []byte("name: replicas-max-five")) {
					t.Errorf("%s: %v\n%s", c.outputFile, err, data)
				}
			}
		})
	}
	var first, second bytes.Buffer
	run([]string{"convert", "-f", replicas, "-f", mixed}, nil, &first, &bytes.Buffer{})
	run([]string{"convert", "-f", replicas, "-f", mixed}, nil, &second, &bytes.Buffer{})
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("output is not deterministic")
	}
}

// TestConvertCheck runs --check on a suite that converts cleanly, and on a
// copy whose expectation is wrong: the check fails on it.
func TestConvertCheck(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"convert", "--check", "-f", "../../test/conformance/pod-controllers", "-o", t.TempDir()}, nil, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "check: converted: 8 rows passed, 0 failed") || !strings.Contains(stdout.String(), "check: source: 8 rows passed, 0 failed") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	dir := t.TempDir()
	for _, name := range []string{"policy.yaml", "resources.yaml", "kyverno-test.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../test/conformance/pod-controllers", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "kyverno-test.yaml" {
			data = bytes.Replace(data, []byte("resources: [pod-good]\n  result: pass"), []byte("resources: [pod-good]\n  result: fail"), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout.Reset()
	if code := run([]string{"convert", "--check", "-f", dir, "-o", t.TempDir()}, nil, &stdout, &bytes.Buffer{}); code != 1 || !strings.Contains(stdout.String(), "check: source: 7 rows passed, 1 failed") {
		t.Fatalf("exit %d, want 1 for a wrong expectation\n%s", code, stdout.String())
	}
	if code := run([]string{"convert", "--check", "-f", "../../test/conformance/pod-controllers/policy.yaml"}, nil, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Fatalf("--check without tests: exit %d, want 2", code)
	}
}
