// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine"
)

// patternVariablesPolicy holds patterns whose values are one variable
// (frontend/classic runtime.go): in a foreach, the element's value string
// read from the request (plain, under a global anchor, under an equality
// anchor on a list of ports) and an element's value as the pattern of a
// label; a rule's pattern and anyPattern (with a conditional anchor).
const patternVariablesPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: pattern-variables
  annotations:
    pod-policies.kyverno.io/autogen-controllers: none
spec:
  validationFailureAction: Audit
  rules:
  - name: plain
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers
        pattern:
          value: "{{ request.object.spec.p }}"
  - name: global
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers
        pattern:
          <(value): "{{ request.object.spec.p }}"
          name: checked
  - name: port
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers
        pattern:
          =(ports):
          - containerPort: "{{ request.object.spec.p }}"
  - name: rule-pattern
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      pattern:
        spec:
          containers:
          - value: "{{ request.object.spec.p }}"
  - name: rule-any-pattern
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      anyPattern:
      - spec:
          containers:
          - (name): other
            value: "{{ request.object.spec.p }}"
      - metadata:
          labels:
            tier: "{{ request.object.spec.p }}"
  - name: element-as-pattern
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers
        elementScope: false
        pattern:
          metadata:
            labels:
              =(tier): "{{ element.value }}"`

// substitutedValues are what the pattern values are substituted with:
// value strings of every operator, range, duration, quantity and wildcard
// form, and the other JSON types.
var substitutedValues = []any{
	"2", "!2", ">1", ">=2", "<3", "<=2", ">1 & <3", " >1&<3 ", "1-5", "1!-5", "3-4", "-1-5", "1.5-2.5", "10-2", "0-0",
	"1h-2h", "2 | 3", "*|2", ">=1 & <=3 | 10", "*", "?", "?*", "a*", "*m", "a?c", "1k", "1000", ">500m", "1Ki", "1e3",
	"1h", "<2h", ">=60m", "!1h", "60m", "0", "", " ", "  2  ", "\t2", "ab", "true", "false", "null", ">", "!", "<=", "|",
	"&", "2&", "> 1", "!-", "1.5", "0.5-2.5", "+2", "0x10", "1E+00", "[.]", "a.c", "(x)", "\\d",
	int64(2), 1.5, int64(0), int64(-1), 1e3, true, false, nil, map[string]any{"a": "b"}, []any{"2"},
}

// checkedValues are the values the patterns are checked against: an int
// as a container's port (a field of the Pod's schema, which the API server
// and kyvap's engine read as an int; an int in a field outside the schema
// is a double to kyvap's engine, and a double fails to evaluate, named,
// against a value string known at run time).
var checkedValues = []any{
	"2", "3", "0", "-1", "1.5", "1000", "1k", "1Ki", "1024", "100m", "0.1", "1e3", "1h", "60m", "3600s", "90m", "1h30m",
	"ab", "abc", "a.c", "axc", "true", "false", "*", "1-5", " 2", "+2", "0x10", "1E+00", "", "m", "(x)", "\\d",
	int64(0), int64(2), int64(3), int64(1000), int64(-1), int64(3600), true, false, nil,
	map[string]any{"a": "b"}, []any{"2", "3"}, []any{},
}

// TestPatternVariablesAgreeWithKyverno runs foreach patterns whose values
// are one variable two ways on Pods built around them: Kyverno's engine
// (its admission path) and kyvap's (the rules compiled, on kyvap's engine):
// every substituted value against every checked value, missing ones
// included, on CREATE and DELETE. Each rule's status must agree, except
// where kyvap's CEL fails by one of its named failures
// (classic.FloatAgainstRuntimeValueString, classic.SubstitutedNonString),
// counted apart.
func TestPatternVariablesAgreeWithKyverno(t *testing.T) {
	oracle := buildOracle(t)
	data, err := yaml.YAMLToJSON([]byte(patternVariablesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	var policy kyvernov1.ClusterPolicy
	if err := json.Unmarshal(data, &policy); err != nil {
		t.Fatal(err)
	}
	eng := kyvapEngine(t, &policy)
	var requests []admissionRequest
	// nonString[i]: request i's substituted value, or the element's
	// value (the last rule's pattern), is neither a string nor missing,
	// which kyvap's CEL fails by classic.SubstitutedNonString (inside a
	// foreach, an element that fails to evaluate).
	var nonString []bool
	missing := struct{}{}
	substituted := append(append([]any(nil), substitutedValues...), missing)
	for i, p := range substituted {
		for j, x := range slice(append(append([]any(nil), checkedValues...), missing), i) {
			container := map[string]any{"name": "checked"}
			switch x.(type) {
			case struct{}:
			case int64:
				container["ports"] = []any{map[string]any{"containerPort": x}}
			default:
				container["value"] = x
			}
			spec := map[string]any{"containers": []any{container}}
			if p != missing {
				spec["p"] = p
			}
			tier := checkedValues[(i+j)%len(checkedValues)]
			pod := map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": fmt.Sprint(tier)}}, "spec": spec}
			requests = append(requests, admissionRequest{Operation: "CREATE", Object: pod})
			nonString = append(nonString, isNonString(p, x))
			if j%5 == 0 {
				requests = append(requests, admissionRequest{Operation: "DELETE", OldObject: pod})
				nonString = append(nonString, isNonString(p, x))
			}
		}
	}
	if len(podRequests(requests)) != len(requests) {
		t.Fatal("a request is no Pod's")
	}
	requests = podRequests(requests)
	kyverno := askPolicy(t, oracle, data, requests)
	compared, disagreements, named := 0, 0, map[string]int{}
	statuses := map[string]int{}
	for i, r := range requests {
		got, messages := kyvapOutcomes(t, eng, r)
		rules := map[string]bool{}
		for rule := range got {
			rules[rule] = true
		}
		for rule := range kyverno[i] {
			rules[rule] = true
		}
		names := make([]string, 0, len(rules))
		for rule := range rules {
			names = append(names, rule)
		}
		sort.Strings(names)
		for _, rule := range names {
			compared++
			want := kyverno[i][rule]
			statuses[want]++
			if got[rule] == want {
				continue
			}
			if got[rule] == "error" && nonString[i] && (strings.Contains(messages[rule], "a foreach element failed to evaluate") || strings.HasPrefix(rule, "rule-") && strings.Contains(messages[rule], "type conversion error from 'string' to 'int'")) {
				named["a pattern value substituted with null, a number, a bool, a map or a list"]++
				continue
			}
			disagreements++
			if disagreements <= 20 {
				obj, _ := json.Marshal(r.Object)
				old, _ := json.Marshal(r.OldObject)
				msg := messages[rule]
				if len(msg) > 200 {
					msg = msg[len(msg)-200:]
				}
				t.Errorf("%s %s %s (old %s): Kyverno says %q, kyvap %q (...%s)", rule, r.Operation, obj, old, want, got[rule], msg)
			}
		}
	}
	t.Logf("%d requests, %d rule results compared (Kyverno's statuses: %v), %d disagreements; kyvap's named failures, not compared: %v", len(requests), compared, statuses, disagreements, named)
	if compared < 3000 {
		t.Errorf("only %d rule results compared", compared)
	}
}

// isNonString says whether the substituted value p, or the element's
// value x (the last rule's pattern), is one kyvap's CEL fails on
// (classic.SubstitutedNonString): neither a string nor missing.
func isNonString(p, x any) bool {
	for _, v := range []any{p, x} {
		switch v.(type) {
		case string, struct{}:
		default:
			return true
		case nil:
			return true
		}
	}
	return false
}

// kyvapOutcomes are kyvap's engine's statuses of each rule on r, and
// their messages.
func kyvapOutcomes(t *testing.T, e *engine.Engine, r admissionRequest) (statuses, messages map[string]string) {
	t.Helper()
	req := admissionV1(r)
	outcomes, err := e.Evaluate(context.Background(), engine.Request{Admission: &req})
	if err != nil {
		t.Fatal(err)
	}
	statuses, messages = map[string]string{}, map[string]string{}
	for _, o := range outcomes {
		statuses[o.Rule], messages[o.Rule] = string(o.Result), o.Message
	}
	return statuses, messages
}
