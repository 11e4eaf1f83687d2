// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package specializetest generates objects of built-in types as the API
// server hands them to a ValidatingAdmissionPolicy, for the tests that
// compare specialized expressions with their general form.
package specializetest

import (
	"reflect"
	"strings"

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

// admittedValues are the values Admit gives a missing required field, by
// its name.
var admittedValues = map[string]func() any{
	"containers": func() any { return []any{map[string]any{"name": "admitted", "image": "busybox:1.36"}} },
	"name":       func() any { return "admitted" },
	"image":      func() any { return "busybox:1.36" },
}

// Admit makes a converted object one the API server's validation admits
// as far as the facts (specialize.AdmittedFacts) say: each path's value
// is set where it is missing or null, and the maps on the way created.
// Random objects do not hold them, and the specialized forms assume them.
func Admit(obj map[string]any, facts []string) {
	for _, fact := range facts {
		admit(obj, strings.Split(strings.ReplaceAll(fact, "[]", ".[]"), "."))
	}
}

func admit(v any, path []string) {
	if len(path) == 0 {
		return
	}
	switch v := v.(type) {
	case []any:
		if path[0] == "[]" {
			for _, el := range v {
				admit(el, path[1:])
			}
		}
	case map[string]any:
		name := path[0]
		rest := path[1:]
		if len(rest) > 0 && rest[0] == "[]" {
			// Every element of the list, when there is one.
			admit(v[name], rest)
			return
		}
		if v[name] == nil {
			if len(rest) == 0 {
				if value, ok := admittedValues[name]; ok {
					v[name] = value()
				}
				return
			}
			v[name] = map[string]any{}
		}
		admit(v[name], rest)
	}
}
