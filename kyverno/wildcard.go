// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import "strings"

// WildcardMatch reports whether name matches a Kyverno wildcard pattern, as
// Kyverno's ext/wildcard/match.go Match (github.com/IGLOU-EU/go-wildcard
// v1.0.3, wildcard.go Match): '*' matches any run of characters (also
// none), '?' exactly one, anything else itself. Every '*' and '?' of the
// pattern is a wildcard, even where name holds the same character: "*a"
// matches "*ba". The empty pattern matches only the empty name, and "*"
// matches everything.
//
// Kyverno compares runes, so invalid UTF-8 bytes all read as U+FFFD there
// and here. Unlike go-wildcard's recursion, which is exponential in the
// number of '*', this backtracks only to the last '*' seen, so a hostile
// pattern costs O(len(pattern)·len(name)); the answers are the same.
func WildcardMatch(pattern, name string) bool {
	if pattern == "" {
		return name == ""
	}
	if pattern == "*" {
		return true
	}
	p, n := []rune(pattern), []rune(name)
	// star is the index of the last '*' in p, mark the position in n it
	// currently stands for the end of; on a mismatch the '*' swallows one
	// more rune of n and matching resumes after it.
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// CheckPatterns reports whether one of the names matches one of the
// patterns, as Kyverno's ext/wildcard/utils.go CheckPatterns.
func CheckPatterns(patterns []string, names ...string) bool {
	for _, name := range names {
		for _, pattern := range patterns {
			if WildcardMatch(pattern, name) {
				return true
			}
		}
	}
	return false
}

// ContainsWildcard reports whether s holds a Kyverno wildcard character
// ('*' or '?'), as Kyverno's ext/wildcard/utils.go ContainsWildcard: such a
// value is a pattern, not a literal.
func ContainsWildcard(s string) bool {
	return strings.ContainsAny(s, "*?")
}
