// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package convert migrates Kyverno ClusterPolicies and namespaced Policies
// (validate.cel rules) to ValidatingPolicies and NamespacedValidatingPolicies
// (policies.kyverno.io/v1), one per rule.
//
// A rule is converted from its lowered form in the policy model
// (clusterpolicy.Lower): the same match constraints, match
// conditions, variables and validations kyvap's VAPs enforce, which
// translate proves equal to Kyverno's verdicts. Whatever has no exact
// ValidatingPolicy form is never approximated: the rule is reported with a
// reason (Result.Unconverted).
//
// The package is pure and deterministic: no cluster, no clock.
package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/frontend/validatingpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

// Annotations and labels that trace a converted policy back to its source.
const (
	// AnnotationSource is "<Kind>/<name>" or "<Kind>/<namespace>/<name>".
	AnnotationSource = "kyvap.io/converted-from"
	// AnnotationRule is the source rule's name (autogen-… for a
	// pod-controller variant converted on its own).
	AnnotationRule = "kyvap.io/converted-from-rule"
	// LabelSourcePolicy is the source policy's name (as a label value).
	LabelSourcePolicy = "kyvap.io/converted-from-policy"
)

// ConditionApplies is the match condition that holds the part of a rule's
// matching that reads the namespace's labels, with the rule's
// celPreconditions (see vap.GuardVariable).
const ConditionApplies = "kyvap-applies"

// ConditionSourceNamespace is the match condition that keeps a policy
// converted from a namespaced Policy off other namespaces and off
// Namespace objects, as the Policy was.
const ConditionSourceNamespace = "kyvap-policy-namespace-only"

// Options tune a conversion.
type Options struct {
	// Resolver resolves the kinds the policies name (nil: core kinds).
	Resolver kyverno.KindResolver
	// CompatibilityVersion is the CEL compatibility version expressions
	// are checked at (empty: the newest).
	CompatibilityVersion string
	// KyvernoConfig, when set, is Kyverno's global configuration folded
	// into every converted policy (its resource filters, excluded users and
	// groups and webhook match conditions as match conditions, its webhook
	// selectors ANDed into the match constraints); nil leaves it to
	// Kyverno, as the source policies did.
	KyvernoConfig *kyverno.Config
	// Exceptions are the kyverno.io PolicyExceptions converted beside the
	// policies. Those with podSecurity controls are folded into the
	// converted policies of the rules they name (FoldedExceptions): a
	// policies.kyverno.io PolicyException skips a whole policy, and cannot
	// say which podSecurity errors they exclude. The others are converted
	// on their own (Exception).
	Exceptions []kyvernov2.PolicyException
}

// FoldedExceptions are the exceptions Policy folds into the policies it
// converts: those with podSecurity controls.
func FoldedExceptions(exceptions []kyvernov2.PolicyException) []kyvernov2.PolicyException {
	var out []kyvernov2.PolicyException
	for _, ex := range exceptions {
		if len(ex.Spec.PodSecurity) > 0 {
			out = append(out, ex)
		}
	}
	return out
}

// Converted is one ValidatingPolicy (cluster-scoped source) or
// NamespacedValidatingPolicy (namespaced source) written from a rule.
type Converted struct {
	// Rule is the source rule, Variants the autogen variants folded into
	// the policy's spec.autogen.
	Rule     string
	Variants []string
	// AutogenOf is the rule a pod-controller variant converted on its own
	// was derived from, Targets the kinds it applies to.
	AutogenOf string
	Targets   []string
	// Region is the index of the region of the namespaces the policy
	// covers, when failure-action overrides split the rule (-1: whole).
	Region int
	// Exactly one is set.
	ValidatingPolicy           *policiesv1.ValidatingPolicy
	NamespacedValidatingPolicy *policiesv1.NamespacedValidatingPolicy
	// PassesWithoutResult: the rule is a foreach whose has-result
	// condition was folded into the validations (foldHasResult): where
	// the ClusterPolicy's rule has no result, the converted policy passes.
	PassesWithoutResult bool
	// Exceptions are the PolicyExceptions (namespace/name) folded into the
	// policy (FoldedExceptions) because they name its rules.
	Exceptions []string
	// NoAutogen: spec.autogen.podControllers.controllers is [] (Kyverno
	// would otherwise derive variants the source does not have, or that
	// are converted as policies of their own). The field's omitempty
	// drops an empty list, so the writer adds it.
	NoAutogen bool
}

