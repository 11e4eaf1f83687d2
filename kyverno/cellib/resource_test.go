// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/environment"
)

// testResources maps the kinds of the tests' objects, as a RESTMapper would.
func testResources(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	resource, ok := map[schema.GroupVersionKind]string{
		{Version: "v1", Kind: "ConfigMap"}:                      "configmaps",
		{Version: "v1", Kind: "Secret"}:                         "secrets",
		{Version: "v1", Kind: "Namespace"}:                      "namespaces",
		{Version: "v1", Kind: "Pod"}:                            "pods",
		{Group: "apps", Version: "v1", Kind: "Deployment"}:      "deployments",
		{Group: "example.com", Version: "v1", Kind: "Cluster"}:  "clusters",
		{Group: "example.com", Version: "v1", Kind: "Cluster2"}: "clusters",
	}[gvk]
	return gvk.GroupVersion().WithResource(resource), ok
}

// testObject is an object as the reader stores it (the map Get returns).
func testObject(apiVersion, kind, namespace, name string, labels map[string]any, fields map[string]any) map[string]any {
	metadata := map[string]any{"name": name}
	if namespace != "" {
		metadata["namespace"] = namespace
	}
	if labels != nil {
		metadata["labels"] = labels
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": metadata}
	for k, v := range fields {
		obj[k] = v
	}
	return obj
}

var (
	cmA    = testObject("v1", "ConfigMap", "default", "cm-a", map[string]any{"app": "a", "tier": "web"}, map[string]any{"data": map[string]any{"secret": "s1"}})
	cmB    = testObject("v1", "ConfigMap", "default", "cm-b", map[string]any{"app": "b", "tier": "web"}, nil)
	cmC    = testObject("v1", "ConfigMap", "other", "cm-c", map[string]any{"app": "a"}, nil)
	cmD    = testObject("v1", "ConfigMap", "a-b", "cm-d", nil, nil)
	cmE    = testObject("v1", "ConfigMap", "a", "cm-e", nil, nil)
	secret = testObject("v1", "Secret", "default", "s1", nil, map[string]any{"data": map[string]any{"k": "dg=="}})
	nsObj  = testObject("v1", "Namespace", "", "default", map[string]any{"env": "prod"}, nil)
	deploy = testObject("apps/v1", "Deployment", "default", "web", nil, map[string]any{"spec": map[string]any{"replicas": int64(2)}})
)

func newTestResources(t *testing.T) *StaticResources {
	t.Helper()
	var objs []unstructured.Unstructured
	// Out of order, and cm-b twice: the later one wins.
	for _, o := range []map[string]any{cmC, testObject("v1", "ConfigMap", "default", "cm-b", map[string]any{"app": "old"}, nil),
		deploy, cmA, secret, nsObj, cmE, cmD, cmB} {
		objs = append(objs, unstructured.Unstructured{Object: o})
	}
	r, err := NewStaticResources(objs, testResources)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newResourceEnvSet extends the API server's base environment with libs and
// the resource library, exactly as kyvap's engine does.
func newResourceEnvSet(t *testing.T, r ResourceReader, namespace string, libs ...string) *environment.EnvSet {
	t.Helper()
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions:        append(EnvOptions(libs), ResourceEnvOptions(r, namespace)...),
	})
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	return set
}

// newResourceEnv is newResourceEnvSet's stored-expressions environment, with
// object declared.
func newResourceEnv(t *testing.T, r ResourceReader, namespace string, libs ...string) *cel.Env {
	t.Helper()
	env, err := newResourceEnvSet(t, r, namespace, libs...).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatalf("Env: %v", err)
	}
	if env, err = env.Extend(cel.Variable("object", cel.DynType)); err != nil {
		t.Fatalf("Extend(object): %v", err)
	}
	return env
}

// names lists the namespace/name of the items of list, an expression. The
// items are of type google.protobuf.Any to CEL's checker: dyn makes them a
// list.
func names(list string) string {
	return "dyn(" + list + ".items).map(i, (has(i.metadata.namespace) ? i.metadata.namespace + '/' : '') + i.metadata.name)"
}

