// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/validatingpolicy"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/policytest/vapsim"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/vap"
)

// ValidatingPolicies (policies.kyverno.io) run on the VAP path only: each
// is lowered to the policy model (validatingpolicy.Lower, with the
// suite's CEL PolicyExceptions) and translated (translate.TranslatePolicy)
// as the operator does; the VAPs are evaluated by the simulator. Kyverno's
// CLI (processor/policy_processor.go, pkg/cel/policies/vpol/engine) differs
// from an API server in ways the mapping below reproduces:
//
//   - every rule is evaluated, admission disabled or not (the CLI passes no
//     admission predicate): a background-only rule is translated with
//     admission on and evaluated in-process, though no VAP is deployed;
//   - the PolicyExceptions are evaluated before the matchConditions, and an
//     exempted request is skip (pass when the exception's reportResult says
//     so); a false matchCondition is skip;
//   - the first validation that does not hold decides: false is fail, a CEL
//     error is error (whatever the failurePolicy), whatever the
//     validationActions (the CLI compares results without audit-warn);
//   - a rule's pod-controller variants are compiled policies of the same
//     name, reported under the policy name with no rule name, so a result's
//     `rule` is ignored (commands/test/command.go isRulelessPolicyKind);
//   - a variant that does not match reports nothing when its
//     matchConstraints are "plain" (one resource rule, no selector, no
//     exclusion, no names: processor hasSelector), an empty response
//     otherwise; a resource no variant reports on is then "Not found" (a
//     failure) or "excluded" (a pass) in commands/test/output.go.
//
// The fallback engine evaluates the same rules (forEvaluation) with
// Kyverno's ValidatingPolicy engine semantics (engine.SetModelRules): its
// column is checked too, except for rules it cannot evaluate
// (translate.ModelRuleNotEnforced), whose column is n/a.

// vpolState is one ValidatingPolicy or NamespacedValidatingPolicy, lowered
// and translated.
type vpolState struct {
	vp *ValidatingPolicy
	// lowered is the policy as written; plan its translation as deployed.
	lowered model.Policy
	plan    translate.Plan
	// rules indexes plan.Rules, modelRules lowered.Rules, by rule ID.
	rules      map[string]*translate.RuleResult
	modelRules map[string]*model.Rule
}

// label names the policy in messages: Kind/name or Kind/namespace/name.
func (st *vpolState) label() string { return st.lowered.Source.String() }

// vpolRuleRef is a generated VAP's policy and rule.
type vpolRuleRef struct {
	st   *vpolState
	rule string
}

// vpolPaths evaluates the suite's ValidatingPolicies.
type vpolPaths struct {
	r *runner
	// full has the VAPs as evaluated (background-only rules included);
	// fullProbe its probes (do the rules apply?); condProbe the rules
	// without their matchConditions (exceptions kept); bareProbe the rules'
	// matchConstraints alone (and the namespace confinement), for every
	// rule, even those that are no VAP (Kyverno libraries); confinedProbe
	// the same confined to a namespaced policy's namespace, as deployed.
	full, fullProbe, condProbe, bareProbe, confinedProbe *vapsim.Simulator
	vaps                                                 map[string]vpolRuleRef
	notes                                                []string
	// exceptionProbe has, for every full PolicyException of a rule, the
	// rule's bare probe with the exception's matchConditions added:
	// whether each exception matches a request, evaluated as the API
	// server evaluates the VAP's exception condition. exceptionVAPs maps
	// its VAPs to their rule and exception.
	exceptionProbe *vapsim.Simulator
	exceptionVAPs  map[string]exceptionRef
}

// exceptionRef is the rule and the exception (its index in the rule's
// Exceptions) an exception probe VAP stands for.
type exceptionRef struct {
	st        *vpolState
	rule      string
	exception int
}

