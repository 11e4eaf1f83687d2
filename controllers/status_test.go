// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

func TestComputeStatus(t *testing.T) {
	translated := translate.RuleResult{Rule: "replicas", Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{"kyvap-p.replicas"}}
	fallback := translate.RuleResult{Rule: "roles", Verdict: translate.VerdictFallback, Reason: model.ReasonRolesOrClusterRoles, Message: "roles need RBAC look-ups"}
	invalid := translate.RuleResult{Rule: "broken", Verdict: translate.VerdictInvalid, Reason: model.ReasonCELCompileError, Message: "syntax error"}
	notHandled := translate.RuleResult{Rule: "pattern", Verdict: translate.VerdictNotHandled, Reason: model.ReasonNonCELRule}

	tests := []struct {
		name          string
		in            statusInput
		wantGenerated bool
		wantReason    string
		wantStatus    metav1.ConditionStatus
		wantMessage   []string // substrings of the Kyverno status message; none means empty
	}{{
		name:          "every rule translated",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated}}, GenerateEnabled: true},
		wantGenerated: true, wantReason: ReasonAllRulesTranslated, wantStatus: metav1.ConditionTrue,
	}, {
		// generated: true would make a running Kyverno skip the pattern
		// rule too.
		name:          "every CEL rule translated, a pattern rule left to Kyverno",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated, notHandled}}, GenerateEnabled: true},
		wantGenerated: false, wantReason: ReasonAllRulesTranslated, wantStatus: metav1.ConditionTrue,
		wantMessage: []string{`rule "pattern": left to Kyverno (NonCELRule`},
	}, {
		name:          "fallback while no webhook serves",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated, fallback}}, GenerateEnabled: true},
		wantGenerated: false, wantReason: ReasonFallback, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{`rule "roles": NOT ENFORCED`, "RolesOrClusterRoles", "roles need RBAC look-ups"},
	}, {
		name:          "fallback enforced by the webhook",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{fallback}}, GenerateEnabled: true, FallbackEnforced: true},
		wantGenerated: false, wantReason: ReasonFallback, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{`rule "roles": enforced by kyvap's webhook`},
	}, {
		name:          "fallback left to a running Kyverno",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated, fallback}}, GenerateEnabled: true, FallbackEnforced: true, KyvernoRunning: true},
		wantGenerated: false, wantReason: ReasonFallback, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{`rule "roles": left to Kyverno, whose admission controller runs in this cluster (RolesOrClusterRoles`},
	}, {
		name:          "generation disabled",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{{Rule: "replicas", Verdict: translate.VerdictFallback, Reason: model.ReasonGenerationDisabled, Message: "disabled"}}}},
		wantGenerated: false, wantReason: ReasonGenerationDisabled, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{"GenerationDisabled"},
	}, {
		name:          "invalid CEL",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated, invalid}}, GenerateEnabled: true},
		wantGenerated: false, wantReason: ReasonInvalidRules, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{`rule "broken": not enforced: syntax error`},
	}, {
		name:          "no CEL rules",
		in:            statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{notHandled}}, GenerateEnabled: true},
		wantGenerated: false, wantReason: ReasonNoCELRules, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{"no CEL validate rule"},
	}, {
		name: "name conflict",
		in: statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated}}, GenerateEnabled: true,
			Outcomes: []objectOutcome{{Kind: "ValidatingAdmissionPolicy", Name: "kyvap-p.replicas", Action: actionConflict, Err: errors.New(`ValidatingAdmissionPolicy "kyvap-p.replicas" already exists`)}}},
		wantGenerated: false, wantReason: ReasonNameConflict, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{`rule "replicas": not enforced`, "kyvap-p.replicas", "already exists"},
	}, {
		name: "a binding failed to apply",
		in: statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated}}, GenerateEnabled: true,
			Outcomes: []objectOutcome{{Kind: "ValidatingAdmissionPolicyBinding", Name: "kyvap-p.replicas-0", Action: actionFailed, Err: errors.New("refused")}}},
		wantGenerated: false, wantReason: ReasonApplyFailed, wantStatus: metav1.ConditionFalse,
		wantMessage: []string{"kyvap-p.replicas-0", "refused"},
	}, {
		name: "type-checking warnings are reported",
		in: statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{translated}}, GenerateEnabled: true,
			TypeWarnings: map[string][]string{"kyvap-p.replicas": {"spec.validations[0].expression: undefined field 'replica'"}}},
		wantGenerated: true, wantReason: ReasonAllRulesTranslated, wantStatus: metav1.ConditionTrue,
		wantMessage: []string{`ValidatingAdmissionPolicy "kyvap-p.replicas" type checking`, "undefined field 'replica'"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Generation = 7
			got := computeStatus(tt.in)
			if got.VAP.Generated != tt.wantGenerated {
				t.Errorf("generated = %v, want %v", got.VAP.Generated, tt.wantGenerated)
			}
			if got.Condition.Reason != tt.wantReason || got.Condition.Status != tt.wantStatus {
				t.Errorf("condition = %s/%s, want %s/%s", got.Condition.Status, got.Condition.Reason, tt.wantStatus, tt.wantReason)
			}
			if got.Condition.ObservedGeneration != 7 || got.Condition.Type != ConditionType {
				t.Errorf("condition type/generation = %s/%d", got.Condition.Type, got.Condition.ObservedGeneration)
			}
			if len(tt.wantMessage) == 0 && got.VAP.Message != "" {
				t.Errorf("message = %q, want empty", got.VAP.Message)
			}
			for _, want := range tt.wantMessage {
				if !strings.Contains(got.VAP.Message, want) {
					t.Errorf("message %q does not contain %q", got.VAP.Message, want)
				}
			}
			if got.Condition.Message == "" {
				t.Error("the condition has no message")
			}
		})
	}
}

