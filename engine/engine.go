// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package engine is kyvap's fallback engine: it enforces the Kyverno CEL
// rules that are not expressed as ValidatingAdmissionPolicies, with Kyverno's
// matching semantics (package match) and the API server's CEL evaluation
// (package celeval), so a rule gives the verdict its VAP would give.
//
// Rules are compiled once per policy generation into an immutable snapshot
// that is swapped atomically; admission requests evaluate the snapshot they
// loaded without locks.
package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	admissionauthorizer "k8s.io/apiserver/pkg/admission/plugin/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/engine/celeval"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/kyverno/match"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/vap"
)

// Result is a rule's result for one request, in Kyverno's vocabulary.
type Result string

// The results. A rule that does not match the request has no Outcome.
const (
	// Pass: every validation holds.
	Pass Result = "pass"
	// Fail: a validation does not hold.
	Fail Result = "fail"
	// Skip: a PolicyException exempts the request, or a celPrecondition is false.
	Skip Result = "skip"
	// Error: the rule could not be evaluated (CEL runtime error, missing
	// parameters, a construct the engine cannot evaluate).
	Error Result = "error"
)

// Outcome is what one rule concluded about one request.
type Outcome struct {
	// Policy and Rule name the Kyverno rule as Kyverno reports it: pod
	// controller variants carry their autogen names.
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Result Result `json:"result"`
	// Action is Enforce or Audit, the failure action for the request's
	// namespace.
	Action kyvernov1.ValidationFailureAction `json:"action,omitempty"`
	// Blocking is true when the outcome counts as a violation: a failure, or
	// an error under failurePolicy Fail. An error under failurePolicy Ignore
	// is not blocking, as in a VAP.
	Blocking bool `json:"blocking,omitempty"`
	// Message is the first violation's message (the text a VAP denial
	// carries); Messages has one entry per violation.
	Message  string   `json:"message,omitempty"`
	Messages []string `json:"messages,omitempty"`
	// Reason is the first violation's reason (a validation's `reason`,
	// Invalid by default), which sets the denial's HTTP status as in a VAP.
	Reason metav1.StatusReason `json:"reason,omitempty"`
	// AuditAnnotations are the rule's auditAnnotations, keyed as written.
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
	// Kind is the kind of a policy-model policy (ValidatingPolicy,
	// NamespacedValidatingPolicy), empty for a ClusterPolicy or namespaced
	// Policy (Policy is then its namespace/name); Namespace is a namespaced
	// policy's namespace.
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// RuleID is a policy-model rule's model.Rule.ID ("policy",
	// "autogen-defaults", ...).
	RuleID string `json:"ruleID,omitempty"`
	// Warn: the policy's validationActions include Warn, so a failure or
	// an error is a warning to the client.
	Warn bool `json:"warn,omitempty"`
}

// ParamSource finds parameter objects for rules with a paramKind.
type ParamSource interface {
	// Params returns the objects of kind that ref selects for a request in
	// namespace (ref.namespace, when set, wins; cluster-scoped kinds ignore
	// namespaces). None found is an empty list, not an error.
	Params(ctx context.Context, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, namespace string) ([]runtime.Object, error)
}

// Request is one admission request with what the engine needs gathered.
type Request struct {
	Admission *admissionv1.AdmissionRequest
	// Namespace is the object of the request's namespace; nil when the
	// request is cluster-scoped or the namespace is unknown.
	Namespace *corev1.Namespace
	// Roles ("namespace:name") and ClusterRoles bound to the requesting user;
	// only needed when some rule matches on roles (see NeedsRoles).
	Roles        []string
	ClusterRoles []string
	Params       ParamSource
	// Authorizer answers the CEL `authorizer` variable; nil says no opinion.
	Authorizer authorizer.UnconditionalAuthorizer
	// ResourceKind is the kind of the request's resource without its
	// subresource (Pod for pods/exec, Deployment for deployments/scale):
	// Kyverno matches kinds against it. Needed only for subresource requests.
	ResourceKind *schema.GroupVersionKind
	// Policies, when set, limits evaluation to the policies it accepts (the
	// webhook evaluates, per configured webhook, the policies it serves).
	Policies func(PolicyGroup) bool
}

