// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import "testing"

func TestYAML(t *testing.T) {
	cm := map[string]any{"data": map[string]any{"yaml": "x:\n  - 1\n  - two\ny: {z: w}\n", "a": "b"}}
	runCases(t, newEnv(t, "yaml", "json"), []evalCase{
		// Through JSON, as sigs.k8s.io/yaml decodes: numbers are doubles.
		{name: "map", expr: "yaml.parse('a: 1\\nb: [x, 2.5, true, null]')", want: map[string]any{"a": 1.0, "b": []any{"x", 2.5, true, nil}}},
		{name: "from the object", expr: "yaml.parse(object.data.yaml)", object: cm, want: map[string]any{"x": []any{1.0, "two"}, "true": map[string]any{"z": "w"}}},
		{name: "list", expr: "yaml.parse('- a\\n- b')", want: []any{"a", "b"}},
		{name: "scalar", expr: "yaml.parse('x')", want: "x"},
		{name: "number type", expr: "json.marshal(type(yaml.parse('a: 10').a))", want: `"double"`},
		{name: "empty", expr: "yaml.parse('') == null", want: true},
		{name: "comment only", expr: "yaml.parse('# comment only') == null", want: true},
		{name: "first document only", expr: "yaml.parse('a: 1\\n---\\nb: 2')", want: map[string]any{"a": 1.0}},
		{name: "non-string keys", expr: "yaml.parse('{1: a, true: b, 2.5: c}')", want: map[string]any{"1": "a", "true": "b", "2.5": "c"}},
		{name: "date stays a string", expr: "yaml.parse('a: 2024-01-01')", want: map[string]any{"a": "2024-01-01"}},
		{name: "YAML 1.1 boolean", expr: "yaml.parse('a: yes')", want: map[string]any{"a": true}},
		{name: "hexadecimal", expr: "yaml.parse('a: 0x10')", want: map[string]any{"a": 16.0}},
		{name: "YAML 1.1 on", expr: "yaml.parse('tls: on').tls", want: true},
		{name: "tilde", expr: "yaml.parse('a: ~')", want: map[string]any{"a": nil}},
		{name: "anchors", expr: "yaml.parse('a: &x 1\\nb: *x')", want: map[string]any{"a": 1.0, "b": 1.0}},
		{name: "duplicate keys", expr: "yaml.parse('a: 1\\na: 2')", want: map[string]any{"a": 2.0}},
		{name: "JSON", expr: "yaml.parse('{\"a\": 1}')", want: map[string]any{"a": 1.0}},
		{name: "big integer", expr: "json.marshal(yaml.parse('a: 12345678901234567890'))", want: `{"a":12345678901234567000}`},
		{name: "unclosed", expr: "yaml.parse('a: [')", wantErr: "error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{name: "unclosed flow sequence", expr: "yaml.parse('tls: [true')", wantErr: "error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'"},
		{name: "mapping in a value", expr: "yaml.parse('a: b: c')", wantErr: "error converting YAML to JSON: yaml: mapping values are not allowed in this context"},
		{name: "tab", expr: "yaml.parse('\\t')", wantErr: "error converting YAML to JSON: yaml: found character that cannot start any token"},
		{name: "dyn int", expr: "yaml.parse(dyn(1))", wantErr: "no such overload: parse(yaml.Yaml, int)"},
		{name: "int", expr: "yaml.parse(1)", wantNoComp: "found no matching overload for 'parse' applied to 'yaml.Yaml.(int)'"},
		{name: "variable type", expr: "json.marshal(type(yaml))", want: `"yaml.Yaml"`},
		{name: "marshal yaml", expr: "json.marshal(yaml)", want: `{"YamlIface":{}}`},
	})
}