// Name is the converted policy's name.
func (c *Converted) Name() string {
	if c.ValidatingPolicy != nil {
		return c.ValidatingPolicy.Name
	}
	return c.NamespacedValidatingPolicy.Name
}

// Unconverted is a rule that has no exact ValidatingPolicy form.
type Unconverted struct {
	Rule   string
	Reason string
}

// Result is the conversion of one policy.
type Result struct {
	Source      model.Source
	Policies    []Converted
	Unconverted []Unconverted
	// ExceptionGuards are, by rule (and variant) name, the lowered rules'
	// model.Rule.ExceptionGuard: where their exceptions do not apply.
	ExceptionGuards map[string]string
	// Warnings change no verdict (the translator's, e.g. rewritten orValue).
	Warnings []string
}

// Policy converts a ClusterPolicy, or a namespaced Policy carried as one
// (TypeMeta kind Policy, see clusterpolicy.InputFor). The options'
// PolicyExceptions with podSecurity controls are folded into the policies
// of the rules they name, compiled as the translation compiles them; the
// others are converted (or refused) on their own (Exception).
func Policy(p *kyvernov1.ClusterPolicy, opts Options) (Result, error) {
	folded := FoldedExceptions(opts.Exceptions)
	in := clusterpolicy.InputFor(p, folded)
	lowering, err := clusterpolicy.Lower(in, opts.Resolver, clusterpolicy.Options{CompatibilityVersion: opts.CompatibilityVersion, KyvernoConfig: opts.KyvernoConfig})
	if err != nil {
		return Result{}, err
	}
	lowered := lowering.Policy
	if cfg := opts.KyvernoConfig; cfg != nil && (cfg.NamespaceSelector != nil || cfg.ObjectSelector != nil) {
		// The webhook selectors are binding scope in a VAP; a
		// ValidatingPolicy has its match constraints only.
		for i := range lowered.Rules {
			m := &lowered.Rules[i].MatchConstraints
			m.NamespaceSelector = vap.AndLabelSelectors(m.NamespaceSelector, cfg.NamespaceSelector)
			m.ObjectSelector = vap.AndLabelSelectors(m.ObjectSelector, cfg.ObjectSelector)
		}
	}
	res := Result{Source: lowered.Source, Warnings: lowering.Warnings, ExceptionGuards: map[string]string{}}
	for _, r := range lowered.Rules {
		if r.ExceptionGuard != "" {
			res.ExceptionGuards[r.Name] = r.ExceptionGuard
		}
	}
	for _, o := range lowering.Outcomes {
		if o.Fate != clusterpolicy.Lowered {
			res.Unconverted = append(res.Unconverted, Unconverted{Rule: o.Name, Reason: unloweredReason(o.Refusal)})
		}
	}
	variants := map[string][]model.Rule{}
	for _, r := range lowered.Rules {
		if r.AutogenOf != "" {
			variants[r.AutogenOf] = append(variants[r.AutogenOf], r)
		}
	}
	for i := range lowered.Rules {
		r := &lowered.Rules[i]
		if r.AutogenOf != "" {
			continue
		}
		res.convertRule(r, variants[r.ID])
	}
	key := clusterpolicy.PolicyKey(p.Namespace, p.Name)
	for i := range res.Policies {
		c := &res.Policies[i]
		for _, ex := range folded {
			for _, rule := range append([]string{c.Rule}, c.Variants...) {
				if kyverno.ExceptionContains(ex.Spec.Exceptions, key, rule) {
					c.Exceptions = append(c.Exceptions, ex.Namespace+"/"+ex.Name)
					break
				}
			}
		}
	}
	return res, nil
}

// unloweredReason says why a rule has no lowered form.
func unloweredReason(r *model.Refusal) string {
	if r.Reason == model.ReasonEmptyRule {
		return "the rule has no CEL expressions (Kyverno passes every request): nothing to convert"
	}
	return fmt.Sprintf("%s: %s", r.Reason, r.Message)
}

