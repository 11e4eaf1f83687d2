// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ResourceReader reads cluster objects for Kyverno's resource library.
// Implementations: the manager's cache (operator), a test's context file
// (kyvap test, StaticResources). It must be safe for concurrent use.
//
// The library calls it with context.Background(): CEL function bindings get
// no context, and Kyverno's own calls use context.TODO(). A reader that may
// block (one calling the API server) must bound its calls itself.
type ResourceReader interface {
	// Get returns the object, or an error. A not-found error
	// (apierrors.IsNotFound) makes resource.Get return null, a forbidden
	// or unauthorized one is reported as "permission denied", as in
	// Kyverno. namespace is "" for a cluster-scoped resource; a namespaced
	// resource asked without namespace, or a cluster-scoped one asked in a
	// namespace, is not found (as the API server answers). gvr.Resource is
	// the expression's resource string: it may name a subresource
	// ("pods/status"), which Kyverno's client reads.
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
	// List returns the objects of the resource in namespace ("" = all
	// namespaces, or the objects of a cluster-scoped resource) that
	// selector matches (labels.Everything() when the call has no labels):
	// Kyverno lists with a label selector, which the API server applies.
	// Items may come in any order: the library sorts them as the API server
	// does.
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (*unstructured.UnstructuredList, error)
	// ResourceFor maps a kind to its resource, as a RESTMapper's
	// RESTMapping does (an error such as meta.NoKindMatchError when there
	// is none), for resource.ToGVR(apiVersion, kind): Kyverno answers it
	// with its REST mapper, which Get and List do not need.
	ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error)
}

// ResourceEnvOptions declares and binds Kyverno's resource library
// (kyverno.resource, sdk extensions/cel/libs/resource, at Kyverno 1.19's
// library version) reading through r: the variable resource, of the opaque
// type resource.Context, whose member functions, each under a PascalCase
// and a camelCase name, are
//
//   - Get/get(apiVersion, resource, namespace, name) and Get/get(gvr,
//     namespace, name): the object, typed map(string, any) as in Kyverno,
//     null when it does not exist;
//   - List/list(apiVersion, resource, namespace[, labels]) and
//     List/list(gvr, namespace[, labels]): a map whose items are the objects
//     ("" = all namespaces), labels (map(string, string)) selecting by
//     equality;
//   - ToGVR/toGVR(apiVersion, kind): a schema.GroupVersionResource for the
//     gvr overloads;
//   - Post/post(apiVersion, resource[, namespace], object): declared, as
//     Kyverno declares it for ValidatingPolicies, but always an error:
//     kyvap does not write from a validation.
//
// namespace, when set (a NamespacedValidatingPolicy's namespace), confines
// reads as Kyverno does: Get, List and Post lose their namespace argument
// (Get(apiVersion, resource, name), List(apiVersion, resource[, labels]),
// Get(gvr, name), List(gvr[, labels]), Post(apiVersion, resource, object))
// and read in namespace alone, so an expression naming another namespace
// does not compile.
//
// The options are a cel.Lib (added once per environment whatever the reader)
// to give next to EnvOptions' in the same VersionedOptions. The reader is
// bound into the environment: an environment cache must key it by reader
// and namespace.
func ResourceEnvOptions(r ResourceReader, namespace string) []cel.EnvOption {
	return []cel.EnvOption{cel.Lib(&resourceLib{reader: r, namespace: namespace})}
}

// resourceLib is Kyverno's kyverno.resource over a ResourceReader.
type resourceLib struct {
	reader    ResourceReader
	namespace string
}

func (*resourceLib) LibraryName() string { return "kyverno.resource" }

var (
	resourceContextType = cel.OpaqueType("resource.Context")
	gvrType             = cel.OpaqueType("schema.GroupVersionResource")
	stringMapType       = cel.MapType(cel.StringType, cel.StringType)
	// objectMapType is Kyverno's result type, map(string, any) (cel-go's
	// types.AnyType, google.protobuf.Any, not dyn), which decides what
	// compiles as in Kyverno: fields, indexes, size() and comparisons with
	// values do, but the result is not comparable with null (Kyverno's
	// idiom: type(x) == type(null)), a field is no range for a
	// comprehension (resource.List(...).items.map(...) does not compile,
	// dyn(resource.List(...).items).map(...) does), and neither the result
	// nor a field is a bool or string expression's output.
	objectMapType = cel.MapType(cel.StringType, cel.AnyType)
)

