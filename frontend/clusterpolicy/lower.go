// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

// ErrNilPolicy is returned for an Input without a policy.
var ErrNilPolicy = errors.New("clusterpolicy: input has no policy")

// Input is what a lowering reads.
type Input struct {
	Policy *kyvernov1.ClusterPolicy
	// Exceptions are the PolicyExceptions that may name the policy's rules;
	// the ones that do not are ignored.
	Exceptions []kyvernov2.PolicyException
	// Namespace, when set, makes Policy a namespaced kyverno.io/v1 Policy
	// of that namespace (see PolicyInput): every rule is confined to it.
	Namespace string
}

// PolicyInput is the Input for a namespaced kyverno.io/v1 Policy: Kyverno
// evaluates its rules as a ClusterPolicy's, on the resources of its own
// namespace only (pkg/engine/internal/match.go checkNamespacedPolicy: the
// resource's namespace must be the policy's, so cluster-scoped resources,
// Namespaces included, never match).
func PolicyInput(p *kyvernov1.Policy, exceptions []kyvernov2.PolicyException) Input {
	return InputFor(p.AsClusterPolicy(), exceptions)
}

// InputFor is the Input for a policy that is either a ClusterPolicy or a
// namespaced Policy carried as one (PolicyInput's Policy, TypeMeta kind
// Policy): the form files and suites hold both in.
func InputFor(p *kyvernov1.ClusterPolicy, exceptions []kyvernov2.PolicyException) Input {
	in := Input{Policy: p, Exceptions: exceptions}
	if p.Kind == "Policy" {
		in.Namespace = p.Namespace
		if in.Namespace == "" {
			in.Namespace = "default" // as Kyverno's checkNamespacedPolicy reads it
		}
	}
	return in
}

// PolicyKey is how results, exceptions and generated objects name a
// policy: a ClusterPolicy by its name, a namespaced Policy as
// namespace/name (Kyverno's cache key, which PolicyExceptions' policyName
// uses).
func PolicyKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Options tune a lowering.
type Options struct {
	// CompatibilityVersion is the target cluster's CEL compatibility
	// version, "<major>.<minor>" (e.g. "1.37"); empty means the newest this
	// build knows. A rule whose CEL does not compile there has no VAP form.
	CompatibilityVersion string
	// KyvernoConfig is Kyverno's global configuration (resource filters,
	// excluded users and groups, webhook match conditions) that every
	// lowered rule applies, as Kyverno's admission controller applies it
	// before any policy. Nil applies none, as `kyverno test`.
	KyvernoConfig *kyverno.Config
}

// Fate is what became of a rule of the policy, or of one of its
// pod-controller variants.
type Fate int

const (
	// Lowered: the rule is a rule of the model (Outcome.Lowered).
	Lowered Fate = iota
	// NotCEL: not a validate.cel rule; this front-end does not read it.
	NotCEL
	// Refused: Kyverno refuses the rule or its policy (or its CEL does not
	// compile): no engine runs it.
	Refused
	// NoVAPForm: the rule means something that no ValidatingAdmissionPolicy
	// can say; only an engine with Kyverno's semantics can evaluate it,
	// from the rule as written (Outcome.Rule, Outcome.Variants).
	NoVAPForm
	// Empty: the rule has no expressions; Kyverno passes every request.
	Empty
)

// Outcome is what became of one rule or pod-controller variant.
type Outcome struct {
	// Name is the rule's name, or the variant's as Kyverno reports it
	// (autogen-<rule>, autogen-cronjob-<rule>).
	Name string
	Fate Fate
	// Refusal says why the rule was not lowered (nil when Lowered).
	Refusal *model.Refusal
	// Rule is the rule as Kyverno evaluates it (an autogen-* rule narrowed,
	// a variant as Kyverno generates it), a copy.
	Rule *kyvernov1.Rule
	// Variants are the pod-controller variants Kyverno generates for Rule,
	// as written (set by Screen).
	Variants []kyvernov1.Rule
	// Lowered is the rule of the model (Fate Lowered).
	Lowered *model.Rule
	// Shadowed: a rule of the policy has this variant's name (Kyverno
	// narrows that rule); the variant's ID is <rule>/<name>.
	Shadowed bool
	// Warnings change no verdict; they are the user's to know.
	Warnings []string
}

// Result is a whole policy lowered (Lower).
type Result struct {
	// Policy holds the lowered rules and variants, in the policy's order.
	Policy model.Policy
	// Outcomes has one entry per rule of the policy, in order, each
	// followed by its variants' when the rule was lowered.
	Outcomes []Outcome
	// Warnings are the lowering's, in order (the policy's, then each
	// outcome's).
	Warnings []string
}

