// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Kyverno's membership operators read a string value as a JSON array of
// strings (json.Unmarshal into a []string). When the string is known at
// run time only, the CEL below decides that with RE2 expressions: the
// JSON text such an Unmarshal accepts is a regular language (whitespace,
// brackets, commas, strings and nulls; a null element is the empty
// string, and the whole text null an empty array).
const (
	jsonSpace  = `[ \t\n\r]*`
	jsonString = `"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"`
	// jsonElement is one element Unmarshal takes into a string.
	jsonElement = `(?:` + jsonString + `|null)`
)

// jsonStringArrayRegex is the RE2 expression of a text json.Unmarshal
// reads into a []string without error.
var jsonStringArrayRegex = `^` + jsonSpace + `(?:null|\[` + jsonSpace + `(?:` + jsonElement + jsonSpace + `(?:,` + jsonSpace + jsonElement + jsonSpace + `)*)?\])` + jsonSpace + `$`

// jsonStringArrayHolding is the RE2 expression of a text json.Unmarshal
// reads into a []string holding s: anchored, so that every element is a
// token of the whole array (a JSON string ends at its first unescaped
// quote, so the tokens are those of a left-to-right scan). ok is false
// where s holds a rune an invalid escape decodes to (U+FFFD), which this
// does not enumerate.
func jsonStringArrayHolding(s string) (expr string, ok bool) {
	if strings.ContainsRune(s, utf8.RuneError) {
		return "", false
	}
	element := `"` + jsonEncodings(s) + `"`
	if s == "" {
		// Unmarshal leaves a null element the empty string.
		element = `(?:""|null)`
	}
	item := jsonElement + jsonSpace + `,` + jsonSpace
	return `^` + jsonSpace + `\[` + jsonSpace + `(?:` + item + `)*` + element + jsonSpace + `(?:,` + jsonSpace + jsonElement + jsonSpace + `)*\]` + jsonSpace + `$`, true
}

// jsonEncodings is the RE2 expression of every JSON string body that
// decodes to s: each rune written as itself (where JSON allows it), as a
// short escape, or as \u escapes (a surrogate pair past the BMP), in any
// case of hexadecimal digit.
func jsonEncodings(s string) string {
	var b strings.Builder
	for _, r := range s {
		var forms []string
		switch {
		case r == '"':
			forms = append(forms, `\\"`)
		case r == '\\':
			forms = append(forms, `\\\\`)
		case r >= 0x20:
			forms = append(forms, regexp.QuoteMeta(string(r)))
		}
		if short, found := map[rune]string{'/': `\\/`, '\b': `\\b`, '\f': `\\f`, '\n': `\\n`, '\r': `\\r`, '\t': `\\t`}[r]; found {
			forms = append(forms, short)
		}
		if r < 0x10000 {
			forms = append(forms, hexEscape(r))
		} else {
			r -= 0x10000
			forms = append(forms, hexEscape(0xD800+(r>>10))+hexEscape(0xDC00+(r&0x3FF)))
		}
		b.WriteString("(?:" + strings.Join(forms, "|") + ")")
	}
	return b.String()
}

// hexEscape is the RE2 expression of \uXXXX for the code unit u, its
// hexadecimal digits in either case.
func hexEscape(u rune) string {
	var b strings.Builder
	b.WriteString(`\\u`)
	for _, d := range fmt.Sprintf("%04x", u) {
		if d >= 'a' && d <= 'f' {
			b.WriteString("[" + string(d) + strings.ToUpper(string(d)) + "]")
		} else {
			b.WriteRune(d)
		}
	}
	return b.String()
}