func (l *resourceLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable("resource", resourceContextType),
		withAdapter(func(adapter types.Adapter) []cel.EnvOption {
			calls := resourceCalls{reader: l.reader, adapter: adapter}
			var decls func(suffix string) map[string][]cel.FunctionOpt
			if l.namespace == "" {
				decls = calls.clusterDecls
			} else {
				decls = func(suffix string) map[string][]cel.FunctionOpt {
					return calls.namespacedDecls(l.namespace, suffix)
				}
			}
			var opts []cel.EnvOption
			// Kyverno's names (1.18 added the camelCase ones), in a fixed order.
			for _, name := range []string{"Get", "List", "Post", "ToGVR"} {
				for _, variant := range []struct{ name, suffix string }{{name, "pascal"}, {lowerFirst(name), "camel"}} {
					opts = append(opts, cel.Function(variant.name, decls(variant.suffix)[name]...))
				}
			}
			return opts
		}),
	}
}

func (l *resourceLib) ProgramOptions() []cel.ProgramOption {
	// Kyverno's value is a Go struct embedding its context interface: what
	// encoding/json sees of it is {"ContextInterface":{}}.
	return []cel.ProgramOption{cel.Globals(map[string]any{"resource": opaqueValue{resourceContextType, "ContextInterface"}})}
}

// lowerFirst gives the camelCase name of a PascalCase one: Get, get.
func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// resourceCalls implements the library's overloads. The receiver (args[0],
// the resource variable) carries nothing: the reader is the library's.
type resourceCalls struct {
	reader  ResourceReader
	adapter types.Adapter
}

// clusterDecls are the overloads of a cluster-wide policy, with Kyverno's
// overload IDs, by PascalCase function name.
func (c resourceCalls) clusterDecls(suffix string) map[string][]cel.FunctionOpt {
	str := cel.StringType
	return map[string][]cel.FunctionOpt{
		"List": {
			c.overload("resource_list_string_string_string_"+suffix, "arn", "", str, str, str),
			c.overload("resource_list_string_string_string_map_"+suffix, "arnl", "", str, str, str, stringMapType),
			c.overload("list_resources_gvr_string_"+suffix, "gn", "", gvrType, str),
			c.overload("list_resources_gvr_string_map_"+suffix, "gnl", "", gvrType, str, stringMapType),
		},
		"Get": {
			c.overload("resource_get_string_string_string_string_"+suffix, "arnN", "", str, str, str, str),
			c.overload("resource_get_gvr_string_string_"+suffix, "gnN", "", gvrType, str, str),
		},
		"Post": {
			postOverload("resource_post_string_string_string_map_"+suffix, str, str, str, objectMapType),
			postOverload("resource_post_string_string_map_"+suffix, str, str, objectMapType),
		},
		"ToGVR": c.toGVRDecls(suffix),
	}
}

// namespacedDecls are the overloads of a policy confined to namespace: no
// namespace argument, every read in namespace.
func (c resourceCalls) namespacedDecls(namespace, suffix string) map[string][]cel.FunctionOpt {
	str := cel.StringType
	return map[string][]cel.FunctionOpt{
		"List": {
			c.overload("resource_list_string_string_"+suffix, "ar", namespace, str, str),
			c.overload("resource_list_string_string_map_"+suffix, "arl", namespace, str, str, stringMapType),
			c.overload("list_resources_gvr_"+suffix, "g", namespace, gvrType),
			c.overload("list_resources_gvr_map_"+suffix, "gl", namespace, gvrType, stringMapType),
		},
		"Get": {
			c.overload("resource_get_string_string_string_"+suffix, "arN", namespace, str, str, str),
			c.overload("resource_get_gvr_string_"+suffix, "gN", namespace, gvrType, str),
		},
		"Post": {
			postOverload("resource_post_string_string_map_"+suffix, str, str, objectMapType),
		},
		"ToGVR": c.toGVRDecls(suffix),
	}
}

