// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// transformLib is Kyverno's kyverno.transform: listObjToMap(keys, values,
// keyField, valueField) zips two lists of objects into a map from each key
// object's keyField to the value object's valueField at the same index.
type transformLib struct{}

func (*transformLib) LibraryName() string { return "kyverno.transform" }

func (*transformLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		withAdapter(func(adapter types.Adapter) []cel.EnvOption {
			overload := func(suffix string) cel.FunctionOpt {
				return cel.Overload("list_of_object_to_map_"+suffix,
					[]*cel.Type{cel.ListType(cel.DynType), cel.ListType(cel.DynType), cel.StringType, cel.StringType},
					cel.MapType(cel.DynType, cel.DynType),
					cel.FunctionBinding(func(args ...ref.Val) ref.Val { return listObjToMap(adapter, args...) }))
			}
			return []cel.EnvOption{
				cel.Function("listObjToMap", overload("non_prefixed")),
				cel.Function("transform.listObjToMap", overload("prefixed")),
			}
		}),
	}
}

func (*transformLib) ProgramOptions() []cel.ProgramOption { return nil }

func listObjToMap(adapter types.Adapter, args ...ref.Val) ref.Val {
	if len(args) < 4 {
		return types.WrapErr(fmt.Errorf("listObjToMap must take 4 arguments, %d were passed", len(args)))
	}
	keys, err := convertToNative[[]any](args[0])
	if err != nil {
		return types.WrapErr(err)
	}
	values, err := convertToNative[[]any](args[1])
	if err != nil {
		return types.WrapErr(err)
	}
	keyName, err := convertToNative[string](args[2])
	if err != nil {
		return types.WrapErr(err)
	}
	valueName, err := convertToNative[string](args[3])
	if err != nil {
		return types.WrapErr(err)
	}
	if len(keys) != len(values) {
		return types.WrapErr(fmt.Errorf("listObjToMap must take lists of equal length. list1: %d, list2: %d", len(keys), len(values)))
	}
	out := make(map[string]any, len(keys))
	for i, entry := range keys {
		// An object from the request is a map[string]any; one built in CEL
		// converts to a map[any]any. Anything else is a bare type
		// assertion in Kyverno: a panic, which cel-go's Program.Eval
		// reports as an "internal error" and which, unlike an error value,
		// no || or && can absorb. kyvap panics alike.
		key, ok := entry.(map[string]any)
		if !ok {
			key, err = stringKeyed(entry.(map[any]any))
			if err != nil {
				return types.WrapErr(err)
			}
		}
		k, ok := key[keyName].(string)
		if !ok {
			return types.WrapErr(fmt.Errorf("the passed key name cannot be handled as a string in the key object list"))
		}
		value, ok := values[i].(map[string]any)
		if !ok {
			value, err = stringKeyed(values[i].(map[any]any))
			if err != nil {
				return types.WrapErr(fmt.Errorf("object cannot be handled as a map string to any in the value object list"))
			}
		}
		out[k] = value[valueName]
	}
	return adapter.NativeToValue(out)
}

func stringKeyed(m map[any]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		s, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("failed to convert key to a string, %+T", k)
		}
		out[s] = v
	}
	return out, nil
}