func TestComputeStatusIsDeterministic(t *testing.T) {
	in := statusInput{
		Plan:         &translate.Plan{Rules: []translate.RuleResult{{Rule: "a", Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{"kyvap-a"}}}},
		TypeWarnings: map[string][]string{"kyvap-a": {"w1"}, "kyvap-b": {"w2"}, "kyvap-c": {"w3"}},
		Outcomes: []objectOutcome{
			{Name: "kyvap-a-0", Action: actionFailed, Err: errors.New("x")},
			{Name: "kyvap-a-1", Action: actionFailed, Err: errors.New("y")},
		},
	}
	first := computeStatus(in)
	for range 20 {
		if got := computeStatus(in); got != first {
			t.Fatalf("status differs between runs:\n%+v\n%+v", got, first)
		}
	}
}

func TestTransitionEvent(t *testing.T) {
	translated := metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonAllRulesTranslated}
	fallback := metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonFallback}
	conflict := metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonNameConflict}
	tests := []struct {
		name     string
		previous *metav1.Condition
		next     metav1.Condition
		wantType string
		wantOK   bool
	}{
		{"first sight, translated", nil, translated, "", false},
		{"first sight, fallback", nil, fallback, "Warning", true},
		{"unchanged", &translated, translated, "", false},
		{"unchanged failure", &fallback, fallback, "", false},
		{"recovered", &conflict, translated, "Normal", true},
		{"degraded", &translated, conflict, "Warning", true},
		{"another failure", &fallback, conflict, "Warning", true},
	}
	for _, tt := range tests {
		gotType, gotOK := transitionEvent(tt.previous, tt.next)
		if gotOK != tt.wantOK || (gotOK && gotType != tt.wantType) {
			t.Errorf("%s: got (%q, %v), want (%q, %v)", tt.name, gotType, gotOK, tt.wantType, tt.wantOK)
		}
	}
}