// vpolOutcome is the VAP path's result for one rule of a ValidatingPolicy.
type vpolOutcome struct {
	result PathResult
	// skipped says why kyvap cannot evaluate the rule (it matched the
	// resource, but is not a VAP kyvap can evaluate).
	skipped string
}

// translateValidating lowers and translates the suite's ValidatingPolicies.
func (r *runner) translateValidating(report *Report) {
	now := time.Now()
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true, CompatibilityVersion: r.opts.CompatibilityVersion}
	for i := range r.suite.ValidatingPolicies {
		vp := &r.suite.ValidatingPolicies[i]
		st := &vpolState{vp: vp, rules: map[string]*translate.RuleResult{}, modelRules: map[string]*model.Rule{}}
		if vp.Namespaced != nil {
			st.lowered = validatingpolicy.LowerNamespaced(vp.Namespaced, r.suite.CELExceptions, now)
		} else {
			st.lowered = validatingpolicy.Lower(vp.Cluster, r.suite.CELExceptions, now)
		}
		st.plan = translate.TranslatePolicy(st.lowered, r.resolver, opts)
		for j := range st.lowered.Rules {
			st.modelRules[st.lowered.Rules[j].ID] = &st.lowered.Rules[j]
		}
		for j := range st.plan.Rules {
			rr := &st.plan.Rules[j]
			st.rules[rr.Rule] = rr
			report.Rules = append(report.Rules, RuleVerdict{
				Policy: st.label(), Rule: rr.Rule, Verdict: string(rr.Verdict), Reason: string(rr.Reason),
				VAPs: rr.ValidatingAdmissionPolicies, Message: rr.Message,
			})
		}
		for _, w := range st.plan.Warnings {
			r.warnings = append(r.warnings, fmt.Sprintf("%s: %s", st.label(), w))
		}
		r.vpols = append(r.vpols, st)
	}
}

// vpolsNamed are the ValidatingPolicies a result's policy names: Kyverno
// compares the last segment of "namespace/name" with the policy's name.
func (r *runner) vpolsNamed(name string) []*vpolState {
	var out []*vpolState
	for _, st := range r.vpols {
		if st.vp.Name() == name {
			out = append(out, st)
		}
	}
	return out
}

// evaluable reports whether the VAP path evaluates the rule: translated
// into a VAP, or not applied at admission only (background-only), in which
// case it is translated with admission on.
func evaluable(rr *translate.RuleResult) bool {
	switch {
	case rr == nil:
		return false
	case rr.Verdict == translate.VerdictTranslated:
		return true
	case rr.Verdict == translate.VerdictNotHandled && rr.Reason == model.ReasonAdmissionDisabled:
		return true
	}
	return false
}

// vpolSkipReason says why kyvap does not evaluate a rule, or "".
func vpolSkipReason(st *vpolState, id string) string {
	rr := st.rules[id]
	if evaluable(rr) {
		return ""
	}
	if rr == nil {
		return fmt.Sprintf("%s: rule %s has no translation", st.label(), id)
	}
	what := "no VAP"
	if rr.Verdict == translate.VerdictInvalid {
		what = "invalid: Kyverno refuses the policy"
	}
	if id != model.RuleIDPolicy {
		what += " (" + id + ")"
	}
	return fmt.Sprintf("%s: %s; %s", rr.Reason, rr.Message, what)
}

// forEvaluation is the policy as the VAP path evaluates it, as Kyverno's
// CLI does: every rule at admission (the CLI evaluates background-only
// rules too) and in every namespace (the CLI applies a
// NamespacedValidatingPolicy to resources of any namespace: it passes the
// vpol engine no namespace predicate, processor/policy_processor.go, where
// Kyverno's webhook selects namespaced policies by the request's
// namespace, pkg/cel/policies/vpol/engine/predicate.go).
func forEvaluation(p model.Policy) model.Policy {
	out := p
	out.Rules = make([]model.Rule, len(p.Rules))
	copy(out.Rules, p.Rules)
	for i := range out.Rules {
		if out.Rules[i].Mode != model.ModeJSON {
			out.Rules[i].Admission = true
		}
		out.Rules[i].Namespace = ""
	}
	return out
}

