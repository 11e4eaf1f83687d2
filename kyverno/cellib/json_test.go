// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import "testing"

func TestJSON(t *testing.T) {
	cm := map[string]any{
		"metadata": map[string]any{"name": "cm", "labels": map[string]any{"app": "x"}},
		"data":     map[string]any{"a": "b", "json": `{"x": [1, 2.5, "s", null, true], "y": {"z": "w"}}`, "n": int64(1)},
	}
	runCases(t, newEnv(t, "json"), []evalCase{
		// unmarshal: numbers are doubles, as encoding/json decodes into any.
		{name: "unmarshal object", expr: `json.unmarshal('{"a":1,"b":[true,null,"x",1.5]}')`, want: map[string]any{"a": 1.0, "b": []any{true, nil, "x", 1.5}}},
		{name: "unmarshal from the object", expr: "json.unmarshal(object.data.json).x[1]", object: cm, want: 2.5},
		{name: "unmarshal number", expr: "json.unmarshal('1')", want: 1.0},
		{name: "unmarshal number type", expr: "json.marshal(type(json.unmarshal('1')))", want: `"double"`},
		{name: "unmarshal string", expr: `json.unmarshal('"s"')`, want: "s"},
		{name: "unmarshal null", expr: "json.unmarshal('null') == null", want: true},
		{name: "unmarshal truncated", expr: "json.unmarshal('{')", wantErr: "unexpected end of JSON input"},
		{name: "unmarshal empty", expr: "json.unmarshal('')", wantErr: "unexpected end of JSON input"},
		{name: "unmarshal invalid", expr: "json.unmarshal('x')", wantErr: "invalid character 'x' looking for beginning of value"},
		{name: "unmarshal trailing data", expr: `json.unmarshal('{"a":1} x')`, wantErr: "invalid character 'x' after top-level value"},
		{name: "unmarshal not JSON", expr: "json.unmarshal(object.data.a)", object: cm, wantErr: "invalid character 'b' looking for beginning of value"},
		{name: "unmarshal int", expr: "json.unmarshal(1)", wantErr: "unsupported type conversion from 'int' to string"},
		{name: "unmarshal dyn int", expr: "json.unmarshal(object.data.n)", object: cm, wantErr: "unsupported type conversion from 'int' to string"},
		{name: "unmarshal null argument", expr: "json.unmarshal(dyn(null))", wantErr: "type conversion error from 'null_type' to 'string'"},
		{name: "unmarshal no argument", expr: "json.unmarshal()", wantNoComp: "found no matching overload for 'unmarshal' applied to 'json.Json.()'"},

		{name: "marshal map", expr: "json.marshal({'a': 1})", want: `{"a":1}`},
		{name: "marshal list", expr: "json.marshal([1, 2])", want: `[1,2]`},
		{name: "marshal round trip", expr: "json.marshal(json.unmarshal(object.data.json))", object: cm, want: `{"x":[1,2.5,"s",null,true],"y":{"z":"w"}}`},
		{name: "marshal HTML escaping", expr: "json.marshal('s<&>')", want: `"s\u003c\u0026\u003e"`},
		{name: "marshal double", expr: "json.marshal(1.5)", want: `1.5`},
		{name: "marshal negative zero", expr: "json.marshal(-0.0)", want: `-0`},
		{name: "marshal infinity", expr: "json.marshal(1e300 * 1e300)", wantErr: "json: unsupported value: +Inf"},
		{name: "marshal null", expr: "json.marshal(null)", want: `null`},
		{name: "marshal bytes", expr: "json.marshal(b'abc')", want: `"YWJj"`},
		{name: "marshal timestamp", expr: "json.marshal(timestamp('2024-01-01T00:00:00Z'))", want: `"2024-01-01T00:00:00Z"`},
		{name: "marshal duration", expr: "json.marshal(duration('1s'))", want: `1000000000`},
		{name: "marshal uint", expr: "json.marshal(1u)", want: `1`},
		{name: "marshal bool", expr: "json.marshal(true)", want: `true`},
		{name: "marshal the object", expr: "json.marshal(object.metadata)", object: cm, want: `{"labels":{"app":"x"},"name":"cm"}`},
		{name: "marshal int keys", expr: "json.marshal({1: 'a'})", wantErr: "json: failed to convert CEL map to native map: unsupported type conversion from 'int' to string"},
		{name: "marshal nested int keys", expr: "json.marshal({'a': {1: 'b'}})", wantErr: "json: unsupported map key type int64 (original key type: int64)"},
		{name: "marshal nested null", expr: "json.marshal([{'a': null}])", want: `[{"a":null}]`},
		{name: "marshal nested", expr: "json.marshal({'a': {'b': [dyn(1), dyn({'c': 2})]}})", want: `{"a":{"b":[1,{"c":2}]}}`},
		{name: "marshal nested lists", expr: "json.marshal([[1], [2, 3]])", want: `[[1],[2,3]]`},
		{name: "marshal nested bytes", expr: "json.marshal({'a': b'x'})", want: `{"a":"eA=="}`},
		{name: "marshal nested timestamp", expr: "json.marshal({'a': timestamp('2024-01-01T00:00:00Z')})", want: `{"a":"2024-01-01T00:00:00Z"}`},
		{name: "marshal nested duration", expr: "json.marshal([duration('1m')])", want: `[60000000000]`},
		{name: "marshal optional", expr: "json.marshal(optional.of(1))", want: `1`},
		{name: "marshal optional none", expr: "json.marshal(optional.none())", want: `null`},
		{name: "marshal nested optional", expr: "json.marshal({'x': [optional.of(1)]})", want: `{"x":[1]}`},
		{name: "marshal type", expr: "json.marshal(int)", want: `"int"`},
		{name: "marshal dyn", expr: "json.marshal(dyn({'a': 1}))", want: `{"a":1}`},
		// The variable itself: Kyverno serializes its Go struct.
		{name: "marshal json", expr: "json.marshal(json)", want: `{"JsonIface":{}}`},
		{name: "marshal no argument", expr: "json.marshal()", wantNoComp: "found no matching overload for 'marshal' applied to 'json.Json.()'"},

		{name: "variable type", expr: "json.marshal(type(json))", want: `"json.Json"`},
		{name: "variable equality", expr: "json == json", want: true},
		{name: "unknown member", expr: "json.foo('x')", wantNoComp: "undeclared reference to 'foo'"},
	})
}
