// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"math"
	"testing"
)

func TestMath(t *testing.T) {
	cm := map[string]any{"data": map[string]any{"num": "12", "f": 2.345}}
	runCases(t, newEnv(t, "math"), []evalCase{
		{name: "two decimals", expr: "math.round(1.2345, 2)", want: 1.23},
		{name: "half away from zero", expr: "math.round(2.5, 0)", want: 3.0},
		{name: "negative half", expr: "math.round(-2.5, 0)", want: -3.0},
		{name: "negative precision", expr: "math.round(1234.5, -2)", want: 1200.0},
		// Floating point as in Kyverno: 1.005*100 is 100.49999999999999.
		{name: "binary fraction", expr: "math.round(1.005, 2)", want: 1.0},
		{name: "binary fraction up", expr: "math.round(2.675, 2)", want: 2.68},
		{name: "beyond double precision", expr: "math.round(0.1 + 0.2, 20)", want: 0.30000000000000004},
		{name: "overflow", expr: "math.round(1e308, 10)", want: math.Inf(1)},
		{name: "shift overflow", expr: "string(math.round(1.5, 400))", want: "NaN"},
		{name: "from the object", expr: "math.round(double(object.data.num), 1)", object: cm, want: 12.0},
		{name: "dyn double", expr: "math.round(object.data.f, 1)", object: cm, want: 2.3},
		{name: "dyn int", expr: "math.round(dyn(1), 2)", wantErr: "no such overload: math.round(int, int)"},
		{name: "int", expr: "math.round(1, 2)", wantNoComp: "found no matching overload for 'math.round' applied to '(int, int)'"},
		// cel-go's ext.Math one-argument round: in Kyverno's base
		// environment, not in this library nor in the API server's.
		{name: "one argument", expr: "math.round(1.5)", wantNoComp: "found no matching overload for 'math.round' applied to '(double)'"},
	})
}
