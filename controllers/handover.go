// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// A rule that moves between a VAP and kyvap's webhook is handed over so
// that it is never enforced by nobody: the old enforcement goes only once
// the new one is in place.
//
//   - webhook → VAP (a rule becomes translatable, generation is switched
//     on, the opt-out annotation is removed): every replica keeps the rule
//     in its engine until the rule's VAPs and bindings are active
//     (heldRules);
//   - a new rule for a VAP (a policy is created or gains a rule): every
//     replica's engine enforces it, as the webhook would with generation
//     off, until its VAPs and bindings are active (bridgedRules), so that
//     it is enforced from the moment the policy is applied (at most
//     maxBridgedRules at once);
//   - VAP → webhook: the leader keeps the rule's VAPs and bindings until
//     the webhook configuration covers the rule (WebhookCoverage).
//
// A VAP and its binding are active once the API server has compiled them:
// its policy source recompiles what changed once a second
// (k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_source.go),
// so an object that exists is not enforced yet for up to a second, more
// on a busy server. vapActivationGrace is how long after kyvap first sees
// an object it counts it active.
//
// handoverPoll is how often a held hand-over looks again.
const (
	handoverPoll       = time.Second
	vapActivationGrace = 2 * time.Second
	// vapSettled is an age past which an object is active whatever the
	// skew between this replica's clock and the API server's: objects that
	// existed before the manager started are not held again.
	vapSettled = 30 * time.Second
)

// activationClock tells when a generated object is active: this replica
// saw it at least vapActivationGrace ago, or it was created more than
// vapSettled ago. It forgets an object once its creation settles it.
type activationClock struct {
	mu  sync.Mutex
	now func() time.Time
	// firstSeen is keyed by an object's version (activationKey): an
	// update is compiled anew, as a creation is.
	firstSeen map[string]time.Time
}

func newActivationClock(now func() time.Time) *activationClock {
	return &activationClock{now: now, firstSeen: map[string]time.Time{}}
}

// activationKey names one version of a generated object for the clock:
// its generation, which changes with its spec (the API server's own
// status writes, its type checking, change only the resourceVersion and
// need no recompilation).
func activationKey(obj client.Object) string {
	return fmt.Sprintf("%s/%d", obj.GetUID(), obj.GetGeneration())
}

// lastChanged is when obj was last written, as far as the API server's
// policy source cares: its creation or the latest write to its main
// resource by any field manager (the API server's own status writes, its
// type checking, do not count). A binding switched from Audit to Deny is
// compiled anew, like a new one, and is not enforced yet for a moment.
func lastChanged(obj client.Object) time.Time {
	changed := obj.GetCreationTimestamp().Time
	for _, entry := range obj.GetManagedFields() {
		if entry.Subresource == "" && entry.Time != nil && entry.Time.After(changed) {
			changed = entry.Time.Time
		}
	}
	return changed
}

// vapActivation is the manager's activation clock, shared by every
// reconciler that hands rules over.
var vapActivation = newActivationClock(time.Now)

// maxBridgedRules bounds the rules bridged at once, across policies: a
// burst of new policies (an install, a GitOps sync of hundreds) would
// otherwise have every replica compile all their rules for the second
// their VAPs take, which doubled the time 1,000 new policies took to
// converge (BenchmarkConvergence1000). Past the bound, a new rule waits
// for its VAP, as it did before bridging.
const maxBridgedRules = 64

// bridgeBudget tracks the rules each policy has bridged. An entry not
// renewed for vapSettled is dropped: its policy was deleted, or no
// replica reconciles it any more.
type bridgeBudget struct {
	mu      sync.Mutex
	now     func() time.Time
	max     int
	bridged map[string]bridgeEntry
}

type bridgeEntry struct {
	rules   int
	renewed time.Time
}

func newBridgeBudget(now func() time.Time, maxRules int) *bridgeBudget {
	return &bridgeBudget{now: now, max: maxRules, bridged: map[string]bridgeEntry{}}
}

// bridges is the manager's bridge budget, shared by every reconciler.
var bridges = newBridgeBudget(time.Now, maxBridgedRules)

// full reports whether the budget has no room left for a policy that does
// not bridge yet: its bridge need not even be computed.
func (b *bridgeBudget) full(policy string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, bridging := b.bridged[policy]; bridging {
		return false
	}
	now, total := b.now(), 0
	for _, e := range b.bridged {
		if now.Sub(e.renewed) <= vapSettled {
			total += e.rules
		}
	}
	return total >= b.max
}

