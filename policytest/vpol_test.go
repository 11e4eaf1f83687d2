// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	"github.com/kyvap/kyvap/policytest/vapsim"
)

const vpolTest = `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: vpols}
policies: [policy.yaml]
resources: [resources.yaml]
exceptions: [exceptions.yaml]
results:
- {policy: v1-pol, isValidatingPolicy: true, kind: Pod, resources: [bad], result: fail}
- {policy: v1alpha1-pol, isValidatingPolicy: true, kind: Pod, resources: [good], result: pass}
- {policy: ns/nv-pol, isValidatingPolicy: true, kind: Pod, resources: [ns/bad], result: fail}
- {policy: v1-pol, isValidatingPolicy: true, kind: ConfigMap, resources: [cm], result: skip}
- {policy: selective, isValidatingPolicy: true, kind: ConfigMap, resources: [cm], result: skip}
- {policy: selective, isValidatingPolicy: true, kind: ConfigMap, resources: [cm], result: fail}
- {policy: selective, isValidatingPolicy: true, kind: ConfigMap, resources: [cm], result: pass}
- {policy: v1-pol, isValidatingPolicy: true, kind: Pod, resources: [bad], result: warn}
- {policy: missing, isValidatingPolicy: true, kind: Pod, resources: [bad], result: fail}
- {policy: envoy, isValidatingPolicy: true, kind: Pod, resources: [bad], result: fail}
`

const vpolPolicies = `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: v1-pol}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.metadata.name != 'bad'"
---
apiVersion: policies.kyverno.io/v1alpha1
kind: ValidatingPolicy
metadata: {name: v1alpha1-pol}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.metadata.name != 'bad'"
---
apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedValidatingPolicy
metadata: {name: nv-pol, namespace: ns}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.metadata.name != 'bad'"
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: selective}
spec:
  matchConstraints:
    objectSelector:
      matchLabels: {checked: "yes"}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "false"
---
apiVersion: policies.kyverno.io/v1alpha1
kind: NamespacedValidatingPolicy
metadata: {name: old, namespace: ns}
spec: {}
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: envoy}
spec:
  evaluation: {mode: Envoy}
---
apiVersion: policies.kyverno.io/v1beta1
kind: PolicyException
metadata: {name: in-policy-file}
spec:
  policyRefs: [{name: v1-pol, kind: ValidatingPolicy}]
`

const vpolExceptions = `apiVersion: policies.kyverno.io/v1alpha1
kind: PolicyException
metadata: {name: a, namespace: default}
spec:
  policyRefs: [{name: v1-pol, kind: ValidatingPolicy}]
  matchConditions: [{name: never, expression: "false"}]
---
apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata: {name: b, namespace: default}
spec:
  policyRefs: [{name: v1-pol, kind: ValidatingPolicy}]
  matchConditions: [{name: never, expression: "false"}]
`

const vpolResources = `apiVersion: v1
kind: Pod
metadata: {name: bad}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: good}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bad, namespace: ns}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
`