// Lower lowers a ClusterPolicy (or a namespaced Policy, see InputFor) into
// the policy model: one rule with ClusterPolicy semantics for every rule
// and pod-controller variant that has the form of a
// ValidatingAdmissionPolicy, in the policy's order, carrying everything
// Kyverno's engine applies around the rule's CEL (match and exclude with
// wildcards, the PolicyExceptions in the input, opts.KyvernoConfig, a
// namespaced Policy's confinement, preconditions, failure-action
// overrides as bindings, params). Every rule it does not lower has an
// Outcome saying why. It never mutates its input and is deterministic.
func Lower(in Input, resolver kyverno.KindResolver, opts Options) (Result, error) {
	l, err := New(in, resolver, opts)
	if err != nil {
		return Result{}, err
	}
	out := Result{Warnings: l.Warnings()}
	for i := range l.policy.Spec.Rules {
		screened := l.Screen(i)
		outcomes := []Outcome{screened}
		if screened.Fate == Lowered {
			// The screening's warnings (as translate reports them), then
			// the lowering's.
			out.Warnings = append(out.Warnings, screened.Warnings...)
			outcomes = l.Lower(screened)
		}
		for _, o := range outcomes {
			out.Warnings = append(out.Warnings, o.Warnings...)
			if o.Lowered != nil {
				out.Policy.Rules = append(out.Policy.Rules, *o.Lowered.DeepCopy())
			}
		}
		out.Outcomes = append(out.Outcomes, outcomes...)
	}
	out.Policy.Source = l.Source()
	return out, nil
}

// Lowering is one policy being lowered, rule by rule: a caller that
// decides between Screen and Lower who enforces a rule (the translator's
// generation options) drives it itself.
type Lowering struct {
	policy *kyvernov1.ClusterPolicy
	// namespace is a namespaced Policy's namespace, empty for a
	// ClusterPolicy.
	namespace   string
	exceptions  []kyvernov2.PolicyException
	resolver    kyverno.KindResolver
	opts        Options
	version     *version.Version
	warnings    []string
	controllers []string
	// ruleNames are the names of the policy's own rules.
	ruleNames map[string]bool
	// positions are each rule name's 1-based positions in the policy.
	positions map[string][]int
	// pending are the warnings of the rule being lowered.
	pending []string
	// classic names the rules (and variants) compiled from Kyverno's
	// classic language by Screen.
	classic map[string]bool
	// preconditionFailures holds, by rule (or variant) name, where a
	// compiled classic rule's JMESPath preconditions fail to evaluate (a
	// CEL predicate; "false" or absent when they never do). Kyverno
	// evaluates them before the rule's PolicyExceptions: there the rule
	// is an error, exempted or not.
	preconditionFailures map[string]string
	// podSecurity names the compiled podSecurity rules (and variants):
	// their exceptions with podSecurity controls are compiled into them
	// (podSecurityExceptions), not conditions of their VAPs.
	podSecurity map[string]bool
}

// FailuresAreErrors reports a rule (or variant), by name, that Screen
// compiled from Kyverno's classic language: where its expression fails to
// evaluate, Kyverno's result is error (model.Rule.FailuresAreErrors).
func (l *Lowering) FailuresAreErrors(name string) bool { return l.classic[name] }

// IsPodSecurity says whether the rule of that name was compiled from a
// podSecurity subrule.
func (l *Lowering) IsPodSecurity(name string) bool { return l.podSecurity[name] }