func (c resourceCalls) toGVRDecls(suffix string) []cel.FunctionOpt {
	return []cel.FunctionOpt{
		cel.MemberOverload("convert_to_gvr_string_string_"+suffix,
			[]*cel.Type{resourceContextType, cel.StringType, cel.StringType}, gvrType,
			cel.FunctionBinding(c.toGVR)),
	}
}

// overload declares a Get (the layout has a name) or List member overload of
// resource whose arguments, after the receiver, are, in layout: a apiVersion,
// r resource, g a ToGVR value (standing for both), n namespace, N name, l
// labels. Without n, the call reads in namespace.
func (c resourceCalls) overload(id, layout, namespace string, params ...*cel.Type) cel.FunctionOpt {
	return cel.MemberOverload(id, append([]*cel.Type{resourceContextType}, params...), objectMapType,
		cel.FunctionBinding(func(args ...ref.Val) ref.Val {
			call, err := readCall(args, layout)
			if err != nil {
				return err
			}
			if !strings.Contains(layout, "n") {
				call.namespace = namespace
			}
			if strings.Contains(layout, "N") {
				return c.get(call)
			}
			return c.list(call)
		}))
}

// resourceCall is what a Get or List call reads.
type resourceCall struct {
	apiVersion, resource, namespace, name string
	labels                                map[string]string
}

// readCall converts the arguments as Kyverno does, in order (a ToGVR value
// first, then the others), reporting a bad argument at the position it has
// in Kyverno's apiVersion/resource overload, to which the gvr overloads
// delegate with the value's apiVersion and resource.
func readCall(args []ref.Val, layout string) (resourceCall, ref.Val) {
	var call resourceCall
	// Kyverno's overloads check their argument count, which CEL's
	// dispatch guarantees.
	if len(args) != len(layout)+1 {
		return call, types.NewErr("expected %d arguments, got %d", len(layout)+1, len(args))
	}
	position := 1
	for i, kind := range layout {
		arg := args[i+1]
		var err ref.Val
		switch kind {
		case 'g':
			var gvr *schema.GroupVersionResource
			// Kyverno converts the value at its own position.
			if gvr, err = argument[*schema.GroupVersionResource](arg, i+1); err == nil {
				call.apiVersion, call.resource = gvr.GroupVersion().String(), gvr.Resource
				position++
			}
		case 'a':
			call.apiVersion, err = argument[string](arg, position)
		case 'r':
			call.resource, err = argument[string](arg, position)
		case 'n':
			call.namespace, err = argument[string](arg, position)
		case 'N':
			call.name, err = argument[string](arg, position)
		case 'l':
			call.labels, err = argument[map[string]string](arg, position)
		}
		if err != nil {
			return call, err
		}
		position++
	}
	return call, nil
}

// argument converts the argument at position index as Kyverno's
// utils.GetArg does.
func argument[T any](arg ref.Val, index int) (T, ref.Val) {
	v, err := convertToNative[T](arg)
	if err != nil {
		return v, types.NewErr("invalid arg %d: %v", index, err)
	}
	return v, nil
}

// accessError is Kyverno's message for a read that failed: permission
// problems are told apart.
func accessError(prefix string, err error) ref.Val {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return types.NewErr("%s: permission denied: %v", prefix, err)
	}
	return types.NewErr("%s: %v", prefix, err)
}

func (c resourceCalls) get(call resourceCall) ref.Val {
	const prefix = "failed to get resource"
	gv, err := schema.ParseGroupVersion(call.apiVersion)
	if err != nil {
		return types.NewErr("%s: %v", prefix, err)
	}
	obj, err := c.reader.Get(context.Background(), gv.WithResource(call.resource), call.namespace, call.name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return types.NullValue
		}
		return accessError(prefix, err)
	}
	if obj == nil {
		return types.NullValue
	}
	return c.adapter.NativeToValue(obj.UnstructuredContent())
}

