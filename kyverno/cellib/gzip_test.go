// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"encoding/base64"
	"testing"
)

func TestGzip(t *testing.T) {
	// Kyverno's output for 'hello' and '' (by its CLI): fixed, since the
	// header's modification time is the epoch.
	hello, _ := base64.StdEncoding.DecodeString("H4sIAAAAAAAA/8pIzcnJBwQAAP//hqYQNgUAAAA=")
	empty, _ := base64.StdEncoding.DecodeString("H4sIAAAAAAAA/wEAAP//AAAAAAAAAAA=")
	cm := map[string]any{"data": map[string]any{"a": "some text", "n": int64(1)}, "binary": hello}
	runCases(t, newEnv(t, "gzip"), []evalCase{
		{name: "compress", expr: "gzip.compress('hello')", want: hello},
		{name: "compress empty", expr: "gzip.compress('')", want: empty},
		{name: "size", expr: "size(gzip.compress('hello'))", want: int64(29)},
		{name: "round trip", expr: "gzip.decompress(gzip.compress(object.data.a))", object: cm, want: "some text"},
		{name: "round trip empty", expr: "gzip.decompress(gzip.compress(''))", want: ""},
		{name: "decompress", expr: "gzip.decompress(object.binary)", object: cm, want: "hello"},
		{name: "not gzip", expr: "gzip.decompress(b'not gzip')", wantErr: "unexpected EOF"},
		{name: "no bytes", expr: "gzip.decompress(b'')", wantErr: "EOF"},
		{name: "header only", expr: "gzip.decompress(b'\\x1f\\x8b\\x08\\x00\\x00\\x00\\x00\\x00\\x00\\xff')", wantErr: "unexpected EOF"},
		{name: "bad magic", expr: "gzip.decompress(b'\\x1f\\x8c\\x08\\x00\\x00\\x00\\x00\\x00\\x00\\xff')", wantErr: "gzip: invalid header"},
		// compress is declared on dyn: anything compiles.
		{name: "compress int", expr: "gzip.compress(1)", wantErr: "unsupported type conversion from 'int' to string"},
		{name: "compress dyn int", expr: "gzip.compress(object.data.n)", object: cm, wantErr: "unsupported type conversion from 'int' to string"},
		{name: "compress bytes", expr: "gzip.compress(dyn(b'x'))", wantErr: "type conversion error from Bytes to 'string'"},
		{name: "decompress dyn string", expr: "gzip.decompress(object.data.a)", object: cm, wantErr: "no such overload: gzip.decompress(string)"},
		{name: "decompress string", expr: "gzip.decompress('x')", wantNoComp: "found no matching overload for 'gzip.decompress' applied to '(string)'"},
	})
}