// withoutConditions drops the rules' matchConditions.
func withoutConditions(p model.Policy) model.Policy {
	out := forEvaluation(p)
	for i := range out.Rules {
		out.Rules[i].MatchConditions = nil
	}
	return out
}

// constraintsOnly keeps the rules' matchConstraints alone (with the
// namespace confinement when confined), with a validation that always
// holds: a rule that applies matches the request.
func constraintsOnly(p model.Policy, confined bool) model.Policy {
	out := withoutConditions(p)
	for i := range out.Rules {
		rl := &out.Rules[i]
		if confined {
			rl.Namespace = p.Rules[i].Namespace
		}
		rl.Exceptions, rl.Variables, rl.AuditAnnotations, rl.Libraries = nil, nil, nil, nil
		rl.Validations = []admissionregistrationv1.Validation{{Expression: "true"}}
		rl.Unsupported = ""
	}
	return out
}

// newVpolPaths builds the simulators of the suite's ValidatingPolicies.
func newVpolPaths(r *runner) *vpolPaths {
	p := &vpolPaths{r: r, vaps: map[string]vpolRuleRef{}}
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true, CompatibilityVersion: r.opts.CompatibilityVersion}
	type set struct {
		vaps     []admissionregistrationv1.ValidatingAdmissionPolicy
		bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	}
	var full, cond, bare, confined set
	add := func(s *set, st *vpolState, plan translate.Plan, only func(string) bool) {
		keep := map[string]bool{}
		for _, v := range plan.ValidatingAdmissionPolicies {
			id := v.Annotations[translate.AnnotationRule]
			if !only(id) {
				continue
			}
			keep[v.Name] = true
			s.vaps = append(s.vaps, v)
			p.vaps[v.Name] = vpolRuleRef{st: st, rule: id}
		}
		for _, b := range plan.Bindings {
			if keep[b.Spec.PolicyName] {
				s.bindings = append(s.bindings, b)
			}
		}
	}
	if reader, err := r.contextReader(); err != nil {
		p.notes = append(p.notes, "context file: "+err.Error()+"; Kyverno's resource library is not evaluated")
	} else {
		r.paths.engine.SetResourceReader(reader)
		r.engineCaps.Resources = true
	}
	for _, st := range r.vpols {
		r.paths.engine.SetModelRules(st.lowered.Source, forEvaluation(st.lowered).Rules)
		isEvaluable := func(id string) bool { return evaluable(st.rules[id]) }
		add(&full, st, translate.TranslatePolicy(forEvaluation(st.lowered), r.resolver, opts), isEvaluable)
		add(&cond, st, translate.TranslatePolicy(withoutConditions(st.lowered), r.resolver, opts), isEvaluable)
		all := func(string) bool { return true }
		add(&bare, st, translate.TranslatePolicy(constraintsOnly(st.lowered, false), r.resolver, opts), all)
		if st.vp.Namespaced != nil {
			add(&confined, st, translate.TranslatePolicy(constraintsOnly(st.lowered, true), r.resolver, opts), all)
		}
	}
	p.exceptionVAPs = map[string]exceptionRef{}
	var exceptions set
	for i := range bare.vaps {
		v := &bare.vaps[i]
		ref := p.vaps[v.Name]
		rule := ref.st.modelRules[ref.rule]
		if rule == nil {
			continue
		}
		for j, ex := range rule.Exceptions {
			if !ex.Full() {
				continue
			}
			probe := v.DeepCopy()
			probe.Name = fmt.Sprintf("%s.exception-%d", v.Name, j)
			for _, c := range ex.MatchConditions {
				c.Name = "exception-" + c.Name
				probe.Spec.MatchConditions = append(probe.Spec.MatchConditions, c)
			}
			exceptions.vaps = append(exceptions.vaps, *probe)
			p.exceptionVAPs[probe.Name] = exceptionRef{st: ref.st, rule: ref.rule, exception: j}
			for _, b := range bare.bindings {
				if b.Spec.PolicyName == v.Name {
					binding := b.DeepCopy()
					binding.Name = probe.Name + strings.TrimPrefix(b.Name, v.Name)
					binding.Spec.PolicyName = probe.Name
					exceptions.bindings = append(exceptions.bindings, *binding)
				}
			}
		}
	}
	p.exceptionProbe = vapsim.New(withoutParams(probes(exceptions.vaps), exceptions.bindings))
	p.full = vapsim.New(full.vaps, full.bindings)
	p.fullProbe = vapsim.New(withoutParams(probes(full.vaps), full.bindings))
	p.condProbe = vapsim.New(withoutParams(probes(cond.vaps), cond.bindings))
	p.bareProbe = vapsim.New(withoutParams(probes(bare.vaps), bare.bindings))
	p.confinedProbe = vapsim.New(withoutParams(probes(confined.vaps), confined.bindings))
	for _, n := range p.full.Notes() {
		if !strings.Contains(n, "matchPolicy Equivalent") {
			p.notes = append(p.notes, "VAP simulation: "+n)
		}
	}
	return p
}

