// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine/celeval"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// SetModelRules compiles the rules of a policy of the policy model (a
// ValidatingPolicy or NamespacedValidatingPolicy) that the engine must
// enforce, replacing those set before for the same source (unless they are
// unchanged), and publishes a new snapshot. No rules removes the policy.
func (e *Engine) SetModelRules(source model.Source, rules []model.Rule) {
	key := modelKey(source)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(rules) == 0 {
		if _, ok := e.policies[key]; !ok {
			return
		}
		delete(e.policies, key)
	} else {
		if old, ok := e.policies[key]; ok && old.modelSource == source && reflect.DeepEqual(old.modelSourceRules, rules) {
			return
		}
		e.policies[key] = compileModelPolicy(key, source, rules, e.resources)
	}
	e.publish()
}

// ModelPolicy is one policy of the policy model as the engine holds it.
type ModelPolicy struct {
	Source model.Source
	Rules  []model.Rule
}

// ModelRules returns the policy-model rules the engine enforces, per
// policy, in the engine's evaluation order.
func (e *Engine) ModelRules() []ModelPolicy {
	var out []ModelPolicy
	for _, p := range e.current.Load().policies {
		if len(p.modelRules) > 0 {
			out = append(out, ModelPolicy{Source: p.modelSource, Rules: p.modelSourceRules})
		}
	}
	return out
}

// ModelRulesOf returns the rules SetModelRules set for the policy (matched
// by kind, namespace and name).
func (e *Engine) ModelRulesOf(source model.Source) []model.Rule {
	for _, p := range e.current.Load().policies {
		if p.name == modelKey(source) {
			return p.modelSourceRules
		}
	}
	return nil
}

// modelKey keys a model policy among the engine's policies: it contains a
// "/", which no ClusterPolicy name does, so the two never collide.
func modelKey(s model.Source) string { return s.String() }

// modelPrograms are a rule's compiled matchConditions (nil when it has
// none) and validations.
type modelPrograms struct {
	conditions *celeval.Program
	program    *celeval.Program
}

// compiledModelRule is one rule of the policy model, compiled to Kyverno's
// ValidatingPolicy engine semantics (pkg/cel/policies/vpol/engine and
// compiler in Kyverno's module): match constraints (Kyverno's matcher),
// then the PolicyExceptions' conditions, then the rule's matchConditions,
// then the validations in order, the first that does not hold deciding.
type compiledModelRule struct {
	source model.Source
	rule   *model.Rule
	// constraints are the rule's match constraints.
	constraints admissionregistrationv1.MatchResources
	// exceptions are the conditions of each CEL PolicyException (a program
	// with those matchConditions and no validation).
	exceptions []*celeval.Program
	// variants are the rule's programs: one, or, when the rule reads the
	// `exceptions` variable of partial PolicyExceptions, one per subset of
	// them that may match (bit i: partial[i] matched), each with the
	// variable bound to what that subset allows.
	variants []modelPrograms
	// partial are the indexes of the rule's partial exceptions (images or
	// allowedValues), when the rule reads `exceptions`.
	partial []int
	// notEnforced says why the engine cannot evaluate the rule.
	notEnforced string
	ignore      bool
	deny, warn  bool
}

func compileModelPolicy(key string, source model.Source, rules []model.Rule, resources cellib.ResourceReader) *compiledPolicy {
	p := &compiledPolicy{name: key, modelSource: source, modelSourceRules: rules}
	for i := range rules {
		p.modelRules = append(p.modelRules, compileModelRule(source, &rules[i], resources))
	}
	p.failurePolicy = admissionregistrationv1.Fail
	if len(rules) > 0 && rules[0].FailurePolicy == admissionregistrationv1.Ignore {
		p.failurePolicy = admissionregistrationv1.Ignore
	}
	if len(rules) > 0 {
		p.timeoutSeconds = rules[0].TimeoutSeconds
	}
	return p
}

