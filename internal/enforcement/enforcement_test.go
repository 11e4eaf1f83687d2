// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package enforcement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	message := `rule "context-rule": NOT ENFORCED by kyvap: the rule needs Kyverno's JMESPath engine (ContextEntries: context entries have no VAP form); ` +
		`rule "pattern": left to Kyverno (NonCELRule: not a validate.cel rule; Kyverno enforces it); ` +
		`rule "opted \"out\"": enforced by kyvap's webhook (GenerateOptOut: the policy is annotated kyvap.io/generate=false); ` +
		`rule "split": partly enforced by ValidatingAdmissionPolicy kyvap-p.split, the rest enforced by kyvap's webhook (X: y); ` +
		`rule "bad": not enforced: does not compile (CELCompileError); warning: something; ... and 3 more rules`
	rules, unlisted := Parse(message, map[string][]string{"cel": {"kyvap-p.cel"}, "split": {"kyvap-p.split"}})
	got := map[string]Enforcer{}
	for _, r := range rules {
		got[r.Name] = r.By
	}
	want := map[string]Enforcer{
		"context-rule": ByNobody, "pattern": ByKyverno, `opted "out"`: ByWebhook, "split": ByVAPAndWebhook, "bad": ByNobody, "cel": ByVAP,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if unlisted != 3 {
		t.Errorf("unlisted = %d, want 3", unlisted)
	}
	if rules[0].Name != "bad" || rules[len(rules)-1].Name != "split" {
		t.Errorf("not sorted: %v", rules)
	}
	if rules, _ := Parse("", nil); len(rules) != 0 {
		t.Errorf("empty message: %v", rules)
	}
}