func TestValidatingPolicies(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kyverno-test.yaml": vpolTest,
		"policy.yaml":       vpolPolicies,
		"exceptions.yaml":   vpolExceptions,
		"resources.yaml":    vpolResources,
	})
	suites, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &suites[0]
	var keys []string
	for i := range s.ValidatingPolicies {
		keys = append(keys, s.ValidatingPolicies[i].Kind+" "+s.ValidatingPolicies[i].Key())
	}
	if got := strings.Join(keys, ", "); got != "ValidatingPolicy v1-pol, ValidatingPolicy v1alpha1-pol, NamespacedValidatingPolicy ns/nv-pol, ValidatingPolicy selective" {
		t.Errorf("ValidatingPolicies = %s", got)
	}
	if len(s.CELExceptions) != 2 {
		t.Errorf("CELExceptions = %d, want 2", len(s.CELExceptions))
	}
	var ignored []string
	for _, ig := range s.Ignored {
		ignored = append(ignored, ig.Name)
	}
	if got := strings.Join(ignored, ", "); got != "ns/old, envoy" {
		t.Errorf("Ignored = %s", got)
	}
	if !strings.Contains(strings.Join(s.Warnings, "\n"), "PolicyException in a policy file is ignored") {
		t.Errorf("no warning about the PolicyException in a policy file: %q", s.Warnings)
	}

	report := runDir(t, dir)
	got := map[string]Row{}
	for _, row := range report.Rows {
		key := row.Policy + " " + row.Expected + " " + row.Resource
		if _, dup := got[key]; dup {
			t.Errorf("duplicate row %s", key)
		}
		got[key] = row
	}
	want := []struct {
		key, vap string
		status   Status
		reason   string
	}{
		{"v1-pol fail v1/Pod/default/bad", "fail", StatusPass, ""},
		{"v1alpha1-pol pass v1/Pod/default/good", "pass", StatusPass, ""},
		{"ns/nv-pol fail v1/Pod/ns/bad", "fail", StatusPass, ""},
		// Plain matchConstraints (and autogen variants: the Pod policy's
		// defaults variant has two resource rules, so not plain): excluded.
		{"v1-pol skip v1/ConfigMap/default/cm", "none", StatusPass, "excluded"},
		// An object selector: Kyverno reports an empty response, excluded.
		{"selective skip v1/ConfigMap/default/cm", "none", StatusPass, "excluded"},
		{"selective fail v1/ConfigMap/default/cm", "none", StatusFail, "excluded pass"},
		// An expected pass: Kyverno's CLI counts the excluded resource as a
		// pass (--strict fails it).
		{"selective pass v1/ConfigMap/default/cm", "none", StatusPass, "expected pass as met"},
		{"v1-pol warn v1/Pod/default/bad", "fail", StatusFail, "never reports warn"},
		{"missing fail ", "none", StatusFail, "not among the test's policies"},
		{"envoy fail ", "n/a", StatusSkipped, "Envoy"},
	}
	for _, w := range want {
		row, ok := got[w.key]
		if !ok {
			t.Errorf("no row %q", w.key)
			continue
		}
		if string(row.VAP.Result) != w.vap || row.Status != w.status || !strings.Contains(row.Reason, w.reason) {
			t.Errorf("row %q: VAP %s, status %s, reason %q; want %s, %s, %q", w.key, row.VAP.Result, row.Status, row.Reason, w.vap, w.status, w.reason)
		}
		// The engine evaluates every rule the VAP path does: same result.
		if row.Status != StatusSkipped && row.VAP.Result != NotApplicable && row.Engine.Result != row.VAP.Result {
			t.Errorf("row %q: engine %s, want the VAP path's %s", w.key, row.Engine.Result, row.VAP.Result)
		}
	}
	if len(report.Rules) == 0 || report.Rules[0].Policy != "ValidatingPolicy/v1-pol" {
		t.Errorf("report.Rules = %+v", report.Rules)
	}
}

// A Pod policy without autogen has plain matchConstraints only: Kyverno's
// CLI reports a resource it does not match as not found, a failure.
func TestValidatingPolicyNotFound(t *testing.T) {
	dir := podPolicyDir(t, "pods", "{policy: pods, isValidatingPolicy: true, kind: ConfigMap, resources: [cm], result: skip}", "true")
	report := runDir(t, dir)
	if len(report.Rows) != 1 || report.Rows[0].Status != StatusFail || !strings.Contains(report.Rows[0].Reason, "not found") {
		t.Errorf("rows = %+v", report.Rows)
	}
}

// podPolicyDir writes a test of one result against a ValidatingPolicy on
// Pod CREATE (no pod-controller variants) with one validation.
func podPolicyDir(t *testing.T, name, result, expression string) string {
	t.Helper()
	return writeFiles(t, map[string]string{
		"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: " + name + "}\npolicies: [policy.yaml]\nresources: [resources.yaml]\nresults:\n- " + result + "\n",
		"policy.yaml": `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: ` + name + `}
spec:
  autogen: {podControllers: {controllers: []}}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: ` + strconv.Quote(expression) + `
`,
		"resources.yaml": vpolResources,
	})
}

