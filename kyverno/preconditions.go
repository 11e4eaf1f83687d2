// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"bytes"
	"encoding/json"
)

// NoPreconditions reports whether a rule's raw `preconditions` JSON holds no
// condition, so that Kyverno lets every request through them without
// evaluating any JMESPath. Anything else needs Kyverno's JMESPath engine,
// which kyvap does not have.
//
// It decodes as Kyverno does: api/kyverno/v1/wrappers.go
// ConditionsWrapper.UnmarshalJSON tries a list of conditions, then an
// AnyAllConditions object (encoding/json: keys case-insensitive, unknown
// keys ignored), and pkg/engine/variables/evaluate.go passes
//   - absent or null preconditions (pkg/engine/utils/utils.go
//     TransformConditions),
//   - an empty list (evaluateOldConditions),
//   - an object whose "any" is absent or null and whose "all" is absent,
//     null or empty (evaluateAnyAllConditionsWithContext).
//
// An "any" that is present but empty is not "no preconditions": Kyverno
// then finds no passing condition and skips the rule for every request.
// Whitespace is insignificant JSON, so " {} " and "[ ]" hold no condition
// either. JSON Kyverno cannot decode counts as holding conditions.
func NoPreconditions(raw []byte) bool {
	if len(bytes.TrimSpace(raw)) == 0 {
		return true
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		return len(list) == 0
	}
	var anyAll struct {
		Any *[]json.RawMessage `json:"any"`
		All []json.RawMessage  `json:"all"`
	}
	if json.Unmarshal(raw, &anyAll) != nil {
		return false
	}
	return anyAll.Any == nil && len(anyAll.All) == 0
}
