// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"context"
	"sort"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

// Translate translates every CEL validate rule of a ClusterPolicy (or a
// namespaced Policy, see clusterpolicy.InputFor) into a VAP and its
// bindings, and says for every rule where it is enforced. The rules are
// lowered by the ClusterPolicy front-end (frontend/clusterpolicy); the
// generation options choose, between its screening and its lowering, which
// rules kyvap's webhook enforces instead. It never mutates its input and is
// deterministic. The only error is a nil policy; everything else is
// reported per rule in the Plan.
func Translate(in clusterpolicy.Input, resolver kyverno.KindResolver, opts Options) (Plan, error) {
	return TranslateContext(context.Background(), in, resolver, opts)
}

// TranslateContext is Translate, abandoned with ctx's error once ctx is
// done. Compiling a large classic policy type-checks hundreds of kilobytes
// of CEL, seconds of CPU on a loaded node: a stopping manager must not
// wait for it. The context is read between rules and their variants.
//
// At most GOMAXPROCS translations run at once (slots); the others wait, and
// give up with ctx's error.
func TranslateContext(ctx context.Context, in clusterpolicy.Input, resolver kyverno.KindResolver, opts Options) (Plan, error) {
	release, err := acquireSlot(ctx)
	if err != nil {
		return Plan{}, err
	}
	defer release()
	lowering, err := clusterpolicy.New(in, resolver, clusterpolicy.Options{CompatibilityVersion: opts.CompatibilityVersion, KyvernoConfig: opts.KyvernoConfig})
	if err != nil {
		return Plan{}, err
	}
	t := &translation{ctx: ctx, lowering: lowering, policy: lowering.Policy(), namespace: in.Namespace, resolver: lowering.Resolver(), opts: opts}
	return t.run()
}

// translation is the state of one Translate or TranslatePolicy call.
type translation struct {
	// ctx abandons a Translate (TranslateContext). TranslatePolicy, whose
	// rules are CEL already, has none.
	ctx context.Context
	// lowering, policy and namespace are a ClusterPolicy's (Translate).
	lowering *clusterpolicy.Lowering
	policy   *kyvernov1.ClusterPolicy
	// namespace is a namespaced Policy's namespace, empty for a
	// ClusterPolicy.
	namespace string
	resolver  kyverno.KindResolver
	opts      Options
	version   *version.Version
	plan      Plan
}

func (t *translation) run() (Plan, error) {
	t.plan.Policy = t.lowering.Key()
	t.plan.Warnings = t.lowering.Warnings()
	for i := range t.policy.Spec.Rules {
		if err := t.ctx.Err(); err != nil {
			return Plan{}, err
		}
		t.plan.Rules = append(t.plan.Rules, t.rule(i)...)
	}
	if err := t.ctx.Err(); err != nil {
		return Plan{}, err
	}
	sort.Slice(t.plan.ValidatingAdmissionPolicies, func(i, j int) bool {
		return t.plan.ValidatingAdmissionPolicies[i].Name < t.plan.ValidatingAdmissionPolicies[j].Name
	})
	sort.Slice(t.plan.Bindings, func(i, j int) bool { return t.plan.Bindings[i].Name < t.plan.Bindings[j].Name })
	t.plan.Warnings = append(t.plan.Warnings, CostWarnings(&t.plan)...)
	return t.plan, nil
}