func TestResourceGet(t *testing.T) {
	env := newResourceEnv(t, newTestResources(t), "")
	pointer := map[string]any{"metadata": map[string]any{"namespace": "default"}, "data": map[string]any{"secret": "s1", "missing": "nope"}}
	runCases(t, env, []evalCase{
		{name: "found", expr: `resource.Get("v1", "configmaps", "default", "cm-a")`, want: cmA},
		{name: "camelCase", expr: `resource.get("v1", "secrets", "default", "s1")`, want: secret},
		{name: "field", expr: `resource.Get("v1", "secrets", "default", "s1").data.k`, want: "dg=="},
		{name: "group", expr: `resource.Get("apps/v1", "deployments", "default", "web")`, want: deploy},
		{name: "int stays int", expr: `resource.Get("apps/v1", "deployments", "default", "web").spec.replicas + 1`, want: int64(3)},
		{name: "later duplicate wins", expr: `resource.Get("v1", "configmaps", "default", "cm-b")`, want: cmB},
		{name: "from the object", expr: `type(resource.Get("v1", "secrets", object.metadata.namespace, object.data.secret)) != type(null)`, object: pointer, want: true},
		{name: "not found is null", expr: `resource.Get("v1", "secrets", object.metadata.namespace, object.data.missing)`, object: pointer, want: nil},
		// Kyverno's idiom: the result is typed map(string, dyn), which CEL's
		// checker does not compare with null.
		{name: "not found has null's type", expr: `type(resource.Get("v1", "configmaps", "default", "nope")) == type(null)`, want: true},
		{name: "compared with null", expr: `resource.Get("v1", "configmaps", "default", "nope") == null`, wantNoComp: "found no matching overload for '_==_' applied to '(map(string, any), null)'"},
		{name: "field of null", expr: `resource.Get("v1", "configmaps", "default", "nope").data`, wantErr: "no such key: data"},
		{name: "has on null", expr: `has(resource.Get("v1", "configmaps", "default", "nope").data)`, want: false},
		{name: "optional field of null", expr: `resource.Get("v1", "configmaps", "default", "nope").?data.orValue({})`, want: map[string]any{}},
		{name: "other namespace", expr: `resource.Get("v1", "configmaps", "default", "cm-c")`, want: nil},
		{name: "unknown resource", expr: `resource.Get("v1", "widgets", "default", "cm-a")`, want: nil},
		{name: "other version", expr: `resource.Get("v2", "configmaps", "default", "cm-a")`, want: nil},
		{name: "cluster-scoped", expr: `resource.Get("v1", "namespaces", "", "default").metadata.labels.env`, want: "prod"},
		{name: "cluster-scoped in a namespace", expr: `resource.Get("v1", "namespaces", "default", "default")`, want: nil},
		{name: "namespaced without namespace", expr: `resource.Get("v1", "configmaps", "", "cm-a")`, want: nil},
		{name: "subresource", expr: `resource.Get("v1", "configmaps/status", "default", "cm-a")`, want: nil},
		{name: "gvr", expr: `resource.Get(resource.ToGVR("apps/v1", "Deployment"), "default", "web").metadata.name`, want: "web"},
		{name: "gvr camelCase", expr: `resource.get(resource.toGVR("v1", "ConfigMap"), "other", "cm-c").metadata.name`, want: "cm-c"},
		{name: "gvr not found", expr: `resource.Get(resource.ToGVR("v1", "ConfigMap"), "other", "cm-a")`, want: nil},
		{name: "bad apiVersion", expr: `resource.Get("a/b/c", "configmaps", "default", "cm-a")`, wantErr: "failed to get resource: unexpected GroupVersion string: a/b/c"},
		{name: "empty apiVersion", expr: `resource.Get("", "configmaps", "default", "cm-a")`, want: nil},
		{name: "dyn argument", expr: `resource.Get("v1", "configmaps", "default", dyn(1))`, wantErr: "no such overload: Get(resource.Context, string, string, string, int)"},
		{name: "namespaced overload", expr: `resource.Get("v1", "configmaps", "cm-a")`, wantNoComp: "found no matching overload for 'Get' applied to 'resource.Context.(string, string, string)'"},
		{name: "no receiver", expr: `Get("v1", "configmaps", "default", "cm-a")`, wantNoComp: "found no matching overload for 'Get'"},
		{name: "variable type", expr: `type(resource) == type(resource) && resource == resource`, want: true},
	})
}

