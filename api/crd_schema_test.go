// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package api_test checks kyvap's Kyverno types against Kyverno's own CRDs
// from the pinned kyverno module.
package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/test/controlplane"
)

var (
	jsonType     = reflect.TypeFor[apiextensionsv1.JSON]()
	timeType     = reflect.TypeFor[metav1.Time]()
	objMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
	listMetaType = reflect.TypeFor[metav1.ListMeta]()
)

// modelled pairs each kind we type with the Go type and the CRD it must match.
var modelled = []struct {
	crdFile, version string
	goType           reflect.Type
}{
	{"kyverno.io_clusterpolicies.yaml", "v1", reflect.TypeFor[kyvernov1.ClusterPolicy]()},
	{"kyverno.io_policies.yaml", "v1", reflect.TypeFor[kyvernov1.Policy]()},
	{"kyverno.io_policyexceptions.yaml", "v2", reflect.TypeFor[kyvernov2.PolicyException]()},
}

func crdDir(t *testing.T) string {
	t.Helper()
	dir, err := controlplane.KyvernoCRDDir()
	if err != nil {
		t.Fatalf("locating Kyverno's CRDs: %v", err)
	}
	return dir
}

func loadSchema(t *testing.T, path, version string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s has no schema for version %s", path, version)
	return nil
}

// jsonFields lists the JSON fields of a struct type, flattening inline
// embedded structs as encoding/json does.
func jsonFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name := strings.Split(tag, ",")[0]
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			out = append(out, jsonFields(ft)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		f.Name = name
		out = append(out, f)
	}
	return out
}

// checkType verifies that Go type typ is compatible with schema s at path,
// recording every path it checked.
func checkType(path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps, checked *[]string, errs *[]error) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	*checked = append(*checked, path)
	if typ == jsonType || s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && len(s.Properties) == 0 && s.Type == "" {
		return // opaque in both: any value is kept as is.
	}
	want := func(schemaType string) bool {
		if s.Type != schemaType && !s.XIntOrString {
			*errs = append(*errs, errors.New(path+": Go "+typ.String()+" needs schema type "+schemaType+", CRD says "+s.Type))
			return false
		}
		return true
	}
	switch {
	case typ == timeType:
		want("string")
	case typ == objMetaType || typ == listMetaType:
		want("object")
	case typ.Kind() == reflect.String:
		want("string")
	case typ.Kind() == reflect.Bool:
		want("boolean")
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want("integer")
	case typ.Kind() == reflect.Float32 || typ.Kind() == reflect.Float64:
		want("number")
	case typ.Kind() == reflect.Slice:
		if want("array") {
			if s.Items == nil || s.Items.Schema == nil {
				*errs = append(*errs, errors.New(path+": array without an item schema"))
				return
			}
			checkType(path+"[]", typ.Elem(), s.Items.Schema, checked, errs)
		}
	case typ.Kind() == reflect.Map:
		if want("object") {
			if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
				*errs = append(*errs, errors.New(path+": map without additionalProperties"))
				return
			}
			checkType(path+"{}", typ.Elem(), s.AdditionalProperties.Schema, checked, errs)
		}
	case typ.Kind() == reflect.Struct:
		if !want("object") {
			return
		}
		for _, f := range jsonFields(typ) {
			if f.Type == objMetaType && f.Name == "metadata" {
				*checked = append(*checked, path+".metadata")
				continue // a CRD's metadata schema is the API server's own.
			}
			prop, ok := s.Properties[f.Name]
			if !ok {
				*errs = append(*errs, errors.New(path+"."+f.Name+": declared by the Go type, absent from the CRD schema"))
				continue
			}
			checkType(path+"."+f.Name, f.Type, &prop, checked, errs)
		}
	default:
		*errs = append(*errs, errors.New(path+": unsupported Go kind "+typ.Kind().String()))
	}
}

func TestTypesMatchKyvernoCRDs(t *testing.T) {
	dir := crdDir(t)
	for _, m := range modelled {
		t.Run(m.goType.Name(), func(t *testing.T) {
			schema := loadSchema(t, filepath.Join(dir, m.crdFile), m.version)
			var checked []string
			var errs []error
			checkType(m.goType.Name(), m.goType, schema, &checked, &errs)
			for _, err := range errs {
				t.Error(err)
			}
			// Guard against a walker that silently checks nothing.
			if len(checked) < 40 {
				t.Errorf("only %d paths checked, the walker is not descending: %v", len(checked), checked)
			}
			t.Logf("%d JSON paths checked against %s", len(checked), m.crdFile)
		})
	}
}

