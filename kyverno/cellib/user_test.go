// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"testing"

	"github.com/kyvap/kyvap/kyverno/cellib/internal/user"
)

func TestUser(t *testing.T) {
	cm := map[string]any{"data": map[string]any{"sa": "system:serviceaccount:team-a:builder", "n": int64(1)}}
	runCases(t, newEnv(t, "user", "json"), []evalCase{
		{name: "service account", expr: "parseServiceAccount('system:serviceaccount:ns:sa')", want: user.ServiceAccount{Namespace: "ns", Name: "sa"}},
		{name: "prefixed", expr: "user.parseServiceAccount(object.data.sa)", object: cm, want: user.ServiceAccount{Namespace: "team-a", Name: "builder"}},
		{name: "fields", expr: "parseServiceAccount('system:serviceaccount:ns:sa').Namespace + '/' + parseServiceAccount('system:serviceaccount:ns:sa').Name", want: "ns/sa"},
		{name: "name keeps colons", expr: "parseServiceAccount('system:serviceaccount:ns:sa:extra')", want: user.ServiceAccount{Namespace: "ns", Name: "sa:extra"}},
		{name: "no name", expr: "parseServiceAccount('system:serviceaccount:ns')", want: user.ServiceAccount{}},
		{name: "empty parts", expr: "parseServiceAccount('system:serviceaccount::')", want: user.ServiceAccount{}},
		{name: "a user", expr: "parseServiceAccount('alice')", want: user.ServiceAccount{}},
		{name: "empty", expr: "parseServiceAccount('')", want: user.ServiceAccount{}},
		{name: "has empty field", expr: "has(parseServiceAccount('alice').Name)", want: false},
		{name: "has field", expr: "has(parseServiceAccount('system:serviceaccount:ns:sa').Name)", want: true},
		{name: "equal", expr: "parseServiceAccount('system:serviceaccount:ns:sa') == user.parseServiceAccount('system:serviceaccount:ns:sa')", want: true},
		{name: "not equal", expr: "parseServiceAccount('system:serviceaccount:ns:sa') == parseServiceAccount('alice')", want: false},
		{name: "type", expr: "json.marshal(type(parseServiceAccount('alice')))", want: `"user.ServiceAccount"`},
		// json.marshal serializes the Go struct: its json tags apply.
		{name: "marshal", expr: "json.marshal(parseServiceAccount('system:serviceaccount:ns:sa'))", want: `{"name":"sa","namespace":"ns"}`},
		{name: "marshal empty", expr: "json.marshal(parseServiceAccount('alice'))", want: `{}`},
		// The native type's literal, which Kyverno's environment accepts too.
		{name: "literal", expr: "user.ServiceAccount{Name: 'a'}", want: &user.ServiceAccount{Name: "a"}},
		{name: "literal equality", expr: "user.ServiceAccount{Namespace: 'x', Name: 'a'} == parseServiceAccount('system:serviceaccount:x:a')", want: true},
		{name: "type value", expr: "type(parseServiceAccount('')) == user.ServiceAccount", want: true},
		{name: "dyn int", expr: "parseServiceAccount(object.data.n).Name", object: cm, wantErr: "no such overload: parseServiceAccount(int)"},
		{name: "int", expr: "parseServiceAccount(1)", wantNoComp: "found no matching overload for 'parseServiceAccount' applied to '(int)'"},
		{name: "unknown field", expr: "parseServiceAccount('x').Foo", wantNoComp: "undefined field 'Foo'"},
		{name: "json field name", expr: "parseServiceAccount('x').name", wantNoComp: "undefined field 'name'"},
	})
}
