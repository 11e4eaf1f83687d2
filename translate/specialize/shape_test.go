// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/kyvap/kyvap/translate/specialize/specializetest"
)

// kindOf is the runtime type CEL gives an unstructured value.
func kindOf(v any) kinds {
	switch v.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case int64, int32, int:
		return kInt
	case float64:
		return kDouble
	case string:
		return kString
	case []any:
		return kList
	case map[string]any:
		return kMap
	}
	return kOther
}

// conforms reports where v leaves shape s, or "".
func conforms(path string, v any, s *shape) string {
	k := kindOf(v)
	if s.kinds&k == 0 {
		return fmt.Sprintf("%s: a %T outside the shape's kinds %b", path, v, s.kinds)
	}
	switch v := v.(type) {
	case []any:
		if s.elem != nil {
			for i, e := range v {
				if p := conforms(fmt.Sprintf("%s[%d]", path, i), e, s.elem); p != "" {
					return p
				}
			}
		}
	case map[string]any:
		for _, key := range keys(s.always) {
			if _, ok := v[key]; !ok {
				return fmt.Sprintf("%s.%s: a field the shape says is always present is absent", path, key)
			}
		}
		for _, key := range keys(v) {
			switch {
			case s.fields != nil:
				f, ok := s.fields[key]
				if !ok {
					return fmt.Sprintf("%s.%s: a field the shape does not have", path, key)
				}
				if p := conforms(path+"."+key, v[key], f); p != "" {
					return p
				}
			case s.elem != nil:
				if p := conforms(path+"."+key, v[key], s.elem); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

// TestShapesHoldForConvertedObjects fills objects of every built-in type
// at random, converts them as the API server does for a VAP, and checks
// that every value is of a kind its shape allows, every field one it
// lists, and every field it says is always present there: the shapes are
// what the folding relies on.
func TestShapesHoldForConvertedObjects(t *testing.T) {
	types := map[reflect.Type]bool{}
	for _, typ := range builtinTypes() {
		types[typ] = true
	}
	if len(types) < 40 {
		t.Fatalf("only %d built-in types known", len(types))
	}
	objects := 0
	for typ := range types {
		shapesMu.Lock()
		s := shapeOf(typ)
		shapesMu.Unlock()
		if s.kinds != kMap || s.fields == nil {
			t.Errorf("%v: a top-level object's shape is not a struct: %b", typ, s.kinds)
			continue
		}
		for i, obj := range specializetest.RandomObjects(typ, int64(len(typ.String())), 30) {
			objects++
			if p := conforms(typ.String(), obj, s); p != "" {
				t.Errorf("object %d: %s", i, p)
				break
			}
		}
	}
	t.Logf("%d objects of %d built-in types conform to their shapes", objects, len(types))
}
