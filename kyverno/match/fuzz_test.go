// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"encoding/json"
	"testing"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
)

// FuzzRule feeds arbitrary JSON-decoded rules, specs and requests to every
// entry point: none may panic, and each must be deterministic (Kyverno's
// own answers depend on map order in places; ours must not).
func FuzzRule(f *testing.F) {
	seeds := []struct{ rule, spec, req string }{
		{
			`{"name":"r","match":{"any":[{"resources":{"kinds":["Pod"],"selector":{"matchLabels":{"app":"ngi*"}}}}]}}`,
			`{"validationFailureAction":"Enforce"}`,
			`{"Operation":"CREATE","Kind":{"Version":"v1","Kind":"Pod"},"Namespace":"default","Object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nginx","labels":{"app":"nginx"}}},"UserInfo":{"username":"alice"}}`,
		},
		{
			`{"name":"r","match":{"all":[{"resources":{"kinds":["a/b/c/d/e"],"namespaceSelector":{"matchExpressions":[{"key":"-","operator":"In"}]}}},{"roles":[]}]},"exclude":{"subjects":[{"kind":"Group","name":"*"}]},"validate":{"failureAction":"Audit","failureActionOverrides":[{"action":"Enforce","namespaces":["p*"],"namespaceSelector":{"matchLabels":{"*":"?"}}}]}}`,
			`{"validationFailureActionOverrides":[{"action":"Enforce","namespaces":[]},{"namespaceSelector":{}}]}`,
			`{"Operation":"DELETE","Kind":{"Version":"v1","Kind":"Namespace"},"Namespace":"prod","OldObject":{"kind":"Namespace","metadata":{"name":"prod","labels":{"a":1}}},"NamespaceLabels":{"env":"prod"}}`,
		},
		{
			`{"name":"autogen-r","match":{"resources":{"kinds":["*/*"],"annotations":{"*":"*"},"operations":["CONNECT"]}}}`,
			`{}`,
			`{"Operation":"CONNECT","Kind":{"Version":"v1","Kind":"Pod"},"SubResource":"exec","Object":{"kind":"PodExecOptions","metadata":"oops"},"Roles":["ns:r"]}`,
		},
		{`{"name":"","match":{}}`, `{}`, `{}`},
	}
	for _, s := range seeds {
		f.Add([]byte(s.rule), []byte(s.spec), []byte(s.req))
	}
	f.Fuzz(func(t *testing.T, ruleJSON, specJSON, reqJSON []byte) {
		var rule kyvernov1.Rule
		var spec kyvernov1.Spec
		var req Request
		if json.Unmarshal(ruleJSON, &rule) != nil || json.Unmarshal(specJSON, &spec) != nil || json.Unmarshal(reqJSON, &req) != nil {
			return
		}
		got, err := Rule(&rule, &req)
		again, err2 := Rule(&rule, &req)
		if got != again || (err == nil) != (err2 == nil) {
			t.Fatalf("Rule is not deterministic: %v/%v, %v/%v", got, again, err, err2)
		}

		ex := &kyvernov2.PolicyException{Spec: kyvernov2.PolicyExceptionSpec{
			Match:      kyvernov2.MatchResources{Any: rule.MatchResources.Any, All: rule.MatchResources.All},
			Exceptions: []kyvernov2.Exception{{PolicyName: "pol", RuleNames: []string{rule.Name}}},
		}}
		if rule.ExcludeResources != nil {
			ex.Spec.Match.Any = append(ex.Spec.Match.Any, rule.ExcludeResources.Any...)
		}
		exGot, exErr := Exception(ex, "pol", rule.Name, &req)
		exAgain, _ := Exception(ex, "pol", rule.Name, &req)
		if exGot != exAgain {
			t.Fatalf("Exception is not deterministic")
		}
		if exErr == nil && len(ex.Spec.Match.Any)+len(ex.Spec.Match.All) == 0 && exGot {
			t.Fatalf("an exception without filters exempted the request")
		}

		action := FailureAction(&spec, &rule, &req)
		if action != "Enforce" && action != "Audit" {
			t.Fatalf("FailureAction = %q", action)
		}
		if FailureAction(&spec, &rule, &req) != action {
			t.Fatalf("FailureAction is not deterministic")
		}
	})
}