// applying runs a probe and returns the rules that apply, per policy.
func (p *vpolPaths) applying(ctx context.Context, probe *vapsim.Simulator, req *admissionv1.AdmissionRequest) (map[*vpolState]map[string]bool, error) {
	vaps, err := p.r.paths.applying(ctx, probe, req)
	if err != nil {
		return nil, err
	}
	out := map[*vpolState]map[string]bool{}
	for name := range vaps {
		ref, ok := p.vaps[name]
		if !ok {
			continue
		}
		if out[ref.st] == nil {
			out[ref.st] = map[string]bool{}
		}
		out[ref.st][ref.rule] = true
	}
	return out, nil
}

// evaluate is the VAP path's outcome for every rule of every
// ValidatingPolicy the request concerns; a rule absent did not match.
func (p *vpolPaths) evaluate(ctx context.Context, req *admissionv1.AdmissionRequest) (map[*vpolState]map[string]vpolOutcome, error) {
	// A ValidatingPolicy's parameter is an object its resource.Get reads
	// (translate/libforms), which Kyverno's CLI reads from the context
	// file.
	resp, err := p.r.paths.simulateWith(ctx, p.full, req, p.r.suite.ContextResources)
	if err != nil {
		return nil, err
	}
	for _, n := range resp.Notes {
		if !strings.Contains(n, "not among the known namespaces") && !strings.Contains(n, "matchPolicy Equivalent") {
			p.r.addWarning("VAP simulation: " + n)
		}
	}
	applies, err := p.applying(ctx, p.fullProbe, req)
	if err != nil {
		return nil, err
	}
	cond, err := p.applying(ctx, p.condProbe, req)
	if err != nil {
		return nil, err
	}
	bare, err := p.applying(ctx, p.bareProbe, req)
	if err != nil {
		return nil, err
	}
	confinedApplies, err := p.applying(ctx, p.confinedProbe, req)
	if err != nil {
		return nil, err
	}
	out := map[*vpolState]map[string]vpolOutcome{}
	var exempting map[*vpolState]map[string][]int // computed once, when needed
	set := func(st *vpolState, id string, o vpolOutcome) {
		if out[st] == nil {
			out[st] = map[string]vpolOutcome{}
		}
		out[st][id] = o
	}
	for _, pr := range resp.Policies {
		ref, ok := p.vaps[pr.Policy]
		if !ok || !applies[ref.st][ref.rule] {
			continue
		}
		res, evaluated := vpolResult(pr)
		if !evaluated {
			continue
		}
		set(ref.st, ref.rule, vpolOutcome{result: res})
	}
	for st, rules := range bare {
		for id := range rules {
			if _, done := out[st][id]; done {
				continue
			}
			if why := vpolSkipReason(st, id); why != "" {
				set(st, id, vpolOutcome{skipped: why})
				continue
			}
			if !cond[st][id] {
				if exempting == nil {
					if exempting, err = p.exempting(ctx, req); err != nil {
						return nil, err
					}
				}
				set(st, id, vpolOutcome{result: exceptionResult(st.modelRules[id], exempting[st][id])})
				continue
			}
			set(st, id, vpolOutcome{result: PathResult{Result: Skip, Message: "matchConditions not met"}})
		}
	}
	note := func(o *vpolOutcome, n string) {
		if o.result.Message == "" {
			o.result.Message = n
		} else {
			o.result.Message += "; " + n
		}
	}
	for st, rules := range out {
		for id, o := range rules {
			if o.skipped != "" {
				continue
			}
			if rr := st.rules[id]; rr != nil && rr.Verdict == translate.VerdictNotHandled {
				note(&o, "background-only policy (evaluation.admission.enabled: false): no VAP is deployed; evaluated in-process as Kyverno's CLI does")
			}
			if p.r.suite.NamespaceMissing(req.Namespace) && readsNamespaceObject(st, id) {
				o = vpolOutcome{skipped: fmt.Sprintf("namespace %s is not among the test's context Namespaces: an API server refuses a request in a namespace that does not exist before any admission policy (NamespaceLifecycle), so the VAP, which reads namespaceObject, never judges it; Kyverno's CLI reads the namespace as null", req.Namespace)}
			}
			if st.vp.Namespaced != nil && !confinedApplies[st][id] {
				note(&o, fmt.Sprintf("outside the policy's namespace %s: Kyverno's CLI applies a NamespacedValidatingPolicy to every namespace, while at admission neither Kyverno nor kyvap's VAP (checked) applies it here", st.vp.Namespace()))
			}
			rules[id] = o
		}
	}
	return out, nil
}

