// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import "testing"

func TestCompatibilityVersionOfServer(t *testing.T) {
	for in, want := range map[string]string{"v1.37.1": "1.36", "v1.34.0-rc.1": "1.33", "1.40.2+k3s1": "1.39"} {
		if got, err := CompatibilityVersionOfServer(in); err != nil || got != want {
			t.Errorf("CompatibilityVersionOfServer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "v2.0.0", "v1.0.3", "banana"} {
		if got, err := CompatibilityVersionOfServer(in); err == nil {
			t.Errorf("CompatibilityVersionOfServer(%q) = %q, want an error", in, got)
		}
	}
}