// convertRule converts a rule as written and its pod-controller variants:
// into one policy whose spec.autogen gives Kyverno's ValidatingPolicy
// autogen exactly the variants the ClusterPolicy has, or else into one
// policy for the rule (autogen off) and one per variant.
func (res *Result) convertRule(r *model.Rule, variants []model.Rule) {
	specs, why := specsOf(&res.Source, r)
	if why != "" {
		res.refuse(r, variants, why)
		return
	}
	if len(specs) > 1 {
		res.convertRegions(r, specs, variants)
		return
	}
	spec := specs[0]
	for _, config := range autogenConfigs(variants) {
		candidate := spec.DeepCopy()
		candidate.AutogenConfiguration = config
		if sameVariants(autogenOf(&res.Source, candidate), variants) {
			c := res.object(r, candidate)
			c.NoAutogen = config != nil && config.PodControllers != nil && len(config.PodControllers.Controllers) == 0
			for _, v := range variants {
				c.Variants = append(c.Variants, v.Name)
			}
			res.Policies = append(res.Policies, c)
			return
		}
	}
	// Kyverno's ValidatingPolicy autogen cannot give these variants (it
	// would rewrite kyvap's match conditions too, or the rule does not
	// select exactly Pods): each variant becomes a policy of its own.
	res.convertRegions(r, specs, variants)
}

// convertRegions writes a rule and each of its variants as policies of
// their own, autogen off: one per region of the namespaces when
// failure-action overrides split them (named <policy>-<rule>-<region>).
func (res *Result) convertRegions(r *model.Rule, specs []*policiesv1.ValidatingPolicySpec, variants []model.Rule) {
	type unit struct {
		rule  *model.Rule
		specs []*policiesv1.ValidatingPolicySpec
	}
	units := []unit{{r, specs}}
	for i := range variants {
		vs, why := specsOf(&res.Source, &variants[i])
		if why != "" {
			res.refuse(r, variants, fmt.Sprintf("pod-controller variant %s: %s", variants[i].Name, why))
			return
		}
		units = append(units, unit{&variants[i], vs})
	}
	for _, u := range units {
		for region, s := range u.specs {
			if s == nil {
				continue
			}
			c := res.object(u.rule, noAutogen(s))
			if len(u.specs) > 1 {
				c.Region = region
				name := Name(res.Source.Name, fmt.Sprintf("%s-%d", u.rule.ID, region))
				if c.ValidatingPolicy != nil {
					c.ValidatingPolicy.Name = name
				} else {
					c.NamespacedValidatingPolicy.Name = name
				}
			}
			c.NoAutogen = true
			c.AutogenOf, c.Targets = u.rule.AutogenOf, u.rule.Targets
			res.Policies = append(res.Policies, c)
		}
	}
}

func (res *Result) refuse(r *model.Rule, variants []model.Rule, why string) {
	res.Unconverted = append(res.Unconverted, Unconverted{Rule: r.Name, Reason: why})
	for _, v := range variants {
		res.Unconverted = append(res.Unconverted, Unconverted{Rule: v.Name, Reason: "a pod-controller variant of " + r.Name + ", which is not converted"})
	}
}

func noAutogen(spec *policiesv1.ValidatingPolicySpec) *policiesv1.ValidatingPolicySpec {
	out := spec.DeepCopy()
	out.AutogenConfiguration = &policiesv1.ValidatingPolicyAutogenConfiguration{PodControllers: &policiesv1.PodControllersGenerationConfiguration{Controllers: []string{}}}
	return out
}

// specsOf are the ValidatingPolicy specs of a lowered rule: one, or one
// per region of the namespaces where validationFailureActionOverrides give
// it another action (its bindings), each its region's match constraints
// and action. Or why it has none.
func specsOf(src *model.Source, r *model.Rule) ([]*policiesv1.ValidatingPolicySpec, string) {
	if len(r.Bindings) == 1 && (r.Bindings[0].Scope == nil || confinementOnly(src, r.Bindings[0].Scope)) {
		spec, why := specOf(src, r, r.Bindings[0].Actions)
		if why != "" {
			return nil, why
		}
		return []*policiesv1.ValidatingPolicySpec{spec}, ""
	}
	var specs []*policiesv1.ValidatingPolicySpec
	for i, b := range r.Bindings {
		spec, why := specOf(src, r, b.Actions)
		if why != "" {
			return nil, why
		}
		constraints, ok, why := intersect(*spec.MatchConstraints, b.Scope)
		if why != "" {
			return nil, fmt.Sprintf("binding %d of the rule's validationFailureActionOverrides: %s", i, why)
		}
		if !ok {
			specs = append(specs, nil) // the region holds nothing the rule matches
			continue
		}
		spec.MatchConstraints = &constraints
		specs = append(specs, spec)
	}
	return specs, ""
}

