// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import "sort"

// keys are a map's keys, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
