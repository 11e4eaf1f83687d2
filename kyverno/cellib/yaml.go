// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"sigs.k8s.io/yaml"
)

// yamlLib is Kyverno's kyverno.yaml: the variable yaml, of the opaque type
// yaml.Yaml, whose member parse(string) decodes a YAML document the way
// sigs.k8s.io/yaml does (through JSON: numbers are doubles, keys strings;
// only the first document of a stream counts; an empty one is null).
type yamlLib struct{}

func (*yamlLib) LibraryName() string { return "kyverno.yaml" }

var yamlType = cel.OpaqueType("yaml.Yaml")

func (*yamlLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable("yaml", yamlType),
		withAdapter(func(adapter types.Adapter) []cel.EnvOption {
			return []cel.EnvOption{
				cel.Function("parse",
					cel.MemberOverload("parse_string_dyn", []*cel.Type{yamlType, cel.StringType}, cel.DynType,
						cel.BinaryBinding(func(_, value ref.Val) ref.Val {
							text, err := convertToNative[string](value)
							if err != nil {
								return types.WrapErr(err)
							}
							var v any
							if err := yaml.Unmarshal([]byte(text), &v); err != nil {
								return types.WrapErr(err)
							}
							return adapter.NativeToValue(v)
						}))),
			}
		}),
	}
}

func (*yamlLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.Globals(map[string]any{"yaml": opaqueValue{yamlType, "YamlIface"}})}
}
