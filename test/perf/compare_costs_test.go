// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/test/celtest"
	"github.com/kyvap/kyvap/translate"
)

// checkCost is what one check of the benchmark costs CEL, written three
// ways: compiled by kyvap from the pattern policy, compiled by kyvap from
// the CEL ClusterPolicy (whose expression is the check's hand-written
// CEL), and written by hand into VAPs (handWrittenVAPs).
type checkCost struct {
	check string
	// Estimates are the worst-case cost estimates of the lowered rules
	// (translate.EstimateRuleCost, summed over the policy's rules): the
	// compiled pattern's and the hand-written CEL rule's.
	patternEstimate, celEstimate uint64
	// Runtime costs are the costs CEL counts evaluating the VAPs the API
	// server runs (match conditions, then validations) on every request
	// of the mix they match; patternCheck leaves out the match conditions
	// that carry Kyverno's global configuration (its resource filters and
	// excluded groups, which hand-written VAPs do not have).
	patternVAP, patternCheck, celVAP, handWritten uint64
	// requests is the number of requests of the mix the check's VAPs
	// match.
	requests int
}

// compareCheckCosts computes each check's costs and checks that the three
// forms of its VAPs give every request of the mix the same verdict.
func compareCheckCosts(tb testing.TB) []checkCost {
	tb.Helper()
	config := chartConfig(tb)
	patterns, err := comparePatternPolicies()
	if err != nil {
		tb.Fatal(err)
	}
	cels := compareClusterPolicies()
	hand, _ := handWrittenVAPs()
	env := celtest.Env(tb, "object", "oldObject", "request")
	type request struct {
		resource string
		vars     map[string]any
		name     string
	}
	var requests []request
	for _, r := range compareMix() {
		admission := mixRequest(tb, r.obj)
		var object, req map[string]any
		if err := json.Unmarshal(admission.Object.Raw, &object); err != nil {
			tb.Fatal(err)
		}
		raw, err := json.Marshal(admission)
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			tb.Fatal(err)
		}
		delete(req, "object")
		requests = append(requests, request{
			resource: admission.Resource.Group + "/" + admission.Resource.Resource,
			vars:     map[string]any{"object": object, "oldObject": nil, "request": req},
			name:     r.obj.GetName(),
		})
	}
	var out []checkCost
	for i, check := range compareChecks {
		c := checkCost{check: check.name, patternEstimate: loweredEstimate(tb, patterns[i]), celEstimate: loweredEstimate(tb, cels[i])}
		patternVAPs, _ := translateWithConfig(tb, config, patterns[i:i+1])
		celVAPs, _ := translateWithConfig(tb, config, cels[i:i+1])
		var handVAPs []admissionregistrationv1.ValidatingAdmissionPolicy
		for _, v := range hand {
			if v.Name == "hand-written-"+check.name || strings.HasPrefix(v.Name, "hand-written-"+check.name+"-") {
				handVAPs = append(handVAPs, *v)
			}
		}
		forms := []struct {
			name string
			vaps []compiledVAP
			cost *uint64
		}{
			{"compiled from the pattern", compileVAPs(tb, env, patternVAPs, nil), &c.patternVAP},
			{"compiled from the pattern, without Kyverno's configuration", compileVAPs(tb, env, patternVAPs, kyvernoConfigConditions), &c.patternCheck},
			{"compiled from the CEL policy", compileVAPs(tb, env, celVAPs, nil), &c.celVAP},
			{"written by hand", compileVAPs(tb, env, handVAPs, nil), &c.handWritten},
		}
		for _, r := range requests {
			verdicts := make([]bool, len(forms))
			matched := false
			for k, form := range forms {
				verdicts[k] = true
				for _, v := range form.vaps {
					if !v.resources[r.resource] {
						continue
					}
					matched = true
					pass, cost := celtest.Evaluate(tb, v.conditions, v.validations, r.vars)
					verdicts[k] = verdicts[k] && pass
					*form.cost += cost
				}
			}
			if matched {
				c.requests++
			}
			for k := range forms {
				if verdicts[k] != verdicts[0] {
					tb.Errorf("%s on %s: %s says %t, %s says %t", check.name, r.name, forms[0].name, verdicts[0], forms[k].name, verdicts[k])
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// compiledVAP is a VAP's CEL compiled with cost tracking, and the
// resources ("group/resource") it matches.
type compiledVAP struct {
	resources               map[string]bool
	conditions, validations []cel.Program
}

// kyvernoConfigConditions are the match conditions that carry Kyverno's
// global configuration.
var kyvernoConfigConditions = map[string]bool{kyverno.ConditionResourceFilters: true, kyverno.ConditionExcludedSubjects: true}

// compileVAPs compiles the VAPs' match conditions (but those named in
// skip) and validations. The harness evaluates no variables: a VAP with
// some fails the test.
func compileVAPs(tb testing.TB, env *cel.Env, vaps []admissionregistrationv1.ValidatingAdmissionPolicy, skip map[string]bool) []compiledVAP {
	tb.Helper()
	if len(vaps) == 0 {
		tb.Fatal("no VAP to compile")
	}
	var out []compiledVAP
	for _, v := range vaps {
		if len(v.Spec.Variables) > 0 {
			tb.Fatalf("VAP %s has variables, which the cost harness does not evaluate", v.Name)
		}
		c := compiledVAP{resources: map[string]bool{}}
		for _, rule := range v.Spec.MatchConstraints.ResourceRules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					c.resources[g+"/"+res] = true
				}
			}
		}
		var conditions, validations []string
		for _, mc := range v.Spec.MatchConditions {
			if !skip[mc.Name] {
				conditions = append(conditions, mc.Expression)
			}
		}
		for _, val := range v.Spec.Validations {
			validations = append(validations, val.Expression)
		}
		c.conditions, c.validations = celtest.CostPrograms(tb, env, conditions), celtest.CostPrograms(tb, env, validations)
		out = append(out, c)
	}
	return out
}

// loweredEstimate sums the cost estimates of the policy's lowered rules.
func loweredEstimate(tb testing.TB, p *kyvernov1.ClusterPolicy) uint64 {
	tb.Helper()
	l, err := clusterpolicy.New(clusterpolicy.InputFor(p, nil), kyverno.NewStaticResolver(), clusterpolicy.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	var units uint64
	for k := range p.Spec.Rules {
		o := l.Screen(k)
		if o.Fate != clusterpolicy.Lowered || !o.Rule.HasValidateCEL() {
			tb.Fatalf("%s: rule %d is not compiled: %v", p.Name, k, o.Refusal)
		}
		units += translate.EstimateRuleCost(o.Rule).Units
	}
	return units
}

// TestCompareCheckCosts compares, for each check of the admission
// benchmark, the CEL cost of kyvap's VAPs compiled from the pattern with
// the hand-written CEL of the same check (BenchmarkCompare writes the same
// numbers to bin/bench-compare.txt): the forms must agree on every
// request, and each ratio is logged.
func TestCompareCheckCosts(t *testing.T) {
	costs := compareCheckCosts(t)
	for _, c := range costs {
		if c.requests == 0 {
			t.Errorf("%s: no request of the mix reaches the check's VAPs", c.check)
		}
		if c.patternVAP == 0 || c.handWritten == 0 {
			t.Errorf("%s: no cost counted (pattern %d, hand-written %d)", c.check, c.patternVAP, c.handWritten)
		}
	}
	t.Log("\n" + checkCostTable(costs))
}

// checkCostTable is the report's table of checkCosts.
func checkCostTable(costs []checkCost) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %8s %12s %14s %10s %13s %8s %8s %14s %14s\n", "check", "requests", "pattern VAPs", "without config", "CEL VAPs", "hand-written", "ratio", "w/o cfg", "est. pattern", "est. CEL")
	for _, c := range costs {
		ratio := func(v uint64) float64 { return float64(v) / float64(max(c.handWritten, 1)) }
		fmt.Fprintf(&b, "%-16s %8d %12d %14d %10d %13d %8.2f %8.2f %14d %14d\n", c.check, c.requests, c.patternVAP, c.patternCheck, c.celVAP, c.handWritten,
			ratio(c.patternVAP), ratio(c.patternCheck), c.patternEstimate, c.celEstimate)
	}
	return b.String()
}
