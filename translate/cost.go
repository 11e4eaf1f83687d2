// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"crypto/sha256"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/vap"
)

// WebhookEvaluationBudget is how long kyvap's webhook works on one request
// sent to a configured webhook with the given timeoutSeconds: the timeout
// less a margin for what happens outside the handler (the API server's
// call, TLS, decoding the review and encoding the answer), a fifth of the
// timeout but at least 200 ms and at most 2 s (1 s → 800 ms, 10 s → 8 s,
// 30 s → 28 s). After it, the webhook answers as the webhook's
// failurePolicy says instead of letting the API server's call time out.
func WebhookEvaluationBudget(timeoutSeconds int32) time.Duration {
	timeout := time.Duration(min(max(timeoutSeconds, 1), 30)) * time.Second
	margin := min(max(timeout/5, 200*time.Millisecond), 2*time.Second)
	return timeout - margin
}

// webhookTimeoutSeconds is the timeout of the configured webhook that
// serves a policy's fallback rules (Kyverno's default, 10 s, clamped to
// what the API server accepts, as kyvap's webhook configuration does).
func webhookTimeoutSeconds(spec *kyvernov1.Spec) int32 {
	if spec.WebhookTimeoutSeconds == nil {
		return 10
	}
	return min(max(*spec.WebhookTimeoutSeconds, 1), 30)
}

// WebhookNanosPerCostUnit is how long kyvap's webhook takes per unit of CEL
// runtime cost, at the slow end of what was measured for expensive
// expressions (nested comprehensions, string building, regular
// expressions: 60 to 220 ns per unit on the project's build machine, see
// docs/performance.md). The API server's own figure (its per-expression
// limit of 1,000,000 units "gives roughly 0.1 second") is two to three
// times too optimistic for kyvap's process.
const WebhookNanosPerCostUnit = 250

// RuleCost is the estimated worst-case CEL cost of one evaluation of a
// rule by kyvap's webhook, per parameter object.
type RuleCost struct {
	// Units is the estimate: each expression's estimated maximum cost (as
	// the API server's cost estimator computes it, with objects of unknown
	// size), capped by what the runtime allows (celconfig.PerCallLimit per
	// expression, RuntimeCELCostBudgetMatchConditions for the
	// celPreconditions, RuntimeCELCostBudget for the validations with their
	// variables and messages, and again for the audit annotations).
	Units uint64
	// PerParam: the rule has a paramRef selector, so it is evaluated once
	// per selected parameter object, a number no estimate bounds.
	PerParam bool
}

// Duration is the time the cost takes in kyvap's webhook.
func (c RuleCost) Duration() time.Duration {
	return time.Duration(c.Units) * WebhookNanosPerCostUnit * time.Nanosecond
}

// EstimateRuleCost estimates the worst-case cost of a CEL rule as kyvap's
// webhook evaluates it: compiled in Kyverno's CEL environment, its
// celPreconditions as match conditions. Expressions that do not compile
// cost nothing (they fail at once).
func EstimateRuleCost(rule *kyvernov1.Rule) RuleCost {
	if !rule.HasValidateCEL() {
		return RuleCost{}
	}
	c := rule.Validation.CEL
	env := costEnvFor(vap.KyvernoCELVersion, c.ParamKind != nil)
	if env == nil {
		return RuleCost{}
	}
	var preconditions, validations, annotations uint64
	for _, mc := range rule.CELPreconditions {
		preconditions = saturatingAdd(preconditions, expressionCost(env, mc.Expression))
	}
	for _, v := range c.Variables {
		validations = saturatingAdd(validations, expressionCost(env, v.Expression))
	}
	for _, v := range c.Expressions {
		validations = saturatingAdd(validations, expressionCost(env, v.Expression))
		if v.MessageExpression != "" {
			validations = saturatingAdd(validations, expressionCost(env, v.MessageExpression))
		}
	}
	for _, a := range c.AuditAnnotations {
		annotations = saturatingAdd(annotations, expressionCost(env, a.ValueExpression))
	}
	units := min(preconditions, celconfig.RuntimeCELCostBudgetMatchConditions) +
		min(validations, celconfig.RuntimeCELCostBudget) +
		min(annotations, celconfig.RuntimeCELCostBudget)
	return RuleCost{Units: units, PerParam: c.ParamKind != nil && c.ParamRef != nil && c.ParamRef.Name == "" && c.ParamRef.Selector != nil}
}

// expressionCost is an expression's estimated maximum cost, at most the
// runtime's per-expression limit (an evaluation that reaches it stops with
// an error). Estimates are remembered (costMemo): estimating compiles the
// expression, and a policy is translated several times (its plan, the
// background scan's forms, a handover's bridge) with the same expressions.
func expressionCost(env *cel.Env, expression string) uint64 {
	key := costKey{env: env, expression: sha256.Sum256([]byte(expression))}
	if units, ok := costMemo.Get(key); ok {
		return units
	}
	units := estimateExpressionCost(env, expression)
	costMemo.Put(key, units)
	return units
}

