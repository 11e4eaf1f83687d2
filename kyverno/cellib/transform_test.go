// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import "testing"

func TestTransform(t *testing.T) {
	pod := map[string]any{
		"metadata": map[string]any{"name": "p", "labels": map[string]any{"app": "x"}},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "a", "image": "nginx", "ports": []any{map[string]any{"containerPort": int64(80)}}},
			map[string]any{"name": "b", "image": "redis"},
		}},
	}
	const (
		keys   = "[{'name':'a'},{'name':'b'}]"
		values = "[{'value':'x'},{'value':'y'}]"
	)
	runCases(t, newEnv(t, "transform"), []evalCase{
		{name: "zip", expr: "listObjToMap(" + keys + ", " + values + ", 'name', 'value')", want: map[string]any{"a": "x", "b": "y"}},
		{name: "prefixed", expr: "transform.listObjToMap([{'name':'a'}], [{'value':'x'}], 'name', 'value')", want: map[string]any{"a": "x"}},
		{name: "last key wins", expr: "listObjToMap([{'name':'a'},{'name':'a'}], " + values + ", 'name', 'value')", want: map[string]any{"a": "y"}},
		{name: "missing value field is null", expr: "listObjToMap([{'name':'a'}], [{'other':'x'}], 'name', 'value')", want: map[string]any{"a": nil}},
		{name: "empty", expr: "listObjToMap([], [], 'name', 'value')", want: map[string]any{}},
		{name: "nested value", expr: "listObjToMap([{'name':'a'}], [{'value': {'x': [1, 2]}}], 'name', 'value')['a']['x'][1]", want: int64(2)},
		{name: "request objects", expr: "listObjToMap(object.spec.containers, object.spec.containers, 'name', 'image')", object: pod, want: map[string]any{"a": "nginx", "b": "redis"}},
		{name: "request nested value", expr: "listObjToMap(object.spec.containers, object.spec.containers, 'name', 'ports')['a'][0].containerPort", object: pod, want: int64(80)},
		{name: "request maps", expr: "listObjToMap([object.metadata], [object.metadata.labels], 'name', 'app')", object: pod, want: map[string]any{"p": "x"}},
		{name: "lengths differ", expr: "listObjToMap([{'name':'a'}], [], 'name', 'value')",
			wantErr: "listObjToMap must take lists of equal length. list1: 1, list2: 0"},
		{name: "missing key field", expr: "listObjToMap([{'other':'a'}], [{'value':'x'}], 'name', 'value')",
			wantErr: "the passed key name cannot be handled as a string in the key object list"},
		{name: "key not a string", expr: "listObjToMap([{'name':1}], [{'value':'x'}], 'name', 'value')",
			wantErr: "the passed key name cannot be handled as a string in the key object list"},
		{name: "key object with int keys", expr: "listObjToMap([{1:'a'}], [{'value':'x'}], 'name', 'value')",
			wantErr: "failed to convert key to a string, int64"},
		{name: "value object with int keys", expr: "listObjToMap([{'name':'a'}], [{1:'x'}], 'name', 'value')",
			wantErr: "object cannot be handled as a map string to any in the value object list"},
		// Kyverno's unchecked type assertions panic; cel-go reports an
		// internal error.
		{name: "key not an object", expr: "listObjToMap(['a'], [{'value':'x'}], 'name', 'value')",
			wantErr: "internal error: interface conversion: interface {} is string, not map[interface {}]interface {}"},
		{name: "value not an object", expr: "listObjToMap([{'name':'a'}], ['x'], 'name', 'value')",
			wantErr: "internal error: interface conversion: interface {} is string, not map[interface {}]interface {}"},
		{name: "null value object", expr: "listObjToMap([{'name':'a'}], [null], 'name', 'value')",
			wantErr: "internal error: interface conversion: interface {} is structpb.NullValue, not map[interface {}]interface {}"},
		{name: "error absorbed by ||", expr: "listObjToMap([{'name':'a'}], [], 'name', 'value').size() > 0 || true",
			want: true},
		{name: "panic not absorbed by ||", expr: "listObjToMap(['a'], [{'value':'x'}], 'name', 'value').size() > 0 || true",
			wantErr: "internal error: interface conversion: interface {} is string, not map[interface {}]interface {}"},
		{name: "map for a list", expr: "listObjToMap(dyn(object.metadata), [{'value':'x'}], 'name', 'value')", object: pod,
			wantErr: "no such overload: listObjToMap(map, list, string, string)"},
		{name: "map literal", expr: "listObjToMap({}, [], 'a', 'a')",
			wantNoComp: "found no matching overload for 'listObjToMap' applied to '(map(dyn, dyn), list(dyn), string, string)'"},
		{name: "int field name", expr: "listObjToMap([], [], 1, 'a')",
			wantNoComp: "found no matching overload for 'listObjToMap' applied to '(list(dyn), list(dyn), int, string)'"},
	})
	// A native object among the values cannot be converted: Kyverno's error.
	runCases(t, newEnv(t, "transform", "user"), []evalCase{
		{name: "native value", expr: "listObjToMap([{'name':'a'}], [{'value': parseServiceAccount('system:serviceaccount:a:b')}], 'name', 'value')",
			wantErr: "type conversion error from 'user.ServiceAccount' to 'interface {}'"},
	})
}