// intersect narrows match constraints to a binding's scope: the scope's
// namespace and object selectors ANDed in, its resource rules (every
// resource of one scope, as translate writes them) applied as the scope of
// each rule. ok is false when nothing is left.
func intersect(m admissionregistrationv1.MatchResources, scope *admissionregistrationv1.MatchResources) (out admissionregistrationv1.MatchResources, ok bool, why string) {
	out = *m.DeepCopy()
	if scope == nil {
		return out, true, ""
	}
	if len(scope.ExcludeResourceRules) > 0 || scope.MatchPolicy != nil {
		return out, false, "its scope excludes resources"
	}
	out.NamespaceSelector = vap.AndLabelSelectors(out.NamespaceSelector, scope.NamespaceSelector)
	out.ObjectSelector = vap.AndLabelSelectors(out.ObjectSelector, scope.ObjectSelector)
	if len(scope.ResourceRules) == 0 {
		return out, true, ""
	}
	if len(scope.ResourceRules) != 1 {
		return out, false, "its scope has several resource rules"
	}
	sr := scope.ResourceRules[0]
	if sr.Scope == nil || len(sr.Resources) != 1 || sr.Resources[0] != "*/*" || len(sr.APIGroups) != 1 || sr.APIGroups[0] != "*" {
		return out, false, "its scope selects resources by name"
	}
	want := *sr.Scope
	var kept []admissionregistrationv1.NamedRuleWithOperations
	for _, rr := range out.ResourceRules {
		switch {
		case rr.Scope == nil || *rr.Scope == admissionregistrationv1.AllScopes:
			rr.Scope = &want
		case *rr.Scope != want:
			continue
		}
		kept = append(kept, rr)
	}
	out.ResourceRules = kept
	return out, len(kept) > 0, ""
}

// hasMatchCondition says whether the rule has the named match condition.
func hasMatchCondition(r *model.Rule, name string) bool {
	for _, mc := range r.MatchConditions {
		if mc.Name == name {
			return true
		}
	}
	return false
}

// foldHasResult folds a compiled foreach rule's has-result condition
// (clusterpolicy.ConditionHasResult) into its validations: a
// ValidatingPolicy has no "no result" (a false match condition is a
// skip), so where no element of the foreach applied, and the ClusterPolicy
// reported nothing, the converted policy passes. docs/convert.md says so.
func foldHasResult(r *model.Rule) {
	for i, mc := range r.MatchConditions {
		if mc.Name != clusterpolicy.ConditionHasResult {
			continue
		}
		r.MatchConditions = append(append([]admissionregistrationv1.MatchCondition(nil), r.MatchConditions[:i]...), r.MatchConditions[i+1:]...)
		validations := make([]admissionregistrationv1.Validation, len(r.Validations))
		for j, v := range r.Validations {
			v.Expression = "!(" + mc.Expression + ") || (" + v.Expression + ")"
			validations[j] = v
		}
		r.Validations = validations
		return
	}
}

// specOf is the ValidatingPolicy spec of a lowered rule with one binding's
// actions, or why it has none.
func specOf(src *model.Source, r *model.Rule, bindingActions []admissionregistrationv1.ValidationAction) (*policiesv1.ValidatingPolicySpec, string) {
	if r.ParamKind != nil {
		return nil, "paramKind: a ValidatingPolicy has no parameters (Kyverno's own CEL libraries read objects instead); not converted"
	}
	r = r.DeepCopy()
	// Kyverno's ValidatingPolicy engine gives match conditions the
	// namespace object, which the API server does not: the part of the
	// matching a VAP checks in a guard variable (reporting pass where
	// Kyverno skips) is a match condition again.
	vap.Unguard(&r.MatchConditions, &r.Variables, r.Validations, ConditionApplies)
	foldHasResult(r)
	for i := range r.MatchConditions {
		if r.MatchConditions[i].Name == vap.ConditionPolicyNamespace {
			// Kyverno selects a NamespacedValidatingPolicy by the request's
			// namespace, Namespace objects included; a namespaced Policy
			// never applies to a Namespace: the condition stays, under a
			// name of its own (kyvap writes its own next to the policy's
			// when it translates the converted policy).
			r.MatchConditions[i].Name = ConditionSourceNamespace
		}
	}
	spec := &policiesv1.ValidatingPolicySpec{
		MatchConstraints: &r.MatchConstraints,
		MatchConditions:  r.MatchConditions,
		Variables:        r.Variables,
		Validations:      r.Validations,
		ValidationAction: actions(bindingActions),
	}
	if r.FailurePolicy == admissionregistrationv1.Ignore {
		ignore := admissionregistrationv1.Ignore
		spec.FailurePolicy = &ignore
	}
	if !r.Admission || !r.Background {
		spec.EvaluationConfiguration = &policiesv1.EvaluationConfiguration{}
		if !r.Admission {
			spec.EvaluationConfiguration.Admission = &policiesv1.AdmissionConfiguration{Enabled: ptrFalse()}
		}
		if !r.Background {
			spec.EvaluationConfiguration.Background = &policiesv1.BackgroundConfiguration{Enabled: ptrFalse()}
		}
	}
	return spec, ""
}

