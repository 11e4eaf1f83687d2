// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/classic"
	"github.com/kyvap/kyvap/frontend/podsecurity"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Names of the preconditions a compiled classic rule carries.
const (
	// ConditionExistingViolations: allowExistingViolations, Kyverno's
	// default for an Enforce rule, skips an UPDATE whose old object fails
	// too.
	ConditionExistingViolations = "kyvap-pattern-existing-violations"
	// ConditionPreconditions: the rule's JMESPath preconditions, compiled.
	ConditionPreconditions = "kyvap-preconditions"
	// ConditionHasResult: a foreach rule has a result (some element
	// applied, or a list failed). Where it is false Kyverno reports
	// nothing for the rule, as for a rule that does not match; it is no
	// skip.
	ConditionHasResult = "kyvap-foreach-applies"
	// ConditionPatternNotDelete: a pattern rule has a result: the request
	// is no DELETE (Kyverno validates no pattern on a DELETE:
	// validateResourceWithRule returns no response), or the
	// preconditions decided (false: skip; failing: error). Like
	// ConditionHasResult, where it is false Kyverno reports nothing.
	ConditionPatternNotDelete = "kyvap-pattern-not-delete"
	// ConditionPatternApplies: a pattern's conditional and global anchors
	// hold. Where they do not, Kyverno skips the rule.
	ConditionPatternApplies = "kyvap-pattern-applies"
	// ConditionPodSecurityExceptions: the podSecurity controls of the
	// PolicyExceptions matching the request do not turn the rule's fail
	// into a pass. Where they do, Kyverno skips the rule ("rule is
	// skipped due to policy exceptions").
	ConditionPodSecurityExceptions = "kyvap-podsecurity-exceptions"
)

// IsSkipCondition reports the name of a compiled classic rule's condition
// where Kyverno, when it is false, reports skip: the compiled JMESPath
// preconditions, a pattern's anchors, allowExistingViolations, and
// exceptions' podSecurity controls.
func IsSkipCondition(name string) bool {
	switch name {
	case ConditionPreconditions, ConditionExistingViolations, ConditionPatternApplies, ConditionPodSecurityExceptions:
		return true
	}
	return false
}

// IsHasResultCondition reports the name of a compiled classic rule's
// condition that says whether Kyverno reports a result at all
// (ConditionHasResult, ConditionPatternNotDelete): where it is false the
// rule has no result, which is no skip.
func IsHasResultCondition(name string) bool {
	return name == ConditionHasResult || name == ConditionPatternNotDelete
}

// isPatternRule reports a classic rule whose whole validation is a
// validate.pattern or a validate.anyPattern (Kyverno reads the pattern
// when both are set: such a rule is left to it).
func isPatternRule(r *kyvernov1.Rule) bool {
	v := r.Validation
	return v != nil && (v.RawPattern != nil) != (v.RawAnyPattern != nil) && v.CEL == nil && v.Deny == nil &&
		v.PodSecurity == nil && len(v.ForEachValidation) == 0 && v.Manifests == nil && v.Assert == nil
}

// isDenyRule reports a classic rule whose whole validation is a
// validate.deny.
func isDenyRule(r *kyvernov1.Rule) bool {
	v := r.Validation
	return v != nil && v.Deny != nil && v.RawPattern == nil && v.RawAnyPattern == nil && v.CEL == nil &&
		v.PodSecurity == nil && len(v.ForEachValidation) == 0 && v.Manifests == nil && v.Assert == nil
}

// isForEachRule reports a classic rule whose whole validation is a
// validate.foreach.
func isForEachRule(r *kyvernov1.Rule) bool {
	v := r.Validation
	return v != nil && len(v.ForEachValidation) > 0 && v.Deny == nil && v.RawPattern == nil && v.RawAnyPattern == nil &&
		v.CEL == nil && v.PodSecurity == nil && v.Manifests == nil && v.Assert == nil
}

