// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"errors"
	"fmt"
	"reflect"
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
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

// ErrNilPolicy is returned for an Input without a policy.
var ErrNilPolicy = errors.New("translate: input has no policy")

// Translate translates every CEL validate rule of the policy into a VAP and
// its bindings, and says for every rule where it is enforced. It never
// mutates its input and is deterministic. The only error is a nil policy;
// everything else is reported per rule in the Plan.
func Translate(in Input, resolver kyverno.KindResolver, opts Options) (Plan, error) {
	t, err := newTranslation(in, resolver, opts)
	if err != nil {
		return Plan{}, err
	}
	return t.run(), nil
}

// LowerClusterPolicy lowers a ClusterPolicy (or a namespaced Policy, see
// InputFor) into the policy model: one rule with ClusterPolicy semantics
// for every rule and pod-controller variant that has the form of a
// ValidatingAdmissionPolicy, in the policy's order, carrying everything
// Kyverno's engine applies around the rule's CEL (match and exclude with
// wildcards, the PolicyExceptions in the input, opts.KyvernoConfig, a
// namespaced Policy's confinement, preconditions, failure-action
// overrides as bindings, params). Generation options (opts.
// GenerateValidatingAdmissionPolicy, RespectGenerateField, the
// AnnotationGenerate opt-out) do not apply: they choose who enforces a
// rule, not what it means. The Plan says, for every rule, whether it was
// lowered and why not; the VAPs it lists are those of the lowered rules.
func LowerClusterPolicy(in Input, resolver kyverno.KindResolver, opts Options) (model.Policy, Plan, error) {
	opts.GenerateValidatingAdmissionPolicy, opts.RespectGenerateField = true, false
	t, err := newTranslation(in, resolver, opts)
	if err != nil {
		return model.Policy{}, Plan{}, err
	}
	t.lowering = true
	plan := t.run()
	kind := model.KindClusterPolicy
	if in.Namespace != "" {
		kind = model.KindPolicy
	}
	p := model.Policy{
		Source: model.Source{Kind: kind, APIVersion: "kyverno.io/v1", Namespace: in.Namespace, Name: in.Policy.Name, UID: in.Policy.UID, Generation: in.Policy.Generation},
		Rules:  t.lowered,
	}
	return p, plan, nil
}

