// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ParamObjects is where ResolveParams reads parameter objects from: a fixed
// set (StaticParams) or a cluster (the webhook's cache).
type ParamObjects interface {
	// Scope reports whether objects of kind gvk are namespaced. known is
	// false when the source cannot tell (a fixed set without objects of the
	// kind); an error is the source's (an unknown kind).
	Scope(gvk schema.GroupVersionKind) (namespaced, known bool, err error)
	// Get returns the object of kind gvk with the namespace ("" when
	// cluster-scoped) and name, or nil when there is none.
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error)
	// List returns the objects of kind gvk in the namespace ("" when
	// cluster-scoped) whose labels the selector matches, in any order.
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error)
}

// ResolveParams finds the parameter objects of a rule with the API server's
// paramRef semantics (k8s.io/apiserver admission/plugin/policy/generic
// CollectParams), so that every ParamSource answers alike:
//   - the namespace is paramRef.namespace, else the request's, for a
//     namespaced paramKind; a cluster-scoped paramKind with a
//     paramRef.namespace is ErrClusterScopedParamNamespace (Kyverno's
//     answer);
//   - a name selects at most one object (none found is no error: the
//     caller applies parameterNotFoundAction), otherwise the selector
//     selects any number, in the API server's list order (namespace, then
//     name): Kyverno's engine evaluates parameters in that order, and the
//     first one that is skipped or denied decides.
func ResolveParams(ctx context.Context, objs ParamObjects, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, namespace string) ([]runtime.Object, error) {
	if ref == nil {
		return nil, fmt.Errorf("paramKind %s %s is set but the rule has no paramRef", kind.APIVersion, kind.Kind)
	}
	gv, err := schema.ParseGroupVersion(kind.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("paramKind apiVersion %q: %w", kind.APIVersion, err)
	}
	gvk := gv.WithKind(kind.Kind)
	namespaced, known, err := objs.Scope(gvk)
	if err != nil {
		return nil, fmt.Errorf("paramKind %s: %w", gvk, err)
	}
	if known && !namespaced && ref.Namespace != "" {
		return nil, ErrClusterScopedParamNamespace
	}
	ns := ""
	if namespaced {
		ns = ref.Namespace
		if ns == "" {
			ns = namespace
		}
		if ns == "" {
			return nil, fmt.Errorf("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	}
	if ref.Name != "" {
		obj, err := objs.Get(ctx, gvk, ns, ref.Name)
		if err != nil || obj == nil {
			return nil, err
		}
		return []runtime.Object{obj}, nil
	}
	if ref.Selector == nil {
		return nil, fmt.Errorf("paramRef has neither name nor selector")
	}
	selector, err := metav1.LabelSelectorAsSelector(ref.Selector)
	if err != nil {
		return nil, fmt.Errorf("paramRef selector: %w", err)
	}
	out, err := objs.List(ctx, gvk, ns, selector)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := namespacedName(out[i]), namespacedName(out[j])
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

// namespacedName is the namespace and name of an object (empty when it has
// no metadata).
func namespacedName(obj runtime.Object) types.NamespacedName {
	m, err := meta.Accessor(obj)
	if err != nil {
		return types.NamespacedName{}
	}
	return types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
}

// ErrClusterScopedParamNamespace is what parameter sources return for a
// paramRef.namespace next to a cluster-scoped paramKind: Kyverno's answer
// (pkg/admissionpolicy CollectParams), where the API server would ignore
// the namespace.
var ErrClusterScopedParamNamespace = errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")

// StaticParams is a ParamSource over a fixed set of objects, for offline
// evaluation (kyvap test). An object with a namespace is namespaced.
type StaticParams []unstructured.Unstructured

// Params implements ParamSource with ResolveParams. The scope of a kind is
// the scope of its objects: namespaced when one of them has a namespace,
// unknown when there is none (a paramRef.namespace is then no error, and
// nothing is found).
func (s StaticParams) Params(ctx context.Context, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, namespace string) ([]runtime.Object, error) {
	return ResolveParams(ctx, staticObjects(s), kind, ref, namespace)
}

// staticObjects is StaticParams as ParamObjects.
type staticObjects []unstructured.Unstructured

func (s staticObjects) Scope(gvk schema.GroupVersionKind) (namespaced, known bool, err error) {
	for i := range s {
		if s[i].GroupVersionKind() == gvk {
			known = true
			if s[i].GetNamespace() != "" {
				return true, true, nil
			}
		}
	}
	return false, known, nil
}

func (s staticObjects) Get(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	for i := range s {
		if o := &s[i]; o.GroupVersionKind() == gvk && o.GetNamespace() == namespace && o.GetName() == name {
			return o.DeepCopy(), nil
		}
	}
	return nil, nil
}

func (s staticObjects) List(_ context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	var out []runtime.Object
	for i := range s {
		if o := &s[i]; o.GroupVersionKind() == gvk && o.GetNamespace() == namespace && selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o.DeepCopy())
		}
	}
	return out, nil
}
