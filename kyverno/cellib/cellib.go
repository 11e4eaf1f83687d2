// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cellib reimplements, for kyvap's CEL fallback engine, the pure
// CEL libraries Kyverno adds to a ValidatingPolicy's environment. It follows
// Kyverno v1.19.1, whose libraries live in the github.com/kyverno/sdk module
// (extensions/cel/libs, at the library version Kyverno 1.19 compiles with):
// the same function names, overloads, types, results and error messages, for
//
//   - hash: md5, sha1, sha256 and hash.md5, hash.sha1, hash.sha256;
//   - math: math.round(double, int);
//   - transform: listObjToMap and transform.listObjToMap;
//   - user: parseServiceAccount and user.parseServiceAccount (user.ServiceAccount);
//   - json: the json variable, json.unmarshal and json.marshal;
//   - yaml: the yaml variable and yaml.parse;
//   - x509: x509.decode;
//   - gzip: gzip.compress and gzip.decompress;
//   - time: time.now, time.toCron and time.truncate;
//   - random: random and random.random;
//   - image: image, parseImageReference and isImage (the kyverno.image type
//     and its member functions).
//
// The resource library (resource.Get, resource.List...) reads cluster
// objects: ResourceEnvOptions declares it over a ResourceReader the caller
// gives (the manager's cache, or StaticResources over a test's context
// file), confined to a namespace for a NamespacedValidatingPolicy. It is not
// among the libraries of Supported and EnvOptions, which need nothing but
// the expression's inputs.
//
// Not here: the other libraries that need a cluster, the network or
// Kyverno's admission context (http, globalContext, imagedata, generator,
// exceptions). Kyverno itself is not imported: its modules are not linked
// into kyvap's binaries.
//
// Kyverno's base environment also has cel-go extensions the API server's
// lacks (ext.Math, ext.Encoders, ext.Bindings: a one-argument math.round,
// math.greatest, base64.encode, cel.bind...). They are not Kyverno
// libraries, and not here either.
package cellib

import (
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// libraries are kyvap's implementations in the order Kyverno's ValidatingPolicy
// compiler registers them (pkg/cel/policies/vpol/compiler), so that an
// environment built from any subset declares things in Kyverno's order.
var libraries = []struct {
	name string
	lib  func() cel.Library
}{
	{"image", func() cel.Library { return &imageLib{} }},
	{"user", func() cel.Library { return &userLib{} }},
	{"hash", func() cel.Library { return &hashLib{} }},
	{"math", func() cel.Library { return &mathLib{} }},
	{"json", func() cel.Library { return &jsonLib{} }},
	{"yaml", func() cel.Library { return &yamlLib{} }},
	{"random", func() cel.Library { return &randomLib{} }},
	{"x509", func() cel.Library { return &x509Lib{} }},
	{"time", func() cel.Library { return &timeLib{} }},
	{"transform", func() cel.Library { return &transformLib{} }},
	{"gzip", func() cel.Library { return &gzipLib{} }},
	// Not a Kyverno CEL library: Kyverno's JMESPath functions, for the
	// classic rules frontend/classic compiles.
	{"jmespath", func() cel.Library { return &jmespathLib{} }},
}

// Supported reports whether kyvap's engine implements Kyverno CEL library lib
// (a name cellib.Used returns).
func Supported(lib string) bool {
	for _, l := range libraries {
		if l.name == lib {
			return true
		}
	}
	return false
}

// EnvOptions returns the CEL environment options that declare and bind the
// given libraries (each must be Supported; unsupported names are ignored),
// in a deterministic order. They are added to the API server's CEL
// environment (k8s.io/apiserver/pkg/cel/environment EnvSet.Extend with
// VersionedOptions{EnvOptions: ...}); each is a cel.Lib, so variables such as
// json and yaml are bound with cel.Globals like Kyverno does, and a library
// given twice is added once.
//
// The user library registers a native Go type (user.ServiceAccount) by
// wrapping the environment's type provider: options that later replace the
// provider (the DeclTypes of a VersionedOptions, as
// k8s.io/apiserver/pkg/cel/environment builds them from the provider of the
// environment being extended) must be in a later Extend than these, never in
// the same VersionedOptions, or the type is lost.
func EnvOptions(libs []string) []cel.EnvOption {
	want := make(map[string]bool, len(libs))
	for _, l := range libs {
		want[l] = true
	}
	var opts []cel.EnvOption
	for _, l := range libraries {
		if want[l.name] {
			opts = append(opts, cel.Lib(l.lib()))
		}
	}
	return opts
}

// convertToNative converts a CEL value the way Kyverno's libraries do
// (sdk extensions/cel/utils.ConvertToNative), so that a value of the wrong
// type fails with the same message as in Kyverno.
func convertToNative[T any](value ref.Val) (T, error) {
	native, err := value.ConvertToNative(reflect.TypeFor[T]())
	if err != nil {
		var zero T
		return zero, err
	}
	return native.(T), nil
}

// withAdapter applies the options build returns, given the type adapter of
// the environment being configured, to that environment. Kyverno's
// libraries get the adapter by calling env.Extend inside an option; kyvap
// applies the options in place instead: in the API server's environments
// (EagerlyValidateDeclarations), an Extend inside an option initializes the
// type checker there and then, and the declarations that the next options
// of the same Extend add would never reach it.
func withAdapter(build func(adapter types.Adapter) []cel.EnvOption) cel.EnvOption {
	return func(env *cel.Env) (*cel.Env, error) {
		var err error
		for _, opt := range build(env.CELTypeAdapter()) {
			if env, err = opt(env); err != nil {
				return nil, err
			}
		}
		return env, nil
	}
}