func compileModelRule(source model.Source, r *model.Rule, resources cellib.ResourceReader) *compiledModelRule {
	c := &compiledModelRule{
		source: source, rule: r, constraints: *r.MatchConstraints.DeepCopy(),
		ignore: r.FailurePolicy == admissionregistrationv1.Ignore,
		deny:   slices.Contains(r.Actions, admissionregistrationv1.Deny),
		warn:   slices.Contains(r.Actions, admissionregistrationv1.Warn),
	}
	if c.notEnforced = translate.ModelRuleNotEnforcedWith(r, translate.EngineCapabilities{Resources: resources != nil}); c.notEnforced != "" {
		return c
	}
	env := libraryEnvironment(r.Libraries, resources, source.Namespace)
	name := source.String()
	if r.ID != model.RuleIDPolicy {
		name += "/" + r.ID
	}
	fail := admissionregistrationv1.Fail
	for i := range r.Exceptions {
		ex := &r.Exceptions[i]
		c.exceptions = append(c.exceptions, celeval.CompileIn(env, name+"/exception/"+ex.Key(), conditionsSpec(ex.MatchConditions)))
	}
	var conditions *admissionregistrationv1.ValidatingAdmissionPolicySpec
	if len(r.MatchConditions) > 0 {
		conditions = conditionsSpec(r.MatchConditions)
	}
	validations := make([]admissionregistrationv1.Validation, len(r.Validations))
	for i, v := range r.Validations {
		validations[i] = *v.DeepCopy()
		if validations[i].Message == "" {
			// Kyverno's message for a validation without one
			// (vpol/compiler/policy.go); the API server's would be
			// "failed expression: ...".
			validations[i].Message = fmt.Sprintf("CEL expression validation failed at index %d", i)
		}
	}
	spec := &admissionregistrationv1.ValidatingAdmissionPolicySpec{
		Variables:        slices.Clone(r.Variables),
		Validations:      validations,
		AuditAnnotations: slices.Clone(r.AuditAnnotations),
		FailurePolicy:    &fail,
	}
	kyverno.RewriteOrValueInSpec(spec, nil)
	if slices.Contains(r.Libraries, "exceptions") {
		for i := range r.Exceptions {
			if !r.Exceptions[i].Full() {
				c.partial = append(c.partial, i)
			}
		}
	}
	// Kyverno compiles ValidatingPolicies in the API server's
	// stored-expressions environment (every library this build knows) plus
	// its own libraries; `exceptions` is bound before the matchConditions.
	for mask := 0; mask < 1<<len(c.partial); mask++ {
		variantEnv := env
		if slices.Contains(r.Libraries, "exceptions") {
			variantEnv = withExceptions(env, r, c.partial, mask)
		}
		var v modelPrograms
		if conditions != nil {
			v.conditions = celeval.CompileIn(variantEnv, name+"/conditions", conditions)
		}
		v.program = celeval.CompileIn(variantEnv, name, spec)
		c.variants = append(c.variants, v)
	}
	return c
}

// conditionsSpec compiles match conditions as Kyverno's ValidatingPolicy
// engine evaluates them (vpol/compiler/policy.go match): in the
// environment of the validations, namespaceObject included — the API
// server's matchConditions have no namespaceObject — so each condition is
// a validation of the spec, read back by conditionsMatch.
func conditionsSpec(conditions []admissionregistrationv1.MatchCondition) *admissionregistrationv1.ValidatingAdmissionPolicySpec {
	fail := admissionregistrationv1.Fail
	spec := &admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail}
	for _, mc := range conditions {
		spec.Validations = append(spec.Validations, admissionregistrationv1.Validation{Expression: mc.Expression, Message: "matchCondition " + mc.Name})
	}
	kyverno.RewriteOrValueInSpec(spec, nil)
	return spec
}

// conditionsMatch reads a conditionsSpec's result as Kyverno does: a false
// condition is no match, whatever the others; otherwise an erring one is
// an error (errMessage).
func conditionsMatch(res celeval.Result) (matched bool, errMessage string) {
	for _, d := range res.Decisions {
		switch d.Evaluation {
		case celeval.EvalDeny:
			return false, ""
		case celeval.EvalError:
			if errMessage == "" {
				errMessage = d.Message
			}
		}
	}
	return errMessage == "", errMessage
}