func TestResourceList(t *testing.T) {
	env := newResourceEnv(t, newTestResources(t), "")
	runCases(t, env, []evalCase{
		// The API server's order: by storage key, namespace/name ("a-b/" before "a/").
		{name: "all namespaces", expr: names(`resource.List("v1", "configmaps", "")`), want: []any{"a-b/cm-d", "a/cm-e", "default/cm-a", "default/cm-b", "other/cm-c"}},
		{name: "one namespace", expr: names(`resource.List("v1", "configmaps", "default")`), want: []any{"default/cm-a", "default/cm-b"}},
		{name: "camelCase", expr: names(`resource.list("v1", "configmaps", "other")`), want: []any{"other/cm-c"}},
		// The result: an object with items, the objects as Get gives them.
		{name: "shape", expr: `resource.List("v1", "secrets", "default")`, want: map[string]any{"items": []any{secret}}},
		{name: "empty", expr: `resource.List("v1", "pods", "default")`, want: map[string]any{"items": []any{}}},
		{name: "empty namespace", expr: `resource.List("v1", "configmaps", "nowhere")`, want: map[string]any{"items": []any{}}},
		{name: "count", expr: `size(resource.List("v1", "configmaps", "default").items) <= 2`, want: true},
		{name: "cluster-scoped", expr: names(`resource.List("v1", "namespaces", "")`), want: []any{"default"}},
		{name: "cluster-scoped in a namespace", expr: `resource.List("v1", "namespaces", "default").items`, want: []any{}},
		{name: "labels", expr: names(`resource.List("v1", "configmaps", "", {"app": "a"})`), want: []any{"default/cm-a", "other/cm-c"}},
		{name: "labels, all must match", expr: names(`resource.List("v1", "configmaps", "default", {"app": "a", "tier": "web"})`), want: []any{"default/cm-a"}},
		{name: "labels, none match", expr: `resource.List("v1", "configmaps", "default", {"app": "c"}).items`, want: []any{}},
		{name: "empty labels", expr: names(`resource.List("v1", "configmaps", "default", {})`), want: []any{"default/cm-a", "default/cm-b"}},
		{name: "labels camelCase", expr: names(`resource.list("v1", "configmaps", "default", {"app": "b"})`), want: []any{"default/cm-b"}},
		{name: "invalid label", expr: `resource.List("v1", "configmaps", "default", {"app": "a b"})`, wantErr: "failed to list resource: found 'b', expected: ',' or 'end of string'"},
		{name: "labels from the object", expr: names(`resource.List("v1", "configmaps", "", object.metadata.labels)`), object: map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "b"}}}, want: []any{"default/cm-b"}},
		{name: "dyn labels", expr: `resource.List("v1", "configmaps", "", object.metadata.labels)`, object: map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": int64(1)}}}, wantErr: "no such overload: List(resource.Context, string, string, string, map)"},
		{name: "gvr", expr: names(`resource.List(resource.ToGVR("apps/v1", "Deployment"), "default")`), want: []any{"default/web"}},
		{name: "gvr labels", expr: names(`resource.list(resource.toGVR("v1", "ConfigMap"), "", {"app": "a"})`), want: []any{"default/cm-a", "other/cm-c"}},
		{name: "bad apiVersion", expr: `resource.List("a/b/c", "configmaps", "")`, wantErr: "failed to list resource: unexpected GroupVersion string: a/b/c"},
		{name: "namespaced overload", expr: `resource.List("v1", "configmaps")`, wantNoComp: "found no matching overload for 'List'"},
		// Kyverno's result type, map(string, google.protobuf.Any): its
		// fields are no list to the checker (Kyverno's CLI: "expression of
		// type 'any' cannot be range of a comprehension").
		{name: "items without dyn", expr: `resource.List("v1", "configmaps", "").items.map(i, i)`, wantNoComp: "cannot be range of a comprehension (must be list, map, or dynamic)"},
		{name: "items size", expr: `size(resource.List("v1", "configmaps", "default").items)`, want: int64(2)},
		{name: "item by index", expr: `resource.List("v1", "configmaps", "default").items[1].metadata.name`, want: "cm-b"},
		{name: "compared with null", expr: `resource.List("v1", "configmaps", "") == null`, wantNoComp: "found no matching overload for '_==_'"},
	})
}

