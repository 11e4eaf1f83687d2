// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"encoding/json"

	"github.com/kyvap/kyvap/kyverno"
)

// skippedByKyvernoConfig reports whether Kyverno's global configuration
// makes Kyverno skip the request before any policy: its webhook handler
// (pkg/webhooks/handlers/filter.go) checks the user and the request's
// namespace and name, its engine (pkg/engine/internal/match.go) the new and
// old objects' own namespace and name; the kind is that of the request's
// resource without its subresource.
func skippedByKyvernoConfig(cfg *kyverno.Config, req *Request) bool {
	if cfg == nil {
		return false
	}
	a := req.Admission
	if cfg.IsExcluded(a.UserInfo.Username, a.UserInfo.Groups, req.Roles, req.ClusterRoles) {
		return true
	}
	gvk := req.ResourceKind
	group, version, kind := a.Kind.Group, a.Kind.Version, a.Kind.Kind
	if gvk != nil {
		group, version, kind = gvk.Group, gvk.Version, gvk.Kind
	}
	if cfg.IsFiltered(group, version, kind, a.SubResource, a.Namespace, a.Name) {
		return true
	}
	for _, raw := range [][]byte{a.Object.Raw, a.OldObject.Raw} {
		if len(raw) == 0 || string(raw) == "null" {
			// Kyverno checks only the objects the request has.
			continue
		}
		var o struct {
			Metadata struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(raw, &o) == nil && cfg.IsFiltered(group, version, kind, a.SubResource, o.Metadata.Namespace, o.Metadata.Name) {
			return true
		}
	}
	return false
}
