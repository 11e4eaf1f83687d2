// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import "testing"

func TestHash(t *testing.T) {
	cm := map[string]any{"data": map[string]any{"a": "b", "n": int64(1)}}
	runCases(t, newEnv(t, "hash"), []evalCase{
		{name: "sha1 empty", expr: "sha1('')", want: "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{name: "sha1", expr: "sha1('abc')", want: "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{name: "sha256 empty", expr: "sha256('')", want: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{name: "sha256", expr: "sha256('abc')", want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{name: "md5", expr: "md5('abc')", want: "900150983cd24fb0d6963f7d28e17f72"},
		{name: "md5 of UTF-8 bytes", expr: "md5('héllo wörld')", want: "ed0c22cc110ede12327851863c078138"},
		{name: "hash.sha1", expr: "hash.sha1('abc')", want: "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{name: "hash.sha256", expr: "hash.sha256('abc')", want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{name: "hash.md5", expr: "hash.md5('abc')", want: "900150983cd24fb0d6963f7d28e17f72"},
		{name: "from the object", expr: "sha256(object.data.a)", object: cm, want: "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"},
		{name: "constant", expr: "mylib_version", want: ""},
		{name: "dyn int", expr: "sha256(object.data.n)", object: cm, wantErr: "no such overload: sha256(int)"},
		{name: "dyn int prefixed", expr: "hash.md5(dyn(1))", wantErr: "no such overload: hash.md5(int)"},
		{name: "missing key", expr: "md5(object.data.missing)", object: cm, wantErr: "no such key: missing"},
		{name: "int", expr: "sha256(1)", wantNoComp: "found no matching overload for 'sha256' applied to '(int)'"},
		{name: "bytes", expr: "sha1(b'a')", wantNoComp: "found no matching overload for 'sha1' applied to '(bytes)'"},
		{name: "no sha512", expr: "hash.sha512('a')", wantNoComp: "undeclared reference to 'hash'"},
		{name: "two arguments", expr: "md5('a', 'b')", wantNoComp: "found no matching overload for 'md5'"},
	})
}
