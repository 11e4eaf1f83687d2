// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/translate"
)

// maxConditionMessage is the API's limit on metav1.Condition.Message.
const maxConditionMessage = 32768

// statusInput is everything the status is computed from.
type statusInput struct {
	Generation       int64
	Plan             *translate.Plan
	Outcomes         []objectOutcome
	GenerateEnabled  bool
	FallbackEnforced bool
	// KyvernoRunning: Kyverno's admission controller runs in the cluster and
	// enforces the rules kyvap does not turn into VAPs.
	KyvernoRunning bool
	// TypeWarnings are the VAPs' status.typeChecking warnings, by VAP name.
	TypeWarnings map[string][]string
	// Activating: some generated object was just written and the API
	// server may not enforce its current version yet (activating).
	Activating bool
	// Warnings are the translation's warnings (a namespaced policy matching
	// cluster-scoped resources, resources the cluster does not serve, ...).
	Warnings []string
	// PolicyModel: the plan is of a policy-model kind (ValidatingPolicy...),
	// whose rules are all CEL: a policy with nothing for kyvap says that
	// none of it is enforced at admission by kyvap, not that it has no CEL.
	PolicyModel bool
}

// policyStatus is kyvap's part of a ClusterPolicy's status.
type policyStatus struct {
	VAP       kyvernov1.ValidatingAdmissionPolicyStatus
	Condition metav1.Condition
	// Enforced: every rule is enforced at admission by someone (kyvap's
	// VAPs, kyvap's webhook or a running Kyverno), which is what Kyverno's
	// Ready condition (the CRD's READY column) says when kyvap writes it.
	Enforced bool
	// Activating: the API server may not enforce the objects just written
	// yet; Ready waits for them (see ready).
	Activating bool
}

// ready is what Kyverno's Ready condition says when kyvap writes it: every
// rule is enforced, as the policy's current generation asks. A test or a
// rollout waits for Ready after a change (Kyverno's library switches a
// policy from Audit to Enforce, waits for Ready, then expects a refusal), so
// Ready waits until the API server enforces the objects written for it.
func (st policyStatus) ready() bool { return st.Enforced && !st.Activating }

