// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package celast

import (
	"sort"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/ext"
	"github.com/google/go-cmp/cmp"
)

func TestFreeIdents(t *testing.T) {
	env, err := cel.NewEnv(ext.TwoVarComprehensions())
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string][]string{
		`a.b + c`:                                  {"a", "c"},
		`[1, 2].all(x, x > y)`:                     {"y"},
		`xs.map(x, x + 1)`:                         {"xs"},
		`[x].exists(x, x == x)`:                    {"x"}, // the range's x is the outer one
		`{"k": v}.all(k, k != w)`:                  {"v", "w"},
		`m.all(k, v, k == v)`:                      {"m"},
		`[1].all(x, true) && x`:                    {"x"},
		`"literal"`:                                nil,
		`[[1].map(i, i)].all(l, l.all(j, j == i))`: {"i"},
	} {
		parsed, iss := env.Parse(in)
		if iss != nil && iss.Err() != nil {
			t.Fatalf("%s: %v", in, iss.Err())
		}
		var got []string
		FreeIdents(parsed.NativeRep().Expr(), func(id ast.Expr) bool {
			got = append(got, id.AsIdent())
			return true
		})
		sort.Strings(got)
		got = dedupe(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", in, diff)
		}
	}
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func TestFreeIdentsStops(t *testing.T) {
	env, _ := cel.NewEnv()
	parsed, _ := env.Parse(`a + b + c`)
	n := 0
	if FreeIdents(parsed.NativeRep().Expr(), func(ast.Expr) bool { n++; return false }) || n != 1 {
		t.Errorf("the walk went on after found returned false: %d identifiers seen", n)
	}
}
