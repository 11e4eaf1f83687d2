package match

import "strings"

// wildcardMatch reports whether name matches a Kyverno wildcard pattern:
// '*' matches any run of characters (also none), '?' exactly one, anything
// else itself; the empty pattern matches only the empty name. Kyverno
// (ext/wildcard, go-wildcard v1.0.3) compares runes, so invalid UTF-8 bytes
// all read as U+FFFD there and here. Unlike Kyverno's recursive matcher,
// this one backtracks only to the last '*', so hostile patterns cost
// O(len(pattern)·len(name)) instead of exponential time.
func wildcardMatch(pattern, name string) bool {
	if pattern == "" {
		return name == ""
	}
	if pattern == "*" {
		return true
	}
	p, n := []rune(pattern), []rune(name)
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

// matchesAny reports whether name matches one of the patterns.
func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if wildcardMatch(p, name) {
			return true
		}
	}
	return false
}

// hasWildcard reports whether s holds a Kyverno wildcard character.
func hasWildcard(s string) bool {
	return strings.ContainsAny(s, "*?")
}