// PolicyGroup is what decides which configured webhook serves a policy:
// the API server applies a failure policy and a timeout per webhook.
type PolicyGroup struct {
	// Policy is the policy's key: a ClusterPolicy's name, Kind/name or
	// Kind/namespace/name for the policy model's.
	Policy         string
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds *int32
}

// Engine holds the compiled fallback rules of every policy. The zero value
// is not usable; call New.
type Engine struct {
	mu       sync.Mutex // serialises writers
	policies map[string]*compiledPolicy
	current  atomic.Pointer[snapshot]
	// enforcing says whether a webhook is actually serving this engine.
	enforcing          atomic.Bool
	listeners          []func()
	kyvernoConfig      *kyverno.Config
	enforcingListeners []func()
	// resources reads objects for Kyverno's resource library; nil: not
	// evaluated (SetResourceReader).
	resources cellib.ResourceReader
}

// New returns an engine with no rules.
func New() *Engine {
	e := &Engine{policies: map[string]*compiledPolicy{}}
	e.current.Store(&snapshot{})
	return e
}

// snapshot is an immutable, ordered view of every compiled rule.
type snapshot struct {
	policies   []*compiledPolicy
	needsRoles bool
	// kyverno is Kyverno's global configuration; nil applies none.
	kyverno *kyverno.Config
}

type compiledPolicy struct {
	name   string
	source []translate.FallbackRule
	rules  []*compiledRule
	// applyOne stops at the first rule that passed or failed (spec.applyRules: One).
	applyOne bool
	// failurePolicy and timeoutSeconds place the policy in a PolicyGroup.
	failurePolicy  admissionregistrationv1.FailurePolicyType
	timeoutSeconds *int32
	// modelSource, modelSourceRules and modelRules are set instead of
	// source and rules for a policy of the policy model.
	modelSource      model.Source
	modelSourceRules []model.Rule
	modelRules       []*compiledModelRule
}

func (p *compiledPolicy) group() PolicyGroup {
	return PolicyGroup{Policy: p.name, FailurePolicy: p.failurePolicy, TimeoutSeconds: p.timeoutSeconds}
}

func (p *compiledPolicy) size() int { return len(p.rules) + len(p.modelRules) }

type compiledRule struct {
	policy     string
	rule       *kyvernov1.Rule
	spec       *kyvernov1.Spec
	exceptions []kyvernov2.PolicyException
	program    *celeval.Program
	// notEnforced: the translation found the rule needs Kyverno's JMESPath
	// engine (FallbackRule.NotEnforced).
	notEnforced bool
	ignore      bool
	// namespace confines a namespaced Policy's rule (FallbackRule.Namespace).
	namespace string
	// hasResult, when set, evaluates the rule's condition that it has a
	// result at all (clusterpolicy.ConditionHasResult): where it is false
	// Kyverno reports nothing, as for a rule that does not match.
	hasResult *celeval.Program
	// failuresAreErrors: the rule was compiled from Kyverno's classic
	// language, where an expression that fails to evaluate is Kyverno's
	// error result (FallbackRule.FailuresAreErrors).
	failuresAreErrors bool
	// exceptionsNotOnDelete: the rule was compiled from a podSecurity
	// subrule, whose exceptions Kyverno does not look for on a DELETE
	// (FallbackRule.ExceptionsNotOnDelete).
	exceptionsNotOnDelete bool
	// exceptionConditions holds, for each exception with JMESPath
	// conditions, their compiled form (clusterpolicy.ExceptionConditions):
	// the exception applies where its match and its conditions hold.
	exceptionConditions []*celeval.Program
	// preconditions, when set, evaluates a compiled classic rule's
	// JMESPath preconditions (clusterpolicy.ConditionPreconditions) as a
	// validation: Kyverno evaluates them before the rule's exceptions.
	preconditions *celeval.Program
}