// take records that the policy bridges rules (0: none) and reports whether
// the budget allows it: a policy already bridging keeps its share.
func (b *bridgeBudget) take(policy string, rules int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	total := 0
	for p, e := range b.bridged {
		if now.Sub(e.renewed) > vapSettled {
			delete(b.bridged, p)
			continue
		}
		if p != policy {
			total += e.rules
		}
	}
	_, bridging := b.bridged[policy]
	if rules == 0 || (!bridging && total+rules > b.max) {
		delete(b.bridged, policy)
		return rules == 0
	}
	b.bridged[policy] = bridgeEntry{rules: rules, renewed: now}
	return true
}

// active records that the object's version key exists, written at
// changed, and reports whether the API server enforces it by now.
func (c *activationClock) active(key string, changed time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for seen, first := range c.firstSeen {
		if now.Sub(first) > vapSettled {
			delete(c.firstSeen, seen) // settled by its age from now on
		}
	}
	if now.Sub(changed) >= vapSettled {
		return true
	}
	first, ok := c.firstSeen[key]
	if !ok {
		first = now
		c.firstSeen[key] = now
	}
	return now.Sub(first) >= vapActivationGrace
}

// WebhookCoverage says whether kyvap's webhook configuration, as the API
// server has it, sends the requests of a policy's rule to the webhook.
type WebhookCoverage interface {
	Covers(policy, rule string) bool
}

// ruleNames are the names a fallback rule enforces: its rule and the
// autogen variants it carries.
func ruleNames(fr *translate.FallbackRule) []string {
	names := []string{fr.Rule.Name}
	for i := range fr.AdditionalRules {
		names = append(names, fr.AdditionalRules[i].Name)
	}
	return names
}

// heldRules returns the previous fallback rules the engine must keep
// although the plan no longer hands them over: the plan enforces them with
// VAPs that present does not report yet (with their bindings).
func heldRules(previous, next []translate.FallbackRule, plan *translate.Plan, present func(kind, name string) bool) []translate.FallbackRule {
	handed := map[string]bool{}
	for i := range next {
		for _, n := range ruleNames(&next[i]) {
			handed[n] = true
		}
	}
	var held []translate.FallbackRule
	for i := range previous {
		fr := &previous[i]
		if handed[fr.Rule.Name] {
			continue // still the webhook's
		}
		for _, n := range ruleNames(fr) {
			if !inPlace(plan, n, present) {
				held = append(held, *fr)
				break
			}
		}
	}
	return held
}

// heldModelRules is heldRules for the rules of a policy of the policy
// model, which the plan names by rule ID.
func heldModelRules(previous, next []model.Rule, plan *translate.Plan, present func(kind, name string) bool) []model.Rule {
	handed := map[string]bool{}
	for i := range next {
		handed[next[i].ID] = true
	}
	var held []model.Rule
	for i := range previous {
		if !handed[previous[i].ID] && !inPlace(plan, previous[i].ID, present) {
			held = append(held, previous[i])
		}
	}
	return held
}

// inPlace reports whether every VAP the plan enforces rule with is active,
// with its bindings (present reports an object active).
func inPlace(plan *translate.Plan, rule string, present func(kind, name string) bool) bool {
	for _, rr := range plan.Rules {
		if rr.Rule != rule {
			continue
		}
		for _, vap := range rr.ValidatingAdmissionPolicies {
			if !present(kindVAP, vap) {
				return false
			}
			for i := range plan.Bindings {
				if b := &plan.Bindings[i]; b.Spec.PolicyName == vap && !present(kindBinding, b.Name) {
					return false
				}
			}
		}
	}
	return true
}

// Kinds of generated objects, as objectOutcome.Kind spells them.
const (
	kindVAP     = "ValidatingAdmissionPolicy"
	kindBinding = "ValidatingAdmissionPolicyBinding"
)

// handOver computes the rules to give the sink for a plan: the plan's, the
// previous ones whose VAPs are not active yet, and the bridge's (the
// policy's rules as the webhook enforces them with generation off,
// computed only when some rule's VAPs are not active) for the rules still
// without an active VAP; requeue is true while any is held or bridged.
func handOver(ctx context.Context, reader client.Reader, sink FallbackSink, policy string, plan *translate.Plan, next []translate.FallbackRule, bridge func() []translate.FallbackRule) (rules []translate.FallbackRule, requeue bool) {
	present := activeIn(ctx, reader, vapActivation)
	held := heldRules(sink.RulesOf(policy), next, plan, present)
	rules = append(next, held...)
	var bridged []translate.FallbackRule
	if bridge != nil && !bridges.full(policy) && !allInPlace(plan, present) {
		bridged = bridgedRules(rules, bridge(), plan, present)
	}
	if !bridges.take(policy, len(bridged)) {
		bridged = nil
	}
	return append(rules, bridged...), len(held) > 0 || len(bridged) > 0
}