// exempting returns, per policy and rule, the indexes of the rule's full
// PolicyExceptions whose matchConditions hold for the request (the
// exception probe).
func (p *vpolPaths) exempting(ctx context.Context, req *admissionv1.AdmissionRequest) (map[*vpolState]map[string][]int, error) {
	applying, err := p.r.paths.applying(ctx, p.exceptionProbe, req)
	if err != nil {
		return nil, err
	}
	out := map[*vpolState]map[string][]int{}
	for name := range applying {
		ref, ok := p.exceptionVAPs[name]
		if !ok {
			continue
		}
		if out[ref.st] == nil {
			out[ref.st] = map[string][]int{}
		}
		out[ref.st][ref.rule] = append(out[ref.st][ref.rule], ref.exception)
	}
	for _, rules := range out {
		for id := range rules {
			sort.Ints(rules[id])
		}
	}
	return out, nil
}

// exceptionResult is Kyverno's result for a request PolicyExceptions
// exempt: skip, or pass when the exception Kyverno selects says
// reportResult: pass. The first matching exception in the lowered rule's
// order decides, as in kyvap's engine (engine/model.go), so that both
// paths report the same; matching are the indexes of those whose
// conditions hold.
func exceptionResult(rule *model.Rule, matching []int) PathResult {
	if rule == nil || len(matching) == 0 {
		return PathResult{Result: Skip, Message: "a PolicyException applies"}
	}
	keys := make([]string, 0, len(matching))
	for _, i := range matching {
		keys = append(keys, rule.Exceptions[i].Key())
	}
	msg := "exempted by PolicyException " + strings.Join(keys, ", ")
	if rule.Exceptions[matching[0]].ReportResult == "pass" {
		return PathResult{Result: Pass, Message: msg + ": reportResult pass"}
	}
	return PathResult{Result: Skip, Message: msg}
}