// SetFallbackRules implements controllers.FallbackSink: it compiles the
// policy's rules (unless they are unchanged) and publishes a new snapshot.
func (e *Engine) SetFallbackRules(policy string, rules []translate.FallbackRule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(rules) == 0 {
		if _, ok := e.policies[policy]; !ok {
			return
		}
		delete(e.policies, policy)
	} else {
		if old, ok := e.policies[policy]; ok && reflect.DeepEqual(old.source, rules) {
			return
		}
		e.policies[policy] = compilePolicy(policy, rules)
	}
	e.publish()
}

// Enforcing implements controllers.FallbackSink.
func (e *Engine) Enforcing() bool { return e.enforcing.Load() }

// SetEnforcing records whether a webhook serves the engine and the API
// server is configured to call it, and tells the OnEnforcingChange
// listeners when that changes.
func (e *Engine) SetEnforcing(on bool) {
	if e.enforcing.Swap(on) == on {
		return
	}
	e.mu.Lock()
	listeners := append([]func(){}, e.enforcingListeners...)
	e.mu.Unlock()
	for _, l := range listeners {
		l()
	}
}

// OnEnforcingChange registers a function called when Enforcing changes (the
// status of every policy with fallback rules depends on it). It must not
// block.
func (e *Engine) OnEnforcingChange(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.enforcingListeners = append(e.enforcingListeners, f)
}

// Rules returns the source rules of every policy, ordered by policy name.
func (e *Engine) Rules() []translate.FallbackRule {
	var out []translate.FallbackRule
	for _, p := range e.current.Load().policies {
		out = append(out, p.source...)
	}
	return out
}

// RulesOf returns the fallback rules SetFallbackRules set for the policy,
// without copying every policy's (Rules): a reconcile reads its own.
func (e *Engine) RulesOf(policy string) []translate.FallbackRule {
	for _, p := range e.current.Load().policies {
		if p.name == policy {
			return p.source
		}
	}
	return nil
}

// SetKyvernoConfig sets Kyverno's global configuration, which the engine
// applies before any rule as Kyverno's admission controller does: requests
// from excluded users and groups, and requests a resource filter names,
// are not evaluated. Nil applies none (as `kyverno test`).
func (e *Engine) SetKyvernoConfig(cfg *kyverno.Config) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.kyvernoConfig
	if (old == nil && cfg == nil) || (old != nil && cfg != nil && old.Equal(*cfg)) {
		return
	}
	e.kyvernoConfig = cfg
	e.publish()
}

// KyvernoConfig returns the configuration SetKyvernoConfig set.
func (e *Engine) KyvernoConfig() *kyverno.Config { return e.current.Load().kyverno }

// NeedsRoles reports whether some rule matches on roles or clusterRoles, so
// callers resolve the user's RBAC roles only when they matter.
func (e *Engine) NeedsRoles() bool { return e.current.Load().needsRoles }

func (e *Engine) publish() {
	names := make([]string, 0, len(e.policies))
	for n := range e.policies {
		names = append(names, n)
	}
	sort.Strings(names)
	s := &snapshot{policies: make([]*compiledPolicy, 0, len(names)), kyverno: e.kyvernoConfig}
	s.needsRoles = e.kyvernoConfig != nil && e.kyvernoConfig.NeedsRoles()
	for _, n := range names {
		p := e.policies[n]
		s.policies = append(s.policies, p)
		for _, r := range p.rules {
			s.needsRoles = s.needsRoles || usesRoles(r.rule)
		}
	}
	e.current.Store(s)
	for _, l := range e.listeners {
		l()
	}
}

// OnChange registers a function called after every change of the rule set.
// It runs with the engine's write lock held, so it must not block or call
// back into SetFallbackRules; signalling a channel is the intended use.
func (e *Engine) OnChange(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.listeners = append(e.listeners, f)
}

func compilePolicy(name string, rules []translate.FallbackRule) *compiledPolicy {
	p := &compiledPolicy{name: name, source: rules}
	for i := range rules {
		fr := &rules[i]
		p.applyOne = p.applyOne || (fr.Spec.ApplyRules != nil && *fr.Spec.ApplyRules == "One")
		if i == 0 {
			p.failurePolicy = admissionregistrationv1.Fail
			if fr.Spec.FailurePolicy != nil && *fr.Spec.FailurePolicy == kyvernov1.Ignore {
				p.failurePolicy = admissionregistrationv1.Ignore
			}
			p.timeoutSeconds = fr.Spec.WebhookTimeoutSeconds
		}
		for _, r := range append([]kyvernov1.Rule{fr.Rule}, fr.AdditionalRules...) {
			p.rules = append(p.rules, compileRule(name, r, fr))
		}
	}
	return p
}

