// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

func fallbackRule(name string, variants ...string) translate.FallbackRule {
	fr := translate.FallbackRule{Policy: "p", Rule: kyvernov1.Rule{Name: name}}
	for _, v := range variants {
		fr.AdditionalRules = append(fr.AdditionalRules, kyvernov1.Rule{Name: v})
	}
	return fr
}

func planWith(vaps map[string]string) *translate.Plan {
	plan := &translate.Plan{}
	for rule, vap := range vaps {
		plan.Rules = append(plan.Rules, translate.RuleResult{Rule: rule, Verdict: translate.VerdictTranslated, ValidatingAdmissionPolicies: []string{vap}})
		plan.Bindings = append(plan.Bindings, admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: vap + "-0"},
			Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap},
		})
	}
	return plan
}

func TestHeldRules(t *testing.T) {
	has := func(objects ...string) func(kind, name string) bool {
		return func(kind, name string) bool {
			for _, o := range objects {
				if o == kind+"/"+name {
					return true
				}
			}
			return false
		}
	}
	x := fallbackRule("x", "autogen-x")
	for _, tt := range []struct {
		name     string
		previous []translate.FallbackRule
		next     []translate.FallbackRule
		plan     *translate.Plan
		present  func(kind, name string) bool
		want     []string
	}{
		{"moving to a VAP that does not exist yet", []translate.FallbackRule{x}, nil, planWith(map[string]string{"x": "v"}), has(), []string{"x"}},
		{"VAP without its binding", []translate.FallbackRule{fallbackRule("x")}, nil, planWith(map[string]string{"x": "v"}), has(kindVAP + "/v"), []string{"x"}},
		{"VAP and binding in place", []translate.FallbackRule{fallbackRule("x")}, nil, planWith(map[string]string{"x": "v"}), has(kindVAP+"/v", kindBinding+"/v-0"), nil},
		{"a variant's VAP missing", []translate.FallbackRule{x}, nil, planWith(map[string]string{"x": "v", "autogen-x": "va"}), has(kindVAP+"/v", kindBinding+"/v-0"), []string{"x"}},
		{"still the webhook's", []translate.FallbackRule{x}, []translate.FallbackRule{x}, planWith(nil), has(), nil},
		{"rule removed from the policy", []translate.FallbackRule{x}, nil, planWith(nil), has(), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, fr := range heldRules(tt.previous, tt.next, tt.plan, tt.present) {
				got = append(got, fr.Rule.Name)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("held %v, want %v", got, tt.want)
			}
		})
	}
}

type coverage map[string]bool

func (c coverage) Covers(policy, rule string) bool { return c[policy+"/"+rule] }

func TestHoldStale(t *testing.T) {
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{translate.AnnotationRule: "x"}}}
	toWebhook := map[string]bool{"x": true}
	if holdStale(vap, "p", toWebhook, nil) {
		t.Error("without a webhook a stale VAP goes at once")
	}
	if !holdStale(vap, "p", toWebhook, coverage{}) {
		t.Error("a rule moving to the webhook keeps its VAP until the webhook covers it")
	}
	if holdStale(vap, "p", toWebhook, coverage{"p/x": true}) {
		t.Error("a covered rule's VAP goes")
	}
	if holdStale(vap, "p", map[string]bool{}, coverage{}) {
		t.Error("a rule that is not moving to the webhook does not keep its VAP")
	}
}

