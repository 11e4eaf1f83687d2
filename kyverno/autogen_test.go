// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"strings"
	"testing"
)

func TestAutogenRuleNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name string
		fn   func(string) string
		rule string
		want string
	}{
		{"pod controllers", AutogenRuleName, "check", "autogen-check"},
		{"cronjob", AutogenCronJobRuleName, "check", "autogen-cronjob-check"},
		{"pod controllers, truncated to 63 bytes", AutogenRuleName, long, ("autogen-" + long)[:63]},
		{"cronjob, truncated to 63 bytes", AutogenCronJobRuleName, long, ("autogen-cronjob-" + long)[:63]},
		{"exactly 63 bytes", AutogenRuleName, strings.Repeat("y", 55), "autogen-" + strings.Repeat("y", 55)},
		{"bytes, not runes", AutogenRuleName, strings.Repeat("é", 30), ("autogen-" + strings.Repeat("é", 30))[:63]},
	}
	for _, tt := range tests {
		if got := tt.fn(tt.rule); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
