// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"sync"

	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kindsdiscovery "github.com/kyvap/kyvap/internal/discovery"
	"github.com/kyvap/kyvap/kyverno"
)

// Kinds serves a kind resolver built from the API server's discovery,
// rebuilt on Refresh (the CRD watch refreshes it when CRDs change).
type Kinds struct {
	client discovery.DiscoveryInterface

	mu       sync.RWMutex
	resolver kyverno.KindResolver
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
func (d *Kinds) Resolver() kyverno.KindResolver {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.resolver
}

// Refresh rebuilds the resolver from discovery. Groups that fail to answer
// (an aggregated API down) are left out and logged: their kinds resolve to
// nothing, which the plan reports, until a later refresh succeeds.
func (d *Kinds) Refresh(ctx context.Context) error {
	resolver, partial, err := kindsdiscovery.Resolver(d.client)
	if err != nil {
		return err
	}
	if partial != nil {
		log.FromContext(ctx).Info("some API groups could not be discovered", "error", partial.Error())
	}
	d.mu.Lock()
	d.resolver = resolver
	d.mu.Unlock()
	return nil
}
