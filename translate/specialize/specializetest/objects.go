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
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/randfill"
)

// RandomObjects returns n objects of Go type t, filled at random (nil
// and empty values included), completed where the facts require (Admit)
// and converted as the API server converts them for a
// ValidatingAdmissionPolicy
// (runtime.DefaultUnstructuredConverter.ToUnstructured).
func RandomObjects(t reflect.Type, seed int64, n int, facts ...string) []map[string]any {
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
		Admit(obj.Interface(), facts)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj.Interface())
		if err != nil {
			continue
		}
		out = append(out, u)
	}
	return out
}

// admittedStrings are the values Admit gives a required string field
// that is empty, by its JSON name.
var admittedStrings = map[string]string{"name": "admitted", "image": "busybox:1.36"}

// Admit makes a typed object (a pointer to it) one the API server's
// validation admits as far as the facts (specialize.AdmittedFacts) say:
// a nil pointer on a fact's way is allocated, an empty required list gets
// one zero element, an empty required string a value. Random objects do
// not hold the facts, and the specialized forms assume them. It works on
// the Go value, before conversion, so that what it adds is converted as
// everything else is (a zero struct is written, a nil slice is null).
func Admit(obj any, facts []string) {
	for _, fact := range facts {
		fact = strings.NewReplacer("[]", ".[]", "[0]", ".[0]", "{}", ".{}").Replace(fact)
		admit(reflect.ValueOf(obj), strings.Split(fact, "."))
	}
}

// labelValue is s where the API server's validation takes it as a label
// value (validation.IsValidLabelValue), and another valid value where it
// does not.
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return "label-value"
}

func admit(v reflect.Value, path []string) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	if len(path) == 0 {
		return
	}
	switch v.Kind() {
	case reflect.Slice:
		if path[0] == "[]" {
			for i := range v.Len() {
				admit(v.Index(i), path[1:])
			}
		}
	case reflect.Struct:
		f, ok := fieldByJSON(v, path[0])
		if !ok {
			return
		}
		rest := path[1:]
		if len(rest) > 0 && rest[0] == "[]" {
			admit(f, rest) // every element there is
			return
		}
		if len(rest) == 1 && rest[0] == "[0]" && f.Kind() == reflect.Slice {
			if f.Len() == 0 {
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			}
			return
		}
		if len(rest) == 1 && rest[0] == "{}" && f.Kind() == reflect.Map && f.Type().Elem().Kind() == reflect.String {
			iter := f.MapRange()
			for iter.Next() {
				f.SetMapIndex(iter.Key(), reflect.ValueOf(labelValue(iter.Value().String())).Convert(f.Type().Elem()))
			}
			return
		}
		if len(rest) == 0 {
			switch f.Kind() {
			case reflect.Slice:
				if f.Len() == 0 {
					f.Set(reflect.MakeSlice(f.Type(), 1, 1))
				}
			case reflect.String:
				if f.String() == "" {
					f.SetString(admittedStrings[path[0]])
				}
			}
			return
		}
		admit(f, rest)
	}
}

// fieldByJSON finds a struct field by its JSON name, inlined embedded
// structs included.
func fieldByJSON(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == name {
			return v.Field(i), true
		}
		if tag == "" && sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			if f, ok := fieldByJSON(v.Field(i), name); ok {
				return f, true
			}
		}
	}
	return reflect.Value{}, false
}
