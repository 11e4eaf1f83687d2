// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
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
	for _, want := range []string{"install.yaml", "sbom.spdx.json", "manager_v0.0.1-test_", "kyvap-0.0.1-test.tgz", "kyvap-image_v0.0.1-test.oci.tar"} {
		if !strings.Contains(string(first), want) {
			t.Errorf("checksums.txt lacks %s:\n%s", want, first)
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
