// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"testing"

	kyvernov2 "github.com/kyvap/kyvap/api/v2"
)

func TestExceptionContains(t *testing.T) {
	entries := []kyvernov2.Exception{
		{PolicyName: "pol", RuleNames: []string{"check-*", "exact"}},
		{PolicyName: "ns/local", RuleNames: []string{"*"}},
	}
	tests := []struct {
		name         string
		entries      []kyvernov2.Exception
		policy, rule string
		want         bool
	}{
		{"exact rule", entries, "pol", "exact", true},
		{"rule pattern", entries, "pol", "check-labels", true},
		{"autogen variant is another name", entries, "pol", "autogen-exact", false},
		{"policy name is not a pattern", []kyvernov2.Exception{{PolicyName: "p*", RuleNames: []string{"*"}}}, "pol", "exact", false},
		{"other policy", entries, "other", "exact", false},
		{"namespaced policy", entries, "ns/local", "anything", true},
		{"no rule names", []kyvernov2.Exception{{PolicyName: "pol"}}, "pol", "exact", false},
		{"no entries", nil, "pol", "exact", false},
	}
	for _, tt := range tests {
		if got := ExceptionContains(tt.entries, tt.policy, tt.rule); got != tt.want {
			t.Errorf("%s: ExceptionContains(%q, %q) = %v, want %v", tt.name, tt.policy, tt.rule, got, tt.want)
		}
	}
}