func TestForeignVAPStatus(t *testing.T) {
	policy := func(vap kyvernov1.ValidatingAdmissionPolicyStatus, cond *metav1.Condition) *kyvernov1.ClusterPolicy {
		p := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
		p.Status.ValidatingAdmissionPolicy = vap
		if cond != nil {
			p.Status.Conditions = []metav1.Condition{*cond}
		}
		return p
	}
	translated := computeStatus(statusInput{Generation: 3, Plan: &translate.Plan{Rules: []translate.RuleResult{{Rule: "r", Verdict: translate.VerdictTranslated}}}, GenerateEnabled: true})
	fallback := computeStatus(statusInput{Generation: 3, Plan: &translate.Plan{Rules: []translate.RuleResult{{Rule: "r", Verdict: translate.VerdictFallback, Reason: model.ReasonRolesOrClusterRoles, Message: "roles"}}}, GenerateEnabled: true, FallbackEnforced: true})
	generator := kyvernov1.ValidatingAdmissionPolicyStatus{Generated: false, Message: "skip generating ValidatingAdmissionPolicy: validate.cel.generate is not set to true."}
	older := translated.Condition
	older.ObservedGeneration = 2
	for _, tc := range []struct {
		name string
		p    *kyvernov1.ClusterPolicy
		want bool
	}{
		{"kyvap's full success", policy(translated.VAP, &translated.Condition), false},
		{"kyvap's fallback report", policy(fallback.VAP, &fallback.Condition), false},
		{"Kyverno's generator after kyvap", policy(generator, &translated.Condition), true},
		{"Kyverno's generator marking it generated", policy(kyvernov1.ValidatingAdmissionPolicyStatus{Generated: true}, &fallback.Condition), true},
		{"kyvap has not reported on this generation", policy(generator, &older), false},
		{"Kyverno's generator before kyvap's first report", policy(generator, nil), true},
		{"nobody reported", policy(kyvernov1.ValidatingAdmissionPolicyStatus{}, nil), false},
		{"handed back by kyvap, reinstalled", policy(kyvernov1.ValidatingAdmissionPolicyStatus{Message: HandbackMessage}, nil), false},
	} {
		if got := foreignVAPStatus(tc.p); got != tc.want {
			t.Errorf("%s: foreignVAPStatus = %v, want %v", tc.name, got, tc.want)
		}
	}
	yielded := yieldToGenerator(translated, generator)
	if yielded.VAP != generator || !strings.HasPrefix(yielded.Condition.Message, generatorNotice) || !strings.Contains(yielded.Condition.Message, "features.generateValidatingAdmissionPolicy.enabled: false") {
		t.Errorf("yieldToGenerator = %+v", yielded)
	}
	// Once yielded, the state stays foreign: kyvap keeps yielding, without writes.
	if !foreignVAPStatus(policy(yielded.VAP, &yielded.Condition)) {
		t.Error("a yielded status is not recognised as foreign")
	}
}

// A CEL compile error as translate reports it: the compiler quotes the
// expression under the error.
func compileError(expression string) string {
	return "validations[0].expression: compilation failed: ERROR: <input>:1:21: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} | " + expression + " | " + strings.Repeat(".", len(expression)) + "^"
}

func TestStatusMessageIsBounded(t *testing.T) {
	expression := "object.spec.containers.all(c, c.image.startsWith('registry.example.com/') && " + strings.Repeat("has(c.name) && ", 40) + ")"
	var rules []translate.RuleResult
	for i := range 500 {
		rules = append(rules, translate.RuleResult{Rule: fmt.Sprintf("rule-%03d", i), Verdict: translate.VerdictInvalid, Reason: model.ReasonCELCompileError, Message: compileError(expression)})
	}
	got := computeStatus(statusInput{Generation: 1, Plan: &translate.Plan{Rules: rules}, GenerateEnabled: true})
	msg := got.VAP.Message
	t.Logf("message: %d bytes for 500 invalid rules (unbounded: %d)", len(msg), 500*len(compileError(expression)))
	if len(msg) > maxStatusMessage {
		t.Errorf("message has %d bytes, want at most %d", len(msg), maxStatusMessage)
	}
	if got.Condition.Message != msg || got.Condition.Reason != ReasonInvalidRules {
		t.Errorf("condition %s %q, want InvalidRules with the same message", got.Condition.Reason, got.Condition.Message)
	}
	if strings.Contains(msg, "startsWith") || strings.Contains(msg, "....^") {
		t.Errorf("the message echoes the CEL source: %q", msg)
	}
	clauses := strings.Split(msg, "; ")
	last := clauses[len(clauses)-1]
	want := fmt.Sprintf("... and %d more rules (kyvap translate lists every rule)", 500-(len(clauses)-1))
	if last != want {
		t.Errorf("message ends with %q, want %q", last, want)
	}
	for i, c := range clauses[:len(clauses)-1] {
		if len(c) > len(`rule "rule-000": not enforced:  (CELCompileError)`)+maxRuleMessage {
			t.Errorf("clause %d has %d bytes: %q", i, len(c), c)
		}
		if !strings.HasPrefix(c, fmt.Sprintf("rule %q: not enforced: validations[0].expression: compilation failed", fmt.Sprintf("rule-%03d", i))) || !strings.HasSuffix(c, "(CELCompileError)") {
			t.Errorf("clause %d = %q: want the rule, the problem and the reason", i, c)
		}
	}
	if len(clauses) < 10 {
		t.Errorf("only %d clauses fit", len(clauses)-1)
	}
}