// withoutParams are the probes without parameters: a ValidatingPolicy's
// VAP has one only where translate/libforms wrote a resource.Get as it,
// and the probes ask whether the rule applies, which its match conditions
// decide without it (libforms refuses conditions that read it). With the
// parameter, a probe would not evaluate where the object is missing.
func withoutParams(vaps []admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	outVAPs := make([]admissionregistrationv1.ValidatingAdmissionPolicy, len(vaps))
	for i := range vaps {
		outVAPs[i] = *vaps[i].DeepCopy()
		outVAPs[i].Spec.ParamKind = nil
	}
	outBindings := make([]admissionregistrationv1.ValidatingAdmissionPolicyBinding, len(bindings))
	for i := range bindings {
		outBindings[i] = *bindings[i].DeepCopy()
		outBindings[i].Spec.ParamRef = nil
	}
	return outVAPs, outBindings
}

// vpolResult maps the simulation of one VAP to Kyverno's result for a
// ValidatingPolicy: the first validation that does not hold decides, fail
// when false, error when it errs; a configuration error is error. A
// missing parameter that the binding allows is pass: libforms writes a
// resource.Get as the parameter only where every validation holds with
// the object missing (Kyverno's Get gives null); the probes decide
// whether the rule applies.
func vpolResult(pr vapsim.PolicyResult) (res PathResult, evaluated bool) {
	if pr.ConfigError != "" {
		return PathResult{Result: Error, Message: pr.ConfigError}, true
	}
	for _, b := range pr.Bindings {
		if !b.Matched {
			continue
		}
		if b.ConfigError != "" {
			return PathResult{Result: Error, Message: b.ConfigError}, true
		}
		if !b.Evaluated {
			if b.Params != nil && len(b.Params) == 0 {
				return PathResult{Result: Pass, Message: "the parameter object is missing (parameterNotFoundAction Allow): every validation holds where Kyverno's resource.Get gives null"}, true
			}
			continue
		}
		for _, d := range b.Decisions {
			switch d.Evaluation {
			case validating.EvalError:
				return PathResult{Result: Error, Message: d.Message}, true
			case validating.EvalDeny:
				return PathResult{Result: Fail, Message: d.Message}, true
			}
		}
		return PathResult{Result: Pass}, true
	}
	return PathResult{Result: None}, false
}

// plainConstraints is Kyverno CLI's hasSelector: one resource rule, no
// selector, exclusion or names. A compiled policy with plain constraints
// that does not match a resource reports nothing for it.
func plainConstraints(m *admissionregistrationv1.MatchResources) bool {
	if m == nil {
		return false
	}
	if s := m.NamespaceSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		return false
	}
	if s := m.ObjectSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		return false
	}
	return len(m.ExcludeResourceRules) == 0 && len(m.ResourceRules) == 1 && len(m.ResourceRules[0].ResourceNames) == 0
}

// vpolOf is the ValidatingPolicy an engine outcome is about.
func (r *runner) vpolOf(o engine.Outcome) *vpolState {
	for _, st := range r.vpols {
		src := st.lowered.Source
		if string(src.Kind) == o.Kind && src.Namespace == o.Namespace && src.Name == o.Policy {
			return st
		}
	}
	return nil
}

// contextReader reads the test's context file as Kyverno's CLI serves it
// to the resource library (cellib.StaticResources.KyvernoCLI); kinds
// resolve with the suite's resolver.
func (r *runner) contextReader() (*cellib.StaticResources, error) {
	resources, err := cellib.NewStaticResources(r.suite.ContextResources, func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
		found, err := r.resolver.Resolve(gvk.GroupVersion().String() + "/" + gvk.Kind)
		if gvk.Group == "" {
			found, err = r.resolver.Resolve(gvk.Version + "/" + gvk.Kind)
		}
		for _, f := range found {
			if err == nil && f.Subresource == "" {
				return schema.GroupVersionResource{Group: f.Group, Version: f.Version, Resource: f.Resource}, true
			}
		}
		return schema.GroupVersionResource{}, false
	})
	if err != nil {
		return nil, err
	}
	return resources.KyvernoCLI(), nil
}

