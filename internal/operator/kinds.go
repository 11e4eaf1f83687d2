// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyvap/kyvap/translate"
)

// Kinds serves a kind resolver built from the API server's discovery,
// rebuilt on Refresh (the CRD watch refreshes it when CRDs change).
type Kinds struct {
	client discovery.DiscoveryInterface

	mu       sync.RWMutex
	resolver translate.KindResolver
}

// NewKinds builds the first resolver from discovery.
func NewKinds(client discovery.DiscoveryInterface) (*Kinds, error) {
	d := &Kinds{client: client}
	if err := d.Refresh(context.Background()); err != nil {
		return nil, err
	}
	return d, nil
}

// Resolver returns the current resolver (controllers.ResolverSource).
func (d *Kinds) Resolver() translate.KindResolver {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.resolver
}

// Refresh rebuilds the resolver from discovery. Groups that fail to answer
// (an aggregated API down) are left out and logged: their kinds resolve to
// nothing, which the plan reports, until a later refresh succeeds.
func (d *Kinds) Refresh(ctx context.Context) error {
	_, lists, err := d.client.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovering served resources: %w", err)
	}
	if err != nil {
		log.FromContext(ctx).Info("some API groups could not be discovered", "error", err.Error())
	}
	resolver := translate.NewResolver(resourcesFromDiscovery(lists))
	d.mu.Lock()
	d.resolver = resolver
	d.mu.Unlock()
	return nil
}

// resourcesFromDiscovery flattens discovery lists into translate.Resources;
// "pods/exec" becomes the exec subresource of pods.
func resourcesFromDiscovery(lists []*metav1.APIResourceList) []translate.Resource {
	var out []translate.Resource
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		kinds := map[string]string{}
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				kinds[r.Name] = r.Kind
			}
		}
		for _, r := range list.APIResources {
			res := translate.Resource{Group: gv.Group, Version: gv.Version, Resource: r.Name, Kind: r.Kind, Namespaced: r.Namespaced}
			if parent, sub, ok := strings.Cut(r.Name, "/"); ok {
				res.Resource, res.Subresource = parent, sub
				// The parent's kind: Kyverno spells subresources "<ParentKind>/<sub>".
				res.Kind = kinds[parent]
			}
			out = append(out, res)
		}
	}
	return out
}