// isPodSecurityRule reports a rule whose whole validation is a
// validate.podSecurity.
func isPodSecurityRule(r *kyvernov1.Rule) bool {
	v := r.Validation
	return v != nil && v.PodSecurity != nil && v.Deny == nil && v.RawPattern == nil && v.RawAnyPattern == nil &&
		v.CEL == nil && len(v.ForEachValidation) == 0 && v.Manifests == nil && v.Assert == nil
}

// isClassicRule reports a rule frontend/classic (or, for podSecurity,
// frontend/podsecurity) compiles.
func isClassicRule(r *kyvernov1.Rule) bool {
	return isPatternRule(r) || isDenyRule(r) || isForEachRule(r) || isPodSecurityRule(r)
}

// Scopes of the compiled conditions: the request (Kyverno reads
// request.object as the old object on a DELETE), and the old object of an
// UPDATE, which Kyverno judges as a CREATE of it (validateOldObject).
var oldObjectScope = classic.Scope{Object: "oldObject", QueryObject: "oldObject", Operation: "'CREATE'"}

// judged is a compiled rule's verdict on one object: a CEL predicate,
// never failing, that holds when Kyverno's verdict is fail (the
// preconditions hold and the object violates the validation, nothing
// failing to evaluate).
func judged(pre classic.Predicate, c compiled) string {
	var terms []string
	if pre.Fails != "false" {
		terms = append(terms, "!"+pre.Fails)
	}
	if pre.Holds != "true" {
		terms = append(terms, pre.Holds)
	}
	if c.fails != "false" && !c.violatesNeverFails {
		terms = append(terms, "!"+c.fails)
	}
	return kyverno.CELAnd(append(terms, c.violates))
}

// compiled is a classic validation compiled on one object.
type compiled struct {
	// passes and violates are CEL predicates: the object passes, or
	// violates, the validation; they fail to evaluate where Kyverno's
	// evaluation fails.
	passes, violates string
	// fails, which never fails to evaluate, holds where Kyverno's
	// evaluation fails ("false" when it never does).
	fails string
	// violatesNeverFails: violates never fails to evaluate and never
	// holds with fails (a foreach's, a pattern's), so that judged need not
	// read fails.
	violatesNeverFails bool
	// substitutionFails, for a pattern, holds where a pattern variable
	// fails to substitute: Kyverno's error, on a DELETE too ("false" or
	// "" when it never does).
	substitutionFails string
	// applies, which never fails to evaluate, holds where Kyverno has a
	// result ("" when it always has: a foreach none of whose elements
	// applied has none).
	applies string
	// skips, which never fails to evaluate, holds where Kyverno skips the
	// rule (a pattern's conditional or global anchor did not hold):
	// "false" when it never does, or "" (a deny or a foreach).
	skips string
	// exceptionSkips, for a podSecurity rule, holds where the podSecurity
	// controls of the exceptions matching the request turn its fail into
	// a skip ("" where no exception has such controls).
	exceptionSkips string
}

