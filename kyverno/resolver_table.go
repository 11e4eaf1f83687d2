// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

// NewResolver returns a KindResolver over exactly the given served
// resources (no built-in table): the operator builds them from discovery.
// A Resource with a Subresource adds that subresource to its parent.
func NewResolver(resources []Resource) *StaticResolver {
	index := map[[3]string]int{}
	var table []servedResource
	for _, r := range resources {
		key := [3]string{r.Group, r.Version, r.Resource}
		i, ok := index[key]
		if !ok {
			i = len(table)
			index[key] = i
			table = append(table, servedResource{Group: r.Group, Version: r.Version, Resource: r.Resource, Kind: r.Kind, Namespaced: r.Namespaced})
		}
		if r.Subresource != "" {
			table[i].Subresources = append(table[i].Subresources, r.Subresource)
		} else {
			table[i].Kind, table[i].Namespaced = r.Kind, r.Namespaced
		}
	}
	return &StaticResolver{resources: table}
}