// New starts the lowering of a policy (a copy of it: the input is never
// mutated). A nil resolver knows the built-in kinds only.
func New(in Input, resolver kyverno.KindResolver, opts Options) (*Lowering, error) {
	if in.Policy == nil {
		return nil, ErrNilPolicy
	}
	l := &Lowering{
		policy:               in.Policy.DeepCopy(),
		resolver:             resolver,
		opts:                 opts,
		namespace:            in.Namespace,
		classic:              map[string]bool{},
		preconditionFailures: map[string]string{},
		podSecurity:          map[string]bool{},
	}
	for i := range in.Exceptions {
		l.exceptions = append(l.exceptions, *in.Exceptions[i].DeepCopy())
	}
	sort.SliceStable(l.exceptions, func(i, j int) bool {
		a, b := l.exceptions[i], l.exceptions[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	v, err := vap.CompatibilityVersion(opts.CompatibilityVersion)
	if err != nil {
		l.warnings = append(l.warnings, err.Error()+"; using "+vap.NewestCompatibilityVersion.String())
		v = vap.NewestCompatibilityVersion
	}
	l.version = v
	if l.resolver == nil {
		l.resolver = kyverno.NewStaticResolver()
	}
	l.controllers = autogenControllers(l.policy)
	l.ruleNames = map[string]bool{}
	l.positions = map[string][]int{}
	for i := range l.policy.Spec.Rules {
		name := l.policy.Spec.Rules[i].Name
		l.ruleNames[name] = true
		l.positions[name] = append(l.positions[name], i+1)
	}
	return l, nil
}

// Policy is the policy being lowered (the lowering's copy: do not modify).
func (l *Lowering) Policy() *kyvernov1.ClusterPolicy { return l.policy }

// Namespace is a namespaced Policy's namespace, empty for a ClusterPolicy.
func (l *Lowering) Namespace() string { return l.namespace }

// Key is the policy's PolicyKey.
func (l *Lowering) Key() string { return PolicyKey(l.namespace, l.policy.Name) }

// Resolver is the kind resolver the lowering uses.
func (l *Lowering) Resolver() kyverno.KindResolver { return l.resolver }

// Warnings are the policy's own warnings (an unknown compatibility version).
func (l *Lowering) Warnings() []string { return append([]string(nil), l.warnings...) }

// Source is the policy's identity in the model.
func (l *Lowering) Source() model.Source {
	kind := model.KindClusterPolicy
	if l.namespace != "" {
		kind = model.KindPolicy
	}
	return model.Source{Kind: kind, APIVersion: "kyverno.io/v1", Namespace: l.namespace, Name: l.policy.Name, UID: l.policy.UID, Generation: l.policy.Generation}
}

// Screen is what Kyverno itself makes of rule i of the policy, before
// anything is lowered: Refused (a duplicate name, an autogen-* name it
// cannot narrow, an autogen annotation it refuses), NotCEL, or Lowered
// when the rule is the front-end's to lower (Outcome.Rule, narrowed when
// Kyverno narrows it, with its Variants); Lower lowers it then.
func (l *Lowering) Screen(i int) Outcome {
	rule := &l.policy.Spec.Rules[i]
	refused := func(reason model.Reason, message string) Outcome {
		return Outcome{Name: rule.Name, Fate: Refused, Refusal: &model.Refusal{Reason: reason, Message: message}, Rule: rule.DeepCopy()}
	}
	if at := l.positions[rule.Name]; len(at) > 1 {
		// Kyverno's admission refuses the policy; its CRD does not. The
		// rules would generate objects of the same name, each
		// overwriting the other's: none of them is enforced.
		return refused(model.ReasonDuplicateRuleName, duplicateNameMessage(rule.Name, at))
	}
	var warnings []string
	if strings.HasPrefix(rule.Name, "autogen-") && rule.HasValidateCEL() && hasAutogenVariants(l.policy, l.controllers) {
		narrowed, ok := shadowedAutogenRule(rule, l.policy, l.controllers)
		switch {
		case !ok:
			return refused(model.ReasonAutogenRuleName, "the rule is named autogen-* in a policy Kyverno generates pod-controller variants for: Kyverno skips it for the controllers' kinds and evaluates it only on kinds its other rules match, which kyvap cannot determine for wildcard or missing kinds; rename the rule")
		case narrowed == nil:
			return refused(model.ReasonAutogenRuleName, "the rule is named autogen-* in a policy Kyverno generates pod-controller variants for: Kyverno skips it for the controllers' kinds and evaluates it only on kinds its other rules match, which leaves none; rename the rule")
		}
		if !reflect.DeepEqual(narrowed.MatchResources, rule.MatchResources) {
			warnings = append(warnings, fmt.Sprintf("rule %q: named autogen-* in a policy with pod-controller variants, so Kyverno evaluates it only on %v (not on the controllers' kinds, and only on kinds other rules route to the policy); kyvap does the same", rule.Name, matchKinds(narrowed)))
		}
		rule = narrowed
	}
	variants := autogenRules(rule, l.controllers)
	if isClassicRule(rule) {
		compiled, compiledVariants, fl := l.compileClassic(rule, variants)
		if fl != nil {
			return Outcome{Name: rule.Name, Fate: NotCEL, Refusal: fl, Rule: rule.DeepCopy(), Warnings: warnings}
		}
		if isPodSecurityRule(rule) {
			warnings = append(warnings, podSecurityDifferences(rule, variants)...)
		}
		rule, variants = compiled, compiledVariants
		l.classic[rule.Name] = true
		for _, v := range variants {
			l.classic[v.Name] = true
		}
	}
	switch {
	case !rule.HasValidateCEL():
		return Outcome{Name: rule.Name, Fate: NotCEL, Refusal: &model.Refusal{Reason: model.ReasonNonCELRule, Message: "not a validate.cel rule; Kyverno enforces it"}, Rule: rule.DeepCopy(), Warnings: warnings}
	case l.policy.Annotations[kyvernov1.AutogenControllersAnnotation] == "all":
		// Kyverno's policy validation (api/kyverno/v1 ValidateAutogenAnnotation)
		// refuses the policy: it never enforces any of its rules.
		o := refused(model.ReasonAutogenAnnotationInvalid, "the annotation "+kyvernov1.AutogenControllersAnnotation+": all is refused by Kyverno (\"does not support 'all' anymore\"); remove it or list the controllers")
		o.Rule, o.Warnings = rule.DeepCopy(), warnings
		return o
	}
	return Outcome{Name: rule.Name, Fate: Lowered, Rule: rule.DeepCopy(), Variants: variants, Warnings: warnings}
}

// compileClassic is a classic rule (validate.pattern, anyPattern, deny,
// foreach),
// and its pod-controller variants as Kyverno generates them (a pattern
// nested in the template, variables rewritten to it), compiled to
// validate.cel rules (classicAsCEL); a refusal names the construct, and
// the variant it is in.
func (l *Lowering) compileClassic(rule *kyvernov1.Rule, variants []kyvernov1.Rule) (*kyvernov1.Rule, []kyvernov1.Rule, *model.Refusal) {
	if strings.HasPrefix(rule.Name, "autogen-") && hasAutogenVariants(l.policy, l.controllers) {
		return nil, nil, model.Refuse(model.ReasonPatternNotExpressible, "a classic rule named autogen-* in a policy Kyverno generates pod-controller variants for")
	}
	action := l.policy.Spec.ValidationFailureAction
	if rule.Validation.FailureAction != nil {
		action = *rule.Validation.FailureAction
	}
	asCEL := func(r *kyvernov1.Rule) (*kyvernov1.Rule, *model.Refusal) {
		var exceptions podSecurityExceptions
		if isPodSecurityRule(r) {
			var fl *model.Refusal
			if exceptions, fl = l.podSecurityExceptions(r); fl != nil {
				return nil, fl
			}
			l.podSecurity[r.Name] = true
		}
		compiled, preFails, fl := classicAsCEL(r, action, l.resolver, exceptions)
		if fl != nil {
			return nil, fl
		}
		l.preconditionFailures[compiled.Name] = preFails
		return compiled, nil
	}
	compiled, fl := asCEL(rule)
	if fl != nil {
		return nil, nil, fl
	}
	var out []kyvernov1.Rule
	for i := range variants {
		variant, fl := asCEL(&variants[i])
		if fl != nil {
			return nil, nil, &model.Refusal{Reason: fl.Reason, Message: "pod-controller variant " + variants[i].Name + ": " + fl.Message}
		}
		out = append(out, *variant)
	}
	return compiled, out, nil
}

// Lower lowers a rule that Screen let through (its Outcome, with the rule
// and its variants as Kyverno evaluates them): the rule's outcome,
// followed, when it was lowered, by one per pod-controller variant.
func (l *Lowering) Lower(screened Outcome) []Outcome {
	rule := screened.Rule
	noForm := func(reason model.Reason, message string) []Outcome {
		return []Outcome{{Name: rule.Name, Fate: NoVAPForm, Refusal: &model.Refusal{Reason: reason, Message: message}, Rule: rule.DeepCopy(), Variants: screened.Variants}}
	}
	switch {
	case l.policy.Spec.ApplyRules != nil && *l.policy.Spec.ApplyRules == "One":
		return noForm(model.ReasonApplyRulesOne, "spec.applyRules One makes rules depend on each other")
	case rule.RawAnyAllConditions != nil && !kyverno.NoPreconditions(rule.RawAnyAllConditions.Raw):
		return noForm(model.ReasonJMESPathPreconditions, "JMESPath preconditions have no VAP form")
	case len(rule.Context) > 0:
		return noForm(model.ReasonContextEntries, "context entries have no VAP form")
	case len(rule.Validation.CEL.Expressions) == 0:
		return []Outcome{{Name: rule.Name, Fate: Empty, Refusal: &model.Refusal{Reason: model.ReasonEmptyRule, Message: "the rule has no expressions; Kyverno passes every request"}, Rule: rule.DeepCopy()}}
	}
	first := l.outcome(rule, rule.Name)
	if first.Fate == NoVAPForm {
		first.Variants = screened.Variants
	}
	outcomes := []Outcome{first}
	if first.Fate != Lowered {
		return outcomes
	}
	for _, variant := range screened.Variants {
		outcomes = append(outcomes, l.outcome(&variant, rule.Name))
	}
	return outcomes
}

// outcome lowers one rule, or one pod-controller variant of rule of. A
// variant is an ordinary rule, the one Kyverno's engine evaluates for a
// controller: kinds replaced and the CEL rewritten to the pod template. So
// it is lowered as any rule (its own match, exclusions, exceptions naming
// autogen-<rule>, overrides), and has its own outcome.
func (l *Lowering) outcome(rule *kyvernov1.Rule, of string) Outcome {
	l.pending = nil
	lowered, fl := l.lower(rule)
	o := Outcome{Name: rule.Name, Rule: rule.DeepCopy(), Warnings: l.pending}
	l.pending = nil
	switch {
	case fl != nil && fl.Reason == model.ReasonCELCompileError:
		o.Fate, o.Refusal = Refused, fl
	case fl != nil:
		o.Fate, o.Refusal = NoVAPForm, fl
	default:
		lowered.FailuresAreErrors = l.classic[rule.Name]
		if guard := l.preconditionFailures[rule.Name]; guard != "false" {
			lowered.ExceptionGuard = guard
		}
		o.Fate, o.Lowered = Lowered, &lowered
		if of != rule.Name {
			lowered.AutogenOf = of
			lowered.Targets = matchKinds(rule)
			if l.ruleNames[rule.Name] {
				// A rule of the policy has the variant's name (Kyverno
				// narrows that rule, see shadowedAutogenRule).
				o.Shadowed = true
				lowered.ID = of + "/" + rule.Name
			}
		}
	}
	return o
}

// warn records a warning of the rule being lowered.
func (l *Lowering) warn(message string) { l.pending = append(l.pending, message) }

// lower turns a rule (as written, or an autogen variant) into a rule of the
// policy model with ClusterPolicy semantics: everything Kyverno's engine
// does before its CEL handler runs — match and exclude, the
// PolicyExceptions naming the rule, its global configuration, a namespaced
// Policy's confinement, preconditions, failure-action overrides — expressed
// in the fields of a ValidatingAdmissionPolicy and its bindings. A failure
// says why the rule has no such form.
func (l *Lowering) lower(rule *kyvernov1.Rule) (model.Rule, *model.Refusal) {
	var none model.Rule
	match, fl := translateMatch(l.resolver, rule.MatchResources)
	if fl != nil {
		return none, fl
	}
	if ex := rule.ExcludeResources; ex != nil {
		filters, conjunctive := filtersOf(*ex)
		if fl := addExclusions(&match, l.resolver, filters, conjunctive, forRule, conditionExclude); fl != nil {
			return none, fl
		}
	}
	guard := l.preconditionFailures[rule.Name]
	for i, ex := range l.SkippingExceptionsFor(rule.Name) {
		guarded := guard != "" && guard != "false"
		if l.podSecurity[rule.Name] {
			// Kyverno's podSecurity handler returns no response on a
			// DELETE before it looks for exceptions (validate_pss.go):
			// there an exception skips nothing, and the rule has no
			// result (kyvap-pattern-not-delete).
			applies, err := exceptionApplies(l.resolver, &ex, false)
			switch {
			case errors.Is(err, ErrExceptionMatchesNothing):
				continue
			case err != nil:
				return none, model.Refuse(model.ReasonExceptionNotExpressible, "PolicyException %s/%s: %v", ex.Namespace, ex.Name, err)
			}
			expression := "!(" + applies + ") || request.operation == 'DELETE'"
			if guarded {
				expression += " || " + guard
			}
			match.conditions = append(match.conditions, admissionregistrationv1.MatchCondition{Name: conditionException + "-" + strconv.Itoa(i), Expression: expression})
			continue
		}
		if guarded || ex.Spec.HasConditions() {
			// The exception applies where its match and its conditions
			// hold: one condition, the negation of both. Kyverno evaluates
			// the rule's preconditions before its exceptions: where they
			// fail (guard), the rule is an error, exempted or not, and the
			// condition holds.
			applies, err := ExceptionCondition(l.resolver, &ex)
			switch {
			case errors.Is(err, ErrExceptionMatchesNothing):
				continue
			case err != nil:
				return none, model.Refuse(model.ReasonExceptionNotExpressible, "PolicyException %s/%s: %v", ex.Namespace, ex.Name, err)
			}
			expression := "!" + applies
			if guarded {
				expression = "!(" + applies + ") || " + guard
			}
			match.conditions = append(match.conditions, admissionregistrationv1.MatchCondition{Name: conditionException + "-" + strconv.Itoa(i), Expression: expression})
			continue
		}
		var filters []kyvernov1.ResourceFilter
		conjunctive := false
		switch {
		case len(ex.Spec.Match.Any) > 0:
			filters = ex.Spec.Match.Any
		case len(ex.Spec.Match.All) > 0:
			filters, conjunctive = ex.Spec.Match.All, true
		default:
			continue // Kyverno: an exception without filters matches nothing
		}
		if fl := addExclusions(&match, l.resolver, filters, conjunctive, forException, conditionException+"-"+strconv.Itoa(i)); fl != nil {
			return none, model.Refuse(model.ReasonExceptionNotExpressible, "PolicyException %s/%s: %s", ex.Namespace, ex.Name, fl.Message)
		}
	}
	if fl := kyvernoRuntimeDifferences(l.resolver, rule, match.kinds); fl != nil {
		return none, fl
	}
	if len(match.constraints.ResourceRules) == 0 {
		return none, model.Refuse(model.ReasonMatchNotExpressible, "the match block names only operations a VAP never sees")
	}

	// Exact: Kyverno matches a request by its own group/version/kind, never
	// by an equivalent resource in another version.
	exact := admissionregistrationv1.Exact
	match.constraints.MatchPolicy = &exact
	cel := rule.Validation.CEL
	spec := admissionregistrationv1.ValidatingAdmissionPolicySpec{
		ParamKind:        cel.ParamKind,
		MatchConstraints: &match.constraints,
		Validations:      validationsWithRuleMessage(cel.Expressions, rule.Validation.Message),
		Variables:        cel.Variables,
	}
	if changed := vap.JoinMessageLines(spec.Validations); len(changed) > 0 {
		l.warn(fmt.Sprintf("rule %q: the message of validations %v has line breaks, which a ValidatingAdmissionPolicy refuses; the VAP's message has the lines joined by spaces (the verdict is unchanged)", rule.Name, changed))
	}
	if len(cel.AuditAnnotations) > 0 {
		// Kyverno's engine computes audit annotations and discards them
		// (validate_cel.go reads only the decisions), so they never change
		// its verdict; in a VAP, an annotation that errors or does not
		// compile denies the request.
		l.warn(fmt.Sprintf("rule %q: auditAnnotations are not carried into the ValidatingAdmissionPolicy: Kyverno ignores them at admission, and in a ValidatingAdmissionPolicy an annotation that fails to evaluate would deny the request", rule.Name))
	}
	failurePolicy := admissionregistrationv1.Fail
	if l.policy.Spec.FailurePolicy != nil && *l.policy.Spec.FailurePolicy == kyvernov1.Ignore {
		failurePolicy = admissionregistrationv1.Ignore
	}
	spec.FailurePolicy = &failurePolicy
	confined, scope := l.confinement()
	global, fl := kyverno.ConfigConditions(l.opts.KyvernoConfig, l.resolver, match.kinds, kyverno.ConfinedNamespaces(match.kinds, vap.AndLabelSelectors(match.constraints.NamespaceSelector, scope)))
	if fl != nil {
		return none, fl
	}
	generated := map[string]bool{}
	ours := map[string]bool{}
	for _, mc := range global {
		generated[mc.Name] = true
		ours[mc.Name] = !strings.HasPrefix(mc.Name, kyverno.ConditionKyvernoConfigPrefix)
	}
	if confined != nil {
		match.conditions = append([]admissionregistrationv1.MatchCondition{*confined}, match.conditions...)
	}
	for _, mc := range match.conditions {
		generated[mc.Name] = true
		ours[mc.Name] = true
	}
	preconditions := make([]admissionregistrationv1.MatchCondition, len(rule.CELPreconditions))
	for i, mc := range rule.CELPreconditions {
		if generated[mc.Name] {
			return none, model.Refuse(model.ReasonVAPFieldInvalid, "celPrecondition name %q collides with a name kyvap generates", mc.Name)
		}
		preconditions[i] = mc
		// Kyverno accepts any name (its own tests use "Label should be
		// red"); a VAP needs a qualified name. The name only labels errors.
		if len(validation.IsQualifiedName(mc.Name)) > 0 {
			preconditions[i].Name = vap.QualifiedConditionName(mc.Name, i, generated)
			l.warn(fmt.Sprintf("rule %q: celPrecondition %q is named %q in the ValidatingAdmissionPolicy (names there must be qualified names)", rule.Name, mc.Name, preconditions[i].Name))
		}
		generated[preconditions[i].Name] = true
	}
	spec.MatchConditions = append(append(global, match.conditions...), preconditions...)
	if kyverno.RewriteOrValueInSpec(&spec, generated) {
		l.warn(kyverno.OrValueWarning(fmt.Sprintf("rule %q", rule.Name)))
	}
	if len(spec.MatchConditions) > vap.MaxMatchConditions {
		return none, model.Refuse(model.ReasonMatchNotExpressible, "%d match conditions exceed the API server's limit of %d", len(spec.MatchConditions), vap.MaxMatchConditions)
	}
	if fl := vap.CheckFields(&spec); fl != nil {
		return none, fl
	}
	// A classic rule calling Kyverno's JMESPath functions that only
	// kyvap's engine evaluates (kyverno/cellib's jmespath library): its
	// CEL, all generated, compiles there, not in the API server.
	if l.classic[rule.Name] && slices.Contains(cellib.Used(vap.SpecExpressions(&spec)...), "jmespath") {
		return none, model.Refuse(model.ReasonKyvernoLibrary, "calls Kyverno's JMESPath functions %s, which kyvap's engine evaluates and the API server does not have", strings.Join(cellib.JMESPathFunctions(vap.SpecExpressions(&spec)...), ", "))
	}
	if fl := l.checkCEL(&spec, ours); fl != nil {
		return none, fl
	}
	if fl := vap.GuardNamespacePredicates(&spec, ours); fl != nil {
		return none, fl
	}
	if vap.IsGuarded(&spec) {
		// The user's expressions compiled above; anything failing now is
		// in what kyvap wrapped around them.
		if user, generatedProblems := vap.CheckExpressions(&spec, l.version, ours); len(user)+len(generatedProblems) > 0 {
			return none, model.Refuse(model.ReasonGeneratedCELError, "%s", vap.ProblemsMessage(append(user, generatedProblems...)))
		}
	}

	paramRef, fl := paramRefFor(cel)
	if fl != nil {
		return none, fl
	}
	mayBeClusterScoped := false
	for _, k := range match.kinds {
		if !k.OnlyNamespaced() {
			mayBeClusterScoped = true
		}
	}
	pieces, fl := bindingPieces(actionSteps(&l.policy.Spec, rule), mayBeClusterScoped)
	if fl != nil {
		return none, fl
	}

	lowered := model.Rule{
		Name:             rule.Name,
		ID:               rule.Name,
		Semantics:        model.SemanticsClusterPolicy,
		MatchConstraints: *spec.MatchConstraints,
		MatchConditions:  spec.MatchConditions,
		Variables:        spec.Variables,
		Validations:      spec.Validations,
		FailurePolicy:    *spec.FailurePolicy,
		ParamKind:        spec.ParamKind,
		ParamRef:         paramRef,
		Namespace:        l.namespace,
		Admission:        l.policy.Spec.AdmissionEnabled(),
		Background:       l.policy.Spec.BackgroundEnabled(),
		Mode:             model.ModeKubernetes,
	}
	for _, piece := range pieces {
		lowered.Bindings = append(lowered.Bindings, model.Binding{Scope: confine(piece.scope, scope), Actions: validationActions(piece.action)})
	}
	return *lowered.DeepCopy(), nil
}

// confinement is, for a namespaced Policy, the match condition and the
// binding scope that keep every generated VAP to the policy's namespace,
// whatever the rule says; nil for a ClusterPolicy. Kyverno compares the
// resource's own namespace, so a Namespace object (whose request carries
// its name as namespace) never matches.
func (l *Lowering) confinement() (*admissionregistrationv1.MatchCondition, *metav1.LabelSelector) {
	if l.namespace == "" {
		return nil, nil
	}
	return &admissionregistrationv1.MatchCondition{
			Name:       vap.ConditionPolicyNamespace,
			Expression: "request.namespace == " + strconv.Quote(l.namespace) + ` && !(request.resource.group == "" && request.resource.resource == "namespaces")`,
		}, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{l.namespace},
		}}}
}

