// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package translatetest holds test helpers over the translator's golden
// cases (translate/testdata): one loader for the translator's own golden and
// parity tests, its benchmarks, and the real-API-server suite in
// test/translate. It does not import translate, so the translator's
// in-package tests can use it.
package translatetest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
)

// GoldenCase is one directory of testdata holding a policy.yaml, with an
// optional exceptions.yaml (PolicyExceptions, several documents) and
// options.yaml (GoldenOptions).
type GoldenCase struct {
	// Name is the directory relative to testdata, with forward slashes.
	Name string
	// Dir is the directory's path.
	Dir        string
	Policy     *kyvernov1.ClusterPolicy
	Exceptions []kyvernov2.PolicyException
	Options    GoldenOptions
}

// GoldenOptions is a case's options.yaml: the translation options it runs
// with.
type GoldenOptions struct {
	// Generate is translate.Options.GenerateValidatingAdmissionPolicy;
	// absent means true.
	Generate             *bool  `json:"generateValidatingAdmissionPolicy,omitempty"`
	CompatibilityVersion string `json:"compatibilityVersion,omitempty"`
	RespectGenerateField bool   `json:"respectGenerateField,omitempty"`
}

// GenerateVAP is Generate with its default.
func (o GoldenOptions) GenerateVAP() bool { return o.Generate == nil || *o.Generate }

// LoadGoldenCases reads every case under testdata (but not testdata/fuzz),
// sorted by name. Files are decoded strictly: a misspelt field in a case is
// an error, not a silently different input.
func LoadGoldenCases(t testing.TB, testdata string) []GoldenCase {
	t.Helper()
	var cases []GoldenCase
	err := filepath.WalkDir(testdata, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "fuzz" {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "policy.yaml" {
			return nil
		}
		dir := filepath.Dir(path)
		name, err := filepath.Rel(testdata, dir)
		if err != nil {
			return err
		}
		c, err := loadGoldenCase(filepath.ToSlash(name), dir)
		if err != nil {
			return err
		}
		cases = append(cases, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	return cases
}

func loadGoldenCase(name, dir string) (GoldenCase, error) {
	c := GoldenCase{Name: name, Dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, "policy.yaml"))
	if err != nil {
		return c, err
	}
	c.Policy = &kyvernov1.ClusterPolicy{}
	if err := yaml.UnmarshalStrict(data, c.Policy); err != nil {
		return c, fmt.Errorf("%s/policy.yaml: %w", dir, err)
	}
	if data, err := readOptional(filepath.Join(dir, "exceptions.yaml")); err != nil {
		return c, err
	} else if data != nil {
		for _, doc := range SplitYAML(data) {
			var ex kyvernov2.PolicyException
			if err := yaml.UnmarshalStrict(doc, &ex); err != nil {
				return c, fmt.Errorf("%s/exceptions.yaml: %w", dir, err)
			}
			c.Exceptions = append(c.Exceptions, ex)
		}
	}
	if data, err := readOptional(filepath.Join(dir, "options.yaml")); err != nil {
		return c, err
	} else if data != nil {
		if err := yaml.UnmarshalStrict(data, &c.Options); err != nil {
			return c, fmt.Errorf("%s/options.yaml: %w", dir, err)
		}
	}
	return c, nil
}

// readOptional reads a file, or returns nil when there is none.
func readOptional(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// SplitYAML splits a multi-document YAML stream into its non-empty
// documents.
func SplitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}