func compileRule(policy string, rule kyvernov1.Rule, fr *translate.FallbackRule) *compiledRule {
	spec := &fr.Spec
	c := &compiledRule{
		policy: policy, rule: &rule, spec: spec, exceptions: fr.Exceptions,
		ignore:    spec.FailurePolicy != nil && *spec.FailurePolicy == kyvernov1.Ignore,
		namespace: fr.Namespace,
	}
	for _, name := range fr.FailuresAreErrors {
		c.failuresAreErrors = c.failuresAreErrors || name == rule.Name
	}
	c.exceptionsNotOnDelete = slices.Contains(fr.ExceptionsNotOnDelete, rule.Name)
	// The translation decided whether the engine can evaluate the rule.
	if c.notEnforced = fr.NotEnforced != ""; c.notEnforced || !rule.HasValidateCEL() {
		return c
	}
	// In Kyverno's CEL environment: an expression Kyverno cannot compile
	// fails there, and must here.
	env := celeval.Environment{Version: vap.KyvernoCELVersion}
	if c.failuresAreErrors && slices.Contains(cellib.Used(vap.SpecExpressions(ruleSpec(&rule, spec))...), "jmespath") {
		// A classic rule calling Kyverno's JMESPath functions, which the
		// classic compiler leaves to kyvap's engine (kyverno/cellib).
		env.Extensions, env.ExtensionsKey = cellib.EnvOptions([]string{"jmespath"}), "jmespath"
	}
	for _, mc := range rule.CELPreconditions {
		if mc.Name == clusterpolicy.ConditionPreconditions && len(c.exceptions) > 0 {
			c.preconditions = celeval.CompileIn(env, policy+"/"+rule.Name+"/preconditions", &admissionregistrationv1.ValidatingAdmissionPolicySpec{
				Validations: []admissionregistrationv1.Validation{{Expression: mc.Expression}},
			})
		}
	}
	c.exceptionConditions = make([]*celeval.Program, len(c.exceptions))
	for i := range c.exceptions {
		ex := &c.exceptions[i]
		if !ex.Spec.HasConditions() {
			continue
		}
		// The translation checked that they compile (NotEnforced).
		conditions, err := clusterpolicy.ExceptionConditions(ex)
		if err != nil {
			conditions = "false"
		}
		c.exceptionConditions[i] = celeval.CompileIn(env, policy+"/"+rule.Name+"/exception-"+strconv.Itoa(i), &admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "exception", Expression: conditions}},
			Validations:     []admissionregistrationv1.Validation{{Expression: "true"}},
		})
	}
	for i, mc := range rule.CELPreconditions {
		if !clusterpolicy.IsHasResultCondition(mc.Name) {
			continue
		}
		c.hasResult = celeval.CompileIn(env, policy+"/"+rule.Name+"/has-result", &admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConditions: []admissionregistrationv1.MatchCondition{mc},
			Validations:     []admissionregistrationv1.Validation{{Expression: "true"}},
		})
		rule.CELPreconditions = append(append([]admissionregistrationv1.MatchCondition(nil), rule.CELPreconditions[:i]...), rule.CELPreconditions[i+1:]...)
		c.rule = &rule
		break
	}
	c.program = celeval.CompileIn(env, policy+"/"+rule.Name, ruleSpec(&rule, spec))
	return c
}

