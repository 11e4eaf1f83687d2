// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/policytest/vapsim"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/vap"
)

// paths holds both evaluation paths of a suite.
type paths struct {
	r *runner
	// full simulates the plans' VAPs and bindings as the operator deploys
	// them. The probes tell which rules apply to a request at all: their
	// VAPs have one validation, the rule's guard (vap.GuardVariable,
	// the namespace-selection part of matching that only validations can
	// evaluate) or true, so a VAP that a probe evaluates without a denial
	// is one whose rule matched. fullProbe probes the deployed VAPs,
	// bareProbe the rules without their own celPreconditions and
	// unexceptedProbe also without PolicyExceptions: a rule that only
	// bareProbe applies was stopped by a celPrecondition, one that only
	// unexceptedProbe applies by an exception. Kyverno reports both as
	// skip; a rule none applies did not match.
	full, fullProbe, bareProbe, unexceptedProbe *vapsim.Simulator
	engine                                      *engine.Engine
	params                                      engine.StaticParams
	notes                                       []string
}

// newPaths builds the simulators and the fallback engine.
func newPaths(r *runner) *paths {
	p := &paths{r: r, engine: engine.New(), params: engine.StaticParams(unstructuredObjects(r.suite.Params))}
	var full, bare, unexcepted []admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings, bareBindings, unexceptedBindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true, CompatibilityVersion: r.opts.CompatibilityVersion}
	for _, name := range r.order {
		st := r.policies[name]
		if st.err != nil {
			continue
		}
		full = append(full, st.vap.ValidatingAdmissionPolicies...)
		bindings = append(bindings, st.vap.Bindings...)
		withoutPreconditions := st.policy.DeepCopy()
		for i := range withoutPreconditions.Spec.Rules {
			withoutPreconditions.Spec.Rules[i].CELPreconditions = nil
		}
		if plan, err := translate.Translate(clusterpolicy.InputFor(withoutPreconditions, r.suite.Exceptions), r.resolver, opts); err == nil {
			bare = append(bare, plan.ValidatingAdmissionPolicies...)
			bareBindings = append(bareBindings, plan.Bindings...)
		}
		if plan, err := translate.Translate(clusterpolicy.InputFor(withoutPreconditions, []kyvernov2.PolicyException{}), r.resolver, opts); err == nil {
			unexcepted = append(unexcepted, plan.ValidatingAdmissionPolicies...)
			unexceptedBindings = append(unexceptedBindings, plan.Bindings...)
		}
		var rules []translate.FallbackRule
		for _, rr := range st.engine.Rules {
			if rr.Fallback != nil {
				rules = append(rules, *rr.Fallback)
			}
		}
		p.engine.SetFallbackRules(name, rules)
	}
	p.full = vapsim.New(full, bindings)
	p.fullProbe = vapsim.New(probes(full), bindings)
	p.bareProbe = vapsim.New(probes(withoutClassicPreconditions(bare)), bareBindings)
	p.unexceptedProbe = vapsim.New(probes(withoutClassicPreconditions(unexcepted)), unexceptedBindings)
	for _, n := range p.full.Notes() {
		if !strings.Contains(n, "matchPolicy Equivalent") { // bindings leave it to the API server's default; the VAP itself matches Exact
			p.notes = append(p.notes, "VAP simulation: "+n)
		}
	}
	return p
}