// confine ANDs a namespaced Policy's namespace selector into a binding's
// scope (nil selector: unchanged).
func confine(scope *admissionregistrationv1.MatchResources, selector *metav1.LabelSelector) *admissionregistrationv1.MatchResources {
	if selector == nil {
		return scope
	}
	out := scope.DeepCopy()
	if out == nil {
		out = &admissionregistrationv1.MatchResources{}
	}
	out.NamespaceSelector = vap.AndLabelSelectors(out.NamespaceSelector, selector)
	return out
}

// validationsWithRuleMessage copies the validations, giving those without a
// message the rule's validate.message: Kyverno's engine does the same before
// evaluating, so the denial carries the same text on both paths.
func validationsWithRuleMessage(validations []admissionregistrationv1.Validation, message string) []admissionregistrationv1.Validation {
	if len(validations) == 0 {
		return nil
	}
	out := make([]admissionregistrationv1.Validation, len(validations))
	for i, v := range validations {
		out[i] = *v.DeepCopy()
		if out[i].Message == "" {
			out[i].Message = message
		}
	}
	return out
}

// matchKinds lists the kinds of a rule's match filters.
func matchKinds(rule *kyvernov1.Rule) []string {
	var out []string
	for _, d := range descriptionsOf(&rule.MatchResources) {
		out = append(out, d.Kinds...)
	}
	return kyverno.UniqueSorted(out)
}