func newTranslation(in Input, resolver kyverno.KindResolver, opts Options) (*translation, error) {
	if in.Policy == nil {
		return nil, ErrNilPolicy
	}
	t := &translation{
		policy:    in.Policy.DeepCopy(),
		resolver:  resolver,
		opts:      opts,
		namespace: in.Namespace,
	}
	for i := range in.Exceptions {
		t.exceptions = append(t.exceptions, *in.Exceptions[i].DeepCopy())
	}
	sort.SliceStable(t.exceptions, func(i, j int) bool {
		a, b := t.exceptions[i], t.exceptions[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return t, nil
}

// translation is the state of one Translate call.
type translation struct {
	policy *kyvernov1.ClusterPolicy
	// namespace is a namespaced Policy's namespace, empty for a
	// ClusterPolicy.
	namespace   string
	exceptions  []kyvernov2.PolicyException
	resolver    kyverno.KindResolver
	opts        Options
	version     *version.Version
	controllers []string
	// ruleNames are the names of the policy's own rules.
	ruleNames map[string]bool
	plan      Plan
	// lowered are the rules emitted into the plan, in order, as rules of
	// the policy model.
	lowered []model.Rule
	// lowering ignores the opt-outs of VAP generation (LowerClusterPolicy).
	lowering bool
}

func (t *translation) run() Plan {
	t.plan.Policy = t.key()
	v, err := vap.CompatibilityVersion(t.opts.CompatibilityVersion)
	if err != nil {
		t.plan.Warnings = append(t.plan.Warnings, err.Error()+"; using "+vap.NewestCompatibilityVersion.String())
		v = vap.NewestCompatibilityVersion
	}
	t.version = v
	if t.resolver == nil {
		t.resolver = kyverno.NewStaticResolver()
	}
	t.controllers = autogenControllers(t.policy)
	t.ruleNames = map[string]bool{}
	for i := range t.policy.Spec.Rules {
		t.ruleNames[t.policy.Spec.Rules[i].Name] = true
	}
	positions := map[string][]int{} // rule name -> 1-based positions
	for i := range t.policy.Spec.Rules {
		name := t.policy.Spec.Rules[i].Name
		positions[name] = append(positions[name], i+1)
	}
	for i := range t.policy.Spec.Rules {
		rule := &t.policy.Spec.Rules[i]
		if at := positions[rule.Name]; len(at) > 1 {
			// Kyverno's admission refuses the policy; its CRD does not. The
			// rules would generate objects of the same name, each
			// overwriting the other's: none of them is enforced.
			t.plan.Rules = append(t.plan.Rules, RuleResult{Rule: rule.Name, Verdict: VerdictInvalid, Reason: model.ReasonDuplicateRuleName, Message: duplicateNameMessage(rule.Name, at)})
			continue
		}
		t.plan.Rules = append(t.plan.Rules, t.rule(rule)...)
	}
	sort.Slice(t.plan.ValidatingAdmissionPolicies, func(i, j int) bool {
		return t.plan.ValidatingAdmissionPolicies[i].Name < t.plan.ValidatingAdmissionPolicies[j].Name
	})
	sort.Slice(t.plan.Bindings, func(i, j int) bool { return t.plan.Bindings[i].Name < t.plan.Bindings[j].Name })
	t.plan.Warnings = append(t.plan.Warnings, CostWarnings(&t.plan)...)
	return t.plan
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

// exceptionsFor returns the exceptions naming any of the rule names (Kyverno
// matches ruleNames as wildcard patterns and policyName exactly).
func (t *translation) exceptionsFor(ruleNames ...string) []kyvernov2.PolicyException {
	var out []kyvernov2.PolicyException
	for _, ex := range t.exceptions {
		for _, name := range ruleNames {
			if kyverno.ExceptionContains(ex.Spec.Exceptions, t.key(), name) {
				out = append(out, ex)
				break
			}
		}
	}
	return out
}

// fallbackSpec is the policy spec without rules, for the fallback engine.
func (t *translation) fallbackSpec() kyvernov1.Spec {
	spec := *t.policy.Spec.DeepCopy()
	spec.Rules = nil
	return spec
}

// fallbackResult hands the whole rule (and its autogen variants) to the
// fallback engine.
func (t *translation) fallbackResult(rule *kyvernov1.Rule, reason model.Reason, message string) RuleResult {
	rules := append([]kyvernov1.Rule{*rule.DeepCopy()}, autogenRules(rule, t.controllers)...)
	return RuleResult{
		Rule: rule.Name, Verdict: VerdictFallback, Reason: reason, Message: message,
		Fallback: t.newFallbackRule(rules, reason, message),
	}
}

// rule translates one rule.
func (t *translation) rule(rule *kyvernov1.Rule) []RuleResult {
	if strings.HasPrefix(rule.Name, "autogen-") && rule.HasValidateCEL() && hasAutogenVariants(t.policy, t.controllers) {
		narrowed, ok := shadowedAutogenRule(rule, t.policy, t.controllers)
		switch {
		case !ok:
			return one(RuleResult{Rule: rule.Name, Verdict: VerdictInvalid, Reason: model.ReasonAutogenRuleName, Message: "the rule is named autogen-* in a policy Kyverno generates pod-controller variants for: Kyverno skips it for the controllers' kinds and evaluates it only on kinds its other rules match, which kyvap cannot determine for wildcard or missing kinds; rename the rule"})
		case narrowed == nil:
			return one(RuleResult{Rule: rule.Name, Verdict: VerdictInvalid, Reason: model.ReasonAutogenRuleName, Message: "the rule is named autogen-* in a policy Kyverno generates pod-controller variants for: Kyverno skips it for the controllers' kinds and evaluates it only on kinds its other rules match, which leaves none; rename the rule"})
		}
		if !reflect.DeepEqual(narrowed.MatchResources, rule.MatchResources) {
			t.plan.Warnings = append(t.plan.Warnings, fmt.Sprintf("rule %q: named autogen-* in a policy with pod-controller variants, so Kyverno evaluates it only on %v (not on the controllers' kinds, and only on kinds other rules route to the policy); kyvap does the same", rule.Name, matchKinds(narrowed)))
		}
		rule = narrowed
	}
	switch {
	case !rule.HasValidateCEL():
		return one(RuleResult{Rule: rule.Name, Verdict: VerdictNotHandled, Reason: model.ReasonNonCELRule, Message: "not a validate.cel rule; Kyverno enforces it"})
	case t.policy.Annotations[kyvernov1.AutogenControllersAnnotation] == "all":
		// Kyverno's policy validation (api/kyverno/v1 ValidateAutogenAnnotation)
		// refuses the policy: it never enforces any of its rules.
		return one(RuleResult{Rule: rule.Name, Verdict: VerdictInvalid, Reason: model.ReasonAutogenAnnotationInvalid, Message: "the annotation " + kyvernov1.AutogenControllersAnnotation + ": all is refused by Kyverno (\"does not support 'all' anymore\"); remove it or list the controllers"})
	case !t.policy.Spec.AdmissionEnabled() && !t.lowering:
		return one(RuleResult{Rule: rule.Name, Verdict: VerdictNotHandled, Reason: model.ReasonAdmissionDisabled, Message: "spec.admission is false; the policy does not apply at admission"})
	case !t.opts.GenerateValidatingAdmissionPolicy:
		return one(t.fallbackResult(rule, model.ReasonGenerationDisabled, "ValidatingAdmissionPolicy generation is disabled"))
	case t.policy.Annotations[AnnotationGenerate] == "false" && !t.lowering:
		return one(t.fallbackResult(rule, model.ReasonGenerateOptOut, "the policy is annotated "+AnnotationGenerate+"=false"))
	case t.opts.RespectGenerateField && (rule.Validation.CEL.Generate == nil || !*rule.Validation.CEL.Generate):
		return one(t.fallbackResult(rule, model.ReasonGenerateOptOut, "validate.cel.generate is not true (Kyverno's opt-in is respected)"))
	case t.policy.Spec.ApplyRules != nil && *t.policy.Spec.ApplyRules == "One":
		return one(t.fallbackResult(rule, model.ReasonApplyRulesOne, "spec.applyRules One makes rules depend on each other"))
	case rule.RawAnyAllConditions != nil && !kyverno.NoPreconditions(rule.RawAnyAllConditions.Raw):
		return one(t.fallbackResult(rule, model.ReasonJMESPathPreconditions, "JMESPath preconditions have no VAP form"))
	case len(rule.Context) > 0:
		return one(t.fallbackResult(rule, model.ReasonContextEntries, "context entries have no VAP form"))
	case len(rule.Validation.CEL.Expressions) == 0:
		return one(RuleResult{Rule: rule.Name, Verdict: VerdictTranslated, Reason: model.ReasonEmptyRule, Message: "the rule has no expressions; Kyverno passes every request"})
	}

	lowered, fl := t.lower(rule)
	if fl != nil {
		if fl.Reason == model.ReasonCELCompileError {
			return one(RuleResult{Rule: rule.Name, Verdict: VerdictInvalid, Reason: fl.Reason, Message: fl.Message})
		}
		return one(t.fallbackResult(rule, fl.Reason, fl.Message))
	}
	name := vapName(t.key(), rule.Name)
	t.emit(&lowered, name)
	results := one(RuleResult{Rule: rule.Name, Verdict: VerdictTranslated, ValidatingAdmissionPolicies: []string{name}})
	for _, variant := range autogenRules(rule, t.controllers) {
		results = append(results, t.variant(rule.Name, &variant))
	}
	return results
}

// variant translates one of Kyverno's autogen variants of a translated Pod
// rule (autogen-<rule> for the pod controllers, autogen-cronjob-<rule> for
// CronJobs). A variant is an ordinary rule, the one Kyverno's engine
// evaluates for a controller: kinds replaced and the CEL rewritten to the
// pod template. So it is translated as any rule (its own match, exclusions,
// exceptions naming autogen-<rule>, overrides), into its own VAP, and falls
// back alone when that fails.
func (t *translation) variant(of string, variant *kyvernov1.Rule) RuleResult {
	name := vapName(t.key(), variant.Name)
	if t.ruleNames[variant.Name] {
		// A rule of the policy has the variant's name (Kyverno narrows that
		// rule, see shadowedAutogenRule): the VAPs must not collide.
		name = shadowedVariantName(t.key(), variant.Name)
	}
	lowered, fl := t.lower(variant)
	if fl != nil {
		if fl.Reason == model.ReasonCELCompileError {
			return RuleResult{Rule: variant.Name, Verdict: VerdictInvalid, Reason: fl.Reason, Message: fl.Message}
		}
		return RuleResult{
			Rule: variant.Name, Verdict: VerdictFallback, Reason: fl.Reason, Message: fl.Message,
			Fallback: t.newFallbackRule([]kyvernov1.Rule{*variant}, fl.Reason, fl.Message),
		}
	}
	lowered.AutogenOf = of
	lowered.Targets = matchKinds(variant)
	if t.ruleNames[variant.Name] {
		lowered.ID = of + "/" + variant.Name // unique: a rule of the policy has the name
	}
	t.emit(&lowered, name)
	return RuleResult{Rule: variant.Name, Verdict: VerdictTranslated, ValidatingAdmissionPolicies: []string{name}}
}

// one is a rule's results when it has no translated variants.
func one(r RuleResult) []RuleResult { return []RuleResult{r} }

// lower turns a rule (as written, or an autogen variant) into a rule of the
// policy model with ClusterPolicy semantics: everything Kyverno's engine
// does before its CEL handler runs — match and exclude, the
// PolicyExceptions naming the rule, its global configuration, a namespaced
// Policy's confinement, preconditions, failure-action overrides — expressed
// in the fields of a ValidatingAdmissionPolicy and its bindings. A failure
// says why the rule has no such form.
func (t *translation) lower(rule *kyvernov1.Rule) (model.Rule, *model.Refusal) {
	var none model.Rule
	match, fl := translateMatch(t.resolver, rule.MatchResources)
	if fl != nil {
		return none, fl
	}
	if ex := rule.ExcludeResources; ex != nil {
		filters, conjunctive := filtersOf(*ex)
		if fl := addExclusions(&match, t.resolver, filters, conjunctive, forRule, conditionExclude); fl != nil {
			return none, fl
		}
	}
	for i, ex := range t.exceptionsFor(rule.Name) {
		if ex.Spec.HasConditions() {
			return none, model.Refuse(model.ReasonExceptionNotExpressible, "PolicyException %s/%s has JMESPath conditions", ex.Namespace, ex.Name)
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
		if fl := addExclusions(&match, t.resolver, filters, conjunctive, forException, conditionException+"-"+strconv.Itoa(i)); fl != nil {
			return none, model.Refuse(model.ReasonExceptionNotExpressible, "PolicyException %s/%s: %s", ex.Namespace, ex.Name, fl.Message)
		}
	}
	if fl := kyvernoRuntimeDifferences(t.resolver, rule, match.kinds); fl != nil {
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
		t.plan.Warnings = append(t.plan.Warnings, fmt.Sprintf("rule %q: the message of validations %v has line breaks, which a ValidatingAdmissionPolicy refuses; the VAP's message has the lines joined by spaces (the verdict is unchanged)", rule.Name, changed))
	}
	if len(cel.AuditAnnotations) > 0 {
		// Kyverno's engine computes audit annotations and discards them
		// (validate_cel.go reads only the decisions), so they never change
		// its verdict; in a VAP, an annotation that errors or does not
		// compile denies the request.
		t.plan.Warnings = append(t.plan.Warnings, fmt.Sprintf("rule %q: auditAnnotations are not carried into the ValidatingAdmissionPolicy: Kyverno ignores them at admission, and in a ValidatingAdmissionPolicy an annotation that fails to evaluate would deny the request", rule.Name))
	}
	failurePolicy := admissionregistrationv1.Fail
	if t.policy.Spec.FailurePolicy != nil && *t.policy.Spec.FailurePolicy == kyvernov1.Ignore {
		failurePolicy = admissionregistrationv1.Ignore
	}
	spec.FailurePolicy = &failurePolicy
	global, fl := kyverno.ConfigConditions(t.opts.KyvernoConfig, t.resolver, match.kinds)
	if fl != nil {
		return none, fl
	}
	generated := map[string]bool{}
	ours := map[string]bool{}
	for _, mc := range global {
		generated[mc.Name] = true
		ours[mc.Name] = !strings.HasPrefix(mc.Name, kyverno.ConditionKyvernoConfigPrefix)
	}
	confined, scope := t.confinement()
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
			t.plan.Warnings = append(t.plan.Warnings, fmt.Sprintf("rule %q: celPrecondition %q is named %q in the ValidatingAdmissionPolicy (names there must be qualified names)", rule.Name, mc.Name, preconditions[i].Name))
		}
		generated[preconditions[i].Name] = true
	}
	spec.MatchConditions = append(append(global, match.conditions...), preconditions...)
	if kyverno.RewriteOrValueInSpec(&spec, generated) {
		t.plan.Warnings = append(t.plan.Warnings, orValueWarning(fmt.Sprintf("rule %q", rule.Name)))
	}
	if len(spec.MatchConditions) > vap.MaxMatchConditions {
		return none, model.Refuse(model.ReasonMatchNotExpressible, "%d match conditions exceed the API server's limit of %d", len(spec.MatchConditions), vap.MaxMatchConditions)
	}
	if fl := vap.CheckFields(&spec); fl != nil {
		return none, fl
	}
	if fl := t.checkCEL(&spec, ours); fl != nil {
		return none, fl
	}
	if fl := vap.GuardNamespacePredicates(&spec, ours); fl != nil {
		return none, fl
	}
	if vap.IsGuarded(&spec) {
		// The user's expressions compiled above; anything failing now is
		// in what kyvap wrapped around them.
		if user, generatedProblems := vap.CheckExpressions(&spec, t.version, ours); len(user)+len(generatedProblems) > 0 {
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
	pieces, fl := bindingPieces(actionSteps(&t.policy.Spec, rule), mayBeClusterScoped)
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
		Namespace:        t.namespace,
		Admission:        t.policy.Spec.AdmissionEnabled(),
		Background:       t.policy.Spec.BackgroundEnabled(),
		Mode:             model.ModeKubernetes,
	}
	for _, piece := range pieces {
		lowered.Bindings = append(lowered.Bindings, model.Binding{Scope: confine(piece.scope, scope), Actions: validationActions(piece.action)})
	}
	return *lowered.DeepCopy(), nil
}

// emit adds the VAP (named name) and bindings of a lowered ClusterPolicy
// rule to the plan, and the rule to the lowered policy.
func (t *translation) emit(r *model.Rule, name string) {
	vap := admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: t.objectMeta(name, r.Name),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        r.ParamKind,
			MatchConstraints: &r.MatchConstraints,
			Validations:      r.Validations,
			Variables:        r.Variables,
			FailurePolicy:    &r.FailurePolicy,
			MatchConditions:  r.MatchConditions,
		},
	}
	t.plan.ValidatingAdmissionPolicies = append(t.plan.ValidatingAdmissionPolicies, *vap.DeepCopy())
	for i, b := range r.Bindings {
		binding := admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: t.objectMeta(name+"-"+strconv.Itoa(i), r.Name),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        name,
				ParamRef:          r.ParamRef,
				MatchResources:    t.withKyvernoSelectors(b.Scope),
				ValidationActions: b.Actions,
			},
		}
		t.plan.Bindings = append(t.plan.Bindings, *binding.DeepCopy())
	}
	t.lowered = append(t.lowered, *r.DeepCopy())
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

// withKyvernoSelectors adds the namespace and object selectors of Kyverno's
// webhooks to a binding's scope.
func (t *translation) withKyvernoSelectors(scope *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
	cfg := t.opts.KyvernoConfig
	if cfg == nil || (cfg.NamespaceSelector == nil && cfg.ObjectSelector == nil) {
		return scope
	}
	out := scope.DeepCopy()
	if out == nil {
		out = &admissionregistrationv1.MatchResources{}
	}
	out.NamespaceSelector = vap.AndLabelSelectors(out.NamespaceSelector, cfg.NamespaceSelector)
	out.ObjectSelector = vap.AndLabelSelectors(out.ObjectSelector, cfg.ObjectSelector)
	return out
}

// objectMeta is the metadata of a generated object: labels, annotations
// with the full names, and a controller owner reference to the policy
// (blockOwnerDeletion unset: kyvap needs no finalizer rights on policies).
func (t *translation) objectMeta(name, rule string) metav1.ObjectMeta {
	controller := true
	meta := metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			LabelManagedBy: ManagedByValue,
			LabelPolicy:    labelValue(t.policy.Name),
			LabelRule:      labelValue(rule),
		},
		Annotations: map[string]string{AnnotationPolicy: t.policy.Name, AnnotationRule: rule},
	}
	if t.namespace != "" {
		// A namespaced object cannot own a cluster-scoped one: the labels
		// and annotations are how the operator finds (and deletes) them.
		meta.Labels[LabelPolicyKind] = "Policy"
		meta.Labels[LabelPolicyNamespace] = t.namespace
		meta.Annotations[AnnotationPolicyKind] = "Policy"
		meta.Annotations[AnnotationPolicyNamespace] = t.namespace
		return meta
	}
	meta.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: t.policy.Name, UID: t.policy.UID, Controller: &controller,
	}}
	return meta
}

