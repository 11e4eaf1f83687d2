// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kyvap/kyvap/model"
)

// TestConditionsRefusals: the forms refused, each with a reason naming
// the construct, and the bounds on hostile input.
func TestConditionsRefusals(t *testing.T) {
	many := make([]map[string]any, MaxConditions+1)
	for i := range many {
		many[i] = map[string]any{"key": "{{ request.operation }}", "operator": "Equals", "value": "CREATE"}
	}
	tooMany, _ := json.Marshal(map[string]any{"any": many})
	deep := "request.object" + strings.Repeat(" || request.object", MaxPatternDepth+2)
	tests := map[string]struct {
		raw  string
		want string
	}{
		"not conditions":       {`"text"`, "neither a list nor {any, all}"},
		"too many":             {string(tooMany), fmt.Sprintf("more than %d conditions", MaxConditions)},
		"too long":             {`[{"key": "{{ ` + strings.Repeat("a.", MaxExpressionLength) + `b }}", "operator": "Equals", "value": "x"}]`, "longer than"},
		"too deep":             {`[{"key": "{{ ` + deep + ` }}", "operator": "Equals", "value": "x"}]`, "nesting deeper"},
		"unknown operator":     {`[{"key": "{{ request.operation }}", "operator": "Like", "value": "x"}]`, `the operator "like"`},
		"function":             {`[{"key": "{{ to_upper(request.operation) }}", "operator": "Equals", "value": "x"}]`, "the function to_upper()"},
		"interpolation":        {`[{"key": "ns/{{ request.namespace }}", "operator": "Equals", "value": "x"}]`, "inside a longer string"},
		"variable in value":    {`[{"key": "{{ request.operation }}", "operator": "AnyIn", "value": "{{ request.name }}"}]`, "a variable in the value of the operator AnyIn"},
		"reference":            {`[{"key": "$(./name)", "operator": "Equals", "value": "x"}]`, "a reference $(...)"},
		"roles":                {`[{"key": "{{ request.roles }}", "operator": "AnyIn", "value": ["x"]}]`, "request.roles"},
		"integer key":          {`[{"key": 3600, "operator": "Equals", "value": "{{ request.name }}"}]`, "an integer in a literal key"},
		"integer in variables": {`[{"key": "{{ request.name }}", "operator": "Equals", "value": ["{{ request.name }}", 1]}]`, "an integer inside a map or a list holding variables"},
		"integer past 2^53":    {`[{"key": "{{ request.name }}", "operator": "Equals", "value": 9007199254740993}]`, "past 2^53"},
		"seconds past 2^63":    {`[{"key": "{{ request.name }}", "operator": "GreaterThan", "value": 1e19}]`, "depends on the CPU"},
		"range":                {`[{"key": "{{ request.name }}", "operator": "AnyIn", "value": "1-5"}]`, "the range"},
		"value projection":     {`[{"key": "{{ request.object.spec.*.x }}", "operator": "AnyIn", "value": ["x"]}]`, "ValueProjection"},
		"contains a variable":  {`[{"key": "{{ contains(request.object.spec.a, request.name) }}", "operator": "Equals", "value": true}]`, "no literal"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, fl := Conditions([]byte(tt.raw), RequestScope)
			if fl == nil {
				t.Fatalf("compiled; want a refusal naming %q", tt.want)
			}
			if fl.Reason != model.ReasonJMESPathNotExpressible || !strings.Contains(fl.Message, tt.want) {
				t.Errorf("refusal %s: %s; want JMESPathNotExpressible naming %q", fl.Reason, fl.Message, tt.want)
			}
			if len(fl.Message) > 4096 {
				t.Errorf("refusal message of %d bytes", len(fl.Message))
			}
		})
	}
}

// TestContextRefusals: context entries that read outside the request, and
// variables that are not plain, are refused by name.
func TestContextRefusals(t *testing.T) {
	tests := map[string]struct {
		raw  string
		want string
	}{
		"api call":             {`{"name": "pods", "apiCall": {"urlPath": "/api/v1/pods"}}`, "reads apiCall, outside the request"},
		"config map":           {`{"name": "cm", "configMap": {"name": "x", "namespace": "y"}}`, "reads configMap"},
		"dotted name":          {`{"name": "a.b", "variable": {"value": 1}}`, "a plain name"},
		"reserved name":        {`{"name": "request", "variable": {"value": 1}}`, "a plain name"},
		"reference in path":    {`{"name": "v", "variable": {"jmesPath": "$(./x)"}}`, "a reference in its jmesPath"},
		"reference in default": {`{"name": "v", "variable": {"default": "$(./x)"}}`, "a reference in its default"},
		"not an object":        {`[1]`, "not an object"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, fl := ParseContext([][]byte{[]byte(tt.raw)})
			if fl == nil || !strings.Contains(fl.Message, tt.want) {
				t.Errorf("ParseContext = %v; want a refusal naming %q", fl, tt.want)
			}
		})
	}
}

// TestContextPathRefused: a variable in a context variable's jmesPath
// is compiled only where it is a string known when compiling.
func TestContextPathRefused(t *testing.T) {
	for name, entries := range map[string][]string{
		"request field": {`{"name": "v", "variable": {"jmesPath": "{{ request.object.metadata.name }}"}}`},
		"not a string":  {`{"name": "p", "variable": {"value": 1}}`, `{"name": "v", "variable": {"jmesPath": "{{ p }}"}}`},
		"queried":       {`{"name": "p", "variable": {"jmesPath": "request.name"}}`, `{"name": "v", "variable": {"jmesPath": "{{ p }}"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			raw := make([][]byte, len(entries))
			for i, e := range entries {
				raw[i] = []byte(e)
			}
			variables, fl := ParseContext(raw)
			if fl != nil {
				t.Fatal(fl)
			}
			scope := RequestScope
			scope.Variables = variables
			_, fl = Conditions([]byte(`[{"key": "{{ v }}", "operator": "Equals", "value": "x"}]`), scope)
			if fl == nil || !strings.Contains(fl.Message, "no string literal of an earlier context variable") {
				t.Errorf("Conditions = %v; want a refusal of the jmesPath", fl)
			}
		})
	}
}

// TestForEachRefusals: nested foreach, foreach context and missing lists.
func TestForEachRefusals(t *testing.T) {
	tests := map[string]struct {
		raw  string
		want string
	}{
		"nested":      {`{"list": "request.object.spec.containers", "foreach": [{"list": "element.ports", "deny": {}}]}`, "a nested foreach"},
		"context":     {`{"list": "request.object.spec.containers", "context": [{"name": "x", "variable": {"value": 1}}], "deny": {}}`, "context entries"},
		"no list":     {`{"deny": {}}`, "no list"},
		"no check":    {`{"list": "request.object.spec.containers"}`, "has no deny, pattern or anyPattern"},
		"both":        {`{"list": "request.object.spec.containers", "pattern": {"a": "b"}, "anyPattern": [{"a": "b"}]}`, "both pattern and anyPattern"},
		"list var":    {`{"list": "{{ request.name }}", "deny": {}}`, "a variable in the list"},
		"pattern var": {`{"list": "request.object.spec.containers", "pattern": {"name": "app-{{ request.name }}"}}`, "a variable in"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, fl := ForEach([][]byte{[]byte(tt.raw)}, RequestScope)
			if fl == nil || !strings.Contains(fl.Message, tt.want) {
				t.Errorf("ForEach = %v; want a refusal naming %q", fl, tt.want)
			}
		})
	}
	if _, fl := ForEach(nil, RequestScope); fl == nil {
		t.Error("an empty foreach compiled")
	}
}