// probes are copies of the VAPs whose only validation says whether the rule
// applies: the guard of a guarded VAP, true otherwise.
func probes(vaps []admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ValidatingAdmissionPolicy {
	out := make([]admissionregistrationv1.ValidatingAdmissionPolicy, len(vaps))
	for i := range vaps {
		v := vaps[i].DeepCopy()
		expression := "true"
		if vap.IsGuarded(&v.Spec) {
			expression = "variables." + vap.GuardVariable
		}
		v.Spec.Validations = []admissionregistrationv1.Validation{{Expression: expression, Message: "the rule does not apply"}}
		v.Spec.AuditAnnotations = nil
		out[i] = *v
	}
	return out
}

// withoutClassicPreconditions drops from VAPs the preconditions of the
// classic rules they were compiled from where Kyverno reports skip when
// they are false (clusterpolicy.IsSkipCondition). A rule's has-result
// condition stays: Kyverno reports nothing where it is false.
func withoutClassicPreconditions(vaps []admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ValidatingAdmissionPolicy {
	out := make([]admissionregistrationv1.ValidatingAdmissionPolicy, len(vaps))
	for i := range vaps {
		v := vaps[i].DeepCopy()
		var conditions []admissionregistrationv1.MatchCondition
		for _, mc := range v.Spec.MatchConditions {
			if !clusterpolicy.IsSkipCondition(mc.Name) {
				conditions = append(conditions, mc)
			}
		}
		v.Spec.MatchConditions = conditions
		out[i] = *v
	}
	return out
}

// simulate runs one simulator, with the test's parameter objects (its
// resources and paramResources, as Kyverno's CLI gives a ClusterPolicy).
func (p *paths) simulate(ctx context.Context, sim *vapsim.Simulator, req *admissionv1.AdmissionRequest) (vapsim.Response, error) {
	return p.simulateWith(ctx, sim, req, p.r.suite.Params)
}

// simulateWith runs one simulator with params as the parameter objects.
func (p *paths) simulateWith(ctx context.Context, sim *vapsim.Simulator, req *admissionv1.AdmissionRequest, params []unstructured.Unstructured) (vapsim.Response, error) {
	return sim.Evaluate(ctx, vapsim.Request{
		Admission:  req,
		Namespaces: sortedNamespaces(p.r.ns),
		Params:     unstructuredObjects(params),
	})
}

// applying runs a probe simulator and returns the VAPs whose rule applies
// to the request: a binding matched, and the probe's validation was not
// false for it (an error counts as applying: the rule's own evaluation
// reports it).
func (p *paths) applying(ctx context.Context, probe *vapsim.Simulator, req *admissionv1.AdmissionRequest) (map[string]bool, error) {
	resp, err := p.simulate(ctx, probe, req)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, pr := range resp.Policies {
		if probeApplies(pr) {
			out[pr.Policy] = true
		}
	}
	return out, nil
}

// probeApplies reads one probe VAP's simulation.
func probeApplies(pr vapsim.PolicyResult) bool {
	if pr.ConfigError != "" {
		return true
	}
	for _, b := range pr.Bindings {
		switch {
		case !b.Matched:
			continue
		case b.ConfigError != "":
			return true
		case !b.Evaluated:
			if b.Params != nil && len(b.Params) == 0 {
				return true // no parameter, allowed: the rule passes
			}
			continue
		}
		denied := false
		for _, d := range b.Decisions {
			if d.Evaluation == validating.EvalDeny {
				denied = true
			}
		}
		if !denied {
			return true
		}
	}
	return false
}

// rules maps VAP names to their rules, per policy.
func (p *paths) rules(vaps map[string]bool) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for vap := range vaps {
		policy, rule := p.ruleOf(vap)
		if policy == "" {
			continue
		}
		if out[policy] == nil {
			out[policy] = map[string]bool{}
		}
		out[policy][rule] = true
	}
	return out
}

// ruleOf finds the policy and rule of a generated VAP.
func (p *paths) ruleOf(vap string) (policy, rule string) {
	for _, name := range p.r.order {
		if rule, ok := p.r.policies[name].vapRule[vap]; ok {
			return name, rule
		}
	}
	return "", ""
}

// failuresAreErrors reports a VAP of a rule compiled from Kyverno's
// classic language.
func (p *paths) failuresAreErrors(vap string) bool {
	for _, name := range p.r.order {
		if p.r.policies[name].vapFailuresAreErrors[vap] {
			return true
		}
	}
	return false
}

// vapResult maps the simulation of one VAP to Kyverno's rule status with
// Kyverno's own mapping of validator decisions (validate_cel.go): a denying
// decision is fail (CEL errors under failurePolicy Fail included), an error
// that was admitted (failurePolicy Ignore) is error, otherwise pass; a
// configuration error (e.g. a missing parameter) is error, as Kyverno's
// "error in parameterized resource". evaluated is false when no binding
// matched or the match conditions excluded the request. For a rule
// compiled from Kyverno's classic language (failuresAreErrors), an
// expression that failed to evaluate is Kyverno's error, denied or not.
func vapResult(pr vapsim.PolicyResult, failuresAreErrors bool) (res PathResult, evaluated bool) {
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
				// No parameter selected and the binding allows it:
				// Kyverno's rule passes.
				return PathResult{Result: Pass, Message: "no parameter selected (parameterNotFoundAction Allow)"}, true
			}
			continue
		}
		out := PathResult{Result: Pass}
		for _, d := range b.Decisions {
			switch {
			case d.Evaluation == validating.EvalError && failuresAreErrors:
				return PathResult{Result: Error, Message: fmt.Sprintf("binding %s: %s", b.Binding, d.Message)}, true
			case d.Action == validating.ActionDeny:
				return PathResult{Result: Fail, Message: fmt.Sprintf("binding %s: %s", b.Binding, d.Message)}, true
			case d.Evaluation == validating.EvalError:
				out = PathResult{Result: Error, Message: fmt.Sprintf("binding %s: %s", b.Binding, d.Message)}
			}
		}
		return out, true
	}
	return PathResult{Result: None}, false
}

