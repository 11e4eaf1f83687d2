// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import "testing"

// TestJMESPath: Kyverno's JMESPath functions that kyvap's engine
// evaluates for compiled classic rules (test/classic compares them with
// Kyverno's own on generated requests).
func TestJMESPath(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"n": int64(16777217), "list": []any{"b", "a"}, "mixed": []any{"a", int64(1)}}}
	runCases(t, newEnv(t, "jmespath"), []evalCase{
		{name: "regex", expr: "jmespath.regex_match('^a+$', 'aa')", want: true},
		{name: "regex unanchored", expr: "jmespath.regex_match('b', 'abc')", want: true},
		{name: "regex float32 form", expr: "jmespath.regex_match('^16777216$', object.spec.n)", object: obj, want: true},
		{name: "regex of a bool", expr: "jmespath.regex_match('x', true)", wantErr: "invalid type for regex_match(): a bool, where a string or a number is expected"},
		{name: "pattern", expr: "jmespath.pattern_match('w?b*', 'web-1')", want: true},
		{name: "parse json", expr: "jmespath.parse_json('{\"a\": [1]}').a[0]", want: 1.0},
		{name: "parse json invalid", expr: "jmespath.parse_json_valid('{')", want: false},
		{name: "parse yaml", expr: "jmespath.parse_yaml('a: x').a", want: "x"},
		{name: "base64", expr: "jmespath.base64_decode('eHl6')", want: "xyz"},
		{name: "base64 invalid", expr: "jmespath.base64_valid('eHl')", want: false},
		{name: "path", expr: "jmespath.path_canonicalize('/a/../b//c/')", want: "/b/c"},
		{name: "replace", expr: "jmespath.regex_replace_all('h.*', '100h30m', '')", want: "100"},
		{name: "to_string map", expr: "jmespath.to_string({'b': dyn(1), 'a': dyn('<')})", want: `{"a":"\u003c","b":1}`},
		{name: "to_string string", expr: "jmespath.to_string('x')", want: "x"},
		{name: "to_number", expr: "jmespath.to_number('1e3')", want: 1000.0},
		{name: "to_number of a word", expr: "jmespath.to_number('x') == null", want: true},
		{name: "max of numbers", expr: "jmespath.max([dyn(1), dyn(2.5)])", want: 2.5},
		{name: "max of strings", expr: "jmespath.max(object.spec.list)", object: obj, want: "b"},
		{name: "max of empty", expr: "jmespath.max([]) == null", want: true},
		{name: "max mixed", expr: "jmespath.max_valid(object.spec.mixed)", object: obj, want: false},
	})
}
