package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReproducible builds a release twice, the second time with an empty
// Go build cache (every package compiled and linked again) and from
// another output directory: the artefacts and their checksums must be
// byte-identical. One platform and the manager only, to keep make test
// short; every platform is built the same way.
func TestReproducible(t *testing.T) {
	kustomize := os.Getenv("KUSTOMIZE")
	if kustomize == "" {
		t.Fatal("KUSTOMIZE is not set: run this test through make test, which builds kustomize")
	}
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	o := options{version: "v0.0.1-test", kustomize: kustomize, image: "ghcr.io/kyvap/kyvap", platforms: []string{runtime.GOOS + "/" + runtime.GOARCH}, binaries: []string{"manager"}}
	o.out = t.TempDir()
	if err := release(o); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(o.out, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", t.TempDir())
	o.out = filepath.Join(t.TempDir(), "elsewhere")
	if err := release(o); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(filepath.Join(o.out, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("two builds differ:\n%s\n%s", first, second)
	}
	for _, want := range []string{"install.yaml", "sbom.spdx.json", "manager_v0.0.1-test_"} {
		if !strings.Contains(string(first), want) {
			t.Errorf("checksums.txt lacks %s:\n%s", want, first)
		}
	}
	install, err := os.ReadFile(filepath.Join(o.out, "install.yaml"))
	if err != nil || !strings.Contains(string(install), "image: ghcr.io/kyvap/kyvap:v0.0.1-test") {
		t.Errorf("install.yaml does not pin the release's image (%v)", err)
	}
	sbom, err := os.ReadFile(filepath.Join(o.out, "sbom.spdx.json"))
	if err != nil || !strings.Contains(string(sbom), `"name": "sigs.k8s.io/controller-runtime"`) {
		t.Errorf("the SBOM does not list controller-runtime (%v)", err)
	}
}

func TestReleaseRefusesBadVersions(t *testing.T) {
	for _, v := range []string{"", "1.2.3", "v1.2", "latest"} {
		if err := release(options{version: v, out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "want vMAJOR.MINOR.PATCH") {
			t.Errorf("version %q: %v", v, err)
		}
	}
}