// list reads the list with the labels' selector and sorts it as the API
// server does.
func (c resourceCalls) list(call resourceCall) ref.Val {
	const prefix = "failed to list resource"
	gv, err := schema.ParseGroupVersion(call.apiVersion)
	if err != nil {
		return types.NewErr("%s: %v", prefix, err)
	}
	selector := labels.Everything()
	if len(call.labels) > 0 {
		// Kyverno sends labels.SelectorFromSet(labels).String() as the
		// list's labelSelector, which the API server parses: an invalid
		// key or value fails the list.
		if selector, err = labels.Parse(labels.SelectorFromSet(call.labels).String()); err != nil {
			return types.NewErr("%s: %v", prefix, err)
		}
	}
	list, err := c.reader.List(context.Background(), gv.WithResource(call.resource), call.namespace, selector)
	if err != nil {
		return accessError(prefix, err)
	}
	// Sorted in a copy: the reader's list stays as it is.
	out := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{}}
	if list != nil {
		out.Object = list.Object
		out.Items = append(out.Items, list.Items...)
	}
	sortByKey(out.Items)
	return c.adapter.NativeToValue(out.UnstructuredContent())
}

// sortByKey sorts objects in the API server's list order, the order of
// their storage keys: namespace/name, or name for a cluster-scoped object.
func sortByKey(items []unstructured.Unstructured) {
	sort.SliceStable(items, func(i, j int) bool { return objectKey(&items[i]) < objectKey(&items[j]) })
}

func (c resourceCalls) toGVR(args ...ref.Val) ref.Val {
	const prefix = "failed to map kind to resource"
	apiVersion, err := argument[string](args[1], 1)
	if err != nil {
		return err
	}
	kind, err := argument[string](args[2], 2)
	if err != nil {
		return err
	}
	gv, perr := schema.ParseGroupVersion(apiVersion)
	if perr != nil {
		return types.NewErr("%s: %v", prefix, perr)
	}
	gvr, merr := c.reader.ResourceFor(gv.WithKind(kind))
	if merr != nil {
		return types.NewErr("%s: %v", prefix, merr)
	}
	return gvrValue{&gvr}
}

// postOverload declares a resource.Post overload: Kyverno creates the
// object through its client; kyvap's validations never write.
func postOverload(id string, params ...*cel.Type) cel.FunctionOpt {
	return cel.MemberOverload(id, append([]*cel.Type{resourceContextType}, params...), objectMapType,
		cel.FunctionBinding(func(...ref.Val) ref.Val {
			return types.NewErr("failed to create resource: kyvap does not write from a validation")
		}))
}

// gvrValue is what resource.ToGVR returns: a *schema.GroupVersionResource
// of the opaque type schema.GroupVersionResource, only usable as the gvr
// argument of Get and List (Kyverno's is the Go pointer as a native object).
type gvrValue struct{ gvr *schema.GroupVersionResource }

func (v gvrValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	switch typeDesc {
	case reflect.TypeFor[*schema.GroupVersionResource]():
		return v.gvr, nil
	case reflect.TypeFor[schema.GroupVersionResource]():
		return *v.gvr, nil
	}
	return nil, fmt.Errorf("type conversion error from '%s' to '%v'", gvrType, typeDesc)
}