// compileClassic compiles the rule's validation on one object. kinds are
// the kinds the rule matches (a podSecurity subrule reads the pod where
// each kind holds it).
//
// exceptions are the podSecurity rule's PolicyExceptions with podSecurity
// controls, matched on the object, and skippedBy where an exception
// without them skips the rule on it (read on the old object of an UPDATE,
// where Kyverno matches exceptions again; on the request such exceptions
// are conditions of the rule's VAP).
func compileClassic(v *kyvernov1.Validation, kinds []string, resource string, scope classic.Scope, exceptions []podsecurity.Exception, skippedBy string) (compiled, *model.Refusal) {
	switch {
	case v.PodSecurity != nil:
		c, fl := compilePodSecurity(v.PodSecurity, kinds, resource, exceptions)
		if fl != nil {
			return compiled{}, fl
		}
		out := compiled{passes: "!" + c.ViolatesExcepted, violates: c.ViolatesExcepted, fails: "false", violatesNeverFails: true, substitutionFails: "false"}
		if c.ViolatesExcepted != c.Violates {
			out.exceptionSkips = "(" + c.Violates + " && !" + c.ViolatesExcepted + ")"
		}
		if skippedBy != "" && skippedBy != "false" {
			out.violates = "(!(" + skippedBy + ") && " + out.violates + ")"
			out.passes = "!" + out.violates
		}
		return out, nil
	case len(v.ForEachValidation) > 0:
		entries := make([][]byte, len(v.ForEachValidation))
		for i := range v.ForEachValidation {
			entries[i] = v.ForEachValidation[i].Raw
		}
		j, fl := classic.ForEach(entries, scope)
		if fl != nil {
			return compiled{}, fl
		}
		return compiled{passes: j.Passes, violates: j.Violates, fails: j.Fails, applies: j.Applies, violatesNeverFails: true}, nil
	case v.Deny != nil:
		var deny struct {
			Conditions json.RawMessage `json:"conditions"`
		}
		if err := json.Unmarshal(v.Deny.Raw, &deny); err != nil {
			return compiled{}, model.Refuse(model.ReasonJMESPathNotExpressible, "validate.deny is not an object: %v", err)
		}
		if classic.HasConditionMessages(deny.Conditions) {
			return compiled{}, model.Refuse(model.ReasonJMESPathNotExpressible, "a message on a deny condition (Kyverno adds the messages of the conditions that decided to the rule's)")
		}
		p, fl := classic.Conditions(deny.Conditions, scope)
		if fl != nil {
			return compiled{}, fl
		}
		return compiled{passes: "!" + p.Holds, violates: p.Holds, fails: p.Fails}, nil
	}
	raw := v.RawPattern
	if v.RawAnyPattern != nil {
		raw = v.RawAnyPattern
	}
	verdict, substitutionFails, fl := classic.RulePattern(raw.Raw, v.RawAnyPattern != nil, resource, scope)
	if fl != nil {
		return compiled{}, fl
	}
	// violates holds where the verdict is fail, never where it is an
	// error (a pattern variable that failed to substitute, a conditional
	// anchor's key missing from every element).
	return compiled{passes: verdict.Passes, violates: verdict.Violates, fails: verdict.Fails, skips: verdict.Skips,
		substitutionFails: substitutionFails, violatesNeverFails: true}, nil
}