// ruleSpec is the CEL part of a Kyverno rule as the VAP spec the API server
// would evaluate: Kyverno's CEL handler builds the same validator.
func ruleSpec(rule *kyvernov1.Rule, spec *kyvernov1.Spec) *admissionregistrationv1.ValidatingAdmissionPolicySpec {
	cel := rule.Validation.CEL
	validations := make([]admissionregistrationv1.Validation, len(cel.Expressions))
	for i, v := range cel.Expressions {
		validations[i] = *v.DeepCopy()
		if validations[i].Message == "" {
			validations[i].Message = rule.Validation.Message
		}
	}
	failurePolicy := admissionregistrationv1.Fail
	if spec.FailurePolicy != nil && *spec.FailurePolicy == kyvernov1.Ignore {
		failurePolicy = admissionregistrationv1.Ignore
	}
	out := &admissionregistrationv1.ValidatingAdmissionPolicySpec{
		ParamKind:        cel.ParamKind,
		MatchConditions:  append([]admissionregistrationv1.MatchCondition(nil), rule.CELPreconditions...),
		Validations:      validations,
		AuditAnnotations: append([]admissionregistrationv1.AuditAnnotation(nil), cel.AuditAnnotations...),
		Variables:        append([]admissionregistrationv1.Variable(nil), cel.Variables...),
		FailurePolicy:    &failurePolicy,
	}
	// Kyverno compiles with its orValue compatibility macro; the same
	// rewrite as the VAPs' gives its meaning (one home: kyverno.RewriteOrValue).
	kyverno.RewriteOrValueInSpec(out, nil)
	return out
}

func usesRoles(rule *kyvernov1.Rule) bool {
	blocks := []*kyvernov1.MatchResources{&rule.MatchResources, rule.ExcludeResources}
	for _, b := range blocks {
		if b == nil {
			continue
		}
		if len(b.Roles) > 0 || len(b.ClusterRoles) > 0 {
			return true
		}
		for _, f := range append(append(kyvernov1.ResourceFilters{}, b.Any...), b.All...) {
			if len(f.Roles) > 0 || len(f.ClusterRoles) > 0 {
				return true
			}
		}
	}
	return false
}

// OutOfTimeError is Evaluate's error when ctx ended before every rule was
// evaluated: the outcomes returned with it are those of the rules that ran
// to their end, and the request has no verdict from the others.
type OutOfTimeError struct {
	// Evaluated is the number of rules that ran to their end (matched or
	// not); Rules is the number of rules the request was to be evaluated
	// against (those of the selected policies).
	Evaluated, Rules int
	// Cause is why the context ended (context.Cause).
	Cause error
}

func (e *OutOfTimeError) Error() string {
	return fmt.Sprintf("ran out of time after %d of %d rules: %v", e.Evaluated, e.Rules, e.Cause)
}

// Unwrap lets errors.Is see the context's error.
func (e *OutOfTimeError) Unwrap() error { return e.Cause }