// TestSchemaCheckCatchesMismatch proves the checker fails on a wrong type and
// on a field the CRD does not have.
func TestSchemaCheckCatchesMismatch(t *testing.T) {
	schema := loadSchema(t, filepath.Join(crdDir(t), "kyverno.io_clusterpolicies.yaml"), "v1")
	type badSpec struct {
		Background string `json:"background"`
		NoSuch     bool   `json:"noSuchField"`
	}
	type bad struct {
		Spec badSpec `json:"spec"`
	}
	var checked []string
	var errs []error
	checkType("bad", reflect.TypeFor[bad](), schema, &checked, &errs)
	if len(errs) != 2 {
		t.Fatalf("got %d errors, want 2 (wrong type, missing field): %v", len(errs), errs)
	}
}

// decodeDocs reads every YAML document of a file as a generic map.
func decodeDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	var docs []map[string]any
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
}

// prune keeps only the parts of v that Go type typ models.
func prune(v any, typ reflect.Type) any {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == jsonType {
		return v
	}
	switch typ.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := map[string]any{}
		for _, f := range jsonFields(typ) {
			if fv, ok := m[f.Name]; ok {
				out[f.Name] = prune(fv, f.Type)
			}
		}
		return out
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(l))
		for i := range l {
			out[i] = prune(l[i], typ.Elem())
		}
		return out
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := map[string]any{}
		for k, e := range m {
			out[k] = prune(e, typ.Elem())
		}
		return out
	}
	return v
}

// dropEmpty removes empty objects, which encode the same absence as a
// missing key for every field kyvap models.
func dropEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			e = dropEmpty(e)
			if m, ok := e.(map[string]any); ok && len(m) == 0 {
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		for i := range x {
			x[i] = dropEmpty(x[i])
		}
	}
	return v
}

func TestConformancePoliciesDecodeWithoutLoss(t *testing.T) {
	modDir, err := controlplane.KyvernoModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(modDir, "test", "conformance", "chainsaw", "generate-validating-admission-policy")
	kinds := map[string]reflect.Type{
		"ClusterPolicy":   reflect.TypeFor[kyvernov1.ClusterPolicy](),
		"Policy":          reflect.TypeFor[kyvernov1.Policy](),
		"PolicyException": reflect.TypeFor[kyvernov2.PolicyException](),
	}
	counts := map[string]int{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		for i, doc := range decodeDocs(t, path) {
			typ, ok := kinds[doc["kind"].(string)]
			if !ok || !strings.HasPrefix(doc["apiVersion"].(string), "kyverno.io/") {
				continue
			}
			counts[typ.Name()]++
			rel, _ := filepath.Rel(root, path)
			t.Run(rel+"#"+string(rune('0'+i)), func(t *testing.T) {
				raw, _ := json.Marshal(doc)
				obj := reflect.New(typ).Interface()
				dec := json.NewDecoder(bytes.NewReader(raw))
				if err := dec.Decode(obj); err != nil {
					t.Fatalf("decoding: %v", err)
				}
				reencoded, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				var got map[string]any
				if err := json.Unmarshal(reencoded, &got); err != nil {
					t.Fatal(err)
				}
				want := prune(doc, typ).(map[string]any)
				// metadata is the API server's; of it kyvap reads annotations and names only.
				for _, m := range []map[string]any{want, got} {
					md, _ := m["metadata"].(map[string]any)
					m["metadata"] = map[string]any{"name": md["name"], "annotations": md["annotations"]}
					if _, ok := doc["status"]; !ok {
						delete(m, "status")
					}
				}
				if diff := cmp.Diff(dropEmpty(want), dropEmpty(got)); diff != "" {
					t.Errorf("fields lost or changed by decoding (-want +got):\n%s", diff)
				}
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts["ClusterPolicy"] < 30 {
		t.Errorf("found %d ClusterPolicies in %s, expected the whole suite (>= 30)", counts["ClusterPolicy"], root)
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%s: %d decoded", k, counts[k])
	}
}
