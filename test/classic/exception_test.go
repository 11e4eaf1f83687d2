// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"encoding/json"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/classic"
)

// exceptionCases are PolicyException conditions where Kyverno's exception
// semantics differ from a rule's: the all block first, an empty any block
// holding, a failing variable making the exception not apply.
var exceptionCases = map[string]string{
	"all-then-any": `
all:
- key: "{{ request.object.metadata.name }}"
  operator: Equals
  value: "prod-*"
any:
- key: "{{ request.object.metadata.labels.team }}"
  operator: AnyIn
  value: ["payments", "web-*"]`,
	"all-failing-any-true": `
any:
- key: "{{ request.operation }}"
  operator: Equals
  value: CREATE
all:
- key: "{{ request.object.metadata.labels.team }}"
  operator: Equals
  value: payments`,
	"empty-any": `
any: []
all:
- key: "{{ request.object.metadata.labels.color || '' }}"
  operator: Equals
  value: blue`,
	"any-failing-after-false": `
any:
- key: "{{ request.object.metadata.labels.color || '' }}"
  operator: Equals
  value: blue
- key: "{{ request.object.spec.replicas }}"
  operator: Equals
  value: "1"`,
}

// TestExceptionConditionsAgreeWithKyverno compares the compiled
// conditions of PolicyExceptions (classic.ExceptionConditions) with
// Kyverno's conditions.CheckAnyAllConditions, on the exception cases and
// on every {any, all} block of the rule cases: the CEL must hold exactly
// where Kyverno applies the exception, and never fail.
func TestExceptionConditionsAgreeWithKyverno(t *testing.T) {
	oracle := buildOracle(t)
	env := requestEnv(t)
	cases := map[string][]byte{}
	for name, c := range exceptionCases {
		cases[name] = mustYAMLToJSON(t, c)
	}
	for name, c := range conditionCases {
		raw := mustYAMLToJSON(t, c)
		var block map[string]json.RawMessage
		// old-object reads the old object in its value, which the
		// compiler refuses (frontend/classic's refusal tests).
		if json.Unmarshal(raw, &block) == nil && name != "old-object" {
			cases["rule-"+name] = raw
		}
	}
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	compared, disagreements := 0, 0
	var noVerdicts noVerdictCounts
	verdicts := map[string]int{}
	for _, name := range names {
		applies, fl := classic.ExceptionConditions(cases[name], classic.RequestScope)
		if fl != nil {
			t.Errorf("%s: refused: %s", name, fl.Message)
			continue
		}
		program, cpu, panics, invalid := compile(t, env, applies), cpuDependence(t, env, applies), noVerdict(t, env, applies, classic.KyvernoPanics), noVerdict(t, env, applies, classic.InvalidLabelValue)
		requests := requestsAround(cases[name])
		kyverno := runOracle(t, oracle, map[string]any{"exceptionConditions": json.RawMessage(cases[name]), "requests": requests}, len(requests))
		for i, r := range requests {
			compared++
			verdicts[kyverno[i]]++
			want := kyverno[i]
			if want == "error" {
				want = "false" // Kyverno logs the error and skips the exception
			}
			got := evaluateRequest(program, r)
			if skip, disagree := noVerdicts.skip(t, name, r, kyverno[i], got, cpu, panics, invalid); skip {
				if disagree {
					disagreements++
				}
				continue
			}
			if got != want {
				disagreements++
				if disagreements <= 20 {
					data, _ := json.Marshal(r)
					t.Errorf("%s: %s: Kyverno says %s, kyvap's CEL %s", name, data, kyverno[i], got)
				}
			}
		}
	}
	t.Logf("%d exception condition blocks, %d requests compared (Kyverno: %v), %d disagreements; %s", len(names), compared, verdicts, disagreements, noVerdicts)
	if compared < 2000 {
		t.Errorf("only %d requests compared", compared)
	}
}

func mustYAMLToJSON(t *testing.T, s string) []byte {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
