// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command release writes kyvap's release artefacts into a directory (make
// release VERSION=vX.Y.Z): the CLI and the manager for every platform, the
// manager's image as an OCI archive (built without a Docker engine),
// install.yaml (config/default with the image pinned by digest), the
// packaged Helm chart (pinned likewise), an SPDX SBOM of the binaries'
// modules and checksums.txt. Builds are reproducible: -trimpath,
// no build ID, the version and the commit time from the inputs, no
// timestamps; the same inputs give the same bytes. Every release proves it:
// it is built a second time, from an empty Go build cache, and the two
// must be byte-identical (-verify-reproducible, on by default).
// TestReproducible checks the packaging on every run and the empty-cache
// rebuild once per change to the build's inputs (reproducible.sum).
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// defaultPlatforms are the release's platforms.
var defaultPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// binaries are the commands released, by name.
var binaries = map[string]string{"kyvap": "./cmd/kyvap", "manager": "./cmd/manager"}

type options struct {
	version, out, kustomize, image string
	platforms                      []string
	binaries                       []string
	// verify rebuilds the release from an empty Go build cache into a
	// temporary directory and fails unless both are byte-identical.
	verify bool
}

func main() {
	var o options
	var platforms, only string
	flag.StringVar(&o.version, "version", "", "release version, vX.Y.Z (required)")
	flag.StringVar(&o.out, "out", "dist", "output directory (emptied first)")
	flag.StringVar(&o.kustomize, "kustomize", "bin/kustomize", "kustomize binary for install.yaml")
	flag.StringVar(&o.image, "image", "ghcr.io/kyvap/kyvap", "the manager's image: a repository, to build the image here (an OCI archive) and pin install.yaml and the chart to its digest; or repository@sha256:digest, an image built elsewhere")
	flag.StringVar(&platforms, "platforms", strings.Join(defaultPlatforms, ","), "os/arch list")
	flag.StringVar(&only, "binaries", "kyvap,manager", "commands to build")
	flag.BoolVar(&o.verify, "verify-reproducible", true, "build the release a second time from an empty Go build cache and fail unless the two are byte-identical")
	flag.Parse()
	o.platforms = strings.Split(platforms, ",")
	o.binaries = strings.Split(only, ",")
	if err := release(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

func release(o options) error {
	if !semver.MatchString(o.version) {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH", o.version)
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var built []string
	managers := map[string]string{} // linux platform → manager binary
	for _, name := range o.binaries {
		pkg, ok := binaries[name]
		if !ok {
			return fmt.Errorf("unknown command %q", name)
		}
		for _, platform := range o.platforms {
			goos, goarch, ok := strings.Cut(platform, "/")
			if !ok {
				return fmt.Errorf("platform %q: want os/arch", platform)
			}
			file := filepath.Join(o.out, fmt.Sprintf("%s_%s_%s_%s", name, o.version, goos, goarch))
			cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
				"-ldflags", "-s -w -buildid= -X github.com/kyvap/kyvap/internal/version.Version="+o.version,
				"-o", file, pkg)
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("building %s for %s: %w", name, platform, err)
			}
			built = append(built, file)
			if name == "manager" && goos == "linux" {
				managers[platform] = file
			}
		}
	}
	repository, digest, err := image(o, managers)
	if err != nil {
		return err
	}
	ref := repository + ":" + o.version
	if digest != "" {
		ref = repository + "@" + digest
	}
	if err := installYAML(o, ref); err != nil {
		return err
	}
	if _, err := packChart(o, repository, digest); err != nil {
		return err
	}
	if err := sbom(o, built); err != nil {
		return err
	}
	if err := checksums(o.out); err != nil {
		return err
	}
	if o.verify {
		return verifyReproducible(o)
	}
	return nil
}

// verifyReproducible builds the release again from an empty Go build
// cache (every package compiled and linked anew) into another directory,
// and compares the two checksums.txt.
func verifyReproducible(o options) error {
	cache, err := os.MkdirTemp("", "kyvap-release-gocache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	again, err := os.MkdirTemp("", "kyvap-release-again-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(again)
	second := o
	second.out, second.verify = filepath.Join(again, "dist"), false
	previous, had := os.LookupEnv("GOCACHE")
	if err := os.Setenv("GOCACHE", cache); err != nil {
		return err
	}
	err = release(second)
	if had {
		_ = os.Setenv("GOCACHE", previous)
	} else {
		_ = os.Unsetenv("GOCACHE")
	}
	if err != nil {
		return fmt.Errorf("rebuilding from an empty Go build cache: %w", err)
	}
	return sameChecksums(filepath.Join(o.out, "checksums.txt"), filepath.Join(second.out, "checksums.txt"))
}

// sameChecksums fails, naming the artefacts that differ, unless the two
// checksums.txt are identical.
func sameChecksums(first, second string) error {
	a, err := os.ReadFile(first)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(second)
	if err != nil {
		return err
	}
	if bytes.Equal(a, b) {
		return nil
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(a), "\n") {
		seen[line] = true
	}
	var differ []string
	for _, line := range strings.Split(string(b), "\n") {
		if !seen[line] {
			if _, name, ok := strings.Cut(line, "  "); ok {
				differ = append(differ, name)
			}
		}
	}
	return fmt.Errorf("the release is not reproducible: %s differ between two builds", strings.Join(differ, ", "))
}

// image is the manager's image repository and digest: -image's when it
// has a digest (an image built elsewhere), else the one built here from
// the linux managers (none when no linux manager was built: the image is
// then named by the version's tag).
func image(o options, managers map[string]string) (repository, digest string, err error) {
	repository = o.image
	if name, d, ok := strings.Cut(o.image, "@"); ok {
		return name, d, nil
	}
	if i := strings.LastIndex(repository, ":"); i > strings.LastIndex(repository, "/") {
		repository = repository[:i]
	}
	if len(managers) == 0 {
		return repository, "", nil
	}
	file := filepath.Join(o.out, "kyvap-image_"+o.version+".oci.tar")
	hash, err := buildImage(o, managers, file)
	if err != nil {
		return "", "", fmt.Errorf("building the image: %w", err)
	}
	return repository, hash.String(), nil
}

// installYAML is config/default with the manager's image.
func installYAML(o options, image string) error {
	out, err := exec.Command(o.kustomize, "build", "config/default").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("kustomize build config/default: %s", exit.Stderr)
		}
		return fmt.Errorf("kustomize build config/default: %w", err)
	}
	const shipped = "image: ghcr.io/kyvap/kyvap:latest"
	if !bytes.Contains(out, []byte(shipped)) {
		return fmt.Errorf("config/default has no %q to pin", shipped)
	}
	out = bytes.ReplaceAll(out, []byte(shipped), []byte("image: "+image))
	header := fmt.Sprintf("# kyvap %s: kubectl apply -f install.yaml (after Kyverno's CRDs; docs/install.md)\n", o.version)
	return os.WriteFile(filepath.Join(o.out, "install.yaml"), append([]byte(header), out...), 0o644)
}