func TestResourceToGVRAndPost(t *testing.T) {
	env := newResourceEnv(t, newTestResources(t), "", "json")
	runCases(t, env, []evalCase{
		{name: "ToGVR", expr: `json.marshal(resource.ToGVR("apps/v1", "Deployment"))`, want: `{"Group":"apps","Version":"v1","Resource":"deployments"}`},
		{name: "ToGVR equality", expr: `resource.ToGVR("v1", "ConfigMap") == resource.toGVR("v1", "ConfigMap")`, want: true},
		{name: "ToGVR inequality", expr: `resource.ToGVR("v1", "ConfigMap") == resource.ToGVR("v1", "Secret")`, want: false},
		{name: "ToGVR field", expr: `resource.ToGVR("v1", "ConfigMap").Resource`, wantNoComp: "does not support field selection"},
		{name: "ToGVR unknown kind", expr: `resource.ToGVR("v1", "Widget")`, wantErr: `failed to map kind to resource: no matches for kind "Widget" in version "v1"`},
		{name: "ToGVR unknown group", expr: `resource.ToGVR("x.io/v2", "Widget")`, wantErr: `failed to map kind to resource: no matches for kind "Widget" in version "x.io/v2"`},
		{name: "ToGVR bad apiVersion", expr: `resource.ToGVR("a/b/c", "ConfigMap")`, wantErr: "failed to map kind to resource: unexpected GroupVersion string: a/b/c"},
		{name: "ToGVR lowercase kind", expr: `resource.ToGVR("v1", "configmap")`, wantErr: `failed to map kind to resource: no matches for kind "configmap" in version "v1"`},
		{name: "Post", expr: `resource.Post("v1", "configmaps", "default", {"metadata": {"name": "x"}})`, wantErr: "failed to create resource: kyvap does not write from a validation"},
		{name: "post without namespace", expr: `resource.post("v1", "namespaces", {"metadata": {"name": "x"}})`, wantErr: "failed to create resource: kyvap does not write from a validation"},
		{name: "variable", expr: `json.marshal(resource)`, want: `{"ContextInterface":{}}`},
		{name: "variable type", expr: `json.marshal(type(resource))`, want: `"resource.Context"`},
		{name: "gvr type", expr: `json.marshal(type(resource.ToGVR("v1", "Pod")))`, want: `"schema.GroupVersionResource"`},
	})
}

