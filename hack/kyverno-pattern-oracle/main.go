//go:build ignore

// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kyverno-pattern-oracle answers with Kyverno's own pattern
// matcher (pkg/engine/validate MatchPattern, v1.19.1) what a
// validate.pattern makes of resources: the oracle of test/classic's
// differential run. It is built by hack/build-kyverno.sh pattern-oracle in
// a scratch module outside kyvap's (the ignore build tag keeps it out of kyvap's
// own), and never linked into kyvap.
//
// Input (stdin), one JSON document: {"pattern": ..., "resources": [...]}.
// Output (stdout): one line per resource, in order: pass, fail, skip or
// error, as Kyverno's validate handler reports a pattern rule
// (pkg/engine/handlers/validation/validate_resource.go validatePatterns).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/kyverno/kyverno/pkg/engine/validate"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

type input struct {
	Pattern   json.RawMessage   `json:"pattern"`
	Resources []json.RawMessage `json:"resources"`
}

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var in input
	if err := json.Unmarshal(data, &in); err != nil {
		fail(err)
	}
	// As Kyverno reads a pattern (kyvernov1.FromJSON): plain JSON, numbers
	// as float64.
	var pattern any
	if err := json.Unmarshal(in.Pattern, &pattern); err != nil {
		fail(err)
	}
	for _, raw := range in.Resources {
		// As Kyverno reads a resource (unstructured): integers as int64.
		var resource map[string]any
		if err := utiljson.Unmarshal(raw, &resource); err != nil {
			fail(err)
		}
		fmt.Println(verdict(validate.MatchPattern(logr.Discard(), resource, pattern)))
	}
}

func verdict(err error) string {
	if err == nil {
		return "pass"
	}
	pe, ok := err.(*validate.PatternError)
	switch {
	case !ok:
		return "error"
	case pe.Skip:
		return "skip"
	case pe.Path == "":
		return "error"
	}
	return "fail"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kyverno-pattern-oracle:", err)
	os.Exit(2)
}