// vpolEngineResult is the engine column for one rule: its outcome, or why
// the engine does not evaluate the rule (n/a), or no result.
func vpolEngineResult(st *vpolState, id string, ev *evaluation, caps translate.EngineCapabilities) PathResult {
	if res, ok := ev.vpolEngine[st][id]; ok {
		return res
	}
	if rule := st.modelRules[id]; rule != nil {
		if why := translate.ModelRuleNotEnforcedWith(rule, caps); why != "" {
			return PathResult{Result: NotApplicable, Message: "not evaluated by kyvap's engine: " + why}
		}
	}
	return PathResult{Result: None}
}

// checkColumns compares every evaluated column (not n/a) with the expected
// result; a row no column evaluated is skipped with why.
func checkColumns(row *Row, want, why string) {
	var problems []string
	evaluated := 0
	for _, c := range []struct {
		name string
		res  *PathResult
	}{{"VAP path", &row.VAP}, {"engine path", &row.Engine}} {
		if c.res.Result == NotApplicable {
			continue
		}
		evaluated++
		ok := string(c.res.Result) == want
		c.res.Match = &ok
		if !ok {
			problems = append(problems, vpolMismatch(c.name, want, c.res))
		}
	}
	switch {
	case evaluated == 0:
		row.Status, row.Reason = StatusSkipped, why
	case len(problems) > 0:
		row.Status, row.Reason = StatusFail, strings.Join(problems, "; ")
	default:
		row.Status = StatusPass
	}
}

