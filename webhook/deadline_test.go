// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

// expensiveRules are n ConfigMap rules that pass but each cost close to the
// API server's runtime budget per rule: ten validations of about 940,000
// cost units each (a 100,000-iteration comprehension), 1 to 2 CPU-seconds
// per rule. Ten of them are issue 14's request of 18 CPU-seconds.
func expensiveRules(n int) []kyvernov1.Rule {
	list := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = strconv.Itoa(i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	expensive := list(100) + ".all(i, " + list(100) + ".all(j, " + list(10) + ".all(k, i + j + k >= 0)))"
	rules := make([]kyvernov1.Rule, n)
	for i := range rules {
		rules[i] = cmRule(expensive, "never")
		rules[i].Name = fmt.Sprintf("expensive-%d", i)
		for range 9 {
			rules[i].Validation.CEL.Expressions = append(rules[i].Validation.CEL.Expressions, rules[i].Validation.CEL.Expressions[0])
		}
	}
	return rules
}

var ranOutAfter = regexp.MustCompile(`kyvap's webhook ran out of time after (\d+) rules \(of (\d+)\)`)

// rulesRun reads "after N rules (of M)" from an out-of-time answer.
func rulesRun(t *testing.T, text string) (ran, of int) {
	t.Helper()
	m := ranOutAfter.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%q does not say the webhook ran out of time", text)
	}
	ran, _ = strconv.Atoi(m[1])
	of, _ = strconv.Atoi(m[2])
	return ran, of
}

func groupContext(fp admissionregistrationv1.FailurePolicyType, seconds int32) context.Context {
	return context.WithValue(context.Background(), pathKey{}, Group{fp, seconds}.Path())
}

// TestHandlerStopsAtTheDeadline: ten expensive rules (10 to 20 CPU-seconds)
// under a 100 ms budget. Evaluation is cut (not every rule ran) and the
// answer follows the group's failurePolicy: Fail refuses with a clear
// message, Ignore admits with a warning; a denial by a rule that ran
// before the deadline stands under either.
func TestHandlerStopsAtTheDeadline(t *testing.T) {
	ignore := kyvernov1.Ignore
	budget := func(Group) time.Duration { return 100 * time.Millisecond }
	req := configMapRequest(admissionv1.Create, "x", nil)

	t.Run("Fail refuses", func(t *testing.T) {
		h := newHandler(t, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce}, expensiveRules(10)...)
		h.Budget = budget
		resp := h.Handle(groupContext(admissionregistrationv1.Fail, 10), req)
		if resp.Allowed || resp.Result == nil {
			t.Fatalf("admitted: %+v", resp)
		}
		if resp.Result.Code != http.StatusGatewayTimeout || !strings.Contains(resp.Result.Message, "failurePolicy Fail") {
			t.Errorf("result = %d %q", resp.Result.Code, resp.Result.Message)
		}
		if ran, of := rulesRun(t, resp.Result.Message); ran >= of || of != 10 {
			t.Errorf("%d of %d rules ran, want fewer than all 10", ran, of)
		}
	})
	t.Run("Ignore admits with a warning", func(t *testing.T) {
		h := newHandler(t, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce, FailurePolicy: &ignore}, expensiveRules(10)...)
		h.Budget = budget
		resp := h.Handle(groupContext(admissionregistrationv1.Ignore, 10), req)
		if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "failurePolicy Ignore") {
			t.Fatalf("want admitted with one warning, got %+v", resp)
		}
		if ran, of := rulesRun(t, resp.Warnings[0]); ran >= of || of != 10 {
			t.Errorf("%d of %d rules ran, want fewer than all 10", ran, of)
		}
	})
	t.Run("a denial that was reached stands", func(t *testing.T) {
		deny := cmRule("false", "denied early")
		deny.Name = "a-deny"
		h := newHandler(t, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce, FailurePolicy: &ignore}, append([]kyvernov1.Rule{deny}, expensiveRules(10)...)...)
		h.Budget = budget
		resp := h.Handle(groupContext(admissionregistrationv1.Ignore, 10), req)
		if resp.Allowed || !strings.Contains(resp.Result.Message, "denied early") {
			t.Fatalf("want the early denial, got %+v", resp)
		}
		if len(resp.Warnings) != 1 {
			t.Fatalf("warnings = %q", resp.Warnings)
		}
		if ran, of := rulesRun(t, resp.Warnings[0]); ran >= of || of != 11 {
			t.Errorf("%d of %d rules ran, want fewer than all 11", ran, of)
		}
	})
}

// TestHandlerCapsConcurrentEvaluations: with every evaluation slot taken,
// a request waits for one until its budget runs out, evaluates nothing,
// and is answered by the failurePolicy.
func TestHandlerCapsConcurrentEvaluations(t *testing.T) {
	h := newHandler(t, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce}, cmRule("false", "denied"))
	h.MaxConcurrent = 1
	h.Budget = func(Group) time.Duration { return 50 * time.Millisecond }
	release, ok := h.acquire(context.Background())
	if !ok {
		t.Fatal("no slot for the first evaluation")
	}
	resp := h.Handle(groupContext(admissionregistrationv1.Fail, 10), configMapRequest(admissionv1.Create, "x", nil))
	if resp.Allowed || resp.Result.Code != http.StatusGatewayTimeout || !strings.Contains(resp.Result.Message, "after 0 rules") || !strings.Contains(resp.Result.Message, "all 1 of its evaluation slots stayed busy") {
		t.Fatalf("want a refusal for lack of a slot, got %+v", resp.Result)
	}
	release()
	resp = h.Handle(groupContext(admissionregistrationv1.Fail, 10), configMapRequest(admissionv1.Create, "x", nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "denied") || strings.Contains(resp.Result.Message, "out of time") {
		t.Fatalf("with the slot free the rule decides, got %+v", resp.Result)
	}
}

// TestHandlerConcurrentRequests: many requests at once through a small cap
// all get their rules' verdict (the slots are shared safely).
func TestHandlerConcurrentRequests(t *testing.T) {
	h := newHandler(t, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce}, cmRule("object.metadata.name != 'bad'", "bad name"))
	h.MaxConcurrent = 2
	var wg sync.WaitGroup
	denied := make([]bool, 32)
	for i := range denied {
		wg.Go(func() {
			name := "good"
			if i%2 == 0 {
				name = "bad"
			}
			denied[i] = !h.Handle(groupContext(admissionregistrationv1.Fail, 10), configMapRequest(admissionv1.Create, name, nil)).Allowed
		})
	}
	wg.Wait()
	for i, d := range denied {
		if d != (i%2 == 0) {
			t.Errorf("request %d: denied = %v", i, d)
		}
	}
}
