// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import "testing"

func TestNoPreconditions(t *testing.T) {
	tests := []struct {
		raw  string
		want bool
	}{
		{"", true},
		{"  ", true},
		{"null", true},
		{"{}", true},
		{" { } ", true},
		{"[]", true},
		{"[ ]", true},
		{`{"any": null}`, true},
		{`{"all": []}`, true},
		{`{"all": null, "any": null}`, true},
		{`{"other": [{"key": "x"}]}`, true}, // unknown keys: ignored by Kyverno's decoder
		{`{"any": []}`, false},              // no passing condition: Kyverno skips the rule
		{`{"any": [{"key": "{{ request.operation }}", "operator": "Equals", "value": "CREATE"}]}`, false},
		{`{"all": [{"key": "a", "operator": "Equals", "value": "a"}]}`, false},
		{`{"ALL": [{"key": "a", "operator": "Equals", "value": "a"}]}`, false}, // keys are case-insensitive
		{`[{"key": "a", "operator": "Equals", "value": "a"}]`, false},
		{`[null]`, false},
		{`{"all": {}}`, false}, // Kyverno cannot decode it
		{`"x"`, false},
		{`{`, false},
	}
	for _, tt := range tests {
		if got := NoPreconditions([]byte(tt.raw)); got != tt.want {
			t.Errorf("NoPreconditions(%s) = %v, want %v", tt.raw, got, tt.want)
		}
	}
}