// classicAsCEL is a classic rule (validate.pattern, anyPattern, deny or
// foreach)
// written as the validate.cel rule that gives Kyverno's verdicts
// (frontend/classic compiles it): the same match, exclusions and actions;
// the validation as one expression; and as CEL preconditions the rule's
// JMESPath preconditions and what Kyverno's validate handler does around
// the validation (a pattern is not judged on DELETE; allowExistingViolations
// on UPDATE). action is the rule's failure action (its own, or the
// policy's). It returns, with the rule, the CEL predicate (never failing)
// that holds where the compiled preconditions fail to evaluate ("false"
// when they never do): Kyverno evaluates them before the rule's
// PolicyExceptions. A construct without an exact form is refused, naming
// it.
func classicAsCEL(r *kyvernov1.Rule, action kyvernov1.ValidationFailureAction, resolver kyverno.KindResolver, exceptions podSecurityExceptions) (*kyvernov1.Rule, string, *model.Refusal) {
	v := r.Validation
	entries := make([][]byte, len(r.Context))
	for i := range r.Context {
		entries[i] = r.Context[i].Raw
	}
	variables, fl := classic.ParseContext(entries)
	if fl != nil {
		return nil, "", fl
	}
	requestScope, oldObjectScope := classic.RequestScope, oldObjectScope
	requestScope.Variables, oldObjectScope.Variables = variables, variables
	messageExpression := ""
	if strings.Contains(v.Message, "{{") || strings.Contains(v.Message, "$(") {
		var fl *model.Refusal
		if messageExpression, fl = classic.Message(v.Message, requestScope); fl != nil {
			return nil, "", &model.Refusal{Reason: fl.Reason, Message: "the message: " + fl.Message}
		}
	}
	pre := classic.Predicate{Holds: "true", Fails: "false"}
	jmesPathPreconditions := r.RawAnyAllConditions != nil && !kyverno.NoPreconditions(r.RawAnyAllConditions.Raw)
	if jmesPathPreconditions {
		if len(r.CELPreconditions) > 0 {
			return nil, "", model.Refuse(model.ReasonJMESPathNotExpressible, "JMESPath preconditions beside celPreconditions (Kyverno evaluates them at different stages)")
		}
		var fl *model.Refusal
		if pre, fl = classic.Conditions(r.RawAnyAllConditions.Raw, requestScope); fl != nil {
			return nil, "", &model.Refusal{Reason: fl.Reason, Message: "preconditions: " + fl.Message}
		}
	}
	onNew, fl := compileClassic(v, matchKinds(r), "object", requestScope, exceptions.onObject, "false")
	if fl != nil {
		return nil, "", fl
	}
	out := r.DeepCopy()
	out.RawAnyAllConditions, out.Context = nil, nil
	message := ""
	switch {
	case v.PodSecurity != nil:
		// Kyverno's message for a podSecurity rule is its own, whatever
		// the rule's (validate_pss.go), less the checks' field errors.
		message = fmt.Sprintf(`Validation rule '%s' failed. It violates PodSecurity "%s"`, r.Name, podSecurityProfile(v.PodSecurity))
		messageExpression = ""
	case v.Message == "":
		message = "validation error: rule " + r.Name + " failed" // Kyverno's text, without the path it adds to a pattern's
	}
	out.Validation = &kyvernov1.Validation{
		FailureAction:           v.FailureAction,
		FailureActionOverrides:  v.FailureActionOverrides,
		AllowExistingViolations: v.AllowExistingViolations,
		Message:                 v.Message,
		CEL:                     &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: onNew.passes, Message: message, MessageExpression: messageExpression}}},
	}
	if jmesPathPreconditions {
		out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{Name: ConditionPreconditions, Expression: pre.Holds})
	}
	if onNew.applies != "" {
		// A foreach none of whose elements applied has no result, where
		// the preconditions hold (false ones skip the rule, failing ones
		// are its error: the other preconditions say so).
		applies := onNew.applies
		if pre.Holds != "true" {
			applies = "!" + pre.Holds + " || " + applies
		}
		if pre.Fails != "false" {
			applies = pre.Fails + " || " + applies
		}
		out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{Name: ConditionHasResult, Expression: applies})
	}
	if onNew.skips != "" && onNew.skips != "false" {
		// Where a conditional or global anchor does not hold, Kyverno
		// skips the rule (once the preconditions held: where they fail,
		// the rule is their error).
		applies := "!" + onNew.skips
		if pre.Fails != "false" {
			applies = pre.Fails + " || " + applies
		}
		out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{Name: ConditionPatternApplies, Expression: applies})
	}
	if onNew.exceptionSkips != "" {
		// Where the rule fails the pod but not once the matching
		// exceptions' controls are excluded too, Kyverno skips it (once
		// the preconditions held: where they fail, the rule is their
		// error).
		applies := "!" + onNew.exceptionSkips
		if pre.Fails != "false" {
			applies = pre.Fails + " || " + applies
		}
		out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{Name: ConditionPodSecurityExceptions, Expression: applies})
	}
	if v.RawPattern != nil || v.RawAnyPattern != nil || v.PodSecurity != nil {
		// On a DELETE Kyverno evaluates the preconditions, then judges
		// nothing (validateResourceWithRule, and the podSecurity handler,
		// return no response): the
		// rule is an error where they fail, a skip where they are false,
		// and has no result otherwise.
		notDelete := "request.operation != 'DELETE'"
		if onNew.substitutionFails != "false" {
			// Kyverno substitutes the pattern's variables first: one that
			// fails is the rule's error on a DELETE too.
			notDelete += " || " + onNew.substitutionFails
		}
		if pre.Holds != "true" {
			notDelete = "!" + pre.Holds + " || " + notDelete
		}
		if pre.Fails != "false" {
			notDelete = pre.Fails + " || " + notDelete
		}
		out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{Name: ConditionPatternNotDelete, Expression: notDelete})
	}
	// Kyverno's validateOldObject matches the old object with the rule's
	// raw preconditions (handlers/validation/utils.go matchResource
	// passes rule.RawAnyAllConditions, which TransformConditions refuses
	// as "invalid preconditions"): a rule with preconditions, even empty
	// ones, never matches its old object, and allowExistingViolations
	// never skips it.
	preconditionsBlockOldObject := r.RawAnyAllConditions != nil && strings.TrimSpace(string(r.RawAnyAllConditions.Raw)) != "null"
	if action.IsEnforce() && (v.AllowExistingViolations == nil || *v.AllowExistingViolations) && !preconditionsBlockOldObject {
		oldMatched, fl := oldObjectMatch(resolver, r)
		if fl != nil {
			return nil, "", fl
		}
		if len(variables) > 0 {
			text, _ := json.Marshal([]any{r.RawAnyAllConditions, v.Deny, v.ForEachValidation})
			if classic.ReadsVarying(variables, string(text)) {
				// validateOldObject reloads the context, but a variable
				// loaded for the new object keeps its value: which ones
				// depends on the order the conditions ran in (a variable
				// whose value holds no variable is the same either way).
				return nil, "", model.Refuse(model.ReasonJMESPathNotExpressible, "allowExistingViolations (on unless set to false) with context variables: Kyverno judges the old object with the variables it loaded for the new one")
			}
		}
		oldPre := classic.Predicate{Holds: "true", Fails: "false"}
		if jmesPathPreconditions {
			if oldPre, fl = classic.Conditions(r.RawAnyAllConditions.Raw, oldObjectScope); fl != nil {
				return nil, "", &model.Refusal{Reason: fl.Reason, Message: "preconditions, on the old object of an UPDATE: " + fl.Message}
			}
		}
		onOld, fl := compileClassic(v, matchKinds(r), "oldObject", oldObjectScope, exceptions.onOldObject, exceptions.skipOldObject)
		if fl != nil {
			return nil, "", &model.Refusal{Reason: fl.Reason, Message: "on the old object of an UPDATE: " + fl.Message}
		}
		out.CELPreconditions = append(out.CELPreconditions, admissionregistrationv1.MatchCondition{
			Name:       ConditionExistingViolations,
			Expression: "!(request.operation == 'UPDATE' && " + judged(pre, onNew) + " && " + oldMatched + judged(oldPre, onOld) + ")",
		})
	}
	if fl := checkCompiledSize(out, v); fl != nil {
		return nil, "", fl
	}
	return out, pre.Fails, nil
}

