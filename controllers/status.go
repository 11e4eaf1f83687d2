package controllers

import (
	"fmt"
	"sort"
	"strings"

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
}

// policyStatus is kyvap's part of a ClusterPolicy's status.
type policyStatus struct {
	VAP       kyvernov1.ValidatingAdmissionPolicyStatus
	Condition metav1.Condition
}

// computeStatus derives the Kyverno-compatible VAP status and kyvap's
// condition from a plan and what applying it did.
func computeStatus(in statusInput) policyStatus {
	var lines []string
	failed := map[string]error{} // VAP or binding name -> error
	var conflicts, applyErrors []string
	for _, o := range in.Outcomes {
		switch o.Action {
		case actionConflict:
			conflicts = append(conflicts, o.Err.Error())
			failed[o.Name] = o.Err
		case actionFailed:
			applyErrors = append(applyErrors, o.Err.Error())
			failed[o.Name] = o.Err
		}
	}

	celRules, translated, invalid, fallback, leftToKyverno := 0, 0, 0, 0, 0
	for _, r := range in.Plan.Rules {
		switch r.Verdict {
		case translate.VerdictNotHandled:
			// Kyverno enforces it. generated: true would tell a running
			// Kyverno to skip the whole policy, this rule included.
			leftToKyverno++
			lines = append(lines, fmt.Sprintf("rule %q: left to Kyverno (%s: %s)", r.Rule, r.Reason, r.Message))
		case translate.VerdictTranslated:
			celRules++
			if broken := brokenObjects(r, failed); len(broken) > 0 {
				lines = append(lines, fmt.Sprintf("rule %q: not enforced: its generated objects could not be applied (%s)", r.Rule, strings.Join(broken, ", ")))
				continue
			}
			translated++
		case translate.VerdictFallback:
			celRules++
			fallback++
			lines = append(lines, fmt.Sprintf("rule %q: %s", r.Rule, fallbackText(r, in.FallbackEnforced, in.KyvernoRunning)))
		case translate.VerdictInvalid:
			celRules++
			invalid++
			lines = append(lines, fmt.Sprintf("rule %q: not enforced: %s (%s)", r.Rule, r.Message, r.Reason))
		}
	}
	for _, vap := range sortedKeys(in.TypeWarnings) {
		for _, w := range in.TypeWarnings[vap] {
			lines = append(lines, fmt.Sprintf("ValidatingAdmissionPolicy %q type checking: %s", vap, w))
		}
	}

	cond := metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, ObservedGeneration: in.Generation}
	switch {
	case celRules == 0:
		cond.Reason = ReasonNoCELRules
		lines = append(lines, "the policy has no CEL validate rule to translate")
	case len(conflicts) > 0:
		cond.Reason = ReasonNameConflict
		lines = append(lines, conflicts...)
	case len(applyErrors) > 0:
		cond.Reason = ReasonApplyFailed
		lines = append(lines, applyErrors...)
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
	message := strings.Join(lines, "; ")
	cond.Message = message
	if cond.Message == "" {
		cond.Message = fmt.Sprintf("every CEL rule (%d) is enforced by ValidatingAdmissionPolicies", celRules)
	}
	if len(cond.Message) > maxConditionMessage {
		cond.Message = cond.Message[:maxConditionMessage-3] + "..."
	}
	return policyStatus{
		VAP:       kyvernov1.ValidatingAdmissionPolicyStatus{Generated: generated, Message: message},
		Condition: cond,
	}
}

func fallbackText(r translate.RuleResult, enforced, kyvernoRunning bool) string {
	where := "enforced by kyvap's webhook"
	switch {
	case kyvernoRunning:
		// No second webhook doing Kyverno's work: the policy is not marked
		// generated, so Kyverno enforces it whole.
		where = "left to Kyverno, whose admission controller runs in this cluster"
	case !enforced:
		where = "NOT ENFORCED: left to kyvap's webhook, which is not serving"
	case r.Fallback != nil:
		if r.Fallback.NotEnforced != "" {
			where = "NOT ENFORCED by kyvap: " + r.Fallback.NotEnforced
		}
	}
	text := fmt.Sprintf("%s (%s: %s)", where, r.Reason, r.Message)
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
func foreignVAPStatus(p *kyvernov1.ClusterPolicy) bool {
	cond := meta.FindStatusCondition(p.Status.Conditions, ConditionType)
	if cond == nil || cond.ObservedGeneration != p.Generation {
		return false
	}
	vap := p.Status.ValidatingAdmissionPolicy
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
