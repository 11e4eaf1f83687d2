// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"github.com/kyvap/kyvap/model"
)

// KindSet is what a filter's kinds select.
type KindSet struct {
	// Everything: no kinds, or "*/*": every resource and subresource.
	Everything bool
	// TopLevel: "*": every resource without subresource, plus
	// pods/ephemeralcontainers (Kyverno matches Pod rules on it).
	TopLevel bool
	// Resources are the explicitly resolved Resources, sorted.
	Resources []Resource
}

// OnlyNamespacedOrNamespace reports whether every selected resource is
// namespaced or is a Namespace itself (top level), the resources for
// which a namespace selector on kubernetes.io/metadata.name is exact.
func (k KindSet) OnlyNamespacedOrNamespace() bool {
	if k.Everything || k.TopLevel {
		return false
	}
	for _, r := range k.Resources {
		isNamespaceObject := r.Group == "" && r.Resource == "namespaces" && r.Subresource == ""
		if !r.Namespaced && !isNamespaceObject {
			return false
		}
	}
	return true
}

// OnlyNamespaced reports whether every selected resource is namespaced.
func (k KindSet) OnlyNamespaced() bool {
	if k.Everything || k.TopLevel {
		return false
	}
	for _, r := range k.Resources {
		if !r.Namespaced {
			return false
		}
	}
	return true
}

// ResolveKinds resolves Kyverno kind spellings. A kind resolving to
// nothing is a failure: silently dropping it would narrow the rule.
func ResolveKinds(resolver KindResolver, kinds []string) (KindSet, *model.Refusal) {
	return CollectKinds(resolver, kinds, true)
}

// CollectKinds resolves kinds, every served version of each. Strict (for
// VAPs) refuses a kind that resolves to nothing; lax (for webhook
// registration) skips unserved kinds, which cannot be requested.
func CollectKinds(resolver KindResolver, kinds []string, strict bool) (KindSet, *model.Refusal) {
	var set KindSet
	if len(kinds) == 0 {
		set.Everything = true
		return set, nil
	}
	seen := map[Resource]bool{}
	for _, kind := range kinds {
		if kind == "*" {
			set.TopLevel = true
			continue
		}
		if sel, err := ParseKindSelector(kind); err == nil && sel == (KindSelector{Group: "*", Version: "*", Kind: "*", Subresource: "*"}) {
			set.Everything = true
			continue
		}
		resolved, err := resolver.Resolve(kind)
		if err != nil {
			return KindSet{}, model.Refuse(model.ReasonKindResolutionError, "kind %q: %v", kind, err)
		}
		if strict {
			if fl := strictResolution(kind, resolved); fl != nil {
				return KindSet{}, fl
			}
		}
		for _, r := range resolved {
			seen[r] = true
			if r.Group == "" && r.Resource == "pods" && r.Subresource == "" {
				eph := r
				eph.Subresource = "ephemeralcontainers"
				seen[eph] = true
			}
		}
	}
	for r := range seen {
		set.Resources = append(set.Resources, r)
	}
	sortResources(set.Resources)
	return set, nil
}

// strictResolution refuses a kind that resolves to nothing: dropping it
// would narrow the rule silently. A kind served in several versions
// (autoscaling v1 and v2 HorizontalPodAutoscaler) resolves to each of them:
// Kyverno registers its webhook for every served version and evaluates the
// object in the version it was sent, which the VAP's Exact match policy
// with one resource rule per version does too.
func strictResolution(kind string, resolved []Resource) *model.Refusal {
	if len(resolved) == 0 {
		return model.Refuse(model.ReasonKindUnresolved, "kind %q matches no served resource", kind)
	}
	return nil
}