// key is the policy's PolicyKey.
func (t *translation) key() string { return PolicyKey(t.namespace, t.policy.Name) }

// confinement is, for a namespaced Policy, the match condition and the
// binding scope that keep every generated VAP to the policy's namespace,
// whatever the rule says; nil for a ClusterPolicy. Kyverno compares the
// resource's own namespace, so a Namespace object (whose request carries
// its name as namespace) never matches.
func (t *translation) confinement() (*admissionregistrationv1.MatchCondition, *metav1.LabelSelector) {
	if t.namespace == "" {
		return nil, nil
	}
	return &admissionregistrationv1.MatchCondition{
			Name:       conditionNamespace,
			Expression: "request.namespace == " + strconv.Quote(t.namespace) + ` && !(request.resource.group == "" && request.resource.resource == "namespaces")`,
		}, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{t.namespace},
		}}}
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

// checkCEL compiles the VAP's expressions for the cluster (t.version) and
// for Kyverno's environment. CEL environments only grow with the version,
// so one compile at the older of the two proves both; the other versions
// are tried only to name a failure.
func (t *translation) checkCEL(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, ours map[string]bool) *model.Refusal {
	oldest := t.version
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
	cluster, _ := vap.CheckExpressions(spec, t.version, ours)
	return model.Refuse(model.ReasonCELNotAtCompatibilityVersion, "does not compile at CEL compatibility version %s: %s", t.version, vap.ProblemsMessage(cluster))
}

// kyvernoCELFailure: the rule compiles for the cluster but not in Kyverno's
// CEL environment, where every request it matches fails; kyvap's webhook
// compiles fallback rules in Kyverno's environment and does the same.
func kyvernoCELFailure(problems []vap.Problem) *model.Refusal {
	return model.Refuse(model.ReasonCELNotInKyverno, "does not compile in Kyverno's CEL environment (Kubernetes %s libraries), where every request the rule matches fails: %s", vap.KyvernoCELVersion, vap.ProblemsMessage(problems))
}
