// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkCorpus times Run per test case of the repository's corpus
// (test/conformance): translation of the policies both ways plus the
// evaluation of every expected result on both paths.
func BenchmarkCorpus(b *testing.B) {
	root := filepath.Join("..", "test", "conformance")
	suites, err := Load(root)
	if err != nil {
		b.Fatal(err)
	}
	for i := range suites {
		s := &suites[i]
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(s.Path), filepath.ToSlash(root)+"/"), "/kyverno-test.yaml")
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if r := Run(context.Background(), s, Options{}); r.Failed() {
					b.Fatalf("%s fails: %s", s.Path, r.Summary)
				}
			}
		})
	}
}
