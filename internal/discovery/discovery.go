// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package discovery builds kind resolvers from an API server's discovery:
// the operator's (rebuilt when CRDs change) and the CLI's (kyvap convert
// --cluster).
package discovery

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientdiscovery "k8s.io/client-go/discovery"

	"github.com/kyvap/kyvap/kyverno"
)

// Resolver builds a resolver over the resources the API server serves.
// Groups that fail to answer (an aggregated API down) are left out: their
// kinds resolve to nothing; partial is then the discovery error, for the
// caller to report.
func Resolver(client clientdiscovery.DiscoveryInterface) (resolver kyverno.KindResolver, partial, err error) {
	_, lists, err := client.ServerGroupsAndResources()
	if err != nil && !clientdiscovery.IsGroupDiscoveryFailedError(err) {
		return nil, nil, fmt.Errorf("discovering served resources: %w", err)
	}
	return kyverno.NewResolver(Resources(lists)), err, nil
}

// Resources flattens discovery lists into translate.Resources;
// "pods/exec" becomes the exec subresource of pods.
func Resources(lists []*metav1.APIResourceList) []kyverno.Resource {
	var out []kyverno.Resource
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
			res := kyverno.Resource{Group: gv.Group, Version: gv.Version, Resource: r.Name, Kind: r.Kind, Namespaced: r.Namespaced}
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