// allInPlace reports whether every rule the plan enforces with VAPs has
// them active.
func allInPlace(plan *translate.Plan, present func(kind, name string) bool) bool {
	for _, rr := range plan.Rules {
		if !inPlace(plan, rr.Rule, present) {
			return false
		}
	}
	return true
}

// bridgedRules returns the bridge's fallback rules (the policy translated
// with generation off) that enforce a rule whose VAPs are not active, and
// that rules does not carry already.
func bridgedRules(rules, bridge []translate.FallbackRule, plan *translate.Plan, present func(kind, name string) bool) []translate.FallbackRule {
	carried := webhookRuleNames(rules)
	var out []translate.FallbackRule
	for i := range bridge {
		fr := &bridge[i]
		if fr.NotEnforced != "" || carried[fr.Rule.Name] {
			continue
		}
		for _, n := range ruleNames(fr) {
			if !inPlace(plan, n, present) {
				out = append(out, *fr)
				break
			}
		}
	}
	return out
}

// bridgeFor is handOver's bridge for a ClusterPolicy or Policy: its
// translation with generation off, as the webhook enforces every rule
// then (none when Kyverno runs: kyvap's webhook does not serve then). The
// translation goes through plans: a handover polls every second.
func bridgeFor(ctx context.Context, plans *planCache, in clusterpolicy.Input, resolver kyverno.KindResolver, opts translate.Options, kyverno bool) func() []translate.FallbackRule {
	return func() []translate.FallbackRule {
		opts.GenerateValidatingAdmissionPolicy = false
		plan, err := plans.translate(ctx, in, resolver, opts)
		if err != nil {
			return nil // no bridge: the VAPs alone, a second later
		}
		return fallbackRules(&plan, kyverno)
	}
}

// activeIn reports, through reader, whether a generated object exists and
// the API server enforces its current version by now (clock). Any error but a found object
// says no: keeping a rule twice is safe.
func activeIn(ctx context.Context, reader client.Reader, clock *activationClock) func(kind, name string) bool {
	return func(kind, name string) bool {
		var obj client.Object = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if kind == kindBinding {
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		}
		if reader.Get(ctx, types.NamespacedName{Name: name}, obj) != nil {
			return false
		}
		return clock.active(activationKey(obj), lastChanged(obj))
	}
}

// bridgeModel is the rules handOverModel may bridge: all of the policy's,
// none when Kyverno runs (kyvap's webhook does not serve then).
func bridgeModel(p *model.Policy, kyverno bool) []model.Rule {
	if kyverno {
		return nil
	}
	return p.Rules
}

// handOverModel is handOver for a policy of the policy model: the rules of
// the policy whose VAPs are not active yet are bridged as they are (the
// engine evaluates every rule of the model), none when Kyverno runs.
func handOverModel(ctx context.Context, reader client.Reader, sink FallbackSink, source model.Source, plan *translate.Plan, next, all []model.Rule) (rules []model.Rule, requeue bool) {
	present := activeIn(ctx, reader, vapActivation)
	held := heldModelRules(sink.ModelRulesOf(source), next, plan, present)
	rules = append(next, held...)
	carried := webhookModelRuleIDs(rules)
	var bridged []model.Rule
	for i := range all {
		if !carried[all[i].ID] && !inPlace(plan, all[i].ID, present) {
			bridged = append(bridged, all[i])
		}
	}
	if !bridges.take(source.String(), len(bridged)) {
		bridged = nil
	}
	return append(rules, bridged...), len(held) > 0 || len(bridged) > 0
}

// webhookModelRules are the rules of a lowered policy that the plan hands
// to kyvap's webhook (its engine can evaluate them): none when Kyverno runs
// and enforces them itself.
func webhookModelRules(p *model.Policy, plan *translate.Plan, kyvernoRunning bool) []model.Rule {
	if kyvernoRunning {
		return nil
	}
	toWebhook := map[string]bool{}
	for _, rr := range plan.Rules {
		if rr.Verdict == translate.VerdictFallback && rr.Fallback != nil && rr.Fallback.NotEnforced == "" {
			toWebhook[rr.Rule] = true
		}
	}
	var out []model.Rule
	for _, r := range p.Rules {
		if toWebhook[r.ID] {
			out = append(out, r)
		}
	}
	return out
}