// withExceptions is env with Kyverno's `exceptions` variable bound to what
// the partial exceptions in mask allow (vpol/compiler/policy.go: their
// images and allowedValues, in order, empty lists when none matched).
func withExceptions(env celeval.Environment, r *model.Rule, partial []int, mask int) celeval.Environment {
	allowed := map[string][]string{"allowedImages": {}, "allowedValues": {}}
	for bit, i := range partial {
		if mask&(1<<bit) != 0 {
			allowed["allowedImages"] = append(allowed["allowedImages"], r.Exceptions[i].Images...)
			allowed["allowedValues"] = append(allowed["allowedValues"], r.Exceptions[i].AllowedValues...)
		}
	}
	out := env
	out.Extensions = append(slices.Clone(env.Extensions), cel.Lib(exceptionsLib(allowed)))
	key, _ := json.Marshal(allowed)
	out.ExtensionsKey = env.ExtensionsKey + "|exceptions:" + string(key)
	out.Uncached = true // the key carries the exceptions' values
	return out
}

// action is the Outcome's action: Enforce when the rule denies.
func (r *compiledModelRule) action() kyvernov1.ValidationFailureAction {
	if r.deny {
		return kyvernov1.Enforce
	}
	return kyvernov1.Audit
}

// evaluate is compiledRule.evaluate for a rule of the policy model.
func (r *compiledModelRule) evaluate(ctx context.Context, req *Request, attrs *admission.VersionedAttributes, namespace *corev1.Namespace) (o Outcome, matchedRule, interrupted bool) {
	o = Outcome{Policy: r.source.Name, Rule: r.rule.Name, RuleID: r.rule.ID, Kind: string(r.source.Kind), Namespace: r.source.Namespace, Action: r.action(), Warn: r.warn}
	// A namespaced policy applies only to requests in its namespace
	// (Kyverno's webhook: vpol/engine/predicate.go NamespacedPolicy).
	if r.rule.Namespace != "" && req.Admission.Namespace != r.rule.Namespace {
		return o, false, false
	}
	matched, err := matchConstraints(&r.constraints, attrs, namespace, req.Admission)
	if err != nil {
		return r.errorOutcome(o, "failed to execute matching: "+err.Error()), true, false
	}
	if !matched || r.notEnforced != "" {
		return o, false, false
	}
	resource := schema.GroupVersionResource{Group: req.Admission.Resource.Group, Version: req.Admission.Resource.Version, Resource: req.Admission.Resource.Resource}
	in := celeval.Input{Attributes: attrs, MatchedResource: resource, Namespace: namespace, Authorizer: req.Authorizer}
	// PolicyExceptions first: the first that matches exempts; partial ones
	// feed the `exceptions` variable.
	var exempted []string
	var partialMatched []int
	for i, ex := range r.exceptions {
		res := ex.Validate(ctx, in)
		if res.Interrupted {
			return o, true, true
		}
		matched, errMessage := conditionsMatch(res)
		if errMessage != "" {
			// Kyverno: an erring exception is no match under
			// failurePolicy Ignore, an error otherwise, unless an earlier
			// exception already exempted the request.
			if r.ignore || len(exempted) > 0 {
				continue
			}
			return r.errorOutcome(o, fmt.Sprintf("PolicyException %s: %s", r.rule.Exceptions[i].Key(), errMessage)), true, false
		}
		if !matched {
			continue
		}
		if r.rule.Exceptions[i].Full() {
			exempted = append(exempted, r.rule.Exceptions[i].Key())
		} else {
			partialMatched = append(partialMatched, i)
		}
	}
	if len(exempted) > 0 {
		o.Result = Skip
		first := slices.IndexFunc(r.rule.Exceptions, func(ex model.Exception) bool { return ex.Key() == exempted[0] })
		if r.rule.Exceptions[first].ReportResult == "pass" {
			o.Result = Pass
		}
		o.Message = "exempted by PolicyException " + strings.Join(exempted, ", ")
		return o, true, false
	}
	programs := r.variants[r.variantOf(partialMatched)]
	if programs.conditions != nil {
		res := programs.conditions.Validate(ctx, in)
		if res.Interrupted {
			return o, true, true
		}
		matched, errMessage := conditionsMatch(res)
		switch {
		case errMessage != "" && !r.ignore:
			return r.errorOutcome(o, errMessage), true, false
		case !matched:
			// Kyverno reports the policy as skipped; a condition that errs
			// under failurePolicy Ignore is a false one.
			o.Result, o.Message = Skip, "matchConditions not met"
			return o, true, false
		}
	}
	res := programs.program.Validate(ctx, in)
	if res.Interrupted {
		return o, true, true
	}
	o.Result = Pass
	for _, d := range res.Decisions {
		switch d.Evaluation {
		case celeval.EvalError:
			// Kyverno: an error is the rule's result whatever the
			// failurePolicy, and denies when the policy denies.
			return r.errorOutcome(o, d.Message), true, false
		case celeval.EvalDeny:
			o.Result, o.Blocking = Fail, r.deny
			o.addViolation(d)
			o.Message = d.Message
		}
		if o.Result == Fail {
			break
		}
	}
	for _, a := range res.AuditAnnotations {
		switch a.Action {
		case celeval.AuditAnnotationActionPublish:
			if o.AuditAnnotations == nil {
				o.AuditAnnotations = map[string]string{}
			}
			o.AuditAnnotations[a.Key] = a.Value
		case celeval.AuditAnnotationActionError:
			return r.errorOutcome(o, fmt.Sprintf("failed to evaluate auditAnnotation '%s': %s", a.Key, a.Error)), true, false
		}
	}
	return o, true, false
}

