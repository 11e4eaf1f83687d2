// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kyvernooracle runs Kyverno's own engine for the differential
// tests (test/classic, test/podsecurity): the pattern oracle, built from
// Kyverno's module outside kyvap's (hack/kyverno-pattern-oracle), which
// reads one JSON input on stdin and answers one line per case.
package kyvernooracle

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyvap/kyvap/test/controlplane"
)

// Build builds the oracle (hack/build-kyverno.sh pattern-oracle, which
// rebuilds it only when its source changed) and returns its path.
func Build(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(controlplane.RepoPath(t), "hack", "build-kyverno.sh"), "pattern-oracle").Output()
	if err != nil {
		t.Fatalf("building Kyverno's engine (the pattern oracle): %v", err)
	}
	return strings.TrimSpace(string(out))
}

// Run runs the oracle on input (as JSON) and returns its answer, one line
// per case, of which there must be want.
func Run(t *testing.T, oracle string, input any, want int) []string {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(oracle)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the oracle: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != want {
		t.Fatalf("the oracle answered %d lines for %d cases", len(lines), want)
	}
	return lines
}