// TestResourceNamespaced: a namespaced policy's calls have no namespace
// argument and read in the policy's namespace alone.
func TestResourceNamespaced(t *testing.T) {
	env := newResourceEnv(t, newTestResources(t), "default")
	runCases(t, env, []evalCase{
		{name: "Get", expr: `resource.Get("v1", "configmaps", "cm-a")`, want: cmA},
		{name: "get", expr: `resource.get("v1", "secrets", "s1").data.k`, want: "dg=="},
		{name: "Get elsewhere", expr: `resource.Get("v1", "configmaps", "cm-c")`, want: nil},
		{name: "Get cluster-scoped", expr: `resource.Get("v1", "namespaces", "default")`, want: nil},
		{name: "Get gvr", expr: `resource.Get(resource.ToGVR("apps/v1", "Deployment"), "web").metadata.name`, want: "web"},
		{name: "Get bad apiVersion", expr: `resource.Get("a/b/c", "configmaps", "cm-a")`, wantErr: "failed to get resource: unexpected GroupVersion string: a/b/c"},
		{name: "Get another namespace", expr: `resource.Get("v1", "configmaps", "other", "cm-c")`, wantNoComp: "found no matching overload for 'Get' applied to 'resource.Context.(string, string, string, string)'"},
		{name: "List", expr: names(`resource.List("v1", "configmaps")`), want: []any{"default/cm-a", "default/cm-b"}},
		{name: "list labels", expr: names(`resource.list("v1", "configmaps", {"app": "a"})`), want: []any{"default/cm-a"}},
		{name: "List gvr", expr: names(`resource.List(resource.ToGVR("v1", "ConfigMap"))`), want: []any{"default/cm-a", "default/cm-b"}},
		{name: "List gvr labels", expr: names(`resource.List(resource.ToGVR("v1", "ConfigMap"), {"app": "b"})`), want: []any{"default/cm-b"}},
		{name: "List cluster-scoped", expr: `resource.List("v1", "namespaces").items`, want: []any{}},
		{name: "dyn labels", expr: `resource.List("v1", "configmaps", object.labels)`, object: map[string]any{"labels": map[string]any{"a": true}}, wantErr: "no such overload: List(resource.Context, string, string, map)"},
		{name: "dyn gvr labels", expr: `resource.List(resource.ToGVR("v1", "ConfigMap"), object.labels)`, object: map[string]any{"labels": map[string]any{"a": "b"}}, want: map[string]any{"items": []any{}}},
		{name: "List all namespaces", expr: `resource.List("v1", "configmaps", "")`, wantNoComp: "found no matching overload for 'List'"},
		{name: "Post", expr: `resource.Post("v1", "configmaps", {"metadata": {"name": "x"}})`, wantErr: "failed to create resource: kyvap does not write from a validation"},
		{name: "Post with namespace", expr: `resource.Post("v1", "configmaps", "other", {})`, wantNoComp: "found no matching overload for 'Post'"},
		{name: "ToGVR", expr: `resource.ToGVR("v1", "Secret") == resource.toGVR("v1", "Secret")`, want: true},
	})
}

// failingReader fails every read with err and maps no kind.
type failingReader struct{ err error }

func (r failingReader) Get(context.Context, schema.GroupVersionResource, string, string) (*unstructured.Unstructured, error) {
	return nil, r.err
}

func (r failingReader) List(context.Context, schema.GroupVersionResource, string, labels.Selector) (*unstructured.UnstructuredList, error) {
	return nil, r.err
}

func (r failingReader) ResourceFor(schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	return schema.GroupVersionResource{}, r.err
}

func TestResourceErrors(t *testing.T) {
	configMaps := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name              string
		err               error
		get, list, toGVR  string
		namespacedListErr string
	}{{
		name:  "forbidden",
		err:   apierrors.NewForbidden(configMaps, "cm-a", errors.New("no RBAC")),
		get:   `failed to get resource: permission denied: configmaps "cm-a" is forbidden: no RBAC`,
		list:  `failed to list resource: permission denied: configmaps "cm-a" is forbidden: no RBAC`,
		toGVR: `failed to map kind to resource: configmaps "cm-a" is forbidden: no RBAC`,
	}, {
		name:  "unauthorized",
		err:   apierrors.NewUnauthorized("who are you"),
		get:   "failed to get resource: permission denied: who are you",
		list:  "failed to list resource: permission denied: who are you",
		toGVR: "failed to map kind to resource: who are you",
	}, {
		name:  "other API error",
		err:   apierrors.NewBadRequest("configmaps resource not found"),
		get:   "failed to get resource: configmaps resource not found",
		list:  "failed to list resource: configmaps resource not found",
		toGVR: "failed to map kind to resource: configmaps resource not found",
	}, {
		name:  "plain error",
		err:   errors.New("cache not synced"),
		get:   "failed to get resource: cache not synced",
		list:  "failed to list resource: cache not synced",
		toGVR: "failed to map kind to resource: cache not synced",
	}, {
		// Only Get treats not found as null.
		name:  "not found",
		err:   apierrors.NewNotFound(configMaps, "cm-a"),
		list:  `failed to list resource: configmaps "cm-a" not found`,
		toGVR: `failed to map kind to resource: configmaps "cm-a" not found`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := failingReader{tc.err}
			getCase := evalCase{name: "Get", expr: `resource.Get("v1", "configmaps", "default", "cm-a")`, wantErr: tc.get}
			if tc.get == "" {
				getCase.want = nil
			}
			runCases(t, newResourceEnv(t, r, ""), []evalCase{
				getCase,
				{name: "List", expr: `resource.List("v1", "configmaps", "default", {"a": "b"})`, wantErr: tc.list},
				{name: "ToGVR", expr: `resource.ToGVR("v1", "ConfigMap")`, wantErr: tc.toGVR},
				{name: "in a condition", expr: `size(resource.List("v1", "configmaps", "").items) > 0 && true`, wantErr: tc.list},
				// CEL's commutative || absorbs the error.
				{name: "absorbed", expr: `size(resource.List("v1", "configmaps", "").items) > 0 || true`, want: true},
			})
			namespaced := []evalCase{
				{name: "namespaced List", expr: `resource.List("v1", "configmaps")`, wantErr: tc.list},
			}
			if tc.get != "" {
				namespaced = append(namespaced, evalCase{name: "namespaced Get", expr: `resource.get("v1", "configmaps", "cm-a")`, wantErr: tc.get})
			}
			runCases(t, newResourceEnv(t, r, "default"), namespaced)
		})
	}
}

