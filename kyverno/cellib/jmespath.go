// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/kyvap/kyvap/kyverno"
)

// jmespathLib is not one of Kyverno's CEL libraries: it is Kyverno's
// JMESPath functions that frontend/classic compiles a classic rule's
// calls to, with no form the API server evaluates (pkg/engine/jmespath
// functions.go in Kyverno's module):
//
//   - jmespath.regex_match(regex, src): regexp.Match of the regular
//     expression on src;
//   - jmespath.pattern_match(pattern, src): Kyverno's wildcard match;
//   - jmespath.parse_json(s), jmespath.parse_yaml(s): the JSON value of s
//     (json.Unmarshal, numbers as float64; sigs.k8s.io/yaml's YAMLToJSON
//     first), with jmespath.parse_json_valid and parse_yaml_valid saying
//     where Kyverno's parse fails;
//   - jmespath.base64_decode(s): the standard encoding decoded, as a
//     string, with jmespath.base64_valid;
//   - jmespath.path_canonicalize(s): filepath.Join(s).
//
// src is a string or a number (the fork checks the argument types first),
// a number formatted as Kyverno's ifaceToString does: the shortest
// decimal of its float32 rounding ('f', -1, 32). Rules that call them are
// evaluated by kyvap's engine, never by a VAP.
type jmespathLib struct{}

func (*jmespathLib) LibraryName() string { return "kyvap.jmespath" }

func (*jmespathLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("jmespath.regex_match",
			cel.Overload("jmespath_regex_match_string_dyn", []*cel.Type{cel.StringType, cel.DynType}, cel.BoolType,
				cel.BinaryBinding(func(regex, src ref.Val) ref.Val {
					s, err := jmespathString(src, "regex_match")
					if err != nil {
						return types.WrapErr(err)
					}
					ok, err := regexp.MatchString(string(regex.(types.String)), s)
					if err != nil {
						return types.WrapErr(err)
					}
					return types.Bool(ok)
				}))),
		cel.Function("jmespath.pattern_match",
			cel.Overload("jmespath_pattern_match_string_dyn", []*cel.Type{cel.StringType, cel.DynType}, cel.BoolType,
				cel.BinaryBinding(func(pattern, src ref.Val) ref.Val {
					s, err := jmespathString(src, "pattern_match")
					if err != nil {
						return types.WrapErr(err)
					}
					return types.Bool(kyverno.WildcardMatch(string(pattern.(types.String)), s))
				}))),
		cel.Function("jmespath.parse_json", cel.Overload("jmespath_parse_json_string", []*cel.Type{cel.StringType}, cel.DynType,
			cel.UnaryBinding(func(s ref.Val) ref.Val { return parsed(parseJSON(string(s.(types.String)))) }))),
		cel.Function("jmespath.parse_json_valid", cel.Overload("jmespath_parse_json_valid_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(s ref.Val) ref.Val {
				_, err := parseJSON(string(s.(types.String)))
				return types.Bool(err == nil)
			}))),
		cel.Function("jmespath.parse_yaml", cel.Overload("jmespath_parse_yaml_string", []*cel.Type{cel.StringType}, cel.DynType,
			cel.UnaryBinding(func(s ref.Val) ref.Val { return parsed(parseYAML(string(s.(types.String)))) }))),
		cel.Function("jmespath.parse_yaml_valid", cel.Overload("jmespath_parse_yaml_valid_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(s ref.Val) ref.Val {
				_, err := parseYAML(string(s.(types.String)))
				return types.Bool(err == nil)
			}))),
		cel.Function("jmespath.base64_decode", cel.Overload("jmespath_base64_decode_string", []*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(s ref.Val) ref.Val {
				decoded, err := base64.StdEncoding.DecodeString(string(s.(types.String)))
				if err != nil {
					return types.WrapErr(err)
				}
				return types.String(decoded)
			}))),
		cel.Function("jmespath.base64_valid", cel.Overload("jmespath_base64_valid_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(s ref.Val) ref.Val {
				_, err := base64.StdEncoding.DecodeString(string(s.(types.String)))
				return types.Bool(err == nil)
			}))),
		cel.Function("jmespath.path_canonicalize", cel.Overload("jmespath_path_canonicalize_string", []*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(s ref.Val) ref.Val { return types.String(filepath.Join(string(s.(types.String)))) }))),
	}
}

// parseJSON is Kyverno's jpParseJson of s.
func parseJSON(s string) (any, error) {
	var out any
	err := json.Unmarshal([]byte(s), &out)
	return out, err
}

// parseYAML is Kyverno's jpParseYAML of s.
func parseYAML(s string) (any, error) {
	data, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, err
	}
	return parseJSON(string(data))
}

// parsed is a parse's result as a CEL value, or its error.
func parsed(v any, err error) ref.Val {
	if err != nil {
		return types.WrapErr(err)
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

func (*jmespathLib) ProgramOptions() []cel.ProgramOption { return nil }

// jmespathString is Kyverno's ifaceToString of a JMESPath string or
// number (every JSON number is a float64 in Kyverno's context).
func jmespathString(v ref.Val, function string) (string, error) {
	switch typed := v.(type) {
	case types.String:
		return string(typed), nil
	case types.Double:
		return strconv.FormatFloat(float64(typed), 'f', -1, 32), nil
	case types.Int:
		return strconv.FormatFloat(float64(typed), 'f', -1, 32), nil
	case types.Uint:
		return strconv.FormatFloat(float64(typed), 'f', -1, 32), nil
	}
	return "", fmt.Errorf("invalid type for %s(): a %s, where a string or a number is expected", function, v.Type())
}
