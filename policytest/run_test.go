// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	"github.com/kyvap/kyvap/policytest/vapsim"
)

// runDir loads the single suite of dir and runs it.
func runDir(t *testing.T, dir string) Report {
	t.Helper()
	suites, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	if len(suites) != 1 {
		t.Fatalf("Load(%s): %d suites, want 1", dir, len(suites))
	}
	return Run(context.Background(), &suites[0], Options{})
}

// rowKey identifies a row in tests: rule (as reported) and resource name.
func rowKey(r Row) string {
	rule := r.Rule
	if r.ReportedRule != "" {
		rule = r.ReportedRule
	}
	parts := strings.Split(r.Resource, "/")
	return rule + " " + parts[len(parts)-1]
}

// summarize maps each row to "expected vap engine status".
func summarize(rows []Row) map[string]string {
	out := map[string]string{}
	for _, r := range rows {
		out[rowKey(r)] = strings.Join([]string{r.Expected, string(r.VAP.Result), string(r.Engine.Result), string(r.Status)}, " ")
	}
	return out
}

func checkRows(t *testing.T, got []Row, want map[string]string) {
	t.Helper()
	sum := summarize(got)
	for k, w := range want {
		if sum[k] != w {
			t.Errorf("row %q = %q, want %q", k, sum[k], w)
		}
	}
}

func TestRunMapping(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: mapping}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: team, rule: team-label, kind: ConfigMap, resources: [good], result: pass}
- {policy: team, rule: team-label, kind: ConfigMap, resources: [bad], result: fail}
- {policy: team, rule: team-label, kind: ConfigMap, resources: [bad], result: warn}
- {policy: team, rule: team-label, kind: ConfigMap, resources: [good], result: fail}
- {policy: team, rule: team-label, kind: Secret, resources: [secret], result: fail}
- {policy: team, rule: red, kind: ConfigMap, resources: [good], result: skip}
- {policy: team, rule: limits, kind: Pod, resources: [pod], result: fail}
- {policy: team, rule: limits, kind: Deployment, resources: [deploy], result: fail}
- {policy: team, rule: pattern, kind: ConfigMap, resources: [bad], result: fail}
- {policy: missing, rule: x, kind: ConfigMap, resources: [bad], result: fail}
- {policy: vap, kind: ConfigMap, resources: [bad], result: fail, isValidatingAdmissionPolicy: true}
- {policy: team, rule: team-label, kind: ConfigMap, resources: [nothing-by-that-name], result: pass}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: team}
spec:
  validationFailureAction: Enforce
  rules:
  - name: team-label
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      cel:
        expressions:
        - {expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", message: "team label"}
  - name: red
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    celPreconditions: [{name: red, expression: "has(object.metadata.labels) && 'color' in object.metadata.labels"}]
    validate:
      cel:
        expressions: [{expression: "false"}]
  - name: limits
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      cel:
        expressions: [{expression: "object.spec.containers.all(c, has(c.resources))"}]
  - name: pattern
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      pattern: {metadata: {labels: {"tea?": "?*"}}}
`,
		"resources.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: good, labels: {team: a}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: bad}
---
apiVersion: v1
kind: Secret
metadata: {name: secret}
---
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec: {containers: [{name: c, image: i}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: deploy}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec: {containers: [{name: c, image: i}]}
`,
	})
	report := runDir(t, dir)
	rows := report.Rows
	if len(rows) < 12 {
		t.Fatalf("got %d rows: %+v", len(rows), rows)
	}
	want := []struct {
		vap, engine Result
		status      Status
		reason      string
	}{
		{Pass, Pass, StatusPass, ""},
		{Fail, Fail, StatusPass, ""},
		{Fail, Fail, StatusFail, "never reports warn"},
		{Pass, Pass, StatusFail, "want fail, got pass"},
		// No rule matches the Secret while the test expects fail: Kyverno's
		// CLI would show an excluded pass, kyvap reports it.
		{None, None, StatusFail, "no rule matched the resource on either path"},
		{Skip, Skip, StatusPass, ""}, // the red rule's precondition is false for "good"
		{Fail, Fail, StatusPass, ""},
		{Fail, Fail, StatusPass, ""}, // autogen-limits: its own VAP
		{NotApplicable, NotApplicable, StatusSkipped, "PatternNotExpressible"},
		{None, None, StatusFail, `policy "missing" is not among the test's policies`},
		{NotApplicable, NotApplicable, StatusSkipped, "a ValidatingAdmissionPolicy result"},
	}
	for i, w := range want {
		r := rows[i]
		if r.VAP.Result != w.vap || r.Engine.Result != w.engine || r.Status != w.status || !strings.Contains(r.Reason, w.reason) {
			t.Errorf("row %d (%s %s, expected %s) = vap %s, engine %s, %s (%q); want %s, %s, %s (%q)",
				i+1, r.Rule, r.Resource, r.Expected, r.VAP.Result, r.Engine.Result, r.Status, r.Reason, w.vap, w.engine, w.status, w.reason)
		}
	}
	if rows[7].ReportedRule != "autogen-limits" {
		t.Errorf("row 8 reported rule = %q, want autogen-limits", rows[7].ReportedRule)
	}
	// A resource name that matches nothing checks every resource, as
	// Kyverno's CLI does, and says so.
	if n := len(rows) - 11; n != 5 {
		t.Errorf("unknown resource name: %d rows, want 5 (every resource)", n)
	}
	var warned bool
	for _, w := range report.Warnings {
		warned = warned || strings.Contains(w, `resource "nothing-by-that-name" is not among the test's resources`)
	}
	if !warned {
		t.Errorf("no warning about the unknown resource name: %q", report.Warnings)
	}
	// Failed: warn, good expected to fail, the Secret no rule matches, the
	// missing policy, and under the last result (which expects pass for
	// every resource) "bad"; the three resources team-label does not match
	// pass there, as Kyverno's CLI passes them (excluded).
	if s := report.Summary; s.Passed != 9 || s.Failed != 5 || s.Skipped != 2 {
		t.Errorf("summary = %+v", s)
	}
}

