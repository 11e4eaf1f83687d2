// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

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
//   - jmespath.path_canonicalize(s): filepath.Join(s);
//   - jmespath.regex_replace_all(regex, src, repl): every match replaced
//     (src and repl strings or numbers, as for regex_match);
//   - jmespath.to_string(v): v, or its JSON (json.Marshal), with
//     to_string_valid; jmespath.to_number(v): a number, a string
//     ParseFloat reads, else null; jmespath.max(list): the greatest of a
//     list of numbers or of strings (null when empty), with max_valid.
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
		cel.Function("jmespath.regex_replace_all",
			cel.Overload("jmespath_regex_replace_all_string_dyn_dyn", []*cel.Type{cel.StringType, cel.DynType, cel.DynType}, cel.StringType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					src, err := jmespathString(args[1], "regex_replace_all")
					if err != nil {
						return types.WrapErr(err)
					}
					repl, err := jmespathString(args[2], "regex_replace_all")
					if err != nil {
						return types.WrapErr(err)
					}
					re, err := regexp.Compile(string(args[0].(types.String)))
					if err != nil {
						return types.WrapErr(err)
					}
					return types.String(re.ReplaceAll([]byte(src), []byte(repl)))
				}))),
		cel.Function("jmespath.to_string", cel.Overload("jmespath_to_string_dyn", []*cel.Type{cel.DynType}, cel.StringType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, err := toJMESPathString(v)
				if err != nil {
					return types.WrapErr(err)
				}
				return types.String(s)
			}))),
		cel.Function("jmespath.to_string_valid", cel.Overload("jmespath_to_string_valid_dyn", []*cel.Type{cel.DynType}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				_, err := toJMESPathString(v)
				return types.Bool(err == nil)
			}))),
		cel.Function("jmespath.to_number", cel.Overload("jmespath_to_number_dyn", []*cel.Type{cel.DynType}, cel.DynType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				switch typed := v.(type) {
				case types.Double:
					return typed
				case types.Int, types.Uint:
					f, _ := nativeJSON(v)
					return types.Double(f.(float64))
				case types.String:
					f, err := strconv.ParseFloat(string(typed), 64)
					if err != nil {
						return types.NullValue
					}
					return types.Double(f)
				}
				return types.NullValue
			}))),
		cel.Function("jmespath.max", cel.Overload("jmespath_max_dyn", []*cel.Type{cel.DynType}, cel.DynType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				best, err := jmespathMax(v)
				if err != nil {
					return types.WrapErr(err)
				}
				return types.DefaultTypeAdapter.NativeToValue(best)
			}))),
		cel.Function("jmespath.max_valid", cel.Overload("jmespath_max_valid_dyn", []*cel.Type{cel.DynType}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				_, err := jmespathMax(v)
				return types.Bool(err == nil)
			}))),
	}
}

// nativeJSON is a CEL value as Kyverno's JMESPath holds the JSON value:
// every number a float64.
func nativeJSON(v ref.Val) (any, error) {
	switch typed := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(typed), nil
	case types.String:
		return string(typed), nil
	case types.Double:
		return float64(typed), nil
	case types.Int:
		return float64(typed), nil
	case types.Uint:
		return float64(typed), nil
	case traits.Lister:
		var out []any
		// A list's iterator yields its elements.
		for it := typed.Iterator(); it.HasNext() == types.True; {
			x, err := nativeJSON(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := typed.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			key, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a map key of type %s", k.Type())
			}
			x, err := nativeJSON(typed.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(key)] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("no JSON value of type %s", v.Type())
}

// toJMESPathString is the fork's jpfToString: a string as it is, any
// other value as its JSON.
func toJMESPathString(v ref.Val) (string, error) {
	native, err := nativeJSON(v)
	if err != nil {
		return "", err
	}
	return JMESPathToString(native)
}

// JMESPathToString is the fork's jpfToString of a JSON value (numbers as
// float64): a string as it is, anything else as its JSON (json.Marshal),
// which fails for a value JSON cannot write (NaN, infinities). The
// compiler folds a call on a value known when compiling with it.
func JMESPathToString(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	data, err := json.Marshal(v)
	return string(data), err
}

// jmespathMax is the fork's jpfMax of a list of numbers (the greatest,
// as a float64) or of strings; an empty list is null; anything else is
// the fork's argument type error.
func jmespathMax(v ref.Val) (any, error) {
	native, err := nativeJSON(v)
	if err != nil {
		return nil, err
	}
	items, ok := native.([]any)
	if !ok {
		return nil, fmt.Errorf("invalid type for max(): %T, where an array of numbers or strings is expected", native)
	}
	if len(items) == 0 {
		return nil, nil
	}
	allNumbers, allStrings := true, true
	for _, x := range items {
		_, isNumber := x.(float64)
		_, isString := x.(string)
		allNumbers, allStrings = allNumbers && isNumber, allStrings && isString
	}
	switch {
	case allNumbers:
		best := items[0].(float64)
		for _, x := range items[1:] {
			if x.(float64) > best {
				best = x.(float64)
			}
		}
		return best, nil
	case allStrings:
		best := items[0].(string)
		for _, x := range items[1:] {
			if x.(string) > best {
				best = x.(string)
			}
		}
		return best, nil
	}
	return nil, errors.New("invalid type for max(): an array of numbers or strings is expected")
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