// computeStatus derives the Kyverno-compatible VAP status and kyvap's
// condition from a plan and what applying it did. The message is bounded
// (see boundedMessage): one short clause per rule.
func computeStatus(in statusInput) policyStatus {
	var ruleLines, otherLines, reasonLines []string
	failed := map[string]error{} // VAP or binding name -> error
	// Objects whose write failed while a previous version stays stored
	// (and enforces the rule as before the change).
	previous := map[string]bool{}
	var conflicts, applyErrors []string
	for _, o := range in.Outcomes {
		switch o.Action {
		case actionConflict:
			conflicts = append(conflicts, capClause(withoutSourceEcho(o.Err.Error())))
			failed[o.Name] = o.Err
		case actionFailed:
			applyErrors = append(applyErrors, capClause(withoutSourceEcho(o.Err.Error())))
			failed[o.Name] = o.Err
			previous[o.Name] = o.Previous
		}
	}

	celRules, translated, invalid, fallback, leftToKyverno, unenforced := 0, 0, 0, 0, 0, 0
	for _, r := range in.Plan.Rules {
		name := r.Rule
		if len(name) > maxRuleNameInClause {
			name = cutUTF8(name, maxRuleNameInClause-len("...")) + "..."
		}
		head := fmt.Sprintf("rule %q: ", name)
		switch r.Verdict {
		case translate.VerdictNotHandled:
			// Kyverno enforces it. generated: true would tell a running
			// Kyverno to skip the whole policy, this rule included.
			leftToKyverno++
			if !in.KyvernoRunning {
				unenforced++
			}
			ruleLines = append(ruleLines, capClause(fmt.Sprintf("%sleft to Kyverno (%s: %s)", head, r.Reason, shortMessage(r.Message))))
		case translate.VerdictTranslated:
			celRules++
			if broken := brokenObjects(r, failed); len(broken) > 0 {
				if allPrevious(broken, previous) {
					// The write was refused, the stored objects were not:
					// the rule is enforced as before the policy changed.
					ruleLines = append(ruleLines, capClause(fmt.Sprintf("%sthe policy's change is not in force: its generated objects could not be updated (%s), so their previous version keeps enforcing the rule", head, strings.Join(broken, ", "))))
					continue
				}
				unenforced++
				ruleLines = append(ruleLines, capClause(fmt.Sprintf("%snot enforced: its generated objects could not be applied (%s)", head, strings.Join(broken, ", "))))
				continue
			}
			translated++
		case translate.VerdictFallback:
			celRules++
			fallback++
			if !in.KyvernoRunning && (!in.FallbackEnforced || (r.Fallback != nil && r.Fallback.NotEnforced != "")) {
				unenforced++
			}
			ruleLines = append(ruleLines, capClause(head+fallbackText(r, shortMessage(r.Message), in.FallbackEnforced, in.KyvernoRunning)))
		case translate.VerdictInvalid:
			celRules++
			invalid++
			unenforced++
			ruleLines = append(ruleLines, capClause(fmt.Sprintf("%snot enforced: %s (%s)", head, shortMessage(r.Message), r.Reason)))
		}
	}
	for _, w := range in.Warnings {
		otherLines = append(otherLines, capClause("warning: "+shortMessage(w)))
	}
	for _, vap := range sortedKeys(in.TypeWarnings) {
		for _, w := range in.TypeWarnings[vap] {
			otherLines = append(otherLines, capClause(fmt.Sprintf("ValidatingAdmissionPolicy %q type checking: %s", vap, shortMessage(w))))
		}
	}

	cond := metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, ObservedGeneration: in.Generation}
	switch {
	case celRules == 0 && in.PolicyModel:
		cond.Reason = ReasonNotForKyvap
		reasonLines = append(reasonLines, "nothing of the policy is for kyvap to enforce at admission")
	case celRules == 0:
		cond.Reason = ReasonNoCELRules
		reasonLines = append(reasonLines, "the policy has no CEL validate rule to translate")
	case len(conflicts) > 0:
		cond.Reason = ReasonNameConflict
		reasonLines = append(reasonLines, conflicts...)
	case len(applyErrors) > 0:
		cond.Reason = ReasonApplyFailed
		reasonLines = append(reasonLines, applyErrors...)
	case invalid > 0:
		cond.Reason = ReasonInvalidRules
	case !in.GenerateEnabled:
		cond.Reason = ReasonGenerationDisabled
	case fallback > 0:
		cond.Reason = ReasonFallback
	default:
		cond.Reason = ReasonAllRulesTranslated
		cond.Status = metav1.ConditionTrue
	}
	// Kyverno skips a policy marked generated entirely (its webhook, its CEL
	// handler, its background scans): only when kyvap enforces every rule.
	generated := celRules > 0 && translated == celRules && leftToKyverno == 0
	message := boundedMessage(ruleLines, otherLines, reasonLines)
	cond.Message = message
	if len(ruleLines) == 0 && len(reasonLines) == 0 && celRules > 0 && translated == celRules {
		// Nothing to say rule by rule: say that all is well, then any
		// warnings.
		summary := fmt.Sprintf("every CEL rule (%d) is enforced by ValidatingAdmissionPolicies", celRules)
		if cond.Message == "" {
			cond.Message = summary
		} else {
			cond.Message = truncate(summary+"; "+cond.Message, maxStatusMessage)
		}
	}
	if cond.Message == "" {
		cond.Message = fmt.Sprintf("every CEL rule (%d) is enforced by ValidatingAdmissionPolicies", celRules)
	}
	return policyStatus{
		VAP:        kyvernov1.ValidatingAdmissionPolicyStatus{Generated: generated, Message: message},
		Condition:  cond,
		Enforced:   celRules+leftToKyverno > 0 && unenforced == 0 && len(conflicts) == 0 && len(applyErrors) == 0,
		Activating: in.Activating,
	}
}

// Bounds of the status kyvap writes. The message (the same in
// status.validatingadmissionpolicy.message and in kyvap's condition) has at
// most maxStatusMessage bytes, far below the condition's API limit
// (maxConditionMessage) and small enough for 1,000s of policies. It has one
// clause per rule, in which the translator's message (e.g. a CEL compile
// error, without the expression the compiler quotes) has at most
// maxRuleMessage bytes and the whole clause at most maxClause (what kyvap
// adds, e.g. the resources the webhook never sees, is kept); the clauses
// explaining the condition's reason (name conflicts, refused writes, each
// cut in the middle if longer than maxClause, so that kyvap's advice at the
// end stays) take at most maxReasonMessage and are always there; clauses
// left out are counted: "... and N more rules".
const (
	maxStatusMessage    = 4096
	maxReasonMessage    = 2048
	maxClause           = 1024
	maxRuleMessage      = 256
	maxRuleNameInClause = 64
)

// moreTail ends a message some rule clauses were left out of.
const moreTail = " (kyvap translate lists every rule)"

// shortMessage is a message of the translator (or the type checker) as a
// status clause carries it: without the CEL compiler's echo of the
// expression, and at most maxRuleMessage bytes.
func shortMessage(msg string) string {
	msg = withoutSourceEcho(msg)
	if len(msg) > maxRuleMessage {
		msg = cutUTF8(msg, maxRuleMessage-len("...")) + "..."
	}
	return msg
}

