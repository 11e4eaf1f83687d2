// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"fmt"
	"regexp"
	"strconv"

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
//   - jmespath.pattern_match(pattern, src): Kyverno's wildcard match.
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
	}
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