func (v gvrValue) ConvertToType(typeVal ref.Type) ref.Val {
	if typeVal == types.TypeType {
		return gvrType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", gvrType, typeVal)
}

func (v gvrValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(gvrValue)
	return types.Bool(ok && *o.gvr == *v.gvr)
}

func (v gvrValue) Type() ref.Type { return gvrType }

// Value is the pointer, which json.marshal serializes as Kyverno's
// ({"Group":...,"Version":...,"Resource":...}).
func (v gvrValue) Value() any { return v.gvr }

// StaticResources is a ResourceReader over a fixed set of objects (a
// kyverno-test.yaml's context file, a unit test). It answers as an API
// server holding only these objects would: Get of a missing object is not
// found, List of a resource without objects is empty, List with namespace
// "" gives every namespace's objects, the label selector applies. Lists
// have items alone (no apiVersion, kind or metadata), like Kyverno CLI's.
// KyvernoCLI gives a reader that also reproduces the CLI's departures from
// an API server. Safe for concurrent use.
type StaticResources struct {
	// objects by resource, then namespace ("" for cluster-scoped), then name.
	objects        map[schema.GroupVersionResource]map[string]map[string]*unstructured.Unstructured
	kindToResource func(schema.GroupVersionKind) (schema.GroupVersionResource, bool)
	cli            bool
}

// NewStaticResources indexes objs by the resource kindToResource gives for
// their kind; a later object with the same resource, namespace and name
// replaces an earlier one, as in Kyverno's CLI. kindToResource also answers
// resource.ToGVR. An object whose kind has no resource is an error, as
// Kyverno's CLI fails loading such a context file.
func NewStaticResources(objs []unstructured.Unstructured, kindToResource func(schema.GroupVersionKind) (schema.GroupVersionResource, bool)) (*StaticResources, error) {
	s := &StaticResources{
		objects:        map[schema.GroupVersionResource]map[string]map[string]*unstructured.Unstructured{},
		kindToResource: kindToResource,
	}
	for i := range objs {
		obj := objs[i].DeepCopy()
		gvr, err := s.ResourceFor(obj.GroupVersionKind())
		if err != nil {
			return nil, fmt.Errorf("object %d (%s %s): %w", i, obj.GetKind(), objectKey(obj), err)
		}
		byNamespace := s.objects[gvr]
		if byNamespace == nil {
			byNamespace = map[string]map[string]*unstructured.Unstructured{}
			s.objects[gvr] = byNamespace
		}
		byName := byNamespace[obj.GetNamespace()]
		if byName == nil {
			byName = map[string]*unstructured.Unstructured{}
			byNamespace[obj.GetNamespace()] = byName
		}
		byName[obj.GetName()] = obj
	}
	return s, nil
}

// KyvernoCLI returns a reader over the same objects that answers as Kyverno
// v1.19.1's CLI answers from a test's context file (its
// FakeContextProvider), where that differs from an API server: List with
// namespace "" gives the objects without namespace only (those of a
// cluster-scoped resource, never all namespaces), ignores the label
// selector, and fails ("<resource> resource not found", a bad request) for
// a resource without any object; ToGVR fails (the CLI panics: "not
// implemented"). Get is the same.
func (s *StaticResources) KyvernoCLI() *StaticResources {
	cli := *s
	cli.cli = true
	return &cli
}

func objectKey(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// Get returns a copy of the object, or a not-found error.
func (s *StaticResources) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	obj := s.objects[gvr][namespace][name]
	if obj == nil {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return obj.DeepCopy(), nil
}

// List returns copies of the resource's objects in namespace ("" = all)
// that selector matches (nil = all), in key order.
func (s *StaticResources) List(_ context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (*unstructured.UnstructuredList, error) {
	byNamespace, ok := s.objects[gvr]
	if s.cli && !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s resource not found", gvr.GroupResource()))
	}
	list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{}}
	for ns, byName := range byNamespace {
		if ns != namespace && (namespace != "" || s.cli) {
			continue
		}
		for _, obj := range byName {
			if s.cli || selector == nil || selector.Matches(labels.Set(obj.GetLabels())) {
				list.Items = append(list.Items, *obj.DeepCopy())
			}
		}
	}
	sortByKey(list.Items)
	return list, nil
}

// ResourceFor maps gvk with kindToResource; without a resource, the error
// is a RESTMapper's (meta.NoKindMatchError).
func (s *StaticResources) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	if s.cli {
		return schema.GroupVersionResource{}, errors.New("not implemented")
	}
	if s.kindToResource != nil {
		if gvr, ok := s.kindToResource(gvk); ok {
			return gvr, nil
		}
	}
	return schema.GroupVersionResource{}, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}