// capClause cuts a clause longer than maxClause in the middle, keeping its
// beginning (what it is about) and its end (the reason code, the advice).
func capClause(s string) string {
	if len(s) <= maxClause {
		return s
	}
	const gap = " ... "
	head := cutUTF8(s, (maxClause-len(gap))*2/3)
	i := len(s) - (maxClause - len(gap) - len(head))
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return head + gap + s[i:]
}

// sourceEcho is the CEL compiler's quote of the expression under an error,
// " | <source line> | ....^", once its line breaks are spaces.
var sourceEcho = regexp.MustCompile(` \| .*? \| [. ]*\^`)

// withoutSourceEcho removes the expression the CEL compiler quotes under
// each error: the status names the rule and the problem, not its source.
func withoutSourceEcho(msg string) string {
	return sourceEcho.ReplaceAllString(msg, "")
}

// cutUTF8 is the longest prefix of s of at most n bytes that does not split
// a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// boundedMessage joins the clauses with "; " within maxStatusMessage bytes:
// the rule clauses, then the others, as many as fit, then the reason
// clauses (within maxReasonMessage), which explain the condition and are
// always there. Identical clauses (rules sharing a name) appear once.
func boundedMessage(rules, others, reasons []string) string {
	reasonText := joinBounded(nil, dedupe(reasons), maxReasonMessage)
	budget := maxStatusMessage
	if reasonText != "" {
		budget -= len(reasonText) + len("; ")
	}
	text := joinBounded(dedupe(rules), dedupe(others), budget)
	switch {
	case text == "":
		return reasonText
	case reasonText == "":
		return text
	}
	return text + "; " + reasonText
}

// joinBounded joins rules then others with "; ", leaving out what does not
// fit in limit bytes and saying how much: "... and N more rules and M more
// messages".
func joinBounded(rules, others []string, limit int) string {
	all := append(append([]string(nil), rules...), others...)
	// size[k] is the length of the first k clauses joined.
	size := make([]int, len(all)+1)
	for i, c := range all {
		size[i+1] = size[i] + len(c)
		if i > 0 {
			size[i+1] += len("; ")
		}
	}
	if size[len(all)] <= limit {
		return strings.Join(all, "; ")
	}
	for kept := len(all) - 1; kept >= 0; kept-- {
		tail := moreText(max(len(rules)-kept, 0), len(all)-max(kept, len(rules)))
		if kept > 0 {
			tail = "; " + tail
		}
		if size[kept]+len(tail) <= limit {
			return strings.Join(all[:kept], "; ") + tail
		}
	}
	return ""
}

// moreText says how many clauses were left out.
func moreText(rules, others int) string {
	var more []string
	if rules > 0 {
		more = append(more, fmt.Sprintf("%d more rules", rules))
	}
	if others > 0 {
		more = append(more, fmt.Sprintf("%d more messages", others))
	}
	text := "... and " + strings.Join(more, " and ")
	if rules > 0 {
		text += moreTail
	}
	return text
}