func estimateExpressionCost(env *cel.Env, expression string) uint64 {
	ast, issues := env.Compile(expression)
	if issues.Err() != nil {
		return 0
	}
	estimate, err := env.EstimateCost(ast, &library.CostEstimator{})
	if err != nil {
		return celconfig.PerCallLimit
	}
	return min(estimate.Max, celconfig.PerCallLimit)
}

// costKey identifies an estimate: the environment (costEnvFor keeps one
// per version and params) and the expression's SHA-256, so that the memo's
// size does not grow with the expressions' length.
type costKey struct {
	env        *cel.Env
	expression [sha256.Size]byte
}

// costMemoSize bounds the remembered estimates (about 60 bytes each).
const costMemoSize = 16384

// costMemo remembers estimates.
var costMemo = &vap.Memo[costKey, uint64]{Limit: costMemoSize}

func saturatingAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// costEnvs caches the estimation environments per version and params.
var costEnvs sync.Map // "major.minor/params" -> *cel.Env

// costEnvFor is the CEL environment of an admission policy's expressions
// (the variables of plugincel's compiler, with every expression kind's
// optional variables declared, and `variables` as a map of dynamic
// values), for cost estimation; nil if it cannot be built.
func costEnvFor(v *version.Version, hasParams bool) *cel.Env {
	key := fmt.Sprintf("%s/%t", v, hasParams)
	if e, ok := costEnvs.Load(key); ok {
		return e.(*cel.Env)
	}
	requestType := plugincel.BuildRequestType()
	namespaceType := plugincel.BuildNamespaceType()
	opts := []cel.EnvOption{
		cel.Variable(plugincel.ObjectVarName, cel.DynType),
		cel.Variable(plugincel.OldObjectVarName, cel.DynType),
		cel.Variable(plugincel.NamespaceVarName, namespaceType.CelType()),
		cel.Variable(plugincel.RequestVarName, requestType.CelType()),
		cel.Variable(plugincel.AuthorizerVarName, library.AuthorizerType),
		cel.Variable(plugincel.RequestResourceAuthorizerVarName, library.ResourceCheckType),
		cel.Variable(plugincel.VariableVarName, cel.MapType(cel.StringType, cel.DynType)),
	}
	if hasParams {
		opts = append(opts, cel.Variable(plugincel.ParamsVarName, cel.DynType))
	}
	set, err := vap.BaseEnvSet(v).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        opts,
		DeclTypes:         []*apiservercel.DeclType{namespaceType, requestType},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		return nil
	}
	actual, _ := costEnvs.LoadOrStore(key, env)
	return actual.(*cel.Env)
}

// CostWarnings names the fallback rules of a plan whose estimated
// worst-case cost (EstimateRuleCost) can make kyvap's webhook run out of
// time: the cost of one rule times the number of the policy's rules the
// webhook evaluates for a request, at WebhookNanosPerCostUnit, exceeds the
// webhook's evaluation budget for the policy's webhookTimeoutSeconds
// (WebhookEvaluationBudget). Such a request is answered by the policy's
// failurePolicy (Fail refuses it) instead of by its rules. A rule and its
// pod-controller variants count once: a request matches one of them.
func CostWarnings(plan *Plan) []string {
	type entry struct {
		name string
		cost RuleCost
	}
	var rules []entry
	var spec *kyvernov1.Spec
	for i := range plan.Rules {
		fr := plan.Rules[i].Fallback
		if fr == nil || fr.NotEnforced != "" {
			continue
		}
		spec = &fr.Spec
		e := entry{name: fr.Rule.Name, cost: EstimateRuleCost(&fr.Rule)}
		for j := range fr.AdditionalRules {
			if c := EstimateRuleCost(&fr.AdditionalRules[j]); c.Units > e.cost.Units {
				e.cost.Units = c.Units
			}
		}
		rules = append(rules, e)
	}
	if len(rules) == 0 {
		return nil
	}
	timeout := webhookTimeoutSeconds(spec)
	budget := WebhookEvaluationBudget(timeout)
	var out []string
	for _, r := range rules {
		// At most 22.5 million units (the runtime's budgets), about 5.6 s:
		// no overflow for any number of rules a policy can hold.
		if r.cost.Duration()*time.Duration(len(rules)) <= budget {
			continue
		}
		perParam := ""
		if r.cost.PerParam {
			perParam = " per parameter object its paramRef selects"
		}
		out = append(out, fmt.Sprintf("rule %q: its estimated worst-case CEL cost in kyvap's webhook is %d units (about %s%s); times the policy's %d rules the webhook evaluates, that exceeds the %s it spends on a request (webhookTimeoutSeconds %d), so requests it matches can run out of time and be answered by the policy's failurePolicy instead of its rules", r.name, r.cost.Units, roundDuration(r.cost.Duration()), perParam, len(rules), budget, timeout))
	}
	return out
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