// TestRunConformanceCases pins what the runner reports for corpus cases
// whose outcome does not depend on the webhook packages' open issues.
func TestRunConformanceCases(t *testing.T) {
	corpus := "../test/conformance"
	tests := []struct {
		dir  string
		want map[string]string
	}{
		{"pod-controllers", map[string]string{
			"limits pod-bad":                  "fail fail fail pass",
			"autogen-limits deploy-bad":       "fail fail fail pass",
			"autogen-cronjob-limits cron-bad": "fail fail fail pass",
			"autogen-limits sts-bad":          "fail fail fail pass",
		}},
		{"cel-preconditions", map[string]string{
			"checksum blue-bad":   "skip skip skip pass",
			"checksum unlabelled": "skip skip skip pass",
			"checksum red-bad":    "fail fail fail pass",
		}},
		{"params-by-name", map[string]string{
			"max-replicas large":  "fail fail fail pass",
			"missing-param small": "error error error pass",
		}},
		{"kyverno-only", map[string]string{
			"pattern bad":                "fail n/a n/a skipped",
			"jmespath-preconditions bad": "fail n/a n/a skipped",
		}},
		{"operations", map[string]string{
			"update-only changed":      "fail fail fail pass",
			"protect-delete protected": "skip none none pass",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			report := runDir(t, filepath.Join(corpus, tt.dir))
			checkRows(t, report.Rows, tt.want)
		})
	}
	// The test without a user: Kyverno ignores the rule's user filters, the
	// VAP path cannot reproduce that and is not compared.
	suites, err := Load(filepath.Join(corpus, "subjects"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range suites {
		if suites[i].Name != "subjects-nobody" {
			continue
		}
		report := Run(context.Background(), &suites[i], Options{})
		checkRows(t, report.Rows, map[string]string{"team-label bad": "fail n/a fail pass"})
	}
}

func TestVAPResult(t *testing.T) {
	deny := validating.PolicyDecision{Action: validating.ActionDeny, Evaluation: validating.EvalDeny, Message: "no"}
	denyErr := validating.PolicyDecision{Action: validating.ActionDeny, Evaluation: validating.EvalError, Message: "boom"}
	admitErr := validating.PolicyDecision{Action: validating.ActionAdmit, Evaluation: validating.EvalError, Message: "boom"}
	tests := []struct {
		name      string
		pr        vapsim.PolicyResult
		want      Result
		evaluated bool
	}{
		{"policy configuration error", vapsim.PolicyResult{ConfigError: "bad paramKind"}, Error, true},
		{"no binding matched", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b"}}}, None, false},
		{"match conditions false", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b", Matched: true}}}, None, false},
		{"binding configuration error", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b", Matched: true, ConfigError: "no params"}}}, Error, true},
		{"no parameter selected, allowed", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b", Matched: true, Params: []string{}}}}, Pass, true},
		{"pass", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b", Matched: true, Evaluated: true}}}, Pass, true},
		{"deny", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b", Matched: true, Evaluated: true, Decisions: []validating.PolicyDecision{deny}}}}, Fail, true},
		{"error under Fail is Kyverno's fail", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b", Matched: true, Evaluated: true, Decisions: []validating.PolicyDecision{denyErr}}}}, Fail, true},
		{"error under Ignore", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Binding: "b", Matched: true, Evaluated: true, Decisions: []validating.PolicyDecision{admitErr}}}}, Error, true},
		{"second binding", vapsim.PolicyResult{Bindings: []vapsim.BindingResult{
			{Binding: "a", Actions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
			{Binding: "b", Matched: true, Evaluated: true, Decisions: []validating.PolicyDecision{deny}},
		}}, Fail, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, evaluated := vapResult(tt.pr, false)
			if got.Result != tt.want || evaluated != tt.evaluated {
				t.Errorf("vapResult = %s, %v; want %s, %v", got.Result, evaluated, tt.want, tt.evaluated)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	var s Summary
	for _, r := range []Row{
		{Status: StatusPass}, {Status: StatusPass}, {Status: StatusFail},
		{Status: StatusSkipped, Reason: "b"}, {Status: StatusSkipped, Reason: "a"}, {Status: StatusSkipped, Reason: "b"},
	} {
		s.count(r)
	}
	if got, want := s.String(), "2 passed, 1 failed, 3 skipped (1: a; 2: b)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := (Summary{Passed: 3}).String(), "3 passed, 0 failed"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestResultsOutput(t *testing.T) {
	report := runDir(t, "../test/conformance/kyverno/check-deployment-namespace-cel")
	results := NewResults([]Report{report})
	var buf bytes.Buffer
	if err := results.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var decoded Results
	if err := json.Unmarshal(buf.Bytes(), &decoded); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, buf.String())
	}
	if len(decoded.Tests) != 1 || decoded.Summary.Passed != 2 || decoded.Summary.Failed != 0 {
		t.Errorf("decoded = %+v", decoded)
	}
	row := decoded.Tests[0].Rows[0]
	if row.VAP.Result != Fail || row.Engine.Result != Fail || row.VAP.Match == nil || !*row.VAP.Match {
		t.Errorf("row = %+v", row)
	}
	buf.Reset()
	if err := results.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{
		"Test check-deployment-namespace-cel (",
		"apps/v1/Deployment/default/bad-deployment",
		"✓",
		"\n2 passed, 0 failed\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
}

func TestShorten(t *testing.T) {
	msg := "binding b: expression '" + strings.Repeat("a == 'x' && ", 20) + "true' resulted in error: no such key: subResource"
	got := shorten(msg)
	if !strings.HasSuffix(got, "…' resulted in error: no such key: subResource") || len(got) > 120 {
		t.Errorf("shorten = %q", got)
	}
	if short := "expression 'a' resulted in error"; shorten(short) != short {
		t.Errorf("shorten changed a short expression: %q", shorten(short))
	}
}

// TestHarnessKyvernoShapes: Namespace requests carry the label the API
// server's defaulting adds, a values file of any kind loads, and a
// resource no rule matches fails a row expecting pass or fail.
func TestHarnessKyvernoShapes(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: shapes}
policies: [policy.yaml]
resources: [resources.yaml]
variables: values.yaml
results:
- {policy: ns, rule: labelled, kind: Namespace, resources: [team], result: pass}
- {policy: ns, rule: labelled, kind: ConfigMap, resources: [cm], result: fail}
- {policy: ns, rule: labelled, kind: ConfigMap, resources: [cm], result: skip}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: ns}
spec:
  validationFailureAction: Enforce
  rules:
  - name: labelled
    match: {any: [{resources: {kinds: [Namespace]}}]}
    validate:
      cel:
        expressions:
        - {expression: "object.metadata.labels['kubernetes.io/metadata.name'] == object.metadata.name"}
`,
		"resources.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: team}
`,
		"values.yaml": `apiVersion: example.com/v9
kind: Whatever
metadata: {name: values}
namespaceSelector:
- {name: team, labels: {tier: prod}}
`,
	})
	report := runDir(t, dir)
	checkRows(t, report.Rows, map[string]string{
		"labelled team": "pass pass pass pass",
	})
	var excluded []string
	for _, r := range report.Rows {
		if strings.HasSuffix(r.Resource, "/cm") {
			excluded = append(excluded, r.Expected+" "+string(r.Status))
		}
	}
	sort.Strings(excluded)
	if want := []string{"fail fail", "skip pass"}; strings.Join(excluded, ",") != strings.Join(want, ",") {
		t.Errorf("rows for a resource no rule matches: %q, want %q", excluded, want)
	}
}

// TestUnservedKind: a resource of a built-in group in a version the
// targeted Kubernetes does not serve is reported, not compared.
func TestUnservedKind(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: unserved}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: p, rule: r, kind: PodSecurityPolicy, resources: [psp], result: pass}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [PodSecurityPolicy]}}]}
    validate:
      cel:
        expressions: [{expression: "false"}]