// checkCEL compiles the VAP's expressions for the cluster (l.version) and
// for Kyverno's environment. CEL environments only grow with the version,
// so one compile at the older of the two proves both; the other versions
// are tried only to name a failure.
func (l *Lowering) checkCEL(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, ours map[string]bool) *model.Refusal {
	oldest := l.version
	if vap.KyvernoCELVersion.LessThan(oldest) {
		oldest = vap.KyvernoCELVersion
	}
	user, generated := vap.CheckExpressions(spec, oldest, ours)
	switch {
	case len(user) == 0 && len(generated) == 0:
		return nil
	case len(user) == 0:
		return model.Refuse(model.ReasonGeneratedCELError, "%s", vap.ProblemsMessage(generated))
	}
	if newest, _ := vap.CheckExpressions(spec, vap.NewestCompatibilityVersion, ours); len(newest) > 0 {
		return model.Refuse(model.ReasonCELCompileError, "%s", vap.ProblemsMessage(newest))
	}
	if kyverno, _ := vap.CheckExpressions(spec, vap.KyvernoCELVersion, ours); len(kyverno) > 0 {
		return kyvernoCELFailure(kyverno)
	}
	cluster, _ := vap.CheckExpressions(spec, l.version, ours)
	return model.Refuse(model.ReasonCELNotAtCompatibilityVersion, "does not compile at CEL compatibility version %s: %s", l.version, vap.ProblemsMessage(cluster))
}