// exceptionsLib declares Kyverno's `exceptions` variable and binds it to a
// value (a map: field selection reads it as Kyverno's libs.Exception).
type exceptionsLib map[string][]string

func (exceptionsLib) LibraryName() string { return "kyvap.exceptions" }

func (exceptionsLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{cel.Variable("exceptions", cel.MapType(cel.StringType, cel.ListType(cel.StringType)))}
}

func (l exceptionsLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.Globals(map[string]any{"exceptions": map[string][]string(l)})}
}

// variantOf is the index of the programs for the partial exceptions that
// matched.
func (r *compiledModelRule) variantOf(matched []int) int {
	mask := 0
	for bit, i := range r.partial {
		if slices.Contains(matched, i) {
			mask |= 1 << bit
		}
	}
	return mask
}

func (r *compiledModelRule) errorOutcome(o Outcome, message string) Outcome {
	o.Result, o.Message, o.Messages, o.AuditAnnotations = Error, message, []string{message}, nil
	o.Blocking = r.deny
	return o
}

// matchConstraints is Kyverno's matcher for a ValidatingPolicy
// (pkg/cel/matching/matcher.go): the API server's policy matching without
// matchPolicy Equivalent, the namespace selector evaluated against the
// request's namespace (or a Namespace's own labels), and resource names
// also matching a generateName that starts with them.
func matchConstraints(m *admissionregistrationv1.MatchResources, attrs *admission.VersionedAttributes, namespace *corev1.Namespace, req *admissionv1.AdmissionRequest) (bool, error) {
	nsMatches, nsErr := matchNamespaceSelector(m.NamespaceSelector, attrs, namespace)
	if !nsMatches && nsErr == nil {
		return false, nil
	}
	objMatches, objErr := matchObjectSelector(m.ObjectSelector, attrs)
	if !objMatches && objErr == nil {
		return false, nil
	}
	if matchResourceRules(m.ExcludeResourceRules, attrs) {
		return false, nil
	}
	if len(m.ResourceRules) > 0 && !matchResourceRules(m.ResourceRules, attrs) {
		return false, nil
	}
	if nsErr != nil {
		return false, nsErr
	}
	return true, objErr
}

func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

