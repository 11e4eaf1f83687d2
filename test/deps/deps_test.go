// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package deps guards what the shipped binaries link.
package deps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyvap/kyvap/test/controlplane"
)

// TestBinariesDoNotLinkKyverno: Kyverno's API package drags in cosign, OPA and
// cloud SDKs; kyvap reads Kyverno objects through its own api/ types and
// Kyverno's light API module (github.com/kyverno/api) only, and
// reimplements the CEL libraries of github.com/kyverno/sdk it needs.
func TestBinariesDoNotLinkKyverno(t *testing.T) {
	deps := goList(t, "-deps", "./cmd/...")
	if len(deps) < 100 {
		t.Fatalf("go list returned only %d packages; the check is not looking at the binaries", len(deps))
	}
	for _, dep := range deps {
		if hasPathPrefix(dep, "github.com/kyverno/kyverno") || hasPathPrefix(dep, "github.com/kyverno/sdk") {
			t.Errorf("the shipped binaries link %s", dep)
		}
	}
}

// TestManagerDoesNotLinkTheSimulator: the in-process API-server simulator
// (policytest/vapsim) and the API server's validating-policy admission plugin
// serve `kyvap test` only; the operator enforces through the real API
// server and its own engine, and must not carry either.
func TestManagerDoesNotLinkTheSimulator(t *testing.T) {
	deps := goList(t, "-deps", "./cmd/manager")
	if len(deps) < 100 {
		t.Fatalf("go list returned only %d packages; the check is not looking at the manager", len(deps))
	}
	for _, dep := range deps {
		if hasPathPrefix(dep, "github.com/kyvap/kyvap/policytest/vapsim") || hasPathPrefix(dep, "k8s.io/apiserver/pkg/admission/plugin/policy/validating") {
			t.Errorf("cmd/manager links %s", dep)
		}
	}
}

// TestControllersDoNotImportTheEngine: whether a rule is enforced is decided
// by the translation (Plan), so the reconcilers need no engine.
func TestControllersDoNotImportTheEngine(t *testing.T) {
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, "./controllers/...") {
		if hasPathPrefix(imp, "github.com/kyvap/kyvap/engine") {
			t.Errorf("controllers/ imports %s", imp)
		}
	}
}

// goList runs go list in the repository and returns its words.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}

func hasPathPrefix(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// licenseHeader starts every Go file of the repository (hack/boilerplate.go.txt;
// generated files carry it after their build constraint).
const licenseHeader = "// Copyright 2026 The kyvap Authors.\n// SPDX-License-Identifier: Apache-2.0\n"

// TestLicenseHeaders: every Go file carries the project's license header.
func TestLicenseHeaders(t *testing.T) {
	root := controlplane.RepoPath(t)
	boilerplate, err := os.ReadFile(filepath.Join(root, "hack", "boilerplate.go.txt"))
	if err != nil || string(boilerplate) != licenseHeader {
		t.Fatalf("hack/boilerplate.go.txt is not the license header (%v)", err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.go").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 100 {
		t.Fatalf("only %d Go files found", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if strings.HasPrefix(text, "//go:build") {
			_, text, _ = strings.Cut(text, "\n\n")
		}
		if !strings.HasPrefix(text, licenseHeader) {
			t.Errorf("%s does not start with the license header (hack/boilerplate.go.txt)", f)
		}
	}
}
