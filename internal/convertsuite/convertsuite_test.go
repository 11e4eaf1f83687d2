// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package convertsuite

import (
	"bytes"
	"context"
	"testing"

	"github.com/kyvap/kyvap/internal/kyvernosuite"
)

// TestConvertCorpus converts every test of the repository's verdict
// corpus and runs the converted folders: every row kept passes kyvap's
// evaluation (both paths), and every row of the source is accounted for:
// converted, left out with a reason, or not converted. The converted
// folders were checked with Kyverno v1.19.1's CLI (docs/convert.md).
func TestConvertCorpus(t *testing.T) {
	out := t.TempDir()
	var stderr bytes.Buffer
	c := New(Options{Files: []string{"../../test/conformance"}, Out: out}, &stderr)
	code := c.ConvertTests(c.FindTests())
	if code != exitInvalidRule {
		t.Fatalf("exit %d, want %d (the corpus has rules no ValidatingPolicy can express); stderr:\n%s", code, exitInvalidRule, stderr.String())
	}
	rows := c.Rows()
	t.Logf("%+v", rows)
	if rows.Source != rows.Converted+rows.LeftOut+rows.Unconverted {
		t.Fatalf("rows not accounted for: %+v", rows)
	}
	if rows.Differs != 0 || rows.Converted < 150 {
		t.Fatalf("rows: %+v; stderr:\n%s", rows, stderr.String())
	}
	suites, err := kyvernosuite.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i := range suites {
		report := kyvernosuite.Run(context.Background(), &suites[i], kyvernosuite.Options{})
		for _, row := range report.Rows {
			checked++
			if row.Status != kyvernosuite.StatusPass {
				t.Errorf("%s: %s %s: %s (VAP %s, engine %s): %s", suites[i].Path, row.Policy, row.Resource, row.Status, row.VAP.Result, row.Engine.Result, row.Reason)
			}
		}
	}
	if checked != rows.Converted {
		t.Errorf("%d rows checked, %d converted", checked, rows.Converted)
	}
}