func TestStatusMessageKeepsTheReasonsExplanation(t *testing.T) {
	var rules []translate.RuleResult
	var outcomes []objectOutcome
	for i := range 300 {
		name := fmt.Sprintf("kyvap-p.rule-%03d", i)
		rules = append(rules, translate.RuleResult{Rule: fmt.Sprintf("rule-%03d", i), Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{name}})
		outcomes = append(outcomes, objectOutcome{Kind: "ValidatingAdmissionPolicy", Name: name, Action: actionConflict, Err: fmt.Errorf("ValidatingAdmissionPolicy %q already exists and was not generated by kyvap for this policy; it was left alone", name)})
	}
	got := computeStatus(statusInput{Plan: &translate.Plan{Rules: rules}, Outcomes: outcomes, GenerateEnabled: true})
	msg := got.VAP.Message
	if len(msg) > maxStatusMessage || got.Condition.Reason != ReasonNameConflict {
		t.Fatalf("%s, %d bytes", got.Condition.Reason, len(msg))
	}
	for _, want := range []string{`rule "rule-000": not enforced`, `ValidatingAdmissionPolicy "kyvap-p.rule-000" already exists`, "more rules (kyvap translate lists every rule)", "more messages"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not contain %q: %q", want, msg)
		}
	}
}

func TestStatusClauses(t *testing.T) {
	dup := translate.RuleResult{Rule: "check", Verdict: translate.VerdictInvalid, Reason: "DuplicateRuleName", Message: `rule name "check" is used by rules #1 and #3; Kyverno rejects such policies: rename one`}
	got := computeStatus(statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{dup, {Rule: "ok", Verdict: translate.VerdictTranslated}, dup}}, GenerateEnabled: true})
	if want := `rule "check": not enforced: rule name "check" is used by rules #1 and #3; Kyverno rejects such policies: rename one (DuplicateRuleName)`; got.VAP.Message != want || got.Condition.Reason != ReasonInvalidRules {
		t.Errorf("duplicate rules: %s %q, want InvalidRules %q (once)", got.Condition.Reason, got.VAP.Message, want)
	}
	long := strings.Repeat("ü", 200)
	if c := shortMessage(long); len(c) > maxRuleMessage || !utf8.ValidString(c) || !strings.HasSuffix(c, "ü...") {
		t.Errorf("shortMessage = %q (%d bytes)", c, len(c))
	}
	advice := "; kyvap's ServiceAccount needs get, list and watch on every LimitRange (v1)"
	if c := capClause(strings.Repeat("é", 1000) + advice); len(c) > maxClause || !utf8.ValidString(c) || !strings.HasPrefix(c, "éé") || !strings.HasSuffix(c, advice) || !strings.Contains(c, " ... ") {
		t.Errorf("capClause = %q (%d bytes)", c, len(c))
	}
	// What kyvap adds to a rule's clause is kept.
	exempt := translate.RuleResult{Rule: "everything", Verdict: translate.VerdictFallback, Reason: model.ReasonGenerationDisabled, Message: strings.Repeat("m", 1000),
		Fallback: &translate.FallbackRule{WebhookExempt: []string{"events", "nodes", "authentication.k8s.io/tokenreviews", "authorization.k8s.io/localsubjectaccessreviews", "authorization.k8s.io/selfsubjectaccessreviews", "authorization.k8s.io/selfsubjectrulesreviews", "authorization.k8s.io/subjectaccessreviews", "coordination.k8s.io/leases"}}}
	got = computeStatus(statusInput{Plan: &translate.Plan{Rules: []translate.RuleResult{exempt}}, FallbackEnforced: true})
	if msg := got.VAP.Message; !strings.Contains(msg, "coordination.k8s.io/leases, which never reach kyvap's webhook") || strings.Contains(msg, strings.Repeat("m", maxRuleMessage)) {
		t.Errorf("fallback clause %q: want the rule's message short and every exempt resource", msg)
	}
	if got := withoutSourceEcho("ERROR: <input>:1:3: found no matching overload for '_||_' | a || b + 1 | ...^ ERROR: <input>:1:9: x | a || b + 1 | ........^"); got != "ERROR: <input>:1:3: found no matching overload for '_||_' ERROR: <input>:1:9: x" {
		t.Errorf("withoutSourceEcho = %q", got)
	}
}

