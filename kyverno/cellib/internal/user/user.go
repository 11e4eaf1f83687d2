// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package user holds the Go type behind the CEL type user.ServiceAccount of
// Kyverno's user library. cel-go names a native Go type after the last
// element of its package path, and Kyverno's type is named
// user.ServiceAccount: hence a package of that name.
package user

// ServiceAccount is the namespace and name of a service account, the result
// of parseServiceAccount. Like Kyverno's, its CEL fields are the Go field
// names (Name, Namespace): the json tags are not used by CEL.
type ServiceAccount struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}