// TestHeldModelRules: the rules of a policy-model policy moving from the
// webhook to VAPs stay in the engine until their VAP and binding exist.
func TestHeldModelRules(t *testing.T) {
	has := func(objects ...string) func(kind, name string) bool {
		return func(kind, name string) bool {
			for _, o := range objects {
				if o == kind+"/"+name {
					return true
				}
			}
			return false
		}
	}
	policy, variant := model.Rule{ID: model.RuleIDPolicy}, model.Rule{ID: "autogen-defaults"}
	plan := planWith(map[string]string{model.RuleIDPolicy: "v", "autogen-defaults": "va"})
	for _, tt := range []struct {
		name     string
		previous []model.Rule
		next     []model.Rule
		present  func(kind, name string) bool
		want     []string
	}{
		{"nothing in place: both held", []model.Rule{policy, variant}, nil, has(), []string{model.RuleIDPolicy, "autogen-defaults"}},
		{"one in place", []model.Rule{policy, variant}, nil, has(kindVAP+"/v", kindBinding+"/v-0"), []string{"autogen-defaults"}},
		{"a VAP without its binding", []model.Rule{policy}, nil, has(kindVAP + "/v"), []string{model.RuleIDPolicy}},
		{"all in place", []model.Rule{policy, variant}, nil, has(kindVAP+"/v", kindBinding+"/v-0", kindVAP+"/va", kindBinding+"/va-0"), nil},
		{"still the webhook's", []model.Rule{policy}, []model.Rule{policy}, has(), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range heldModelRules(tt.previous, tt.next, plan, tt.present) {
				got = append(got, r.ID)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("held %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWebhookModelRules: the webhook takes the rules the plan leaves to it
// that the engine can evaluate, none when Kyverno runs.
func TestWebhookModelRules(t *testing.T) {
	p := &model.Policy{Rules: []model.Rule{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}}
	plan := &translate.Plan{Rules: []translate.RuleResult{
		{Rule: "a", Verdict: translate.VerdictTranslated},
		{Rule: "b", Verdict: translate.VerdictFallback, Fallback: &translate.FallbackRule{}},
		{Rule: "c", Verdict: translate.VerdictFallback, Fallback: &translate.FallbackRule{NotEnforced: "network library"}},
		{Rule: "d", Verdict: translate.VerdictInvalid},
	}}
	var got []string
	for _, r := range webhookModelRules(p, plan, false) {
		got = append(got, r.ID)
	}
	if strings.Join(got, ",") != "b" {
		t.Errorf("webhook rules %v, want [b]", got)
	}
	if rules := webhookModelRules(p, plan, true); len(rules) != 0 {
		t.Errorf("with Kyverno running the webhook takes %v, want none", rules)
	}
}

// TestActivationClock: an object counts as active vapActivationGrace after
// this replica first saw it (the API server compiles VAPs once a second),
// at once when it was created long ago (a manager restart holds nothing).
func TestActivationClock(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := start
	clock := newActivationClock(func() time.Time { return now })
	if clock.active("new", start) {
		t.Fatal("an object just created is active")
	}
	now = start.Add(vapActivationGrace - time.Millisecond)
	if clock.active("new", start) {
		t.Fatal("active before the grace")
	}
	now = start.Add(vapActivationGrace)
	if !clock.active("new", start) {
		t.Fatal("not active after the grace")
	}
	// Created before this replica saw it, but not long ago: the grace runs
	// from the first sight (the clocks may disagree).
	if clock.active("seen-late", start.Add(-time.Second)) {
		t.Fatal("an object seen for the first time is active")
	}
	if !clock.active("old", now.Add(-vapSettled)) {
		t.Fatal("an object created vapSettled ago is not active")
	}
	// Entries go once their objects' age settles them.
	now = now.Add(vapSettled + time.Second)
	if !clock.active("seen-late", start.Add(-time.Second)) {
		t.Fatal("a settled object is not active")
	}
	if len(clock.firstSeen) != 0 {
		t.Errorf("the clock still remembers %d objects", len(clock.firstSeen))
	}
}

// TestBridgedRules: the rules of VAPs that are not active yet go to the
// webhook (as the translation with generation off has them), unless the
// sink's rules carry them already or they cannot be enforced there.
func TestBridgedRules(t *testing.T) {
	active := func(objects ...string) func(kind, name string) bool {
		return func(kind, name string) bool {
			for _, o := range objects {
				if o == kind+"/"+name {
					return true
				}
			}
			return false
		}
	}
	plan := planWith(map[string]string{"a": "va", "b": "vb", "autogen-c": "vc"})
	notEnforced := fallbackRule("d")
	notEnforced.NotEnforced = "context"
	bridge := []translate.FallbackRule{fallbackRule("a"), fallbackRule("b"), fallbackRule("c", "autogen-c"), notEnforced, fallbackRule("e")}
	names := func(rules []translate.FallbackRule) string {
		var out []string
		for _, fr := range rules {
			out = append(out, fr.Rule.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct {
		name    string
		carried []translate.FallbackRule
		present func(kind, name string) bool
		want    string
	}{
		{"nothing active", nil, active(), "a,b,c"},
		{"a active, its binding too", nil, active(kindVAP+"/va", kindBinding+"/va-0"), "b,c"},
		{"a's VAP without its binding", nil, active(kindVAP + "/va"), "a,b,c"},
		{"b carried already (held)", []translate.FallbackRule{fallbackRule("b")}, active(kindVAP+"/va", kindBinding+"/va-0"), "c"},
		{"all active", nil, active(kindVAP+"/va", kindBinding+"/va-0", kindVAP+"/vb", kindBinding+"/vb-0", kindVAP+"/vc", kindBinding+"/vc-0"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(bridgedRules(tt.carried, bridge, plan, tt.present)); got != tt.want {
				t.Errorf("bridged %q, want %q", got, tt.want)
			}
			if all := allInPlace(plan, tt.present); all != (tt.want == "") {
				t.Errorf("allInPlace %v with %q bridged", all, tt.want)
			}
		})
	}
}

// TestBridgeBudget: the rules bridged at once are bounded across policies;
// a policy bridging keeps its share, one that stops frees it, and the
// share of a policy nobody renews (deleted) goes after vapSettled.
func TestBridgeBudget(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	b := newBridgeBudget(func() time.Time { return now }, 10)
	for _, step := range []struct {
		policy string
		rules  int
		want   bool
	}{
		{"a", 6, true},
		{"b", 5, false}, // 11 > 10
		{"b", 4, true},  // 10
		{"a", 6, true},  // a keeps its share
		{"c", 1, false},
	} {
		if got := b.take(step.policy, step.rules); got != step.want {
			t.Fatalf("take(%s, %d) = %v, want %v (%v)", step.policy, step.rules, got, step.want, b.bridged)
		}
	}
	if !b.full("c") || b.full("a") {
		t.Errorf("full: c %v (want true), a %v (want false: it bridges)", b.full("c"), b.full("a"))
	}
	for _, step := range []struct {
		policy string
		rules  int
		want   bool
	}{
		{"a", 0, true}, // a is done: its 6 are free
		{"c", 6, true},
	} {
		if got := b.take(step.policy, step.rules); got != step.want {
			t.Fatalf("take(%s, %d) = %v, want %v (%v)", step.policy, step.rules, got, step.want, b.bridged)
		}
	}
	now = now.Add(vapSettled + time.Second)
	if !b.take("d", 10) {
		t.Errorf("shares nobody renewed for %s still count: %v", vapSettled, b.bridged)
	}
}

// TestActivationClockCountsUpdates: an update is a new version, which the
// API server compiles anew: it is not active until the grace has passed
// since this replica first saw it, however old the object.
func TestActivationClockCountsUpdates(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := start
	clock := newActivationClock(func() time.Time { return now })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{
		UID: "b", Generation: 1, CreationTimestamp: metav1.NewTime(start.Add(-time.Hour)),
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "kyvap", Operation: metav1.ManagedFieldsOperationUpdate, Time: ptr.To(metav1.NewTime(start.Add(-time.Hour)))},
			// the API server's own status writes do not count
			{Manager: "kube-apiserver", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: ptr.To(metav1.NewTime(start))},
		},
	}}
	if !clock.active(activationKey(binding), lastChanged(binding)) {
		t.Fatal("an object last written an hour ago is not active")
	}
	binding.Generation = 2
	binding.ManagedFields[0].Time = ptr.To(metav1.NewTime(start))
	if clock.active(activationKey(binding), lastChanged(binding)) {
		t.Fatal("an object updated just now is active")
	}
	now = start.Add(vapActivationGrace)
	if !clock.active(activationKey(binding), lastChanged(binding)) {
		t.Fatal("an update is not active after the grace")
	}
}

// TestWriteClock: the version this replica wrote of an object is
// remembered until it is active (forget) or for vapSettled at most; an
// object it never wrote (a restarted manager's view of a converged policy)
// has none.
func TestWriteClock(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := start
	w := newWriteClock(func() time.Time { return now })
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "u", Generation: 7}}
	w.wrote(kindBinding, b)
	v, ok := w.version(kindBinding, "b")
	if !ok || v.generation != 7 || v.uid != "u" || v.at != start {
		t.Fatalf("version = %+v, %v", v, ok)
	}
	if _, ok := w.version(kindVAP, "b"); ok {
		t.Fatal("a VAP of the same name counts as written")
	}
	b.Generation = 8
	w.wrote(kindBinding, b)
	w.forget(kindBinding, "b", v) // the older version became active: the newer stays
	if v, ok := w.version(kindBinding, "b"); !ok || v.generation != 8 {
		t.Fatalf("after forgetting an older version: %+v, %v", v, ok)
	}
	now = start.Add(vapSettled)
	if _, ok := w.version(kindBinding, "b"); ok || len(w.written) != 0 {
		t.Errorf("a write vapSettled ago is still remembered (%d entries)", len(w.written))
	}
}
