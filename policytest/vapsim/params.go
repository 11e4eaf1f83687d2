// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vapsim

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// paramSource is what the API server's policy source resolves for a
// paramKind (generic.policySource.ensureParamsForPolicyLocked): the informer
// holding the parameter objects and the kind's scope, or the configuration
// error the policy gets when the kind cannot be resolved.
type paramSource struct {
	informer informers.GenericInformer
	scope    meta.RESTScope
	err      error
}

// paramSources resolves every paramKind the hooks use against the request's
// parameter objects. The API server resolves the kind with its RESTMapper;
// the simulator uses the request's RESTMapper when given and otherwise infers
// the scope from the supplied objects (namespaced when none are supplied).
func paramSources(hooks []*hook, req Request, notes *[]string) (map[schema.GroupVersionKind]*paramSource, error) {
	sources := map[schema.GroupVersionKind]*paramSource{}
	for _, h := range hooks {
		if h.paramGVK == nil {
			continue
		}
		gvk := *h.paramGVK
		if _, done := sources[gvk]; done {
			continue
		}
		src, err := newParamSource(gvk, req, notes)
		if err != nil {
			return nil, err
		}
		sources[gvk] = src
	}
	return sources, nil
}

// newParamSource builds the informer for one paramKind.
func newParamSource(gvk schema.GroupVersionKind, req Request, notes *[]string) (*paramSource, error) {
	var objects []*unstructured.Unstructured
	for i := range req.Params {
		p := &req.Params[i]
		if p.GroupVersionKind() == gvk {
			objects = append(objects, p)
		}
	}

	var resource schema.GroupVersionResource
	var scope meta.RESTScope
	if req.RESTMapper != nil {
		mapping, err := req.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return &paramSource{err: fmt.Errorf("failed to find resource referenced by paramKind: '%v'", gvk)}, nil
		}
		resource, scope = mapping.Resource, mapping.Scope
	} else {
		resource, _ = meta.UnsafeGuessKindToResource(gvk)
		scope = meta.RESTScopeNamespace
		switch {
		case len(objects) == 0:
			*notes = append(*notes, fmt.Sprintf("paramKind %s: no parameter objects and no RESTMapper; assumed namespace-scoped", gvk))
		case objects[0].GetNamespace() == "":
			scope = meta.RESTScopeRoot
		}
		for _, o := range objects {
			if (o.GetNamespace() == "") != (scope.Name() == meta.RESTScopeNameRoot) {
				return nil, fmt.Errorf("parameter objects of kind %s mix namespaced and cluster-scoped objects; pass a RESTMapper", gvk)
			}
		}
	}

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objects {
		if scope.Name() == meta.RESTScopeNameRoot && o.GetNamespace() != "" {
			*notes = append(*notes, fmt.Sprintf("parameter %s %s/%s has a namespace but the kind is cluster-scoped; ignored", gvk.Kind, o.GetNamespace(), o.GetName()))
			continue
		}
		if scope.Name() == meta.RESTScopeNameNamespace && o.GetNamespace() == "" {
			*notes = append(*notes, fmt.Sprintf("parameter %s %s has no namespace but the kind is namespaced; ignored", gvk.Kind, o.GetName()))
			continue
		}
		obj, err := informerRepresentation(gvk, o)
		if err != nil {
			return nil, fmt.Errorf("parameter %s %s: %w", gvk.Kind, paramKey(o), err)
		}
		if err := indexer.Add(obj); err != nil {
			return nil, fmt.Errorf("parameter %s %s: %w", gvk.Kind, paramKey(o), err)
		}
	}
	return &paramSource{
		informer: &staticInformer{indexer: indexer, resource: resource.GroupResource()},
		scope:    scope,
	}, nil
}

// informerRepresentation is the object as the API server's param informer
// holds it (generic.convertParamToInformerRepresentation): built-in kinds
// are typed with an empty TypeMeta (the dispatcher re-adds apiVersion and
// kind from paramKind), other kinds stay unstructured.
func informerRepresentation(gvk schema.GroupVersionKind, o *unstructured.Unstructured) (runtime.Object, error) {
	typed, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return o.DeepCopy(), nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.UnstructuredContent(), typed); err != nil {
		return nil, fmt.Errorf("not a valid %s: %w", gvk.Kind, err)
	}
	typed.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return typed, nil
}

// paramKey is namespace/name, or name for cluster-scoped objects.
func paramKey(o interface {
	GetNamespace() string
	GetName() string
}) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// staticInformer is an informers.GenericInformer over a fixed, always
// synced indexer, so generic.CollectParams can run unchanged.
type staticInformer struct {
	indexer  cache.Indexer
	resource schema.GroupResource
}

func (s *staticInformer) Informer() cache.SharedIndexInformer { return syncedInformer{} }

func (s *staticInformer) Lister() cache.GenericLister {
	return sortedLister{cache.NewGenericLister(s.indexer, s.resource)}
}

// syncedInformer reports HasSynced, the only informer method
// generic.CollectParams calls (the indexer is complete from the start). Any
// other method would hit the nil embedded interface; none is called.
type syncedInformer struct {
	cache.SharedIndexInformer
}

func (syncedInformer) HasSynced() bool { return true }

// sortedLister lists in namespace/name order. The API server's lister
// returns map order, so which parameter's denial it reports first varies;
// the simulator is deterministic instead.
type sortedLister struct{ cache.GenericLister }

func (l sortedLister) List(selector labels.Selector) ([]runtime.Object, error) {
	out, err := l.GenericLister.List(selector)
	return sortByKey(out), err
}

func (l sortedLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return sortedNamespaceLister{l.GenericLister.ByNamespace(namespace)}
}

type sortedNamespaceLister struct{ cache.GenericNamespaceLister }

func (l sortedNamespaceLister) List(selector labels.Selector) ([]runtime.Object, error) {
	out, err := l.GenericNamespaceLister.List(selector)
	return sortByKey(out), err
}

func sortByKey(objs []runtime.Object) []runtime.Object {
	key := func(o runtime.Object) string {
		if a, err := meta.Accessor(o); err == nil {
			return a.GetNamespace() + "/" + a.GetName()
		}
		return ""
	}
	sort.SliceStable(objs, func(i, j int) bool { return key(objs[i]) < key(objs[j]) })
	return objs
}