// maxCompiledCodePoints is the longest CEL expression the API server
// parses (cel-go's default expression size limit, which the API server
// keeps).
const maxCompiledCodePoints = 100000

// checkCompiledSize refuses a compiled rule one of whose expressions is
// too long for the API server to parse (a pattern with many comparisons,
// each carrying Go's duration grammar): Kyverno evaluates it, kyvap cannot.
func checkCompiledSize(r *kyvernov1.Rule, v *kyvernov1.Validation) *model.Refusal {
	reason := model.ReasonJMESPathNotExpressible
	switch {
	case v.RawPattern != nil || v.RawAnyPattern != nil:
		reason = model.ReasonPatternNotExpressible
	case v.PodSecurity != nil:
		reason = model.ReasonPodSecurityNotExpressible
	}
	check := func(what, expression string) *model.Refusal {
		if n := utf8.RuneCountInString(expression); n > maxCompiledCodePoints {
			return model.Refuse(reason, "the compiled %s has %d code points, more than the %d the API server parses", what, n, maxCompiledCodePoints)
		}
		return nil
	}
	for _, e := range r.Validation.CEL.Expressions {
		if fl := check("validation", e.Expression); fl != nil {
			return fl
		}
	}
	for _, mc := range r.CELPreconditions {
		if fl := check("precondition "+mc.Name, mc.Expression); fl != nil {
			return fl
		}
	}
	return nil
}