// recordingReader records the reads and returns nothing.
type recordingReader struct{ reads *[]string }

func (r recordingReader) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	*r.reads = append(*r.reads, "get "+gvr.String()+" "+namespace+" "+name)
	if ctx == nil {
		return nil, errors.New("no context")
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func (r recordingReader) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (*unstructured.UnstructuredList, error) {
	*r.reads = append(*r.reads, "list "+gvr.String()+" "+namespace+" ["+selector.String()+"]")
	if ctx == nil {
		return nil, errors.New("no context")
	}
	return nil, nil
}

func (r recordingReader) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	*r.reads = append(*r.reads, "map "+gvk.String())
	return gvk.GroupVersion().WithResource("things"), nil
}

// TestResourceReads checks what the library asks the reader: the resource
// and namespace of every overload, the policy's namespace for a namespaced
// policy.
func TestResourceReads(t *testing.T) {
	for _, tc := range []struct {
		namespace string
		expr      string
		want      []string
		listAt    int
	}{{
		listAt: 2,
		expr: `[resource.Get("v1", "configmaps", "ns", "a"), resource.get("apps/v1", "deployments/scale", "", "b"),
			resource.List("v1", "pods", ""), resource.list("x.io/v1beta1", "widgets", "ns", {"a": "b"}),
			resource.Get(resource.ToGVR("x.io/v1", "Thing"), "ns", "c"), resource.List(resource.toGVR("v1", "Thing"), "ns2")]`,
		want: []string{
			"get /v1, Resource=configmaps ns a", "get apps/v1, Resource=deployments/scale  b",
			"list /v1, Resource=pods  []", "list x.io/v1beta1, Resource=widgets ns [a=b]",
			"map x.io/v1, Kind=Thing", "get x.io/v1, Resource=things ns c",
			"map /v1, Kind=Thing", "list /v1, Resource=things ns2 []",
		},
	}, {
		namespace: "team",
		listAt:    1,
		expr: `[resource.Get("v1", "configmaps", "a"), resource.List("v1", "pods"), resource.list("v1", "pods", {"a": "b"}),
			resource.get(resource.ToGVR("x.io/v1", "Thing"), "c"), resource.List(resource.toGVR("v1", "Thing"))]`,
		want: []string{
			"get /v1, Resource=configmaps team a", "list /v1, Resource=pods team []", "list /v1, Resource=pods team [a=b]",
			"map x.io/v1, Kind=Thing", "get x.io/v1, Resource=things team c",
			"map /v1, Kind=Thing", "list /v1, Resource=things team []",
		},
	}} {
		var reads []string
		env := newResourceEnv(t, recordingReader{&reads}, tc.namespace)
		got, compileErr, err := evaluate(t, env, tc.expr, nil)
		if compileErr != nil || err != nil {
			t.Fatalf("%s: %v %v", tc.expr, compileErr, err)
		}
		if diff := cmp.Diff(tc.want, reads); diff != "" {
			t.Errorf("namespace %q: reads (-want +got):\n%s", tc.namespace, diff)
		}
		// A nil list from the reader is an empty one.
		if diff := cmp.Diff(map[string]any{"items": []any{}}, got.([]any)[tc.listAt]); diff != "" {
			t.Errorf("namespace %q: List (-want +got):\n%s", tc.namespace, diff)
		}
	}
}