// rule translates rule i of the policy: what Kyverno makes of it
// (screening), then who enforces it (the generation options), then its
// lowering and, for each lowered rule and variant, a VAP.
func (t *translation) rule(i int) []RuleResult {
	screened := t.lowering.Screen(i)
	t.plan.Warnings = append(t.plan.Warnings, screened.Warnings...)
	rule := screened.Rule
	switch screened.Fate {
	case clusterpolicy.NotCEL:
		return one(RuleResult{Rule: rule.Name, Verdict: VerdictNotHandled, Reason: screened.Refusal.Reason, Message: screened.Refusal.Message})
	case clusterpolicy.Refused:
		return one(RuleResult{Rule: rule.Name, Verdict: VerdictInvalid, Reason: screened.Refusal.Reason, Message: screened.Refusal.Message})
	}
	switch {
	case !t.policy.Spec.AdmissionEnabled():
		return one(RuleResult{Rule: rule.Name, Verdict: VerdictNotHandled, Reason: model.ReasonAdmissionDisabled, Message: "spec.admission is false; the policy does not apply at admission"})
	case !t.opts.GenerateValidatingAdmissionPolicy:
		return one(t.fallbackResult(&screened, model.ReasonGenerationDisabled, "ValidatingAdmissionPolicy generation is disabled"))
	case t.policy.Annotations[AnnotationGenerate] == "false":
		return one(t.fallbackResult(&screened, model.ReasonGenerateOptOut, "the policy is annotated "+AnnotationGenerate+"=false"))
	case t.opts.RespectGenerateField && (rule.Validation.CEL.Generate == nil || !*rule.Validation.CEL.Generate):
		return one(t.fallbackResult(&screened, model.ReasonGenerateOptOut, "validate.cel.generate is not true (Kyverno's opt-in is respected)"))
	}
	var results []RuleResult
	for _, o := range t.lowering.Lower(screened) {
		if t.ctx.Err() != nil {
			// run returns the error before the plan is used.
			break
		}
		t.plan.Warnings = append(t.plan.Warnings, o.Warnings...)
		results = append(results, t.result(&o))
	}
	return results
}

// result is the plan's entry for one outcome of the lowering, and its VAP.
func (t *translation) result(o *clusterpolicy.Outcome) RuleResult {
	switch o.Fate {
	case clusterpolicy.Empty:
		return RuleResult{Rule: o.Name, Verdict: VerdictTranslated, Reason: o.Refusal.Reason, Message: o.Refusal.Message}
	case clusterpolicy.Refused, clusterpolicy.NotCEL:
		return RuleResult{Rule: o.Name, Verdict: VerdictInvalid, Reason: o.Refusal.Reason, Message: o.Refusal.Message}
	case clusterpolicy.NoVAPForm:
		return t.fallbackResult(o, o.Refusal.Reason, o.Refusal.Message)
	}
	name := vapName(t.lowering.Key(), o.Name)
	if o.Shadowed {
		// A rule of the policy has the variant's name: the VAPs must not
		// collide.
		name = shadowedVariantName(t.lowering.Key(), o.Name)
	}
	t.emit(o.Lowered, name)
	return RuleResult{Rule: o.Name, Verdict: VerdictTranslated, ValidatingAdmissionPolicies: []string{name}}
}

// fallbackResult hands a rule (as Kyverno evaluates it, with its autogen
// variants) to the fallback engine.
func (t *translation) fallbackResult(o *clusterpolicy.Outcome, reason model.Reason, message string) RuleResult {
	rules := append([]kyvernov1.Rule{*o.Rule.DeepCopy()}, o.Variants...)
	return RuleResult{
		Rule: o.Name, Verdict: VerdictFallback, Reason: reason, Message: message,
		Fallback: t.newFallbackRule(rules, reason, message),
	}
}

// one is a rule's results when it has no translated variants.
func one(r RuleResult) []RuleResult { return []RuleResult{r} }

// fallbackSpec is the policy spec without rules, for the fallback engine.
func (t *translation) fallbackSpec() kyvernov1.Spec {
	spec := *t.policy.Spec.DeepCopy()
	spec.Rules = nil
	return spec
}

// emit adds the VAP (named name) and bindings of a lowered ClusterPolicy
// rule to the plan.
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
	if r.FailuresAreErrors {
		vap.Annotations[AnnotationEvaluationFailures] = "error"
	}
	// Only a rule compiled from the classic language (whose failures are
	// Kyverno's errors) tests the types that specialization folds: CEL as
	// a person writes it is left as written.
	if t.opts.TypedObjects && r.FailuresAreErrors {
		specializeSpec(&vap.Spec, t.opts.CompatibilityVersion)
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
