// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// mathLib is Kyverno's kyverno.math: math.round(value, precision), half
// away from zero at the given number of decimals (negative precisions round
// to tens, hundreds...). cel-go's ext.Math, in Kyverno's base environment but
// not in the API server's, has a one-argument math.round of its own: not
// part of this library.
type mathLib struct{}

func (*mathLib) LibraryName() string { return "kyverno.math" }

func (*mathLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("math.round",
			cel.Overload("math_round_float_int", []*cel.Type{cel.DoubleType, cel.IntType}, cel.DoubleType,
				cel.BinaryBinding(func(val, prec ref.Val) ref.Val {
					v, err := convertToNative[float64](val)
					if err != nil {
						return types.WrapErr(err)
					}
					p, err := convertToNative[int64](prec)
					if err != nil {
						return types.WrapErr(err)
					}
					// The same arithmetic as Kyverno's, so that the
					// floating-point results agree to the last bit.
					shift := math.Pow(10, float64(p))
					return types.Double(math.Round(v*shift) / shift)
				}))),
	}
}

func (*mathLib) ProgramOptions() []cel.ProgramOption { return nil }
