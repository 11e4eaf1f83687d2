// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
)

// update records the build's fingerprint in reproducible.sum once a
// release built from an empty Go build cache proved identical.
var update = flag.Bool("update", false, "prove the release reproducible from an empty Go build cache and record the build's fingerprint in reproducible.sum")

// reproducibleRecord is where TestReproducible records the fingerprint of
// the build inputs last proven reproducible from an empty cache.
const reproducibleRecord = "hack/release/reproducible.sum"

// TestReproducible builds a release twice from another output directory:
// the artefacts and their checksums must be byte-identical (the packaging:
// tar and OCI layouts, the chart, the SBOM, no timestamps). Building from
// an empty Go build cache (every package compiled and linked again) is
// what make release checks on every release (verifyReproducible); here it
// runs once per change to the build's inputs (the Go version, go.mod,
// go.sum, this command's sources), whose fingerprint reproducible.sum
// records with -update, since it costs minutes (750 s on a cold, busy
// machine) where the rest takes seconds. One platform and the manager
// only; every platform is built the same way.
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
	first := filepath.Join(o.out, "checksums.txt")
	o.out = filepath.Join(t.TempDir(), "elsewhere")
	if err := release(o); err != nil {
		t.Fatal(err)
	}
	if err := sameChecksums(first, filepath.Join(o.out, "checksums.txt")); err != nil {
		t.Fatal(err)
	}

	fingerprint := buildFingerprint(t, o.platforms[0])
	recorded, _ := os.ReadFile(reproducibleRecord)
	if *update || !strings.HasPrefix(string(recorded), fingerprint+" ") {
		start := time.Now()
		if err := verifyReproducible(o); err != nil {
			t.Fatal(err)
		}
		cost := time.Since(start).Round(time.Second)
		line := fmt.Sprintf("%s %s rebuilt from an empty Go build cache in %s\n", fingerprint, o.platforms[0], cost)
		if !*update {
			t.Fatalf("the build's inputs changed since they were last proven reproducible (%s: %q); a release rebuilt from an empty Go build cache is identical (%s): record it with\n\tKUSTOMIZE=%s go test ./hack/release -run TestReproducible -update", reproducibleRecord, strings.TrimSpace(string(recorded)), cost, kustomize)
		}
		if err := os.WriteFile(reproducibleRecord, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded in %s: %s", reproducibleRecord, line)
	}

	checksums, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"install.yaml", "sbom.spdx.json", "manager_v0.0.1-test_", "kyvap-0.0.1-test.tgz", "kyvap-image_v0.0.1-test.oci.tar"} {
		if !strings.Contains(string(checksums), want) {
			t.Errorf("checksums.txt lacks %s:\n%s", want, checksums)
		}
	}
	digest := checkImage(t, o)
	install, err := os.ReadFile(filepath.Join(o.out, "install.yaml"))
	if err != nil || !strings.Contains(string(install), "image: ghcr.io/kyvap/kyvap@"+digest+"\n") {
		t.Errorf("install.yaml does not pin the release's image %s (%v)", digest, err)
	}
	checkChart(t, o, digest)
	sbom, err := os.ReadFile(filepath.Join(o.out, "sbom.spdx.json"))
	if err != nil || !strings.Contains(string(sbom), `"name": "sigs.k8s.io/controller-runtime"`) {
		t.Errorf("the SBOM does not list controller-runtime (%v)", err)
	}
}

// buildFingerprint digests the inputs that decide whether a build from an
// empty cache gives the same bytes: the Go toolchain, the module's
// dependencies and this command (its flags), and the platform.
func buildFingerprint(t *testing.T, platform string) string {
	t.Helper()
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", strings.TrimSpace(string(goVersion)), platform)
	files, err := filepath.Glob("hack/release/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "go.mod", "go.sum")
	sort.Strings(files)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func TestSameChecksumsNamesWhatDiffers(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("11  install.yaml\n22  manager\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("11  install.yaml\n33  manager\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sameChecksums(a, a); err != nil {
		t.Errorf("identical files: %v", err)
	}
	if err := sameChecksums(a, b); err == nil || !strings.Contains(err.Error(), "manager differ") || strings.Contains(err.Error(), "install.yaml") {
		t.Errorf("differing manager: %v", err)
	}
}

func TestReleaseRefusesBadVersions(t *testing.T) {
	for _, v := range []string{"", "1.2.3", "v1.2", "latest"} {
		if err := release(options{version: v, out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "want vMAJOR.MINOR.PATCH") {
			t.Errorf("version %q: %v", v, err)
		}
	}
}

// checkImage reads the OCI archive as a registry client would: one index,
// named by the version, with the platform's image, which runs /manager as
// a non-root user; the binary in its layer is the release's and prints
// its version. It returns the index's digest.
func checkImage(t *testing.T, o options) string {
	t.Helper()
	dir := t.TempDir()
	archive, err := os.Open(filepath.Join(o.out, "kyvap-image_"+o.version+".oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer archive.Close()
	untar(t, archive, dir)
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	manifest, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != o.version {
		t.Fatalf("index.json %+v, want one index named %s", manifest.Manifests, o.version)
	}
	digest := manifest.Manifests[0].Digest
	index, err := root.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(o.platforms) || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.OS+"/"+im.Manifests[0].Platform.Architecture != o.platforms[0] {
		t.Fatalf("image index %+v, want the platforms %v", im.Manifests, o.platforms)
	}
	img, err := index.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	config, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if config.Config.User != nonRoot || len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != "/manager" {
		t.Errorf("image config %+v, want /manager as %s", config.Config, nonRoot)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	content, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer content.Close()
	rootfs := t.TempDir()
	untar(t, content, rootfs)
	built, err := os.ReadFile(filepath.Join(o.out, "manager_"+o.version+"_"+strings.ReplaceAll(o.platforms[0], "/", "_")))
	if err != nil {
		t.Fatal(err)
	}
	inImage, err := os.ReadFile(filepath.Join(rootfs, "manager"))
	if err != nil || !bytes.Equal(built, inImage) {
		t.Fatalf("the image's /manager is not the release's binary (%v)", err)
	}
	if err := os.Chmod(filepath.Join(rootfs, "manager"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(rootfs, "manager"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kyvap "+o.version+" ") {
		t.Errorf("the image's manager --version: %q (%v)", out, err)
	}
	return digest.String()
}

// checkChart loads the packaged chart as helm does and renders it: the
// release's version, and the manager's image pinned by digest.
func checkChart(t *testing.T, o options, digest string) {
	t.Helper()
	c, err := loader.Load(filepath.Join(o.out, "kyvap-"+strings.TrimPrefix(o.version, "v")+".tgz"))
	if err != nil {
		t.Fatalf("loading the packaged chart: %v", err)
	}
	if c.Metadata.Version != strings.TrimPrefix(o.version, "v") || c.Metadata.AppVersion != o.version {
		t.Errorf("chart version %s, appVersion %s", c.Metadata.Version, c.Metadata.AppVersion)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = "kyvap", "kyvap-system"
	install.KubeVersion, err = common.ParseKubeVersion("v1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := install.Run(c, nil)
	if err != nil {
		t.Fatalf("rendering the packaged chart: %v", err)
	}
	if manifest := rel.(*helmrelease.Release).Manifest; !strings.Contains(manifest, `image: "ghcr.io/kyvap/kyvap@`+digest+`"`) {
		t.Errorf("the packaged chart does not pin the image %s", digest)
	}
}

func untar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
