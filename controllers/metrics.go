// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kyvap/kyvap/translate"
)

// Prometheus metrics, registered with controller-runtime's registry next to
// its own (reconcile counts and latencies, work queue, client requests).
var (
	policiesByOutcome = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kyvap_policies",
		Help: "Policies (ClusterPolicies, namespaced Policies, ValidatingPolicies, NamespacedValidatingPolicies) by the reason of their kyvap.io/Enforced condition.",
	}, []string{"outcome"})
	rulesByVerdict = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kyvap_rules",
		Help: "Rules of all policies by translation verdict and reason (a ValidatingPolicy and each of its pod-controller variants count as a rule).",
	}, []string{"verdict", "reason"})
	driftReverts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kyvap_drift_reverts_total",
		Help: "Generated objects restored after someone else edited or deleted them.",
	}, []string{"kind"})
	applyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kyvap_apply_errors_total",
		Help: "Failed writes of generated objects (name conflicts included).",
	}, []string{"kind", "action"})
)

func init() {
	metrics.Registry.MustRegister(policiesByOutcome, rulesByVerdict, driftReverts, applyErrors)
	// Every series exists from the start at 0, so that alerts on their
	// increase (config/prometheus) see the first error.
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		driftReverts.WithLabelValues(kind)
		for _, a := range []action{actionFailed, actionConflict} {
			applyErrors.WithLabelValues(kind, string(a))
		}
	}
}

// policyGauges keeps each policy's last contribution to the gauges so they
// can be recomputed exactly when a policy changes or goes away.
type policyGauges struct {
	mu       sync.Mutex
	outcomes map[string]string
	rules    map[string]map[[2]string]int
}

func newPolicyGauges() *policyGauges {
	return &policyGauges{outcomes: map[string]string{}, rules: map[string]map[[2]string]int{}}
}

func (g *policyGauges) set(policy, outcome string, plan *translate.Plan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetLocked(policy)
	g.outcomes[policy] = outcome
	policiesByOutcome.WithLabelValues(outcome).Inc()
	counts := map[[2]string]int{}
	for _, r := range plan.Rules {
		counts[[2]string{string(r.Verdict), string(r.Reason)}]++
	}
	g.rules[policy] = counts
	for k, n := range counts {
		rulesByVerdict.WithLabelValues(k[0], k[1]).Add(float64(n))
	}
}

func (g *policyGauges) forget(policy string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetLocked(policy)
}

func (g *policyGauges) forgetLocked(policy string) {
	if outcome, ok := g.outcomes[policy]; ok {
		policiesByOutcome.WithLabelValues(outcome).Dec()
		delete(g.outcomes, policy)
	}
	for k, n := range g.rules[policy] {
		rulesByVerdict.WithLabelValues(k[0], k[1]).Sub(float64(n))
	}
	delete(g.rules, policy)
}