// dedupe drops repeated clauses, keeping the first of each.
func dedupe(clauses []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range clauses {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// kyvernoReadyType is Kyverno's condition on its policies (the CRD's READY
// column), which kyvap writes only when Kyverno does not run.
const kyvernoReadyType = "Ready"

// readyCondition is Kyverno's Ready condition as kyvap writes it when
// Kyverno does not run: True when every rule is enforced at admission, with
// Kyverno's reasons (Succeeded, Failed) and kyvap's reason in the message.
func readyCondition(st policyStatus) metav1.Condition {
	c := metav1.Condition{Type: kyvernoReadyType, Status: metav1.ConditionTrue, Reason: "Succeeded", ObservedGeneration: st.Condition.ObservedGeneration,
		Message: "enforced by kyvap (" + st.Condition.Reason + ")"}
	switch {
	case !st.Enforced:
		c.Status, c.Reason = metav1.ConditionFalse, "Failed"
		c.Message = "not every rule is enforced (kyvap: " + st.Condition.Reason + "; see condition " + ConditionType + ")"
	case st.Activating:
		c.Status, c.Reason = metav1.ConditionFalse, "Pending"
		c.Message = "the API server is loading the ValidatingAdmissionPolicies and bindings just written (about a second)"
	}
	return c
}

// fallbackText says where a fallback rule is enforced; msg is the rule's
// message (shortened by the caller).
func fallbackText(r translate.RuleResult, msg string, enforced, kyvernoRunning bool) string {
	where := "enforced by kyvap's webhook"
	switch {
	case kyvernoRunning:
		// No second webhook doing Kyverno's work: the policy is not marked
		// generated, so Kyverno enforces it whole.
		where = "left to Kyverno, whose admission controller runs in this cluster"
	case r.Fallback != nil && r.Fallback.NotEnforced != "":
		where = "NOT ENFORCED by kyvap: " + r.Fallback.NotEnforced
	case !enforced:
		where = "NOT ENFORCED: left to kyvap's webhook, which is not serving"
	}
	text := fmt.Sprintf("%s (%s: %s)", where, r.Reason, msg)
	if r.Fallback != nil && len(r.Fallback.WebhookExempt) > 0 && !kyvernoRunning {
		text += fmt.Sprintf("; not enforced on %s, which never reach kyvap's webhook so that it cannot lock the cluster out", strings.Join(r.Fallback.WebhookExempt, ", "))
	}
	if len(r.ValidatingAdmissionPolicies) > 0 && !strings.Contains(r.Message, r.ValidatingAdmissionPolicies[0]) {
		text = fmt.Sprintf("partly enforced by ValidatingAdmissionPolicy %s, the rest %s", strings.Join(r.ValidatingAdmissionPolicies, ", "), text)
	}
	return text
}

// brokenObjects lists the rule's generated objects that failed to apply.
func brokenObjects(r translate.RuleResult, failed map[string]error) []string {
	var out []string
	for name := range failed {
		for _, vap := range r.ValidatingAdmissionPolicies {
			// Bindings are named after their VAP.
			if name == vap || strings.HasPrefix(name, vap+"-") {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// allPrevious reports whether every one of names had a version stored
// before its write failed.
func allPrevious(names []string, previous map[string]bool) bool {
	for _, n := range names {
		if !previous[n] {
			return false
		}
	}
	return true
}

// typeWarnings extracts the type-checking warnings of generated VAPs.
func typeWarnings(vaps []admissionregistrationv1.ValidatingAdmissionPolicy) map[string][]string {
	out := map[string][]string{}
	for _, vap := range vaps {
		if vap.Status.TypeChecking == nil {
			continue
		}
		for _, w := range vap.Status.TypeChecking.ExpressionWarnings {
			out[vap.Name] = append(out[vap.Name], fmt.Sprintf("%s: %s", w.FieldRef, w.Warning))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// generatorNotice is what kyvap's condition says while Kyverno's own VAP
// generator owns status.validatingadmissionpolicy.
const generatorNotice = "Kyverno's ValidatingAdmissionPolicy generator also writes status.validatingadmissionpolicy"

// maxForeignMessage bounds the foreign message quoted in the notice.
const maxForeignMessage = 256

// foreignVAPStatus reports whether status.validatingadmissionpolicy holds
// what someone other than kyvap wrote after kyvap reported on the policy's
// current generation: Kyverno's own VAP generator (on by default) rewrites
// the field on every policy change. kyvap writes the field and its
// condition together, with the same message, so any other value is
// foreign.
//
// Before kyvap's first report (no condition), any value other than the zero
// value and kyvap's own hand-back message is foreign: Kyverno's generator
// reconciles a new policy as fast as kyvap does and, when it writes first,
// does not write again until the spec changes, so overwriting it would hide
// it for good.
func foreignVAPStatus(p *kyvernov1.ClusterPolicy) bool {
	vap := p.Status.ValidatingAdmissionPolicy
	cond := meta.FindStatusCondition(p.Status.Conditions, ConditionType)
	if cond == nil {
		return vap != (kyvernov1.ValidatingAdmissionPolicyStatus{}) && vap.Message != HandbackMessage
	}
	if cond.ObservedGeneration != p.Generation {
		return false
	}
	switch {
	case vap.Message == cond.Message:
		return false
	case vap.Message == "" && vap.Generated && cond.Status == metav1.ConditionTrue:
		return false // full success: the condition has its own text
	case len(vap.Message) > maxConditionMessage && strings.HasPrefix(vap.Message, strings.TrimSuffix(cond.Message, "...")):
		return false // the condition's copy was cut to its limit
	}
	return true
}

// yieldToGenerator keeps the foreign status.validatingadmissionpolicy
// instead of overwriting it (two writers would overwrite each other on every
// change) and says so, with the way out, in kyvap's condition. Kyverno then
// enforces the policy as well (it is not marked generated by kyvap), with
// the same verdicts.
func yieldToGenerator(status policyStatus, foreign kyvernov1.ValidatingAdmissionPolicyStatus) policyStatus {
	quoted := foreign.Message
	if len(quoted) > maxForeignMessage {
		quoted = quoted[:maxForeignMessage-3] + "..."
	}
	notice := fmt.Sprintf("%s (it wrote generated: %v, %q): kyvap does not overwrite it, so Kyverno enforces this policy as well; switch Kyverno's generator off (Helm value features.generateValidatingAdmissionPolicy.enabled: false) and kyvap writes the field again at the policy's next change", generatorNotice, foreign.Generated, quoted)
	status.VAP = foreign
	status.Condition.Message = notice + "; " + status.Condition.Message
	if len(status.Condition.Message) > maxConditionMessage {
		status.Condition.Message = status.Condition.Message[:maxConditionMessage-3] + "..."
	}
	return status
}
