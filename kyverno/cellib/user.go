// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"

	"github.com/kyvap/kyvap/kyverno/cellib/internal/user"
)

// userLib is Kyverno's kyverno.user: parseServiceAccount(username) splits a
// service account's username (system:serviceaccount:<namespace>:<name>) into
// a user.ServiceAccount; any other username gives empty fields.
type userLib struct{}

func (*userLib) LibraryName() string { return "kyverno.user" }

// serviceAccountType is the CEL type ext.NativeTypes derives from
// user.ServiceAccount.
var serviceAccountType = cel.ObjectType("user.ServiceAccount")

func (*userLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		ext.NativeTypes(reflect.TypeFor[user.ServiceAccount]()),
		// The adapter that knows the native type, the one NativeToValue of
		// a user.ServiceAccount needs, whatever adapter a later extension
		// installs.
		withAdapter(func(adapter types.Adapter) []cel.EnvOption {
			overload := func(suffix string) cel.FunctionOpt {
				return cel.Overload("parse_service_account_string_"+suffix, []*cel.Type{cel.StringType}, serviceAccountType,
					cel.UnaryBinding(func(arg ref.Val) ref.Val { return parseServiceAccount(adapter, arg) }))
			}
			return []cel.EnvOption{
				cel.Function("parseServiceAccount", overload("non_prefixed")),
				cel.Function("user.parseServiceAccount", overload("prefixed")),
			}
		}),
	}
}

func (*userLib) ProgramOptions() []cel.ProgramOption { return nil }

func parseServiceAccount(adapter types.Adapter, arg ref.Val) ref.Val {
	const prefix = "system:serviceaccount:"
	username, err := convertToNative[string](arg)
	if err != nil {
		return types.WrapErr(err)
	}
	var sa user.ServiceAccount
	// Kyverno splits at the first colon after the prefix (the name keeps
	// any further one) and leaves both fields empty when there is none.
	if rest, ok := strings.CutPrefix(username, prefix); ok {
		if namespace, name, found := strings.Cut(rest, ":"); found {
			sa.Namespace, sa.Name = namespace, name
		}
	}
	return adapter.NativeToValue(sa)
}