// worse combines two results of one rule: fail over error over pass.
func worse(a, b PathResult) PathResult {
	rank := map[Result]int{"": 0, None: 0, Skip: 1, Pass: 2, Error: 3, Fail: 4}
	if rank[b.Result] > rank[a.Result] {
		return b
	}
	return a
}

// vap is the VAP path's result for every rule the request concerns. A
// rule the deployed VAPs do not apply is skip when they would without its
// celPreconditions or without the PolicyExceptions (Kyverno reports both
// as skip), and has no result otherwise (it does not match).
func (p *paths) vap(ctx context.Context, req *admissionv1.AdmissionRequest) (map[string]map[string]PathResult, error) {
	resp, err := p.simulate(ctx, p.full, req)
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
	results := map[string]map[string]PathResult{}
	for _, pr := range resp.Policies {
		policy, rule := p.ruleOf(pr.Policy)
		if policy == "" || !applies[pr.Policy] {
			continue
		}
		res, evaluated := vapResult(pr, p.failuresAreErrors(pr.Policy))
		if !evaluated {
			continue
		}
		if results[policy] == nil {
			results[policy] = map[string]PathResult{}
		}
		results[policy][rule] = worse(results[policy][rule], res)
	}
	bare, err := p.applying(ctx, p.bareProbe, req)
	if err != nil {
		return nil, err
	}
	unexcepted, err := p.applying(ctx, p.unexceptedProbe, req)
	if err != nil {
		return nil, err
	}
	skip := func(policy, rule, why string) {
		if _, done := results[policy][rule]; done {
			return
		}
		if results[policy] == nil {
			results[policy] = map[string]PathResult{}
		}
		results[policy][rule] = PathResult{Result: Skip, Message: why}
	}
	for policy, rules := range p.rules(bare) {
		for rule := range rules {
			// Only rules the deployed VAPs cover: without preconditions or
			// exceptions a rule may translate that falls back with them.
			if rr := p.r.policies[policy].rules[rule]; rr != nil && len(rr.ValidatingAdmissionPolicies) > 0 {
				skip(policy, rule, "celPreconditions not met")
			}
		}
	}
	for policy, rules := range p.rules(unexcepted) {
		for rule := range rules {
			if rr := p.r.policies[policy].rules[rule]; rr != nil && len(rr.ValidatingAdmissionPolicies) > 0 {
				skip(policy, rule, "a PolicyException applies")
			}
		}
	}
	return results, nil
}

// engineResults is the fallback engine's result for every rule that
// matched: ClusterPolicy rules by policy and rule name, policy-model rules
// by ValidatingPolicy and rule ID.
func (p *paths) engineResults(ctx context.Context, req *admissionv1.AdmissionRequest) (map[string]map[string]PathResult, map[*vpolState]map[string]PathResult, error) {
	info := p.r.suite.UserInfo
	ereq := engine.Request{
		Admission:    req,
		Namespace:    requestNamespace(req, p.r.ns),
		Params:       p.params,
		ResourceKind: p.r.builder.resourceKind(req),
	}
	if info != nil {
		ereq.Roles, ereq.ClusterRoles = info.Roles, info.ClusterRoles
	}
	outcomes, err := p.engine.Evaluate(ctx, ereq)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]map[string]PathResult{}
	vpols := map[*vpolState]map[string]PathResult{}
	for _, o := range outcomes {
		// Results name a namespaced Policy by its name (Kyverno compares
		// the last segment).
		o.Policy = o.Policy[strings.LastIndex(o.Policy, "/")+1:]
		if o.Kind != "" {
			st := p.r.vpolOf(o)
			if st == nil {
				continue
			}
			if vpols[st] == nil {
				vpols[st] = map[string]PathResult{}
			}
			vpols[st][o.RuleID] = PathResult{Result: Result(o.Result), Message: o.Message}
			continue
		}
		if out[o.Policy] == nil {
			out[o.Policy] = map[string]PathResult{}
		}
		out[o.Policy][o.Rule] = PathResult{Result: Result(o.Result), Message: o.Message}
	}
	return out, vpols, nil
}