// webhookModelRuleIDs are the IDs of rules.
func webhookModelRuleIDs(rules []model.Rule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		out[r.ID] = true
	}
	return out
}

// webhookRuleNames are the names of the rules the plan hands to kyvap's
// webhook for enforcement.
func webhookRuleNames(rules []translate.FallbackRule) map[string]bool {
	out := map[string]bool{}
	for i := range rules {
		if rules[i].NotEnforced != "" {
			continue
		}
		for _, n := range ruleNames(&rules[i]) {
			out[n] = true
		}
	}
	return out
}

// holdStale reports whether a generated object the plan no longer wants
// must stay: its rule is now the webhook's, and the webhook configuration
// does not cover it yet.
func holdStale(obj client.Object, policy string, toWebhook map[string]bool, coverage WebhookCoverage) bool {
	if coverage == nil {
		return false
	}
	rule := obj.GetAnnotations()[translate.AnnotationRule]
	return toWebhook[rule] && !coverage.Covers(policy, rule)
}

// held reports whether an outcome kept a stale object.
func held(outcomes []objectOutcome) bool {
	for _, o := range outcomes {
		if o.Action == actionHeld {
			return true
		}
	}
	return false
}

// activating reports whether the API server may not enforce yet what this
// replica wrote for the plan: this reconcile wrote an object, or the
// version of one of the plan's objects that this replica wrote is not
// active yet (its cache has not seen it, or saw it less than
// vapActivationGrace ago: the hand-over's notion of active). The
// reconciler reports the policy not Ready and looks again after
// handoverPoll. Only this replica's own writes count: a restarted manager,
// which wrote nothing, reports a converged policy Ready at once (a no-op
// reconcile writes nothing).
func activating(ctx context.Context, reader client.Reader, plan *translate.Plan, outcomes []objectOutcome) bool {
	for _, o := range outcomes {
		if o.Err == nil && (o.Action == actionCreated || o.Action == actionUpdated) {
			return true
		}
	}
	pending := false
	check := func(kind, name string, obj client.Object) {
		written, ok := vapWrites.version(kind, name)
		if !ok {
			return
		}
		if reader.Get(ctx, types.NamespacedName{Name: name}, obj) != nil || obj.GetUID() != written.uid || obj.GetGeneration() < written.generation {
			pending = true // the cache has not caught up with the write
			return
		}
		if !vapActivation.active(activationKey(obj), written.at) {
			pending = true
			return
		}
		vapWrites.forget(kind, name, written)
	}
	for _, vap := range plan.ValidatingAdmissionPolicies {
		check(kindVAP, vap.Name, &admissionregistrationv1.ValidatingAdmissionPolicy{})
	}
	for _, b := range plan.Bindings {
		check(kindBinding, b.Name, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
	}
	return pending
}

// writeClock remembers the versions of generated objects this replica
// wrote until they are active.
type writeClock struct {
	mu      sync.Mutex
	now     func() time.Time
	written map[string]writtenVersion
}

// writtenVersion is the object and generation a write produced, and
// when.
type writtenVersion struct {
	uid        types.UID
	generation int64
	at         time.Time
}

func newWriteClock(now func() time.Time) *writeClock {
	return &writeClock{now: now, written: map[string]writtenVersion{}}
}

// vapWrites is the manager's write clock, shared by every reconciler.
var vapWrites = newWriteClock(time.Now)

// wrote records a successful create or update: obj as the API server
// returned it.
func (w *writeClock) wrote(kind string, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written[kind+"/"+obj.GetName()] = writtenVersion{uid: obj.GetUID(), generation: obj.GetGeneration(), at: w.now()}
}

// version returns the version this replica last wrote of the object, if
// it did so less than vapSettled ago (past that, the object counts as
// active whatever the cache says); older entries are forgotten.
func (w *writeClock) version(kind, name string) (writtenVersion, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for k, v := range w.written {
		if now.Sub(v.at) >= vapSettled {
			delete(w.written, k)
		}
	}
	v, ok := w.written[kind+"/"+name]
	return v, ok
}

// forget drops the entry once its version is active, unless a newer write
// replaced it meanwhile.
func (w *writeClock) forget(kind, name string, v writtenVersion) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written[kind+"/"+name] == v {
		delete(w.written, kind+"/"+name)
	}
}
