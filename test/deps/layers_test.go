// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kyvap/kyvap/test/controlplane"
)

// module is kyvap's module path.
const module = "github.com/kyvap/kyvap"

// A floor of the house (docs/architecture.md): a package may import one on
// its own floor or below, never one above.
type floor int

const (
	floorTypes     floor = iota + 1 // Kyverno's input types and the policy model
	floorGround                     // the semantics every stage shares: Kyverno's and the API server's
	floorFrontEnds                  // one room per input language, each lowering into the model
	floorBackEnds                   // each reads the model: VAPs, the engine, ValidatingPolicies, scans
	floorSurfaces                   // controllers, webhook, the CLI's features
	floorWiring                     // the manager's wiring and the binaries
)

var floorNames = map[floor]string{
	floorTypes: "types", floorGround: "ground", floorFrontEnds: "front-ends",
	floorBackEnds: "back-ends", floorSurfaces: "surfaces", floorWiring: "wiring",
}

// floors places every package of the module outside hack/ and test/ (a
// package of a longer path prefix wins). A new package must be placed here:
// TestLayers fails on one that is not.
var floors = map[string]floor{
	"api":         floorTypes,
	"model":       floorTypes,
	"kyverno":     floorGround,
	"vap":         floorGround,
	"frontend":    floorFrontEnds,
	"translate":   floorBackEnds,
	"engine":      floorBackEnds,
	"convert":     floorBackEnds,
	"scan":        floorBackEnds,
	"reports":     floorBackEnds,
	"controllers": floorSurfaces,
	"webhook":     floorSurfaces,
	"reporter":    floorSurfaces,
	"policytest":  floorSurfaces,
	"migrate":     floorSurfaces,
	"internal":    floorSurfaces,
	"operator":    floorWiring,
	"cmd":         floorWiring,
}

// floorOf returns the floor of a package of the module (path relative to
// the module), by its longest placed prefix.
func floorOf(rel string) (floor, bool) {
	best, found := "", floor(0)
	for prefix, f := range floors {
		if hasPathPrefix(rel, prefix) && len(prefix) > len(best) {
			best, found = prefix, f
		}
	}
	return found, best != ""
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// modulePackages lists the module's packages outside hack/ and test/ with
// their direct imports and their dependencies (tests excluded).
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if hasPathPrefix(rel, "hack") || hasPathPrefix(rel, "test") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 30 {
		t.Fatalf("go list found only %d packages; the check is not looking at the house", len(pkgs))
	}
	return pkgs
}

// TestLayers: no package imports one that sits above it in the flow
// types → ground → front-ends → back-ends → surfaces → wiring, and every
// package has its floor.
func TestLayers(t *testing.T) {
	for _, p := range modulePackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		own, ok := floorOf(rel)
		if !ok {
			t.Errorf("package %s has no floor: place it in test/deps/layers_test.go and docs/architecture.md", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !hasPathPrefix(imp, module) {
				continue
			}
			impRel := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			theirs, ok := floorOf(impRel)
			if ok && theirs > own {
				t.Errorf("%s (%s) imports %s, which sits above it (%s)", rel, floorNames[own], impRel, floorNames[theirs])
			}
		}
	}
}

// TestLowerFloorsArePure: the model, the ground floor, the front-ends and
// the back-ends import no client, no controller-runtime and no HTTP, and
// depend on neither controller-runtime nor Kyverno's own module; reading a
// cluster is the caller's (a surface's) work. (Packages they use, such as
// the apiserver's CEL environment, may reach client-go indirectly.)
func TestLowerFloorsArePure(t *testing.T) {
	pure := 0
	for _, p := range modulePackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if f, ok := floorOf(rel); !ok || f > floorBackEnds {
			continue
		}
		pure++
		for _, imp := range p.Imports {
			if hasPathPrefix(imp, "sigs.k8s.io/controller-runtime") || hasPathPrefix(imp, "k8s.io/client-go") || imp == "net/http" {
				t.Errorf("%s (%s) imports %s", rel, floorNames[mustFloor(rel)], imp)
			}
		}
		var banned []string
		for _, dep := range p.Deps {
			if hasPathPrefix(dep, "sigs.k8s.io/controller-runtime") || hasPathPrefix(dep, "github.com/kyverno/kyverno") || hasPathPrefix(dep, "github.com/kyverno/sdk") {
				banned = append(banned, dep)
			}
		}
		sort.Strings(banned)
		if len(banned) > 0 {
			t.Errorf("%s depends on %s", rel, strings.Join(banned, ", "))
		}
	}
	if pure < 15 {
		t.Fatalf("only %d packages below the surfaces; the check is not looking at the house", pure)
	}
}

func mustFloor(rel string) floor {
	f, _ := floorOf(rel)
	return f
}

// TestFloorOf pins the placement rule the two tests above rely on.
func TestFloorOf(t *testing.T) {
	for rel, want := range map[string]floor{
		"model": floorTypes, "api/v1": floorTypes, "kyverno/cellib": floorGround, "kyverno/cellib/internal/user": floorGround,
		"frontend/clusterpolicy": floorFrontEnds, "translate": floorBackEnds, "policytest/vapsim": floorSurfaces,
		"internal/version": floorSurfaces, "cmd/kyvap": floorWiring,
	} {
		if got, ok := floorOf(rel); !ok || got != want {
			t.Errorf("floorOf(%q) = %v, %v; want %v", rel, got, ok, want)
		}
	}
	if _, ok := floorOf("modelling"); ok {
		t.Error(`"modelling" must not be placed by the prefix "model"`)
	}
}

// TestArchitectureDocNamesEveryPackage: docs/architecture.md, the map of
// the house, names every package of the module outside hack/ and test/
// (a package of an internal/ folder inside a room goes with its room), and
// README's layout table every top-level room.
func TestArchitectureDocNamesEveryPackage(t *testing.T) {
	root := controlplane.RepoPath(t)
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range modulePackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if i := strings.Index(rel, "/internal/"); i >= 0 {
			rel = rel[:i] // kyverno/cellib/internal/user goes with kyverno/cellib
		}
		if rel == "" || strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "api/") {
			rel, _, _ = strings.Cut(rel, "/") // internal/ and api/ are described as one room each
		}
		if !strings.Contains(string(arch), "`"+rel+"`") && !strings.Contains(string(arch), "`"+rel+"/`") {
			t.Errorf("docs/architecture.md does not name %s", rel)
		}
		top, _, _ := strings.Cut(rel, "/")
		if !strings.Contains(string(readme), "`"+top+"/") {
			t.Errorf("README's layout does not name %s/", top)
		}
	}
}
