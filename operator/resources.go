// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/kyverno/cellib"
)

// ResourceReadTimeout bounds one read of Kyverno's resource library: the
// library calls give no context, and an admission request has its own
// budget (the webhook's evaluation budget stops the evaluation anyway).
const ResourceReadTimeout = 2 * time.Second

// apiResources reads objects for Kyverno's resource library straight from
// the API server, as Kyverno's own client does (no cache: an informer per
// kind a policy reads would hold every object of it in memory). What it
// may read is what kyvap's RBAC grants: a read the API server refuses is
// the library's "permission denied" error, which, as in Kyverno, makes the
// rule's result an error (a denial under Deny).
type apiResources struct {
	reader client.Reader
	mapper meta.RESTMapper
}

var _ cellib.ResourceReader = apiResources{}

// Get implements cellib.ResourceReader.
func (r apiResources) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	gvk, err := r.kindFor(gvr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ResourceReadTimeout)
	defer cancel()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil, err
	}
	return u, nil
}

// List implements cellib.ResourceReader.
func (r apiResources) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (*unstructured.UnstructuredList, error) {
	gvk, err := r.kindFor(gvr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ResourceReadTimeout)
	defer cancel()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: selector}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.reader.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	return list, nil
}

// ResourceFor implements cellib.ResourceReader.
func (r apiResources) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return m.Resource, nil
}

func (r apiResources) kindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	if strings.Contains(gvr.Resource, "/") {
		return schema.GroupVersionKind{}, fmt.Errorf("kyvap does not read subresources (%s)", gvr.Resource)
	}
	return r.mapper.KindFor(gvr)
}