// joinNonEmpty joins the parts that are not empty.
func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// vpolRows checks test result i against the ValidatingPolicies it names.
func (r *runner) vpolRows(ctx context.Context, i int, states []*vpolState) []Row {
	res := &r.suite.Test.Results[i]
	base := Row{Policy: res.Policy, Rule: res.Rule, Expected: res.Result}
	if r.cluster {
		row := base
		// RunCluster replays these itself (replayVpol); not reached.
		row.Status, row.Reason = StatusSkipped, "a ValidatingPolicy result the replay did not send"
		row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
		return []Row{row}
	}
	if len(states) > 1 {
		r.addWarning(fmt.Sprintf("results[%d]: %d ValidatingPolicies are named %q; Kyverno's CLI checks the result against each", i, len(states), states[0].vp.Name()))
	}
	var rows []Row
	selected, warnings := r.suite.SelectResources(i)
	r.warnings = append(r.warnings, warnings...)
	for _, resource := range selected {
		row := base
		row.Resource = resource.Key()
		if why := r.unserved(resource); why != "" {
			row.Status, row.Reason = StatusSkipped, why
			row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
			rows = append(rows, row)
			continue
		}
		spec := r.suite.vpolRequestFor(resource, res.Operation)
		row.Operation = string(spec.operation)
		ev := r.evaluate(ctx, spec)
		if ev.err == nil && ev.vpolErr != nil {
			ev.err = ev.vpolErr
		}
		if ev.err != nil {
			row.Status, row.Reason = StatusFail, ev.err.Error()
			row.VAP = PathResult{Result: None}
			rows = append(rows, row)
			continue
		}
		var produced []Row
		plain := true
		for _, st := range states {
			for _, rule := range st.lowered.Rules {
				if !plainConstraints(&rule.MatchConstraints) {
					plain = false
				}
			}
			ids := make([]string, 0, len(ev.vpol[st]))
			for id := range ev.vpol[st] {
				ids = append(ids, id)
			}
			for id := range ev.vpolEngine[st] {
				if _, done := ev.vpol[st][id]; !done {
					ids = append(ids, id)
				}
			}
			sort.Slice(ids, func(a, b int) bool { return vpolRuleOrder(st, ids[a]) < vpolRuleOrder(st, ids[b]) })
			for _, id := range ids {
				o := ev.vpol[st][id]
				row := row
				if id != model.RuleIDPolicy || len(states) > 1 {
					row.ReportedRule = id
					if len(states) > 1 {
						row.ReportedRule = st.label() + " " + id
					}
				}
				o, onVAP := ev.vpol[st][id]
				switch {
				case !onVAP:
					row.VAP = PathResult{Result: None, Message: "the VAP does not apply"}
				case o.skipped != "":
					row.VAP = PathResult{Result: NotApplicable, Message: o.skipped}
				default:
					row.VAP = o.result
				}
				row.Engine = vpolEngineResult(st, id, ev, r.engineCaps)
				checkColumns(&row, res.Result, joinNonEmpty("; ", o.skipped, row.Engine.Message))
				produced = append(produced, row)
			}
		}
		if len(produced) == 0 {
			row.VAP, row.Engine = PathResult{Result: None}, PathResult{Result: None}
			switch {
			case plain:
				row.Status, row.Reason = StatusFail, "no result: the policy does not match the resource, and Kyverno's CLI reports such a resource as not found (a failure) when every compiled variant of the policy has plain matchConstraints"
			case res.Result == "fail" || (res.Result == "pass" && r.opts.Strict):
				row.Status, row.Reason = StatusFail, fmt.Sprintf("the policy does not match the resource, while the test expects %s (Kyverno's CLI would show it as an excluded pass)", res.Result)
			case res.Result == "pass":
				row.Status, row.Reason = StatusPass, "excluded: the policy does not match the resource, and Kyverno's CLI counts the expected pass as met (--strict fails it)"
			default:
				row.Status, row.Reason = StatusPass, "excluded: the policy does not match the resource (Kyverno's CLI counts this as a pass)"
			}
			produced = append(produced, row)
		}
		rows = append(rows, produced...)
	}
	return rows
}

// vpolRuleOrder orders a policy's rules as lowered.
func vpolRuleOrder(st *vpolState, id string) int {
	for i := range st.lowered.Rules {
		if st.lowered.Rules[i].ID == id {
			return i
		}
	}
	return len(st.lowered.Rules)
}

// vpolMismatch explains why the VAP path's result is not the expected one.
func vpolMismatch(path, want string, p *PathResult) string {
	msg := fmt.Sprintf("%s: want %s, got %s", path, want, p.Result)
	if want == "warn" {
		msg += " (Kyverno's CLI never reports warn for a ValidatingPolicy: it compares results without audit-warn, whatever the validationActions)"
	}
	if p.Message != "" {
		msg += ": " + p.Message
	}
	return msg
}

// readsNamespaceObject reports whether the VAP of the rule reads the
// namespaceObject variable (as written, or a library call kyvap wrote so,
// translate/libforms).
func readsNamespaceObject(st *vpolState, id string) bool {
	rr := st.rules[id]
	if rr == nil {
		return false
	}
	for _, name := range rr.ValidatingAdmissionPolicies {
		for i := range st.plan.ValidatingAdmissionPolicies {
			v := &st.plan.ValidatingAdmissionPolicies[i]
			if v.Name != name {
				continue
			}
			for _, e := range vap.SpecExpressions(&v.Spec) {
				if strings.Contains(e, vap.NamespaceObjectIdent) {
					return true
				}
			}
		}
	}
	return false
}

// policyReadsNamespaceObject reports whether a VAP of the policy reads
// namespaceObject (readsNamespaceObject of any of its rules).
func policyReadsNamespaceObject(st *vpolState) bool {
	for id := range st.rules {
		if readsNamespaceObject(st, id) {
			return true
		}
	}
	return false
}
