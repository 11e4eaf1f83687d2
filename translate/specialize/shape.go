// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// kinds is a set of CEL runtime types a value may have.
type kinds uint16

const (
	kNull kinds = 1 << iota
	kBool
	kInt
	kUint
	kDouble
	kString
	kBytes
	kList
	kMap
	kOther // a type, a duration, a timestamp, an optional...

	kAny = kNull | kBool | kInt | kUint | kDouble | kString | kBytes | kList | kMap | kOther
)

// shape is what is known of a value before it is evaluated: the runtime
// types it may have and, for a map with fixed fields (a Go struct) or a
// list or map of one element shape, the shapes inside. A nil *shape is a
// value of which nothing is known.
type shape struct {
	kinds kinds
	// fields are a struct's fields by JSON name (kinds is kMap); a field
	// absent here is never present in the object.
	fields map[string]*shape
	// always are the struct's fields present in every object: the
	// converter writes a field that is not omitempty or omitzero even when
	// empty (as null, for a nil one), and never omits a struct.
	always map[string]bool
	// elem is the shape of a list's elements or a map's values.
	elem *shape
	// nonEmpty marks a list that has an element whenever it is a list
	// (an admitted fact, "path[0]").
	nonEmpty bool
	// labelValue marks a string that is a label value whenever it is a
	// string (an admitted fact, "path{}"): IsLabelValueCharacter holds
	// for each of its characters.
	labelValue bool
	// tainted marks a comprehension variable bound to a value read from
	// a typed variable (see walker.tainted).
	tainted bool
}

var anyShape = &shape{kinds: kAny}

func (s *shape) orAny() *shape {
	if s == nil {
		return anyShape
	}
	return s
}

// withoutNull is s where a nil Go value is omitted (omitempty, omitzero)
// rather than written as null.
func (s *shape) withoutNull() *shape {
	if s.kinds&kNull == 0 {
		return s
	}
	c := *s
	c.kinds &^= kNull
	return &c
}

// shapeCache holds the shape of each Go type derived so far; a struct's
// entry is stored before its fields are derived, so recursive types end.
var shapeCache = map[reflect.Type]*shape{}

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	timeType        = reflect.TypeFor[metav1.Time]()
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
)

// shapeOf is the shape of a Go value of type t as
// runtime.DefaultUnstructuredConverter.ToUnstructured writes it, which is
// what a ValidatingAdmissionPolicy reads of a built-in object
// (k8s.io/apiserver's SchemalessTypedToVal is its equivalent). The
// converter's rules (k8s.io/apimachinery/pkg/runtime/converter.go):
// a type with its own converter writes what it writes (known here for
// Quantity, Time, MicroTime and IntOrString; anything otherwise); a nil
// pointer, slice, map or interface is null; []byte is a base64 string;
// unsigned integers are int64; a struct is a map of its fields by JSON
// name, embedded structs without a name inlined, omitempty and omitzero
// fields omitted when empty. Callers hold shapesMu.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapeCache[t]; ok {
		return s
	}
	switch t {
	case quantityType:
		return cache(t, &shape{kinds: kString})
	case timeType, microTimeType:
		return cache(t, &shape{kinds: kString | kNull})
	case intOrStringType:
		return cache(t, &shape{kinds: kInt | kString})
	}
	if value.TypeReflectEntryOf(t).CanConvertToUnstructured() {
		return cache(t, anyShape)
	}
	switch t.Kind() {
	case reflect.String:
		return cache(t, &shape{kinds: kString})
	case reflect.Bool:
		return cache(t, &shape{kinds: kBool})
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return cache(t, &shape{kinds: kInt})
	case reflect.Float32, reflect.Float64:
		return cache(t, &shape{kinds: kDouble})
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return cache(t, &shape{kinds: kString | kNull})
		}
		s := cache(t, &shape{kinds: kList | kNull})
		s.elem = shapeOf(t.Elem())
		return s
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return cache(t, anyShape)
		}
		s := cache(t, &shape{kinds: kMap | kNull})
		s.elem = shapeOf(t.Elem())
		return s
	case reflect.Pointer:
		// Derived lazily: a pointer's shape is its element's plus null.
		s := cache(t, &shape{})
		*s = *shapeOf(t.Elem())
		s.kinds |= kNull
		return s
	case reflect.Struct:
		s := cache(t, &shape{kinds: kMap, fields: map[string]*shape{}, always: map[string]bool{}})
		if !structFields(t, s.fields, s.always) {
			*s = *anyShape
		}
		return s
	}
	return cache(t, anyShape)
}

func cache(t reflect.Type, s *shape) *shape {
	shapeCache[t] = s
	return s
}

// structFields adds the fields of struct type t to fields, as the
// converter names them; false when a field is one the converter writes in
// a way not modelled here (an unexported field).
func structFields(t reflect.Type, fields map[string]*shape, always map[string]bool) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		name, omitted, omitZero := jsonName(f)
		if name == "-" {
			continue
		}
		if !f.IsExported() {
			return false
		}
		if name == "" {
			// Inlined: an embedded struct (an embedded pointer, which the
			// converter writes over the whole map when nil, is not known).
			if f.Type.Kind() != reflect.Struct || value.TypeReflectEntryOf(f.Type).CanConvertToUnstructured() {
				return false
			}
			if !structFields(f.Type, fields, always) {
				return false
			}
			continue
		}
		s := shapeOf(f.Type)
		if omitted && nilOmitted(f.Type) {
			s = s.withoutNull()
		}
		fields[name] = s
		// omitempty never omits a struct (the converter's isEmpty is false
		// for one); omitzero does, when it is zero.
		if !omitted || (f.Type.Kind() == reflect.Struct && !omitZero) {
			always[name] = true
		}
	}
	return true
}

// jsonName is the converter's name of a struct field ("" inlines it),
// whether it is omitted when empty or zero, and whether when zero.
func jsonName(f reflect.StructField) (name string, omitted, omitZero bool) {
	tag, ok := f.Tag.Lookup("json")
	if !ok || tag == "" {
		if f.Anonymous {
			return "", false, false
		}
		return f.Name, false, false
	}
	items := strings.Split(tag, ",")
	name = items[0]
	if name == "" && !f.Anonymous {
		name = f.Name
	}
	for _, item := range items[1:] {
		switch item {
		case "omitempty":
			omitted = true
		case "omitzero":
			omitted, omitZero = true, true
		}
	}
	return name, omitted, omitZero
}

// nilOmitted reports whether an omitempty or omitzero field of type t is
// omitted, rather than written as null, when it is nil: its own nil (a
// pointer's, slice's or map's) is empty and zero. A pointer to a type the
// converter writes as null when empty keeps that null.
func nilOmitted(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer:
		inner := t.Elem().Kind()
		return inner != reflect.Pointer && inner != reflect.Slice && inner != reflect.Map && inner != reflect.Interface &&
			shapeOf(t.Elem()).kinds&kNull == 0
	case reflect.Slice, reflect.Map:
		return true
	}
	return false
}