// TestStatusCarriesTranslationWarnings: a policy-model policy whose
// translation warns (a namespaced policy matching cluster-scoped
// resources) says so in its status, after the summary, bounded.
func TestStatusCarriesTranslationWarnings(t *testing.T) {
	plan := &translate.Plan{Rules: []translate.RuleResult{{Rule: "policy", Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{"kyvap-x"}}}}
	warning := "NamespacedValidatingPolicy/a/x: matchConstraints name cluster-scoped namespaces, which a namespaced policy never applies to"
	got := computeStatus(statusInput{Plan: plan, GenerateEnabled: true, PolicyModel: true, Warnings: []string{warning}})
	want := "every CEL rule (1) is enforced by ValidatingAdmissionPolicies; warning: " + warning
	if got.Condition.Message != want || got.Condition.Reason != ReasonAllRulesTranslated {
		t.Errorf("condition %s: %q, want %s: %q", got.Condition.Reason, got.Condition.Message, ReasonAllRulesTranslated, want)
	}
	many := make([]string, 500)
	for i := range many {
		many[i] = fmt.Sprintf("warning number %d about something quite long to fill the status message", i)
	}
	got = computeStatus(statusInput{Plan: plan, GenerateEnabled: true, PolicyModel: true, Warnings: many})
	if len(got.Condition.Message) > maxStatusMessage {
		t.Errorf("message of %d bytes, want at most %d", len(got.Condition.Message), maxStatusMessage)
	}
}

