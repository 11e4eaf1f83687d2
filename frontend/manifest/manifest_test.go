// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"strings"
	"testing"
)

func TestSplitDocumentsKeepsAbsoluteLines(t *testing.T) {
	tests := []struct {
		name  string
		input string
		// want is "index@firstLine" per document.
		want []string
	}{
		{"single", "a: 1\nb: 2\n", []string{"1@1"}},
		{"leading separator", "---\na: 1\n", []string{"1@2"}},
		{"separator with comment", "a: 1\n--- # next\nb: 2\n", []string{"1@1", "2@3"}},
		{"empty documents still count", "a: 1\n---\n---\n# only a comment\n---\nb: 2\n", []string{"1@1", "3@4", "4@6"}},
		{"CRLF", "a: 1\r\n---\r\nb: 2\r\n", []string{"1@1", "2@3"}},
		{"not a separator", "a: |\n  ---x\n", []string{"1@1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, d := range SplitDocuments([]byte(tt.input)) {
				got = append(got, fmt.Sprintf("%d@%d", d.Index, d.FirstLine))
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("documents = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReadAcceptsTabIndentedJSON(t *testing.T) {
	var set Set
	input := "{\n\t\"apiVersion\": \"kyverno.io/v2beta1\",\n\t\"kind\": \"PolicyException\",\n\t\"metadata\": {\"name\": \"e\"}\n}\n"
	if err := set.Read("e.json", []byte(input), AcceptAll); err != nil {
		t.Fatal(err)
	}
	if len(set.Exceptions) != 1 || set.Exceptions[0].Name != "e" {
		t.Errorf("exceptions = %+v, want the v2beta1 exception e", set.Exceptions)
	}
}

func TestReadAddsNothingOnError(t *testing.T) {
	var set Set
	input := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a}\n---\nkind: Secret\napiVersion: v1\n"
	err := set.Read("mixed.yaml", []byte(input), AcceptAll)
	if err == nil || !strings.Contains(err.Error(), "mixed.yaml:5: document 2: unsupported kind v1 Secret") {
		t.Errorf("error = %v, want the Secret at mixed.yaml:5", err)
	}
	if len(set.CRDs) != 0 {
		t.Errorf("CRDs = %d, want none kept from a file that fails", len(set.CRDs))
	}
}
