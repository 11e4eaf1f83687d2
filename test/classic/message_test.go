// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"

	"github.com/kyvap/kyvap/frontend/classic"
)

// messages are rule messages with variables, as policies write them.
var messages = []string{
	"Pod {{ request.object.metadata.name }} must set the team label.",
	"{{request.object.metadata.namespace}}/{{request.object.metadata.name}} is not allowed",
	"The value {{ request.object.spec.replicas || `1` }} is too small; {{ request.object.spec.x }} is set",
	"labels: {{ request.object.metadata.labels.team || 'none' }} on {{ request.operation }}",
}

// TestMessagesAgreeWithKyverno compiles each message and evaluates it on
// requests generated around it: the CEL's text must be Kyverno's, except
// where the CEL fails (the API server then shows the static template):
// where Kyverno fails too, and where the value is a map or a list (which
// Kyverno writes as JSON, and CEL cannot), counted apart.
func TestMessagesAgreeWithKyverno(t *testing.T) {
	oracle := buildOracle(t)
	env := requestEnv(t)
	compared, fallbacks, disagreements := 0, 0, 0
	for _, template := range messages {
		expression, fl := classic.Message(template, classic.RequestScope)
		if fl != nil {
			t.Errorf("%q: refused: %s", template, fl.Message)
			continue
		}
		ast, issues := env.Compile(expression)
		if issues != nil && issues.Err() != nil {
			t.Fatalf("%q: %s does not compile: %v", template, expression, issues.Err())
		}
		program, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(template)
		requests := requestsAround(raw)
		kyverno := askMessages(t, oracle, template, requests)
		for i, r := range requests {
			compared++
			got, ok := evaluateMessage(program, r)
			switch {
			case ok && kyverno[i] == got:
			case !ok && kyverno[i] == "error":
			case !ok && (strings.Contains(kyverno[i], "{") || strings.Contains(kyverno[i], "[")):
				fallbacks++
			default:
				disagreements++
				if disagreements <= 20 {
					data, _ := json.Marshal(r)
					t.Errorf("%q: %s: Kyverno says %s, kyvap's CEL %s (ok %t)", template, data, kyverno[i], got, ok)
				}
			}
		}
	}
	t.Logf("%d messages, %d requests compared, %d shown as the template (a map or a list substituted), %d disagreements", len(messages), compared, fallbacks, disagreements)
}

func evaluateMessage(program cel.Program, r admissionRequest) (string, bool) {
	out, _, err := program.Eval(map[string]any{"object": roundTrip(r.Object), "oldObject": roundTrip(r.OldObject), "request": requestVariable(r)})
	if err != nil {
		return "", false
	}
	s, ok := out.Value().(string)
	if !ok {
		return "", false
	}
	data, _ := json.Marshal(s)
	return string(data), true
}

func askMessages(t *testing.T, oracle, template string, requests []admissionRequest) []string {
	t.Helper()
	return runOracle(t, oracle, map[string]any{"message": template, "requests": requests}, len(requests))
}
