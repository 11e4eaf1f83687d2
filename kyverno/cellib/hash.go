// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// hashLib is Kyverno's kyverno.hash: the hex digest of a string's bytes,
// under global names (Kyverno's first) and under the hash. namespace that
// Kyverno 1.18 added.
type hashLib struct{}

func (*hashLib) LibraryName() string { return "kyverno.hash" }

func (*hashLib) CompileOptions() []cel.EnvOption {
	digest := func(name string, h func() hash.Hash) []cel.EnvOption {
		overload := func(suffix string) cel.FunctionOpt {
			return cel.Overload(name+"_string_"+suffix, []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(arg ref.Val) ref.Val {
					value, err := convertToNative[string](arg)
					if err != nil {
						return types.WrapErr(err)
					}
					sum := h()
					sum.Write([]byte(value))
					return types.String(hex.EncodeToString(sum.Sum(nil)))
				}))
		}
		return []cel.EnvOption{
			cel.Function(name, overload("non_prefixed")),
			cel.Function("hash."+name, overload("prefixed")),
		}
	}
	// Kyverno's library declares this constant too (a leftover of a
	// template): an expression may use it, so kyvap declares it as well.
	opts := []cel.EnvOption{cel.Constant("mylib_version", cel.StringType, types.String(""))}
	opts = append(opts, digest("sha1", sha1.New)...)
	opts = append(opts, digest("sha256", sha256.New)...)
	opts = append(opts, digest("md5", md5.New)...)
	return opts
}

func (*hashLib) ProgramOptions() []cel.ProgramOption { return nil }