// oldObjectMatchUnknown says what of the rule's match or exclude blocks can
// select the old object of an UPDATE differently from the new one, which
// Kyverno matches as a CREATE before it validates it (validateOldObject):
// labels, annotations, operations; "" when nothing can.
func oldObjectMatchUnknown(r *kyvernov1.Rule) string {
	blocks := []kyvernov1.MatchResources{r.MatchResources}
	if r.ExcludeResources != nil {
		blocks = append(blocks, *r.ExcludeResources)
	}
	for _, b := range blocks {
		for _, d := range descriptionsOf(&b) {
			switch {
			case d.Selector != nil:
				return "a match on labels (selector)"
			case len(d.Annotations) > 0:
				return "a match on annotations"
			case len(d.Operations) > 0:
				return "a match on operations"
			}
		}
	}
	return ""
}

// celRequestResource is the CEL of Kyverno's resource in kyverno's match
// fragments, which oldObjectMatch points at the old object.
const celRequestResource = "(request.operation == 'DELETE' ? oldObject : object)"

// oldObjectMatch is Kyverno's match of the old object of an UPDATE, as a
// CREATE of it (validateOldObject calls matchResource so), as a CEL
// predicate followed by " && ", or "" when it is the new object's match
// (nothing in the rule's match or exclude can tell the two apart). The
// filters are the rule's own, each read on the old object's labels and
// annotations with the operation CREATE.
func oldObjectMatch(resolver kyverno.KindResolver, r *kyvernov1.Rule) (string, *model.Refusal) {
	if oldObjectMatchUnknown(r) == "" {
		return "", nil
	}
	refuse := func(format string, args ...any) (string, *model.Refusal) {
		return "", model.Refuse(model.ReasonPatternNotExpressible, "allowExistingViolations (on unless set to false): the old object's match: "+format, args...)
	}
	raw, err := json.Marshal([]any{r.MatchResources, r.ExcludeResources})
	if err != nil || strings.Contains(string(raw), "request.") || strings.Contains(string(raw), "object") {
		return refuse("a filter's text holds \"request.\" or \"object\"")
	}
	block := func(m kyvernov1.MatchResources) (string, *model.Refusal) {
		filters, all := filtersOf(m)
		terms := make([]string, 0, len(filters))
		for _, f := range filters {
			if isEmptyFilter(f) {
				return refuse("an empty filter")
			}
			resolved, fl := resolveFilter(resolver, f)
			if fl != nil {
				return "", fl
			}
			parts, fl := celFilterParts(resolved, forRule)
			if fl != nil {
				return "", fl
			}
			terms = append(terms, parts.all())
		}
		if all {
			return kyverno.CELAnd(terms), nil
		}
		return kyverno.CELOr(terms), nil
	}
	match, fl := block(r.MatchResources)
	if fl != nil {
		return "", fl
	}
	exclude := "false"
	if r.ExcludeResources != nil {
		if filters, _ := filtersOf(*r.ExcludeResources); len(filters) > 0 {
			if exclude, fl = block(*r.ExcludeResources); fl != nil {
				return "", fl
			}
		}
	}
	predicate := "(" + match + " && !" + exclude + ")"
	predicate = strings.ReplaceAll(predicate, celRequestResource, "oldObject")
	predicate = strings.ReplaceAll(predicate, "request.operation", "'CREATE'")
	return predicate + " && ", nil
}