// TestResourceWithLibraries: the resource library next to the others in the
// same environment, and in the environment for new expressions.
func TestResourceWithLibraries(t *testing.T) {
	r := newTestResources(t)
	env := newResourceEnv(t, r, "", allLibraries...)
	expr := `[json.marshal(resource.Get("v1", "configmaps", "default", "cm-a").data),
		sha256(resource.Get("v1", "secrets", "default", "s1").data.k),
		string(size(resource.List("v1", "configmaps", "default", {"tier": "web"}).items)),
		string(yaml.parse('a: x').a), parseServiceAccount('system:serviceaccount:a:b').Name]`
	got, compileErr, err := evaluate(t, env, expr, nil)
	if compileErr != nil || err != nil {
		t.Fatalf("%s: %v %v", expr, compileErr, err)
	}
	want := []any{`{"secret":"s1"}`, fmt.Sprintf("%x", sha256.Sum256([]byte("dg=="))), "2", "x", "b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	newEnv, err := newResourceEnvSet(t, r, "default", "json").Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	got, compileErr, err = evaluate(t, newEnv, "json.marshal("+names(`resource.List("v1", "configmaps")`)+")", nil)
	if compileErr != nil || err != nil {
		t.Fatal(compileErr, err)
	}
	if diff := cmp.Diff(`["default/cm-a","default/cm-b"]`, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestResourceDeclarations: the library adds the variable resource and
// Kyverno's eight function names, and nothing to EnvOptions' libraries.
func TestResourceDeclarations(t *testing.T) {
	for _, namespace := range []string{"", "default"} {
		base, err := newEnvSet(t, "json").Env(environment.StoredExpressions)
		if err != nil {
			t.Fatal(err)
		}
		env, err := newResourceEnvSet(t, newTestResources(t), namespace, "json").Env(environment.StoredExpressions)
		if err != nil {
			t.Fatal(err)
		}
		before := map[string]bool{}
		for _, d := range declarations(base) {
			before[d] = true
		}
		var added []string
		for _, d := range declarations(env) {
			if !before[d] {
				added = append(added, d)
			}
		}
		sort.Strings(added)
		want := []string{
			"function Get", "function List", "function Post", "function ToGVR",
			"function get", "function list", "function post", "function toGVR",
			"variable resource",
		}
		if diff := cmp.Diff(want, added); diff != "" {
			t.Errorf("namespace %q: declarations added (-want +got):\n%s", namespace, diff)
		}
	}
	if Supported("resource") || len(EnvOptions([]string{"resource"})) != 0 {
		t.Error("resource is in EnvOptions' libraries: it needs a reader")
	}
}

func TestStaticResources(t *testing.T) {
	ctx := context.Background()
	r := newTestResources(t)
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

	got, err := r.Get(ctx, configMaps, "default", "cm-a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cmA, got.Object); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	// A copy: changing it changes nothing in the reader.
	got.SetName("changed")
	if again, _ := r.Get(ctx, configMaps, "default", "cm-a"); again.GetName() != "cm-a" {
		t.Errorf("Get after a change of its result: %s", again.GetName())
	}
	if _, err := r.Get(ctx, configMaps, "default", "nope"); !apierrors.IsNotFound(err) || err.Error() != `configmaps "nope" not found` {
		t.Errorf("Get(nope) error = %v", err)
	}

	list, err := r.List(ctx, configMaps, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, item := range list.Items {
		keys = append(keys, item.GetNamespace()+"/"+item.GetName())
	}
	if diff := cmp.Diff([]string{"a-b/cm-d", "a/cm-e", "default/cm-a", "default/cm-b", "other/cm-c"}, keys); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"items": []any{}}, mustList(t, r, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "default").UnstructuredContent()); diff != "" {
		t.Errorf("List(pods) (-want +got):\n%s", diff)
	}

	// Two kinds of one resource share it.
	clusters, err := NewStaticResources([]unstructured.Unstructured{
		{Object: testObject("example.com/v1", "Cluster", "", "one", nil, nil)},
		{Object: testObject("example.com/v1", "Cluster2", "", "two", nil, nil)},
	}, testResources)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(mustList(t, clusters, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "clusters"}, "").Items); n != 2 {
		t.Errorf("List(clusters) has %d items", n)
	}

	gvr, err := r.ResourceFor(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil || gvr != (schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}) {
		t.Errorf("ResourceFor(Deployment) = %v, %v", gvr, err)
	}

	// A kind without resource fails the whole set, as in Kyverno's CLI.
	_, err = NewStaticResources([]unstructured.Unstructured{
		{Object: cmA},
		{Object: testObject("v9", "Widget", "default", "w", nil, nil)},
	}, testResources)
	if diff := cmp.Diff(`object 1 (Widget default/w): no matches for kind "Widget" in version "v9"`, errString(err)); diff != "" {
		t.Errorf("NewStaticResources error (-want +got):\n%s", diff)
	}
	if _, err := NewStaticResources([]unstructured.Unstructured{{Object: cmA}}, nil); err == nil {
		t.Error("NewStaticResources without kindToResource: no error")
	}
	empty, err := NewStaticResources(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := empty.Get(ctx, configMaps, "default", "cm-a"); !apierrors.IsNotFound(err) {
		t.Errorf("Get from an empty set: %v", err)
	}
}

func mustList(t *testing.T, r ResourceReader, gvr schema.GroupVersionResource, namespace string) *unstructured.UnstructuredList {
	t.Helper()
	list, err := r.List(context.Background(), gvr, namespace, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestStaticResourcesKyvernoCLI: the reader answering as Kyverno v1.19.1's
// CLI from a context file (each expectation confirmed with the CLI).
func TestStaticResourcesKyvernoCLI(t *testing.T) {
	r := newTestResources(t)
	env := newResourceEnv(t, r.KyvernoCLI(), "", "json")
	runCases(t, env, []evalCase{
		{name: "Get", expr: `resource.Get("v1", "configmaps", "default", "cm-a")`, want: cmA},
		{name: "Get not found", expr: `resource.Get("v1", "configmaps", "default", "nope")`, want: nil},
		{name: "Get cluster-scoped", expr: `resource.Get("v1", "namespaces", "", "default").metadata.name`, want: "default"},
		{name: "List", expr: `resource.List("v1", "configmaps", "default")`, want: map[string]any{"items": []any{cmA, cmB}}},
		{name: "List empty namespace", expr: `resource.List("v1", "configmaps", "nowhere")`, want: map[string]any{"items": []any{}}},
		// Not all namespaces: the objects without namespace.
		{name: "List all namespaces", expr: `resource.List("v1", "configmaps", "")`, want: map[string]any{"items": []any{}}},
		{name: "List cluster-scoped", expr: names(`resource.List("v1", "namespaces", "")`), want: []any{"default"}},
		// Labels ignored.
		{name: "List labels", expr: names(`resource.List("v1", "configmaps", "default", {"app": "nope"})`), want: []any{"default/cm-a", "default/cm-b"}},
		{name: "List without objects", expr: `resource.List("v1", "pods", "default")`, wantErr: "failed to list resource: pods resource not found"},
		{name: "List without objects, group", expr: `resource.List("apps/v1", "replicasets", "default")`, wantErr: "failed to list resource: replicasets.apps resource not found"},
		{name: "ToGVR", expr: `resource.ToGVR("v1", "ConfigMap")`, wantErr: "failed to map kind to resource: not implemented"},
	})
	// The reader it came from is unchanged.
	if n := len(mustList(t, r, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "").Items); n != 5 {
		t.Errorf("List(configmaps, all namespaces) has %d items", n)
	}
}
