// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// packChart writes charts/kyvap as `helm package` does (a gzipped tar of
// kyvap/...), with the release's version and image: Chart.yaml's version
// (SemVer, without the v) and appVersion, and values.yaml's repository and
// digest (empty: the tag, appVersion). Entries are sorted and carry no
// timestamps, so the same chart gives the same bytes.
func packChart(o options, repository, digest string) (string, error) {
	const dir = "charts/kyvap"
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	version := strings.TrimPrefix(o.version, "v")
	edits := map[string][][2]string{
		"Chart.yaml":  {{"\nversion: 0.0.0-dev\n", "\nversion: " + version + "\n"}, {"\nappVersion: latest\n", "\nappVersion: " + o.version + "\n"}},
		"values.yaml": {{"\n  repository: ghcr.io/kyvap/kyvap\n", "\n  repository: " + repository + "\n"}, {"\n  digest: \"\"\n", "\n  digest: \"" + digest + "\"\n"}},
	}
	var out bytes.Buffer
	gz, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(gz)
	for _, path := range names {
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		for _, edit := range edits[rel] {
			if !bytes.Contains(data, []byte(edit[0])) {
				return "", fmt.Errorf("%s has no %q to set", path, strings.TrimSpace(edit[0]))
			}
			data = bytes.Replace(data, []byte(edit[0]), []byte(edit[1]), 1)
		}
		h := &tar.Header{Name: "kyvap/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return "", err
		}
		if _, err := tw.Write(data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	file := filepath.Join(o.out, "kyvap-"+version+".tgz")
	return file, os.WriteFile(file, out.Bytes(), 0o644)
}