func TestRunValidatingPolicyCases(t *testing.T) {
	corpus := "../test/conformance"
	tests := []struct {
		dir  string
		want map[string]string
	}{
		{"vpol-basic", map[string]string{
			"require-team-label  unlabelled":                                "fail fail fail pass",
			"require-team-label ignored-for-validating-policies unlabelled": "fail fail fail pass",
			"no-privileged  system-privileged":                              "skip skip skip pass",
		}},
		{"vpol-autogen", map[string]string{
			"run-as-non-root autogen-defaults deploy-bad": "fail fail fail pass",
			"run-as-non-root autogen-defaults job-bad":    "fail fail fail pass",
			"run-as-non-root autogen-cronjobs cron-bad":   "fail fail fail pass",
		}},
		{"vpol-exceptions", map[string]string{
			"disallow-latest  exempt":  "skip skip skip pass",
			"disallow-latest  ignored": "skip skip skip pass",
			"disallow-latest  latest":  "fail fail fail pass",
		}},
		{"vpol-background-only", map[string]string{
			"background-only  node-port":    "fail fail fail pass",
			"admission-only  load-balancer": "fail fail fail pass",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			report := runDir(t, filepath.Join(corpus, tt.dir))
			sum := map[string]string{}
			for _, r := range report.Rows {
				sum[r.Policy+" "+rowKey(r)] = strings.Join([]string{r.Expected, string(r.VAP.Result), string(r.Engine.Result), string(r.Status)}, " ")
			}
			for k, w := range tt.want {
				if sum[k] != w {
					t.Errorf("row %q = %q, want %q", k, sum[k], w)
				}
			}
			for _, row := range report.Rows {
				if row.Status == StatusFail {
					t.Errorf("%s on %s: %s", row.Policy, row.Resource, row.Reason)
				}
			}
		})
	}
	// A rule using a Kyverno CEL library is no VAP: the engine alone
	// evaluates it (n/a on the VAP path), one whose library kyvap lacks is
	// skipped with its reason, never passed.
	report := runDir(t, filepath.Join(corpus, "vpol-basic"))
	for _, row := range report.Rows {
		if row.Policy == "valid-images" && (row.Status != StatusPass || row.VAP.Result != NotApplicable || row.Engine.Match == nil || !*row.Engine.Match) {
			t.Errorf("valid-images on %s: %s, VAP %s, engine %s (%s)", row.Resource, row.Status, row.VAP.Result, row.Engine.Result, row.Reason)
		}
	}
	dir := podPolicyDir(t, "remote", "{policy: remote, isValidatingPolicy: true, kind: Pod, resources: [good], result: pass}", "http.Get('https://example.com').ok == true")
	rows := runDir(t, dir).Rows
	if len(rows) == 0 {
		t.Error("no row for the http library policy")
	}
	for _, row := range rows {
		if row.Status != StatusSkipped || !strings.Contains(row.Reason, "KyvernoLibrary") || !strings.Contains(row.Reason, "http") {
			t.Errorf("http library on %s: %s (%s)", row.Resource, row.Status, row.Reason)
		}
	}
}

func TestVpolResult(t *testing.T) {
	binding := func(decisions ...validating.PolicyDecision) vapsim.PolicyResult {
		return vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Matched: true, Evaluated: true, Decisions: decisions,
			Actions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}}}}
	}
	deny := validating.PolicyDecision{Action: validating.ActionDeny, Evaluation: validating.EvalDeny, Message: "denied"}
	// failurePolicy Fail turns an error into a denial; Kyverno says error.
	errored := validating.PolicyDecision{Action: validating.ActionDeny, Evaluation: validating.EvalError, Message: "no such key"}
	tests := []struct {
		pr   vapsim.PolicyResult
		want Result
	}{
		{binding(), Pass},
		{binding(deny), Fail},
		{binding(errored), Error},
		{binding(errored, deny), Error},
		{binding(deny, errored), Fail},
		{vapsim.PolicyResult{ConfigError: "failed"}, Error},
		{vapsim.PolicyResult{Bindings: []vapsim.BindingResult{{Matched: true}}}, None},
	}
	for i, tt := range tests {
		if got, _ := vpolResult(tt.pr); got.Result != tt.want {
			t.Errorf("%d: %s, want %s", i, got.Result, tt.want)
		}
	}
}

// TestExceptionReportResultOnBothPaths: of two PolicyExceptions of a
// ValidatingPolicy, the one with reportResult: pass makes the request it
// exempts pass, on the VAP path as on the engine's (the VAP path once said
// skip, knowing only that some exception applied).
func TestExceptionReportResultOnBothPaths(t *testing.T) {
	report := runDir(t, filepath.Join("..", "test", "conformance", "vpol-exception-report-result"))
	checkRows(t, report.Rows, map[string]string{
		" node-port-ok":    "pass pass pass pass",
		" node-port-other": "skip skip skip pass",
		" node-port":       "fail fail fail pass",
	})
}