// TestStatusEnforced: Kyverno's Ready condition, which kyvap writes when
// Kyverno does not run, says whether every rule is enforced by someone.
func TestStatusEnforced(t *testing.T) {
	translated := translate.RuleResult{Rule: "replicas", Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{"kyvap-p.replicas"}}
	fallback := translate.RuleResult{Rule: "roles", Verdict: translate.VerdictFallback, Reason: model.ReasonRolesOrClusterRoles}
	jmespath := translate.RuleResult{Rule: "jmespath", Verdict: translate.VerdictFallback, Reason: model.ReasonContextEntries, Fallback: &translate.FallbackRule{NotEnforced: "JMESPath"}}
	notHandled := translate.RuleResult{Rule: "pattern", Verdict: translate.VerdictNotHandled, Reason: model.ReasonNonCELRule}
	plan := func(rules ...translate.RuleResult) *translate.Plan { return &translate.Plan{Rules: rules} }
	for _, tc := range []struct {
		name string
		in   statusInput
		want bool
	}{
		{"every rule a VAP", statusInput{Plan: plan(translated), GenerateEnabled: true}, true},
		{"a rule on kyvap's webhook, which serves", statusInput{Plan: plan(translated, fallback), GenerateEnabled: true, FallbackEnforced: true}, true},
		{"a rule on kyvap's webhook, which does not serve", statusInput{Plan: plan(translated, fallback), GenerateEnabled: true}, false},
		{"a rule kyvap's webhook cannot run", statusInput{Plan: plan(translated, jmespath), GenerateEnabled: true, FallbackEnforced: true}, false},
		{"a non-CEL rule without Kyverno", statusInput{Plan: plan(translated, notHandled), GenerateEnabled: true}, false},
		{"a non-CEL rule with Kyverno", statusInput{Plan: plan(translated, notHandled), GenerateEnabled: true, KyvernoRunning: true}, true},
		{"nothing to enforce", statusInput{Plan: plan(), GenerateEnabled: true}, false},
		{"a generated object refused", statusInput{Plan: plan(translated), GenerateEnabled: true,
			Outcomes: []objectOutcome{{Kind: "ValidatingAdmissionPolicy", Name: "kyvap-p.replicas", Action: actionFailed, Err: errors.New("refused")}}}, false},
		{"a change refused, the previous objects stored", statusInput{Plan: plan(translated), GenerateEnabled: true,
			Outcomes: []objectOutcome{{Kind: "ValidatingAdmissionPolicy", Name: "kyvap-p.replicas", Action: actionFailed, Previous: true, Err: errors.New("refused")}}}, false},
	} {
		st := computeStatus(tc.in)
		if st.Enforced != tc.want {
			t.Errorf("%s: enforced %v, want %v", tc.name, st.Enforced, tc.want)
		}
		ready := readyCondition(st)
		wantStatus := map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[tc.want]
		if ready.Type != "Ready" || ready.Status != wantStatus || ready.Reason == "" || !strings.Contains(ready.Message, st.Condition.Reason) {
			t.Errorf("%s: Ready condition %+v", tc.name, ready)
		}
	}
}

// TestReadyWaitsForActivation: Ready says False (Pending) while the API
// server may not enforce what was just written, True once it does.
func TestReadyWaitsForActivation(t *testing.T) {
	plan := &translate.Plan{Rules: []translate.RuleResult{{Rule: "replicas", Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{"kyvap-p.replicas"}}}}
	pending := computeStatus(statusInput{Plan: plan, GenerateEnabled: true, Activating: true})
	if c := readyCondition(pending); c.Status != metav1.ConditionFalse || c.Reason != "Pending" || pending.ready() {
		t.Errorf("while activating: Ready %+v, ready() %v", c, pending.ready())
	}
	if pending.Condition.Reason != ReasonAllRulesTranslated {
		t.Errorf("kyvap's condition while activating = %s, want %s (it says what is enforced, Ready says since when)", pending.Condition.Reason, ReasonAllRulesTranslated)
	}
	done := computeStatus(statusInput{Plan: plan, GenerateEnabled: true})
	if c := readyCondition(done); c.Status != metav1.ConditionTrue || !done.ready() {
		t.Errorf("once active: Ready %+v, ready() %v", c, done.ready())
	}
}

// TestRefusedChangeKeepsThePreviousVersion: a refused update of an object
// that was stored says that the previous version keeps enforcing the rule;
// a refused creation says the rule is not enforced.
func TestRefusedChangeKeepsThePreviousVersion(t *testing.T) {
	plan := &translate.Plan{Rules: []translate.RuleResult{{Rule: "replicas", Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{"kyvap-p.replicas"}}}}
	for _, tc := range []struct {
		previous bool
		want     string
	}{
		{true, "their previous version keeps enforcing the rule"},
		{false, "not enforced: its generated objects could not be applied"},
	} {
		st := computeStatus(statusInput{Plan: plan, GenerateEnabled: true, Outcomes: []objectOutcome{
			{Kind: kindBinding, Name: "kyvap-p.replicas-0", Action: actionFailed, Previous: tc.previous, Err: errors.New("refused")},
		}})
		if st.Condition.Reason != ReasonApplyFailed || !strings.Contains(st.Condition.Message, tc.want) {
			t.Errorf("previous %v: condition %s %q, want ApplyFailed saying %q", tc.previous, st.Condition.Reason, st.Condition.Message, tc.want)
		}
	}
}