// kyvernoCELFailure: the rule compiles for the cluster but not in Kyverno's
// CEL environment, where every request it matches fails; kyvap's webhook
// compiles fallback rules in Kyverno's environment and does the same.
func kyvernoCELFailure(problems []vap.Problem) *model.Refusal {
	return model.Refuse(model.ReasonCELNotInKyverno, "does not compile in Kyverno's CEL environment (Kubernetes %s libraries), where every request the rule matches fails: %s", vap.KyvernoCELVersion, vap.ProblemsMessage(problems))
}

// duplicateNameMessage says which rules share a name (positions 1-based).
func duplicateNameMessage(name string, positions []int) string {
	refs := make([]string, len(positions))
	for i, p := range positions {
		refs[i] = "#" + strconv.Itoa(p)
	}
	list := strings.Join(refs[:len(refs)-1], ", ") + " and " + refs[len(refs)-1]
	fix := "rename one"
	if len(positions) > 2 {
		fix = "rename all but one"
	}
	return fmt.Sprintf("rule name %q is used by rules %s; Kyverno rejects such policies: %s", name, list, fix)
}

// SkippingExceptionsFor returns the exceptions naming any of the rule names
// that skip a rule where they match: all of ExceptionsFor but those with
// podSecurity controls naming a compiled podSecurity rule, which are
// compiled into it (podSecurityExceptions).
func (l *Lowering) SkippingExceptionsFor(ruleNames ...string) []kyvernov2.PolicyException {
	podSecurity := len(ruleNames) > 0
	for _, name := range ruleNames {
		podSecurity = podSecurity && l.podSecurity[name]
	}
	var out []kyvernov2.PolicyException
	for _, ex := range l.ExceptionsFor(ruleNames...) {
		if !podSecurity || len(ex.Spec.PodSecurity) == 0 {
			out = append(out, ex)
		}
	}
	return out
}

// ExceptionsFor returns the exceptions naming any of the rule names (Kyverno
// matches ruleNames as wildcard patterns and policyName exactly).
func (l *Lowering) ExceptionsFor(ruleNames ...string) []kyvernov2.PolicyException {
	var out []kyvernov2.PolicyException
	for _, ex := range l.exceptions {
		for _, name := range ruleNames {
			if kyverno.ExceptionContains(ex.Spec.Exceptions, l.Key(), name) {
				out = append(out, ex)
				break
			}
		}
	}
	return out
}
