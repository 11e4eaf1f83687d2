package clitest

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook/engine"
	"github.com/kyvap/kyvap/webhook/vapsim"
)

// paths holds both evaluation paths of a suite.
type paths struct {
	r *runner
	// full simulates the plans' VAPs and bindings as the operator deploys
	// them. bare has the rules' own celPreconditions removed, and
	// unexcepted also has no PolicyException applied: a rule that full
	// does not evaluate but bare does was stopped by a celPrecondition, one
	// that only unexcepted evaluates by an exception. Kyverno reports both
	// as skip; a rule none evaluates did not match.
	full, bare, unexcepted *vapsim.Simulator
	engine                 *engine.Engine
	params                 engine.StaticParams
	notes                  []string
}

// newPaths builds the simulators and the fallback engine.
func newPaths(r *runner) *paths {
	p := &paths{r: r, engine: engine.New(), params: engine.StaticParams(unstructuredObjects(r.suite.Params))}
	var full, bare, unexcepted []admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings, unexceptedBindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, name := range r.order {
		st := r.policies[name]
		if st.err != nil {
			continue
		}
		full = append(full, st.vap.ValidatingAdmissionPolicies...)
		bindings = append(bindings, st.vap.Bindings...)
		for _, v := range st.vap.ValidatingAdmissionPolicies {
			bare = append(bare, withoutPreconditions(st, v))
		}
		noExceptions, err := translate.Translate(translate.Input{Policy: st.policy, Exceptions: []kyvernov2.PolicyException{}}, r.resolver,
			translate.Options{GenerateValidatingAdmissionPolicy: true, CompatibilityVersion: r.opts.CompatibilityVersion})
		if err == nil {
			for _, v := range noExceptions.ValidatingAdmissionPolicies {
				unexcepted = append(unexcepted, withoutPreconditions(st, v))
			}
			unexceptedBindings = append(unexceptedBindings, noExceptions.Bindings...)
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
	p.bare = vapsim.New(bare, bindings)
	p.unexcepted = vapsim.New(unexcepted, unexceptedBindings)
	for _, n := range p.full.Notes() {
		if !strings.Contains(n, "matchPolicy Equivalent") { // bindings leave it to the API server's default; the VAP itself matches Exact
			p.notes = append(p.notes, "VAP simulation: "+n)
		}
	}
	return p
}

// withoutPreconditions is a copy of the VAP without the match conditions
// that are the rule's own celPreconditions (kyvap's generated conditions
// stay: they are part of matching). translate appends the preconditions
// after its own conditions, possibly renamed, so they are the last ones.
func withoutPreconditions(st *policyState, v admissionregistrationv1.ValidatingAdmissionPolicy) admissionregistrationv1.ValidatingAdmissionPolicy {
	v = *v.DeepCopy()
	own := 0
	for _, rule := range st.policy.Spec.Rules {
		if rule.Name == v.Annotations[translate.AnnotationRule] {
			own = len(rule.CELPreconditions)
		}
	}
	if own <= len(v.Spec.MatchConditions) {
		v.Spec.MatchConditions = v.Spec.MatchConditions[:len(v.Spec.MatchConditions)-own]
	}
	return v
}

// simulate runs one simulator and maps every VAP that evaluated the request
// (a binding matched and the match conditions held) back to its policy and
// rule.
func (p *paths) simulate(ctx context.Context, sim *vapsim.Simulator, req *admissionv1.AdmissionRequest) (map[string]map[string]PathResult, error) {
	resp, err := sim.Evaluate(ctx, vapsim.Request{
		Admission:  req,
		Namespaces: sortedNamespaces(p.r.ns),
		Params:     unstructuredObjects(p.r.suite.Params),
	})
	if err != nil {
		return nil, err
	}
	for _, n := range resp.Notes {
		if !strings.Contains(n, "not among the known namespaces") && !strings.Contains(n, "matchPolicy Equivalent") {
			p.r.addWarning("VAP simulation: " + n)
		}
	}
	results := map[string]map[string]PathResult{}
	for _, pr := range resp.Policies {
		policy, rule := p.ruleOf(pr.Policy)
		if policy == "" {
			continue
		}
		res, evaluated := vapResult(pr)
		if !evaluated {
			continue
		}
		if results[policy] == nil {
			results[policy] = map[string]PathResult{}
		}
		results[policy][rule] = worse(results[policy][rule], res)
	}
	return results, nil
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

// vapResult maps the simulation of one VAP to Kyverno's rule status with
// Kyverno's own mapping of validator decisions (validate_cel.go): a denying
// decision is fail (CEL errors under failurePolicy Fail included), an error
// that was admitted (failurePolicy Ignore) is error, otherwise pass; a
// configuration error (e.g. a missing parameter) is error, as Kyverno's
// "error in parameterized resource". evaluated is false when no binding
// matched or the match conditions excluded the request.
func vapResult(pr vapsim.PolicyResult) (res PathResult, evaluated bool) {
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
// rule the deployed VAPs do not evaluate is skip when they would without
// its celPreconditions or without the PolicyExceptions (Kyverno reports
// both as skip), and has no result otherwise (it does not match).
func (p *paths) vap(ctx context.Context, req *admissionv1.AdmissionRequest) (map[string]map[string]PathResult, error) {
	results, err := p.simulate(ctx, p.full, req)
	if err != nil {
		return nil, err
	}
	bare, err := p.simulate(ctx, p.bare, req)
	if err != nil {
		return nil, err
	}
	unexcepted, err := p.simulate(ctx, p.unexcepted, req)
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
	for policy, rules := range bare {
		for rule := range rules {
			skip(policy, rule, "celPreconditions not met")
		}
	}
	for policy, rules := range unexcepted {
		for rule := range rules {
			// Only rules the deployed VAPs cover: without exceptions a rule
			// may translate that falls back with them.
			if rr := p.r.policies[policy].rules[rule]; rr != nil && len(rr.ValidatingAdmissionPolicies) > 0 {
				skip(policy, rule, "a PolicyException applies")
			}
		}
	}
	return results, nil
}

// engineResults is the fallback engine's result for every rule that matched.
func (p *paths) engineResults(ctx context.Context, req *admissionv1.AdmissionRequest) (map[string]map[string]PathResult, error) {
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
		return nil, err
	}
	out := map[string]map[string]PathResult{}
	for _, o := range outcomes {
		if out[o.Policy] == nil {
			out[o.Policy] = map[string]PathResult{}
		}
		out[o.Policy][o.Rule] = PathResult{Result: Result(o.Result), Message: o.Message}
	}
	return out, nil
}
