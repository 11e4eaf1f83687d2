// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"testing"
	"unicode/utf8"
)

func TestRandom(t *testing.T) {
	obj := map[string]any{"pattern": "[a-f0-9]{12}", "n": int64(1)}
	runCases(t, newEnv(t, "random"), []evalCase{
		{name: "class", expr: "random('[a-z]{5}').matches('^[a-z]{5}$')", want: true},
		{name: "from the object", expr: "random(object.pattern).matches('^[a-f0-9]{12}$')", object: obj, want: true},
		{name: "default", expr: "random().matches('^[0-9a-z]{8}$')", want: true},
		{name: "prefixed default", expr: "random.random().matches('^[0-9a-z]{8}$')", want: true},
		{name: "prefixed", expr: "random.random('x{3}')", want: "xxx"},
		{name: "literal", expr: "random('abc')", want: "abc"},
		{name: "empty", expr: "random('')", want: ""},
		{name: "one alternative", expr: "random('a|a')", want: "a"},
		{name: "anchors generate nothing", expr: "random('^a$')", want: "a"},
		{name: "groups", expr: "random('(a)(b)')", want: "ab"},
		{name: "bounded repeat", expr: "random('[a-c]{2,3}').matches('^[a-c]{2,3}$')", want: true},
		{name: "star", expr: "size(random('x*')) <= 4096", want: true},
		{name: "plus", expr: "size(random('x+')) >= 1", want: true},
		{name: "POSIX class", expr: "random('[[:digit:]]{3}').matches('^[0-9]{3}$')", want: true},
		{name: "NUL", expr: "random('[\\\\x00]')", want: "\x00"},
		{name: "any character", expr: "size(random('.'))", want: int64(1)},
		// No Perl syntax: goregen parses with no flags.
		{name: "Perl class", expr: "random('\\\\d')", wantErr: "error parsing regexp: invalid escape sequence: `\\d`"},
		{name: "flags", expr: "random('(?i)a')", wantErr: "error parsing regexp: missing argument to repetition operator: `?`"},
		{name: "non-capturing group", expr: "random('(?:a)')", wantErr: "error parsing regexp: missing argument to repetition operator: `?`"},
		{name: "Unicode class", expr: "random('\\\\pL')", wantErr: "error parsing regexp: invalid escape sequence: `\\p`"},
		{name: "unclosed class", expr: "random('[')", wantErr: "error parsing regexp: missing closing ]: `[`"},
		{name: "repeat count", expr: "random('a{1001}')", wantErr: "error parsing regexp: invalid repeat count: `{1001}`"},
		// An empty class panics in goregen: an internal error.
		{name: "empty class", expr: "random('[^\\\\x00-\\\\x{10FFFF}]')", wantErr: "internal error: invalid argument to Int31n"},
		{name: "empty class in a concatenation", expr: "random('a[^\\\\x00-\\\\x{10FFFF}]')", wantErr: "internal error: invalid argument to Int31n"},
		{name: "dyn int", expr: "random(object.n)", object: obj, wantErr: "no such overload: random(int)"},
		{name: "int", expr: "random(1)", wantNoComp: "found no matching overload for 'random' applied to '(int)'"},
	})
}

// TestRandomSpread checks goregen's bounds over many draws: an unbounded
// repetition goes up to 4096 (uniformly), alternatives are all reachable,
// and . yields any rune but the invalid ones' replacement.
func TestRandomSpread(t *testing.T) {
	longest := 0
	seen := map[string]bool{}
	for range 200 {
		star, ok := randomString("x*").Value().(string)
		if !ok || len(star) > regenMaxRepeat {
			t.Fatalf("random('x*') = %v", randomString("x*"))
		}
		longest = max(longest, len(star))
		seen[randomString("a|b|c").Value().(string)] = true
		if r, _ := utf8.DecodeRuneInString(randomString(".").Value().(string)); r == 0 {
			t.Errorf("random('.') gave NUL")
		}
	}
	if longest <= regenMaxRepeat/2 {
		t.Errorf("random('x*'): at most %d characters in 200 draws", longest)
	}
	if len(seen) != 3 {
		t.Errorf("random('a|b|c') gave only %v", seen)
	}
}
