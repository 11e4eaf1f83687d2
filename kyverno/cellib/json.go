// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// jsonLib is Kyverno's kyverno.json: the variable json, of the opaque type
// json.Json, whose members unmarshal(string) parses JSON (numbers become
// doubles, as encoding/json decodes them into any) and marshal(value)
// serializes a CEL value.
type jsonLib struct{}

func (*jsonLib) LibraryName() string { return "kyverno.json" }

var jsonType = cel.OpaqueType("json.Json")

func (*jsonLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable("json", jsonType),
		withAdapter(func(adapter types.Adapter) []cel.EnvOption {
			return []cel.EnvOption{
				cel.Function("unmarshal",
					cel.MemberOverload("unmarshal_string_dyn", []*cel.Type{jsonType, cel.DynType}, cel.DynType,
						cel.BinaryBinding(func(_, value ref.Val) ref.Val {
							text, err := convertToNative[string](value)
							if err != nil {
								return types.WrapErr(err)
							}
							var v any
							if err := json.Unmarshal([]byte(text), &v); err != nil {
								return types.WrapErr(err)
							}
							return adapter.NativeToValue(v)
						}))),
				cel.Function("marshal",
					cel.MemberOverload("marshal_dyn_string", []*cel.Type{jsonType, cel.DynType}, cel.StringType,
						cel.BinaryBinding(func(_, value ref.Val) ref.Val {
							native, err := toJSONNative(value)
							if err != nil {
								return types.WrapErr(err)
							}
							data, err := json.Marshal(native)
							if err != nil {
								return types.WrapErr(err)
							}
							return types.String(data)
						}))),
			}
		}),
	}
}

func (*jsonLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.Globals(map[string]any{"json": opaqueValue{jsonType, "JsonIface"}})}
}

// opaqueValue is the value of a library's variable (json, yaml): a handle
// whose only use is as the receiver of the library's member functions. In
// Kyverno it is a Go struct of a registered native type; a value of the same
// type name dispatches the same overloads without registering a type.
type opaqueValue struct {
	typ *cel.Type
	// iface is the interface Kyverno's struct embeds, the one field
	// encoding/json sees in it: json.marshal(json) is {"JsonIface":{}}.
	iface string
}

func (v opaqueValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from '%s' to '%v'", v.typ, typeDesc)
}

func (v opaqueValue) ConvertToType(typeVal ref.Type) ref.Val {
	if typeVal == types.TypeType {
		return v.typ
	}
	return types.NewErr("type conversion error from '%s' to '%s'", v.typ, typeVal)
}

func (v opaqueValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(opaqueValue)
	return types.Bool(ok && o.typ.TypeName() == v.typ.TypeName())
}

func (v opaqueValue) Type() ref.Type { return v.typ }

// Value is what Kyverno's json.marshal serializes for the handle (its Go
// struct); returning the handle itself would recurse forever there.
func (v opaqueValue) Value() any { return map[string]any{v.iface: struct{}{}} }

// nullValue is what a CEL null converts to inside native maps and lists
// (structpb.NullValue), without importing protobuf here.
var nullValue = types.NullValue.Value()

// toJSONNative converts a CEL value into Go values encoding/json serializes
// the way Kyverno's marshal does: maps and lists recursively (map keys must
// end up strings), null as null, and any other value as its Go value
// (bytes as base64, timestamps as RFC 3339, durations as nanoseconds).
func toJSONNative(value any) (any, error) {
	if v, ok := value.(ref.Val); ok {
		switch v.Type() {
		case types.NullType:
			return nil, nil
		case types.MapType:
			native, err := convertToNative[map[string]any](v)
			if err != nil {
				return nil, fmt.Errorf("json: failed to convert CEL map to native map: %w", err)
			}
			return toJSONNative(native)
		case types.ListType:
			native, err := convertToNative[[]any](v)
			if err != nil {
				return nil, fmt.Errorf("json: failed to convert CEL list to native slice: %w", err)
			}
			return toJSONNative(native)
		}
		return toJSONNative(v.Value())
	}
	// nullValue's type is comparable and differs from map and slice types:
	// the comparison cannot panic.
	if value == nullValue {
		return nil, nil
	}
	switch v := value.(type) {
	case nil:
		return nil, nil
	case bool, string,
		int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64, uintptr,
		float32, float64,
		[]bool, []string,
		[]int, []int8, []int16, []int32, []int64,
		[]uint, []byte, []uint16, []uint32, []uint64, []uintptr,
		[]float32, []float64:
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			converted, err := toJSONNative(val)
			if err != nil {
				return nil, err
			}
			out[k] = converted
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, val := range v {
			converted, err := toJSONNative(val)
			if err != nil {
				return nil, err
			}
			out[i] = converted
		}
		return out, nil
	}
	rv := reflect.ValueOf(value)
	switch rv.Kind() {
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			key, err := toJSONNative(iter.Key().Interface())
			if err != nil {
				return nil, err
			}
			s, ok := key.(string)
			if !ok {
				return nil, fmt.Errorf("json: unsupported map key type %T (original key type: %T)", key, iter.Key().Interface())
			}
			val, err := toJSONNative(iter.Value().Interface())
			if err != nil {
				return nil, err
			}
			out[s] = val
		}
		return out, nil
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range rv.Len() {
			val, err := toJSONNative(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			out[i] = val
		}
		return out, nil
	}
	return value, nil
}
