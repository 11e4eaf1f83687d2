// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package specializetest generates objects of built-in types as the API
// server hands them to a ValidatingAdmissionPolicy, for the tests that
// compare specialized expressions with their general form.
package specializetest

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// RandomObjects returns n objects of Go type t, filled at random (nil
// and empty values included) and converted as the API server converts
// them for a ValidatingAdmissionPolicy
// (runtime.DefaultUnstructuredConverter.ToUnstructured).
func RandomObjects(t reflect.Type, seed int64, n int) []map[string]any {
	filler := randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).MaxDepth(10).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(100000), resource.DecimalSI)
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = intstr.FromInt32(c.Int31n(1000))
			} else {
				*v = intstr.FromString(c.String(8))
			}
		},
		func(v *runtime.RawExtension, c randfill.Continue) { *v = runtime.RawExtension{} },
	)
	var out []map[string]any
	for len(out) < n {
		obj := reflect.New(t)
		filler.Fill(obj.Interface())
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj.Interface())
		if err != nil {
			continue
		}
		out = append(out, u)
	}
	return out
}
