// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"strings"
	"testing"
)

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"", "", true},
		{"", "x", false},
		{"*", "", true},
		{"*", "anything", true},
		{"?", "", false},
		{"?", "x", true},
		{"?", "é", true}, // one rune, two bytes
		{"??", "é", false},
		{"a", "a", true},
		{"a", "A", false},
		{"a*b?c", "abXc", true},
		{"a*b?c", "aXXbYc", true},
		{"a*b?c", "abc", false},
		{"a*b?c", "aXbYcZ", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"kube-*", "kube-system", true},
		{"kube-*", "kube", false},
		{"*-system", "kube-system", true},
		{"d??ault", "default", true},
		{"**a", "a", true},
		{"*?*", "", false},
		{"*?*", "x", true},
		// Every '*' of the pattern is a wildcard, also where the name holds a
		// literal '*' (go-wildcard v1.0.3; translate/ used to answer false).
		{"*a", "*ba", true},
		{"*a", "*b", false},
		{"a?", "a*", true},
		{"\xff", "\xfe", true}, // both invalid UTF-8: U+FFFD
	}
	for _, tt := range tests {
		if got := WildcardMatch(tt.pattern, tt.name); got != tt.want {
			t.Errorf("WildcardMatch(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// goWildcard is github.com/IGLOU-EU/go-wildcard v1.0.3's Match, which
// Kyverno's ext/wildcard calls (exponential, for tests only).
func goWildcard(pattern, name string) bool {
	if pattern == "" {
		return name == pattern
	}
	if pattern == "*" {
		return true
	}
	return deepMatchRune([]rune(name), []rune(pattern))
}

func deepMatchRune(str, pattern []rune) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		default:
			if len(str) == 0 || str[0] != pattern[0] {
				return false
			}
		case '?':
			if len(str) == 0 {
				return false
			}
		case '*':
			return deepMatchRune(str, pattern[1:]) || (len(str) > 0 && deepMatchRune(str[1:], pattern))
		}
		str = str[1:]
		pattern = pattern[1:]
	}
	return len(str) == 0 && len(pattern) == 0
}

func FuzzWildcardMatch(f *testing.F) {
	f.Add("a*b?c", "aXXbYc")
	f.Add("*?*", "")
	f.Add("*a", "*ba")
	f.Add("\xff", "\xfe")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 12 || len(name) > 24 {
			return // keep the exponential reference cheap
		}
		if got, want := WildcardMatch(pattern, name), goWildcard(pattern, name); got != want {
			t.Errorf("WildcardMatch(%q, %q) = %v, go-wildcard says %v", pattern, name, got, want)
		}
	})
}

func TestWildcardMatchIsNotExponential(t *testing.T) {
	pattern := strings.Repeat("*a", 40) + "b"
	name := strings.Repeat("a", 200)
	if WildcardMatch(pattern, name) {
		t.Error("matched")
	}
}

func TestCheckPatterns(t *testing.T) {
	tests := []struct {
		patterns, names []string
		want            bool
	}{
		{nil, []string{"a"}, false},
		{[]string{"a"}, nil, false},
		{[]string{"x", "a*"}, []string{"abc"}, true},
		{[]string{"x", "y"}, []string{"abc"}, false},
		{[]string{"b?"}, []string{"a", "bc"}, true},
		{[]string{""}, []string{""}, true},
	}
	for _, tt := range tests {
		if got := CheckPatterns(tt.patterns, tt.names...); got != tt.want {
			t.Errorf("CheckPatterns(%q, %q) = %v, want %v", tt.patterns, tt.names, got, tt.want)
		}
	}
}

func TestContainsWildcard(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", false},
		{"default", false},
		{"kube-*", true},
		{"d?fault", true},
		{"[a]", false},
	}
	for _, tt := range tests {
		if got := ContainsWildcard(tt.in); got != tt.want {
			t.Errorf("ContainsWildcard(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