// sbom writes an SPDX 2.3 document listing every module linked into the
// binaries (read from their build information).
func sbom(o options, files []string) error {
	type pkg struct {
		SPDXID           string `json:"SPDXID"`
		Name             string `json:"name"`
		VersionInfo      string `json:"versionInfo"`
		DownloadLocation string `json:"downloadLocation"`
		Checksums        []any  `json:"checksums,omitempty"`
	}
	modules := map[string]pkg{}
	for _, f := range files {
		info, err := buildinfo.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading the build information of %s: %w", f, err)
		}
		for _, d := range info.Deps {
			m := d
			if d.Replace != nil {
				m = d.Replace
			}
			p := pkg{Name: m.Path, VersionInfo: m.Version, DownloadLocation: "https://proxy.golang.org/" + strings.ToLower(m.Path) + "/@v/" + m.Version + ".zip"}
			if m.Sum != "" {
				p.Checksums = []any{map[string]string{"algorithm": "SHA256", "checksumValue": m.Sum}}
			}
			modules[m.Path+"@"+m.Version] = p
		}
	}
	keys := make([]string, 0, len(modules))
	for k := range modules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var packages []pkg
	for i, k := range keys {
		p := modules[k]
		p.SPDXID = fmt.Sprintf("SPDXRef-Package-%d", i+1)
		packages = append(packages, p)
	}
	doc := map[string]any{
		"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
		"name":              "kyvap-" + o.version,
		"documentNamespace": "https://github.com/kyvap/kyvap/releases/" + o.version + "/sbom",
		"creationInfo":      map[string]any{"creators": []string{"Tool: kyvap hack/release"}, "created": "1970-01-01T00:00:00Z"},
		"packages":          packages,
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "sbom.spdx.json"), append(data, '\n'), 0o644)
}

// checksums writes checksums.txt: the SHA-256 of every file, sorted.
func checksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == "checksums.txt" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), e.Name())
	}
	return os.WriteFile(filepath.Join(dir, "checksums.txt"), []byte(b.String()), 0o644)
}
