// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/kyvap/kyvap/migrate"
	"github.com/kyvap/kyvap/policytest"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// TestClusterReplayConverted converts every other test of the corpus (in
// path order, the odd ones; migrate's TestConvertCorpus converts the even
// ones, so that a test run converts the corpus once) with kyvap convert and
// replays the converted tests on the real API server, as kyvap test
// --cluster does: the ValidatingPolicies converted from the ClusterPolicies
// are created, kyvap enforces them (VAPs, its webhook for the rest), and
// every converted row must get the source's expected verdict from the API
// server (docs/convert.md).
func TestClusterReplayConverted(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	var stderr bytes.Buffer
	c := migrate.New(migrate.Options{Files: []string{"."}, Out: out}, &stderr)
	all := c.FindTests()
	sort.Strings(all)
	var slice []string
	for i := 1; i < len(all); i += 2 {
		slice = append(slice, all[i])
	}
	c.ConvertTests(slice)
	if rows := c.Rows(); rows.Converted < 60 || rows.Differs > 0 {
		t.Fatalf("conversion: %+v\n%s", rows, stderr.String())
	}
	suites, err := policytest.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	cp.EnsureNamespace(t, controlplane.OperatorNamespace, nil)
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: true}, controlplane.FreePort(t))
	replay := cluster(t)
	var total policytest.Summary
	denied := 0
	for _, s := range suites {
		name := strings.TrimSuffix(strings.TrimPrefix(s.Path, out+"/"), "/kyverno-test.yaml")
		t.Run(name, func(t *testing.T) {
			report := policytest.RunCluster(ctx, &s, replay, policytest.Options{})
			total.Add(report.Summary)
			for _, row := range report.Rows {
				switch {
				case row.Status == policytest.StatusFail:
					t.Errorf("%s on %s (%s): %s", row.Policy, row.Resource, row.Operation, row.Reason)
				case row.Status == policytest.StatusSkipped && strings.HasPrefix(row.Reason, policytest.ForeignDenial):
					t.Errorf("%s on %s: %s", row.Policy, row.Resource, row.Reason)
				case row.Status == policytest.StatusPass && row.Cluster != nil && row.Cluster.Result == policytest.Fail:
					denied++
				}
			}
		})
	}
	t.Logf("converted corpus on the API server: %s, %d denied or warned by the API server", total, denied)
	if flagRun() == "" && (total.Passed < 50 || denied < 15) {
		t.Errorf("only %d converted rows replayed, %d denied", total.Passed, denied)
	}
}