func ptrFalse() *bool { f := false; return &f }

// confinementOnly reports a binding scope that only keeps a namespaced
// Policy to its namespace, which a NamespacedValidatingPolicy is anyway.
func confinementOnly(src *model.Source, scope *admissionregistrationv1.MatchResources) bool {
	want := admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{src.Namespace},
	}}}}
	return src.Namespaced() && reflect.DeepEqual(*scope, want)
}

// actions maps a ClusterPolicy rule's VAP actions to a ValidatingPolicy's:
// Enforce is Deny; Audit, which kyvap's VAPs carry as Audit+Warn, is Audit
// (Kyverno reports an Audit rule's failures; it does not warn at
// admission).
func actions(in []admissionregistrationv1.ValidationAction) []admissionregistrationv1.ValidationAction {
	for _, a := range in {
		if a == admissionregistrationv1.Deny {
			return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
		}
	}
	return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
}

// autogenConfigs are the spec.autogen settings worth trying, simplest
// first: Kyverno's defaults, the ClusterPolicy's controllers, none.
func autogenConfigs(variants []model.Rule) []*policiesv1.ValidatingPolicyAutogenConfiguration {
	configs := []*policiesv1.ValidatingPolicyAutogenConfiguration{nil}
	var controllers []string
	seen := map[string]bool{}
	for _, v := range variants {
		for _, kind := range v.Targets {
			if i := strings.LastIndex(kind, "/"); i >= 0 {
				kind = kind[i+1:]
			}
			resource := strings.ToLower(kind) + "s"
			if !seen[resource] {
				seen[resource] = true
				controllers = append(controllers, resource)
			}
		}
	}
	if len(controllers) > 0 {
		configs = append(configs, &policiesv1.ValidatingPolicyAutogenConfiguration{PodControllers: &policiesv1.PodControllersGenerationConfiguration{Controllers: controllers}})
	}
	return append(configs, noAutogen(&policiesv1.ValidatingPolicySpec{}).AutogenConfiguration)
}

// autogenOf lowers a candidate spec as Kyverno would read it and returns
// the pod-controller variants it gets.
func autogenOf(src *model.Source, spec *policiesv1.ValidatingPolicySpec) []model.Rule {
	vp := &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: src.Name}, Spec: *spec}
	lowered := validatingpolicy.Lower(vp, nil, time.Time{})
	var out []model.Rule
	for _, r := range lowered.Rules {
		if r.AutogenOf != "" {
			out = append(out, r)
		}
	}
	return out
}

// sameVariants reports whether Kyverno's ValidatingPolicy autogen gives
// exactly the ClusterPolicy's variants: the same requests matched, the same
// conditions, variables and validations.
func sameVariants(got, want []model.Rule) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		wanted := want[i].DeepCopy()
		vap.Unguard(&wanted.MatchConditions, &wanted.Variables, wanted.Validations, ConditionApplies)
		foldHasResult(wanted)
		g, w := got[i].MatchConstraints.DeepCopy(), wanted.MatchConstraints.DeepCopy()
		// Kyverno's matcher compares a request's own kind: matchPolicy
		// makes no difference to it.
		g.MatchPolicy, w.MatchPolicy = nil, nil
		if !reflect.DeepEqual(g, w) ||
			!reflect.DeepEqual(got[i].MatchConditions, wanted.MatchConditions) ||
			!reflect.DeepEqual(got[i].Variables, wanted.Variables) ||
			!reflect.DeepEqual(got[i].Validations, wanted.Validations) {
			return false
		}
	}
	return true
}