`,
		"resources.yaml": `apiVersion: policy/v1beta1
kind: PodSecurityPolicy
metadata: {name: psp}
spec: {}
`,
	})
	report := runDir(t, dir)
	if len(report.Rows) != 1 || report.Rows[0].Status != StatusSkipped || !strings.Contains(report.Rows[0].Reason, "not served") {
		t.Fatalf("rows = %+v, want one skipped row saying the kind is not served", report.Rows)
	}
}

// TestResultKindTellsApartResourcesSharingAName: Kyverno's CLI selects a
// result's resources by name; a resource of another kind than the
// result's that shares the name, and that no rule matches, passes as
// excluded (Strict fails it), while the one of the named kind is judged.
func TestResultKindTellsApartResourcesSharingAName(t *testing.T) {
	files := map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: shared-name}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: p, rule: r, kind: Namespace, resources: [same], result: fail}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    validate:
      cel:
        expressions: [{expression: "false"}]
`,
		"resources.yaml": `apiVersion: v1
kind: Pod
metadata: {name: same, namespace: default}
spec: {containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: same}
`,
	}
	report := runDir(t, writeFiles(t, files))
	if len(report.Rows) != 2 {
		t.Fatalf("rows = %+v, want one per resource named same", report.Rows)
	}
	for _, r := range report.Rows {
		switch {
		case strings.Contains(r.Resource, "/Pod/"):
			if r.Status != StatusPass || !strings.Contains(r.Reason, "excluded: a Pod of the name the result lists for a Namespace") {
				t.Errorf("Pod row = %s (%q), want an excluded pass", r.Status, r.Reason)
			}
		case r.VAP.Result != Fail || r.Engine.Result != Fail || r.Status != StatusPass:
			t.Errorf("Namespace row = vap %s, engine %s, %s (%q), want fail on both paths, met", r.VAP.Result, r.Engine.Result, r.Status, r.Reason)
		}
	}
}

