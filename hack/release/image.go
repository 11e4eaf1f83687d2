// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRoot is the image's user, distroless's "nonroot" (the Deployment
// also sets runAsNonRoot).
const nonRoot = "65532:65532"

// buildImage writes the manager's image, for every linux platform of the
// release, as an OCI image layout in a tar archive (oci-archive, what
// skopeo and crane push): the static binary alone on an empty base, as
// root of the file system, run as a non-root user. No Docker engine and
// no base image from a registry are needed, and the bytes depend only on
// the binaries. It returns the image index's digest, which pins the image
// wherever it is pushed.
func buildImage(o options, managers map[string]string, file string) (v1.Hash, error) {
	platforms := make([]string, 0, len(managers))
	for p := range managers {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	var index v1.ImageIndex = empty.Index
	index = mutate.IndexMediaType(index, types.OCIImageIndex)
	for _, platform := range platforms {
		img, err := platformImage(o, managers[platform], platform)
		if err != nil {
			return v1.Hash{}, err
		}
		goos, goarch, _ := strings.Cut(platform, "/")
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}},
		})
	}
	digest, err := index.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp("", "kyvap-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	// The layout's index.json names the image index by the version (what
	// skopeo's oci-archive:FILE:VERSION and crane push --index read).
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("writing the image layout: %w", err)
	}
	if err := path.AppendIndex(index, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.version})); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the image layout: %w", err)
	}
	return digest, tarDir(dir, file)
}

func platformImage(o options, binary, platform string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "manager", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	config, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	config = config.DeepCopy()
	goos, goarch, _ := strings.Cut(platform, "/")
	config.OS, config.Architecture = goos, goarch
	config.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	config.Config.Entrypoint = []string{"/manager"}
	config.Config.User = nonRoot
	config.Config.WorkingDir = "/"
	config.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "kyvap",
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.source":   "https://github.com/kyvap/kyvap",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	config.History = nil
	return mutate.ConfigFile(img, config)
}

// tarDir archives a directory with sorted entries and no timestamps or
// owners, so that the same files give the same bytes.
func tarDir(dir, file string) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, path := range names {
		rel, _ := filepath.Rel(dir, path)
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if info.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(file, out.Bytes(), 0o644)
}