// Evaluate runs every rule that matches the request and returns their
// outcomes in policy then rule order. The error is for a request the engine
// cannot read at all, or an *OutOfTimeError when ctx ends first: rules are
// evaluated one after another, ctx is checked between them, and CEL
// evaluation itself stops when ctx ends (comprehensions check it every
// 100 iterations). Per-rule problems are Error outcomes.
func (e *Engine) Evaluate(ctx context.Context, req Request) ([]Outcome, error) {
	if req.Admission == nil {
		return nil, errors.New("no admission request")
	}
	snap := e.current.Load()
	if len(snap.policies) == 0 {
		return nil, nil
	}
	if skippedByKyvernoConfig(snap.kyverno, &req) {
		return nil, nil
	}
	attrs, err := celeval.Attributes(celRequest(req.Admission))
	if err != nil {
		return nil, err
	}
	mreq, err := matchRequest(&req, attrs)
	if err != nil {
		return nil, err
	}
	var namespace *corev1.Namespace
	if req.Admission.Namespace != "" && !isNamespaceKind(req.Admission) {
		namespace = req.Namespace
		if namespace == nil {
			// Kyverno's engine, too, evaluates with a namespace that has only its name when it cannot read it.
			namespace = &corev1.Namespace{}
			namespace.Name = req.Admission.Namespace
		}
	}
	if req.Authorizer != nil {
		// One request, one answer per check: as in the API server.
		req.Authorizer = admissionauthorizer.NewCachingAuthorizer(req.Authorizer)
	}
	selected := make([]*compiledPolicy, 0, len(snap.policies))
	total := 0
	for _, p := range snap.policies {
		if req.Policies != nil && !req.Policies(p.group()) {
			continue
		}
		selected = append(selected, p)
		total += p.size()
	}
	var out []Outcome
	var modelAttrs *admission.VersionedAttributes
	evaluated := 0
	outOfTime := func() error {
		return &OutOfTimeError{Evaluated: evaluated, Rules: total, Cause: context.Cause(ctx)}
	}
	for _, p := range selected {
		for i, r := range p.rules {
			if ctx.Err() != nil {
				return out, outOfTime()
			}
			o, ok, interrupted := r.evaluate(ctx, &req, mreq, attrs, namespace)
			if interrupted {
				// Cut short: the outcome is the interruption's, not the rule's.
				return out, outOfTime()
			}
			evaluated++
			if !ok {
				continue
			}
			out = append(out, o)
			if p.applyOne && (o.Result == Pass || o.Result == Fail) {
				// The policy's other rules are decided: not evaluated.
				evaluated += len(p.rules) - i - 1
				break
			}
		}
		for _, r := range p.modelRules {
			if ctx.Err() != nil {
				return out, outOfTime()
			}
			if modelAttrs == nil {
				if modelAttrs, err = modelAttributes(req.Admission, attrs); err != nil {
					return out, err
				}
			}
			o, ok, interrupted := r.evaluate(ctx, &req, modelAttrs, namespace)
			if interrupted {
				return out, outOfTime()
			}
			evaluated++
			if ok {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// modelAttributes are the request's attributes as Kyverno's
// ValidatingPolicy engine presents them: unlike its ClusterPolicy handler
// (celRequest), a Namespace's request keeps its namespace.
func modelAttributes(req *admissionv1.AdmissionRequest, attrs *admission.VersionedAttributes) (*admission.VersionedAttributes, error) {
	if celRequest(req) == req {
		return attrs, nil
	}
	return celeval.Attributes(req)
}

// celRequest is the request as Kyverno's CEL handler presents it: a
// Namespace object's request has no namespace there (the API server sets
// it to the Namespace's own name).
func celRequest(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionRequest {
	if !isNamespaceKind(req) || req.Namespace == "" {
		return req
	}
	c := *req
	c.Namespace = ""
	return &c
}

func isNamespaceKind(req *admissionv1.AdmissionRequest) bool {
	return req.Kind.Group == "" && req.Kind.Version == "v1" && req.Kind.Kind == "Namespace"
}

// matchRequest is the request as the matcher sees it; it shares the objects
// decoded once for CEL (neither side mutates them).
func matchRequest(req *Request, attrs *admission.VersionedAttributes) (*match.Request, error) {
	a := req.Admission
	m := &match.Request{
		Operation:    string(a.Operation),
		Kind:         schema.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind},
		Resource:     schema.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource},
		SubResource:  a.SubResource,
		Namespace:    a.Namespace,
		Name:         a.Name,
		UserInfo:     a.UserInfo,
		Roles:        req.Roles,
		ClusterRoles: req.ClusterRoles,
	}
	if a.SubResource != "" && req.ResourceKind != nil {
		m.Kind = *req.ResourceKind
	}
	if u, ok := attrs.GetObject().(*unstructured.Unstructured); ok && u != nil {
		m.Object = u.Object
	}
	if u, ok := attrs.GetOldObject().(*unstructured.Unstructured); ok && u != nil {
		m.OldObject = u.Object
	}
	if req.Namespace != nil {
		m.NamespaceLabels = req.Namespace.Labels
	}
	return m, nil
}

// evaluate returns the rule's outcome, whether the rule matched at all, and
// whether ctx ended while the rule ran in a way that may have changed its
// outcome (the outcome is then meaningless).
func (r *compiledRule) evaluate(ctx context.Context, req *Request, mreq *match.Request, attrs *admission.VersionedAttributes, namespace *corev1.Namespace) (o Outcome, matchedRule, interrupted bool) {
	o = Outcome{Policy: r.policy, Rule: r.rule.Name, Namespace: r.namespace}
	if r.namespace != "" && !inNamespace(r.namespace, mreq) {
		return o, false, false
	}
	matched, err := match.Rule(r.rule, mreq)
	if err != nil {
		o.Action = action(r.spec, r.rule, mreq)
		return r.errorOutcome(o, fmt.Sprintf("matching: %v", err)), true, false
	}
	if !matched || r.notEnforced {
		// A rule the engine cannot evaluate is not enforced by kyvap (its
		// policy's status says so); guessing would give wrong verdicts.
		return o, false, false
	}
	o.Action = action(r.spec, r.rule, mreq)
	if r.preconditions != nil {
		// Kyverno's engine checks a rule's preconditions before its
		// exceptions (invokeRuleHandler): failing ones are the rule's
		// error, false ones its skip, exempted or not.
		resource := schema.GroupVersionResource{Group: req.Admission.Resource.Group, Version: req.Admission.Resource.Version, Resource: req.Admission.Resource.Resource}
		res := r.preconditions.Validate(ctx, celeval.Input{Attributes: attrs, MatchedResource: resource, Namespace: namespace, Authorizer: req.Authorizer})
		if res.Interrupted {
			return o, true, true
		}
		for _, d := range res.Decisions {
			switch {
			case d.Evaluation == celeval.EvalError:
				return r.errorOutcome(o, "failed to evaluate preconditions: "+d.Message), true, false
			case d.Action == celeval.ActionDeny:
				o.Result, o.Message = Skip, "preconditions not met"
				return o, true, false
			}
		}
	}
	for i := range r.exceptions {
		if r.exceptionsNotOnDelete && mreq.Operation == string(admissionv1.Delete) {
			break
		}
		ex := &r.exceptions[i]
		exempt, err := match.Exception(ex, r.policy, r.rule.Name, mreq)
		if err != nil {
			return r.errorOutcome(o, fmt.Sprintf("PolicyException %s/%s: %v", ex.Namespace, ex.Name, err)), true, false
		}
		if exempt && i < len(r.exceptionConditions) && r.exceptionConditions[i] != nil {
			resource := schema.GroupVersionResource{Group: req.Admission.Resource.Group, Version: req.Admission.Resource.Version, Resource: req.Admission.Resource.Resource}
			res := r.exceptionConditions[i].Validate(ctx, celeval.Input{Attributes: attrs, MatchedResource: resource, Namespace: namespace, Authorizer: req.Authorizer})
			if res.Interrupted {
				return o, true, true
			}
			exempt = !res.Excluded
		}
		if exempt {
			o.Result, o.Message = Skip, fmt.Sprintf("exempted by PolicyException %s/%s", ex.Namespace, ex.Name)
			return o, true, false
		}
	}
	if r.hasResult != nil {
		resource := schema.GroupVersionResource{Group: req.Admission.Resource.Group, Version: req.Admission.Resource.Version, Resource: req.Admission.Resource.Resource}
		res := r.hasResult.Validate(ctx, celeval.Input{Attributes: attrs, MatchedResource: resource, Namespace: namespace, Authorizer: req.Authorizer})
		if res.Interrupted {
			return o, true, true
		}
		if res.Excluded {
			// A foreach none of whose elements applied: Kyverno reports
			// nothing for the rule.
			return o, false, false
		}
	}
	params := []runtime.Object{nil}
	cel := r.rule.Validation.CEL
	if cel.ParamKind != nil {
		found, err := r.params(ctx, req, attrs.GetNamespace())
		if err != nil {
			// A look-up the deadline cut is no verdict on the request.
			return r.errorOutcome(o, err.Error()), true, ctx.Err() != nil
		}
		if len(found) == 0 {
			// Kyverno's rule: a parameter named but missing is an error
			// whatever the action; a selector that selects nothing is one
			// only with an explicit Deny (translate writes the same actions
			// on the binding).
			ref := cel.ParamRef
			if ref != nil && (ref.Name != "" || ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction) {
				return r.errorOutcome(o, "no params found for policy binding with `Deny` parameterNotFoundAction"), true, false
			}
			o.Result = Pass
			return o, true, false
		}
		params = found
	}
	resource := schema.GroupVersionResource{Group: req.Admission.Resource.Group, Version: req.Admission.Resource.Version, Resource: req.Admission.Resource.Resource}
	o.Result = Pass
	// Kyverno's CEL handler (validate_cel.go) evaluates the parameters in
	// order and stops at the first one whose celPreconditions are false
	// (the rule is skipped, whatever the others say) or that is denied.
params:
	for _, p := range params {
		res := r.program.Validate(ctx, celeval.Input{Attributes: attrs, MatchedResource: resource, Params: p, Namespace: namespace, Authorizer: req.Authorizer})
		if res.Interrupted {
			return o, true, true
		}
		if res.Excluded {
			o.Result, o.Message, o.Messages, o.Blocking, o.Reason = Skip, "celPreconditions not met", nil, false, ""
			return o, true, false
		}
		for _, d := range res.Decisions {
			switch {
			case d.Evaluation == celeval.EvalError && d.Action == celeval.ActionDeny && r.failuresAreErrors:
				// A classic rule's variable failed: Kyverno's result is
				// error, which blocks under Enforce as the denial does.
				o.Result, o.Blocking = Error, true
				o.addViolation(d)
			case d.Evaluation == celeval.EvalError && d.Action == celeval.ActionDeny:
				// failurePolicy Fail: the error counts as a violation, which
				// Kyverno reports as a failure too.
				o.Result, o.Blocking = Fail, true
				o.addViolation(d)
			case d.Evaluation == celeval.EvalError:
				// failurePolicy Ignore: admitted, as by the VAP.
				if o.Result != Fail {
					o.Result, o.Message = Error, d.Message
				}
			case d.Action == celeval.ActionDeny:
				o.Result, o.Blocking = Fail, true
				o.addViolation(d)
			}
		}
		for _, a := range res.AuditAnnotations {
			if a.Action != celeval.AuditAnnotationActionPublish {
				continue
			}
			if o.AuditAnnotations == nil {
				o.AuditAnnotations = map[string]string{}
			}
			if prev, ok := o.AuditAnnotations[a.Key]; ok {
				o.AuditAnnotations[a.Key] = prev + ", " + a.Value
			} else {
				o.AuditAnnotations[a.Key] = a.Value
			}
		}
		if o.Result == Fail {
			break params
		}
	}
	if len(o.Messages) > 0 {
		o.Message = o.Messages[0]
	}
	return o, true, false
}

// inNamespace is Kyverno's check of a namespaced Policy
// (pkg/engine/internal/match.go checkNamespacedPolicy): the request's
// objects all live in the policy's namespace (a cluster-scoped object,
// whose namespace is empty, never does).
func inNamespace(namespace string, mreq *match.Request) bool {
	for _, obj := range []map[string]any{mreq.Object, mreq.OldObject} {
		if obj == nil {
			continue
		}
		ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace")
		if ns != namespace {
			return false
		}
	}
	return mreq.Object != nil || mreq.OldObject != nil
}

func (o *Outcome) addViolation(d celeval.Decision) {
	if len(o.Messages) == 0 {
		o.Reason = d.Reason
	}
	o.Messages = append(o.Messages, d.Message)
}

func (r *compiledRule) errorOutcome(o Outcome, message string) Outcome {
	o.Result, o.Message, o.Messages = Error, message, []string{message}
	o.Blocking = !r.ignore
	return o
}

func (r *compiledRule) params(ctx context.Context, req *Request, namespace string) ([]runtime.Object, error) {
	if req.Params == nil {
		return nil, errors.New("no parameter source configured")
	}
	return req.Params.Params(ctx, r.rule.Validation.CEL.ParamKind, r.rule.Validation.CEL.ParamRef, namespace)
}

func action(spec *kyvernov1.Spec, rule *kyvernov1.Rule, mreq *match.Request) kyvernov1.ValidationFailureAction {
	if kyvernov1.ValidationFailureAction(match.FailureAction(spec, rule, mreq)).IsEnforce() {
		return kyvernov1.Enforce
	}
	return kyvernov1.Audit
}