// TestResultNamingAMissingRule: a result naming a rule the policy does not
// have passes as Kyverno's CLI passes it (its resources count as excluded),
// with a warning, and so does an expected pass for a resource no rule
// matches; Strict fails both.
func TestResultNamingAMissingRule(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: misspelt}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: p, rule: no-such-rule, kind: ConfigMap, resources: [cm], result: fail}
- {policy: p, rule: r, kind: ConfigMap, resources: [cm], result: fail}
- {policy: p, rule: scoped, kind: ConfigMap, resources: [missing], result: pass}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      cel:
        expressions: [{expression: "false"}]
  - name: scoped
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [test]}}]}
    validate:
      cel:
        expressions: [{expression: "false"}]
`,
		"resources.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: default}
`,
	})
	suites, err := Load(dir)
	if err != nil || len(suites) != 1 {
		t.Fatalf("Load: %v (%d suites)", err, len(suites))
	}
	for _, strict := range []bool{false, true} {
		report := Run(context.Background(), &suites[0], Options{Strict: strict})
		statuses := map[string]Status{}
		for _, row := range report.Rows {
			statuses[row.Rule+" "+row.Expected] = row.Status
		}
		// The third result names a resource the suite does not hold, so
		// every resource is checked, and the rule matches none: Kyverno's
		// CLI passes it as excluded (test/cli/test-fail/missing-resource in
		// Kyverno's module), and so does kyvap.
		want := map[string]Status{"no-such-rule fail": StatusPass, "r fail": StatusPass, "scoped pass": StatusPass}
		if strict {
			want["no-such-rule fail"], want["scoped pass"] = StatusFail, StatusFail
		}
		if fmt.Sprint(statuses) != fmt.Sprint(want) {
			t.Errorf("strict %v: statuses %v, want %v", strict, statuses, want)
		}
		if !strings.Contains(strings.Join(report.Warnings, "\n"), `policy "p" has no rule "no-such-rule"`) {
			t.Errorf("strict %v: warnings %q do not name the missing rule", strict, report.Warnings)
		}
	}
}

// TestBackgroundOnlyClusterPolicyGetsTheScansVerdict: a ClusterPolicy with
// spec.admission false is applied by Kyverno in background scans only, and
// Kyverno's CLI gives its scan's verdicts: kyvap test gives the verdicts of
// kyvap's background scan instead of skipping the rows.
func TestBackgroundOnlyClusterPolicyGetsTheScansVerdict(t *testing.T) {
	report := runDir(t, filepath.Join("..", "test", "conformance", "cpol-background-only"))
	checkRows(t, report.Rows, map[string]string{
		"no-node-port cluster-ip": "pass pass pass pass",
		"no-node-port node-port":  "fail fail fail pass",
	})
	if report.Summary.Skipped != 0 {
		t.Errorf("%d rows skipped, want none", report.Summary.Skipped)
	}
}
