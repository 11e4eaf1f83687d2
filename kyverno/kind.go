// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"fmt"
	"strings"
)

// KindSelector is a parsed Kyverno kind spelling. Every part may hold
// Kyverno wildcards; "*" selects any group, version, kind or subresource, and
// an empty Subresource selects only requests without one.
type KindSelector struct {
	Group, Version, Kind, Subresource string
}

// ParseKindSelector splits a kind spelling as Kyverno's
// pkg/utils/kube/kind.go ParseKindSelector: "Kind", "version/Kind",
// "Kind/sub", "*/sub", "*/*", "group/version/Kind", "version/Kind/sub" and
// "group/version/Kind/sub", with '.' also separating the subresource in the
// last segment ("Pod.status").
//
// Kyverno turns a spelling it cannot parse into one that never matches; this
// returns an error instead, so that callers can report the policy bug: more
// than four segments (the selector is then empty), or an empty kind or version
// ("", "v1/", "apps//Deployment"; the selector is then the literal parse,
// which matches no real request, as in Kyverno).
func ParseKindSelector(input string) (KindSelector, error) {
	parts := strings.Split(input, "/")
	parts = append(parts[:len(parts)-1], strings.Split(parts[len(parts)-1], ".")...)
	var sel KindSelector
	switch len(parts) {
	case 1:
		sel = KindSelector{"*", "*", parts[0], ""}
	case 2:
		switch {
		case parts[0] == "*" && parts[1] == "*":
			sel = KindSelector{"*", "*", "*", "*"}
		case parts[0] == "*" && strings.ToLower(parts[1]) == parts[1]:
			// "*/scale": any kind's subresource.
			sel = KindSelector{"*", "*", "*", parts[1]}
		case IsVersion(parts[0]):
			sel = KindSelector{"*", parts[0], parts[1], ""}
		default:
			sel = KindSelector{"*", "*", parts[0], parts[1]}
		}
	case 3:
		if IsVersion(parts[0]) {
			sel = KindSelector{"*", parts[0], parts[1], parts[2]}
		} else {
			sel = KindSelector{parts[0], parts[1], parts[2], ""}
		}
	case 4:
		sel = KindSelector{parts[0], parts[1], parts[2], parts[3]}
	default:
		return KindSelector{}, fmt.Errorf("kind %q has more than four segments", input)
	}
	if sel.Kind == "" || sel.Version == "" {
		return sel, fmt.Errorf("kind %q has an empty kind or version", input)
	}
	return sel, nil
}

// IsVersion reports whether s reads as the version part of a kind spelling
// ("*", "v1", "v2beta1", ...): Kyverno's pkg/utils/kube/kind.go versionRegex,
// ^(v\d((alpha|beta)\d)?|\*)$, without the regular expression. It allows a
// single digit only, so in "v10/Foo" "v10" is a kind (with the subresource
// "Foo"), not a version, as in Kyverno.
func IsVersion(s string) bool {
	if s == "*" {
		return true
	}
	if len(s) < 2 || s[0] != 'v' || !isDigit(s[1]) {
		return false
	}
	rest := s[2:]
	if rest == "" {
		return true
	}
	for _, level := range []string{"alpha", "beta"} {
		if len(rest) == len(level)+1 && strings.HasPrefix(rest, level) && isDigit(rest[len(level)]) {
			return true
		}
	}
	return false
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