// object wraps a spec into the converted policy of the source's scope.
func (res *Result) object(r *model.Rule, spec *policiesv1.ValidatingPolicySpec) Converted {
	meta := metav1.ObjectMeta{
		Name:        Name(res.Source.Name, r.ID),
		Namespace:   res.Source.Namespace,
		Labels:      map[string]string{LabelSourcePolicy: labelValue(res.Source.Name)},
		Annotations: map[string]string{AnnotationSource: res.Source.String(), AnnotationRule: r.Name},
	}
	c := Converted{Rule: r.Name, Region: -1, PassesWithoutResult: hasMatchCondition(r, clusterpolicy.ConditionHasResult)}
	if res.Source.Namespaced() {
		c.NamespacedValidatingPolicy = &policiesv1.NamespacedValidatingPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policies.kyverno.io/v1", Kind: "NamespacedValidatingPolicy"},
			ObjectMeta: meta, Spec: *spec,
		}
		return c
	}
	c.ValidatingPolicy = &policiesv1.ValidatingPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy"},
		ObjectMeta: meta, Spec: *spec,
	}
	return c
}

var notNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// maxName keeps converted names short enough for every name Kyverno
// derives from them (vpol-<name> VAPs, labels).
const maxName = 63

// Name is the converted policy's name for a source policy and rule:
// "<policy>-<rule>", lower case, characters outside [a-z0-9-] replaced by
// '-', and, when longer than 63 characters, cut and suffixed with a hash of
// the full pair so that distinct rules keep distinct names.
func Name(policy, rule string) string {
	name := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(policy+"-"+rule), "-"), "-")
	if len(name) <= maxName && name == strings.ToLower(policy+"-"+rule) {
		return name
	}
	sum := sha256.Sum256([]byte(policy + "\x00" + rule))
	hash := hex.EncodeToString(sum[:])[:8]
	if len(name) > maxName-9 {
		name = strings.TrimRight(name[:maxName-9], "-")
	}
	return name + "-" + hash
}

// labelValue fits a name into a label value (63 characters).
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:54], "-_.") + "-" + hex.EncodeToString(sum[:])[:8]
}

// PolicyFor says which converted policy holds the result a test row of
// the source policy names by rule and resource kind (Kyverno: a row naming
// a rule also matches its pod-controller variants, on the controllers'
// kinds), or why none does.
//
// A rule split into regions of the namespaces by failure-action overrides
// has one policy per region: all are returned, and the resource's
// namespace decides (Converted.Applies).
func (res *Result) PolicyFor(rule, kind string) ([]*Converted, string) {
	if i := strings.LastIndex(kind, "/"); i >= 0 {
		kind = kind[i+1:]
	}
	if rule == "" {
		if len(res.Policies) == 1 && len(res.Unconverted) == 0 {
			return []*Converted{&res.Policies[0]}, ""
		}
		return nil, fmt.Sprintf("the result names no rule, so it checks every rule of %s, which became %d policies", res.Source, len(res.Policies))
	}
	var out []*Converted
	for i := range res.Policies {
		if c := &res.Policies[i]; c.AutogenOf == rule && contains(c.Targets, kind) {
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	for i := range res.Policies {
		if c := &res.Policies[i]; c.Rule == rule || contains(c.Variants, rule) {
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	for _, u := range res.Unconverted {
		if u.Rule == rule {
			return nil, fmt.Sprintf("rule %s is not converted: %s", rule, u.Reason)
		}
	}
	return nil, fmt.Sprintf("%s has no rule %s", res.Source, rule)
}

// Applies reports whether the policy's match constraints can select an
// object of a namespace with the given labels (cluster-scoped objects:
// namespace ""), by the scope of its resource rules and its namespace
// selector: which region of a split rule a resource belongs to.
func (c *Converted) Applies(namespace string, namespaceLabels map[string]string) bool {
	spec := c.spec()
	if spec.MatchConstraints == nil {
		return false
	}
	m := spec.MatchConstraints
	want := admissionregistrationv1.ClusterScope
	if namespace != "" {
		want = admissionregistrationv1.NamespacedScope
	}
	scoped := false
	for _, rr := range m.ResourceRules {
		if rr.Scope == nil || *rr.Scope == admissionregistrationv1.AllScopes || *rr.Scope == want {
			scoped = true
		}
	}
	if !scoped {
		return false
	}
	if namespace == "" || m.NamespaceSelector == nil {
		return true
	}
	selector, err := metav1.LabelSelectorAsSelector(m.NamespaceSelector)
	return err == nil && selector.Matches(labels.Set(namespaceLabels))
}

func (c *Converted) spec() *policiesv1.ValidatingPolicySpec {
	if c.ValidatingPolicy != nil {
		return &c.ValidatingPolicy.Spec
	}
	return &c.NamespacedValidatingPolicy.Spec
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s || strings.HasSuffix(x, "/"+s) {
			return true
		}
	}
	return false
}