func matchNamespaceSelector(s *metav1.LabelSelector, attrs *admission.VersionedAttributes, namespace *corev1.Namespace) (bool, error) {
	name := attrs.GetNamespace()
	isNamespace := attrs.GetResource().Resource == "namespaces"
	if name == "" && !isNamespace {
		// A cluster-scoped object other than a Namespace is never
		// exempted by a namespace selector.
		return true, nil
	}
	selector, err := selectorOf(s)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if selector.Empty() {
		return true, nil
	}
	var nsLabels map[string]string
	op := attrs.GetOperation()
	switch {
	case isNamespace && attrs.GetSubresource() == "" && (op == admission.Create || op == admission.Update):
		accessor, err := meta.Accessor(attrs.GetObject())
		if err != nil {
			return false, err
		}
		nsLabels = accessor.GetLabels()
	case namespace != nil && namespace.Name == name && namespace.Labels != nil:
		nsLabels = namespace.Labels
	default:
		// Kyverno: a namespace it cannot read has only its name label.
		nsLabels = map[string]string{corev1.LabelMetadataName: name}
	}
	return selector.Matches(labels.Set(nsLabels)), nil
}

func matchObjectSelector(s *metav1.LabelSelector, attrs *admission.VersionedAttributes) (bool, error) {
	selector, err := selectorOf(s)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if selector.Empty() {
		return true, nil
	}
	for _, obj := range []any{attrs.GetObject(), attrs.GetOldObject()} {
		if obj == nil || reflect.ValueOf(obj).IsNil() {
			continue
		}
		accessor, err := meta.Accessor(obj)
		if err != nil {
			continue
		}
		if selector.Matches(labels.Set(accessor.GetLabels())) {
			return true, nil
		}
	}
	return false, nil
}

func matchResourceRules(named []admissionregistrationv1.NamedRuleWithOperations, attrs *admission.VersionedAttributes) bool {
	for _, nr := range named {
		if !(&rules.Matcher{Rule: nr.RuleWithOperations, Attr: attrs}).Matches() {
			continue
		}
		if len(nr.ResourceNames) == 0 {
			return true
		}
		name := attrs.GetName()
		if name == "" {
			if generateNameMatches(nr.ResourceNames, attrs) {
				return true
			}
			continue
		}
		if slices.Contains(nr.ResourceNames, name) {
			return true
		}
	}
	return false
}

// generateNameMatches: Kyverno matches a request without a name whose
// object's generateName starts with one of the names.
func generateNameMatches(names []string, attrs *admission.VersionedAttributes) bool {
	obj := attrs.GetObject()
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return false
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	for _, n := range names {
		if strings.HasPrefix(accessor.GetGenerateName(), n) {
			return true
		}
	}
	return false
}

// libraryEnvironment is the API server's stored-expressions environment
// with the Kyverno CEL libraries the rule uses (kyverno/cellib).
func libraryEnvironment(libs []string, resources cellib.ResourceReader, namespace string) celeval.Environment {
	if len(libs) == 0 {
		return celeval.Environment{}
	}
	env := celeval.Environment{Extensions: cellib.EnvOptions(libs), ExtensionsKey: strings.Join(libs, ",")}
	if slices.Contains(libs, "resource") && resources != nil {
		// The reader and the namespace are bound into the environment.
		env.Extensions = append(env.Extensions, cellib.ResourceEnvOptions(resources, namespace)...)
		env.ExtensionsKey += fmt.Sprintf("|resource:%p:%s", resources, namespace)
	}
	return env
}

// Capabilities says what the engine evaluates beyond Kyverno's pure CEL
// libraries.
func (e *Engine) Capabilities() translate.EngineCapabilities {
	e.mu.Lock()
	defer e.mu.Unlock()
	return translate.EngineCapabilities{Resources: e.resources != nil}
}

// SetResourceReader lets the engine evaluate Kyverno's resource library,
// reading through r (nil: rules using it are not evaluated). Set it before
// any rule: rules already compiled keep what they had.
func (e *Engine) SetResourceReader(r cellib.ResourceReader) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resources = r
}
