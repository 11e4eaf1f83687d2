// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// Options tune a run.
type Options struct {
	// CompatibilityVersion is the target cluster's CEL compatibility
	// version ("1.37"); empty means the newest this build knows.
	CompatibilityVersion string
	// Strict fails the results that name a rule their policy does not
	// have, and those expecting pass for a resource no ClusterPolicy rule
	// matches; by default they pass, as Kyverno's CLI counts such
	// resources as excluded.
	Strict bool
}

// Autogen rule name prefixes (Kyverno's pod-controller variants).
const (
	autogenPrefix        = "autogen-"
	autogenCronJobPrefix = "autogen-cronjob-"
)

// policyState is one policy translated both ways.
type policyState struct {
	policy *kyvernov1.ClusterPolicy
	// vap is the plan with VAP generation on (what the operator deploys);
	// engine the plan with it off (every CEL rule a FallbackRule).
	vap, engine translate.Plan
	// rules indexes vap.Rules by rule name.
	rules map[string]*translate.RuleResult
	// vapRule maps each generated VAP's name to its rule.
	vapRule map[string]string
	// vapFailuresAreErrors names the generated VAPs of rules compiled from
	// Kyverno's classic language (translate.AnnotationEvaluationFailures).
	vapFailuresAreErrors map[string]bool
	// fallbackNames are the rule names (as reported, autogen variants
	// included) that the VAP path leaves to the fallback engine.
	fallbackNames map[string]bool
	// err is a translation error; every row of the policy reports it.
	err error
	// backgroundOnly: spec.admission is false with background scans on;
	// vap and engine translate the policy as kyvap's scanner evaluates it
	// (admission on).
	backgroundOnly bool
}

// runner evaluates one suite.
type runner struct {
	suite    *Suite
	opts     Options
	resolver kyverno.KindResolver
	builder  requestBuilder
	policies map[string]*policyState
	order    []string
	paths    *paths
	ns       map[string]*corev1.Namespace
	// evaluations caches the evaluation of each distinct request.
	evaluations map[string]*evaluation
	warnings    []string
	// vpols are the suite's ValidatingPolicies, vpaths their evaluation.
	vpols  []*vpolState
	vpaths *vpolPaths
	// cluster: a --cluster replay (RunCluster sends ValidatingPolicy results itself).
	cluster bool
	// engineCaps are what the engine evaluates beyond the pure libraries
	// (the resource library, reading the test's context file).
	engineCaps translate.EngineCapabilities
	// noUser: the test's request info is empty (no user-info file), in
	// which case Kyverno's matcher ignores user filters in match blocks.
	noUser bool
}

// evaluation is what both paths concluded for one request.
type evaluation struct {
	// vap maps policy → reported rule name → result.
	vap map[string]map[string]PathResult
	// engine maps policy → reported rule name → result.
	engine map[string]map[string]PathResult
	// vpol maps each ValidatingPolicy to its rules' outcomes on the VAP
	// path; vpolEngine to their outcomes on the engine path.
	vpol       map[*vpolState]map[string]vpolOutcome
	vpolEngine map[*vpolState]map[string]PathResult
	// err is why the request could not be evaluated; vpolErr why the
	// ValidatingPolicies could not be.
	err, vpolErr error
}

// Run translates the suite's policies, evaluates every expected result
// through the VAP path and the fallback-engine path, and compares both with
// the expectation, following the Kyverno CLI's rules for selecting
// resources and rules.
func Run(ctx context.Context, s *Suite, opts Options) Report {
	r := newRunner(s, opts)
	report := Report{Name: s.Name, Path: s.Path, Document: s.Document, Rows: []Row{}}
	r.translate(&report)
	r.paths = newPaths(r)
	if len(r.vpols) > 0 {
		r.vpaths = newVpolPaths(r)
		r.paths.notes = append(r.paths.notes, r.vpaths.notes...)
	}
	for i := range s.Test.Results {
		for _, row := range r.rowsFor(ctx, i) {
			row.Result = i
			report.Summary.count(row)
			report.Rows = append(report.Rows, row)
		}
	}
	report.Warnings = append(append(append([]string(nil), s.Warnings...), r.warnings...), r.paths.notes...)
	return report
}

func newRunner(s *Suite, opts Options) *runner {
	r := &runner{
		suite:       s,
		opts:        opts,
		resolver:    kyverno.NewStaticResolver(s.CRDs...),
		policies:    map[string]*policyState{},
		evaluations: map[string]*evaluation{},
	}
	r.builder = requestBuilder{suite: s, resolver: r.resolver}
	r.noUser = s.UserInfo == nil || reflect.DeepEqual(*s.UserInfo, RequestInfo{})
	r.ns = s.clusterNamespaces()
	return r
}

// translate translates every policy both ways.
func (r *runner) translate(report *Report) {
	for i := range r.suite.Policies {
		p := &r.suite.Policies[i]
		st := &policyState{policy: p, rules: map[string]*translate.RuleResult{}, vapRule: map[string]string{}, vapFailuresAreErrors: map[string]bool{}, fallbackNames: map[string]bool{}}
		r.policies[p.Name] = st
		r.order = append(r.order, p.Name)
		in := clusterpolicy.InputFor(p, r.suite.Exceptions)
		st.vap, st.err = translate.Translate(in, r.resolver, translate.Options{GenerateValidatingAdmissionPolicy: true, CompatibilityVersion: r.opts.CompatibilityVersion})
		deployed := st.vap.Rules // what the operator makes of the policy, as listed
		if st.err == nil && kyverno.BackgroundOnly(&p.Spec) {
			// Kyverno applies it in background scans only, and its CLI
			// gives those verdicts: so does kyvap's scanner, which
			// evaluates the rules as at admission (internal/scan).
			st.backgroundOnly = true
			r.warnings = append(r.warnings, fmt.Sprintf("ClusterPolicy %q: spec.admission is false, so no VAP is deployed; its results are the verdicts of kyvap's background scan, as Kyverno's CLI gives its scan's", p.Name))
			in = clusterpolicy.InputFor(kyverno.AsScanned(p), r.suite.Exceptions)
			st.vap, st.err = translate.Translate(in, r.resolver, translate.Options{GenerateValidatingAdmissionPolicy: true, CompatibilityVersion: r.opts.CompatibilityVersion})
		}
		if st.err == nil {
			st.engine, st.err = translate.Translate(in, r.resolver, translate.Options{GenerateValidatingAdmissionPolicy: false, CompatibilityVersion: r.opts.CompatibilityVersion})
		}
		if st.err != nil {
			st.err = fmt.Errorf("translating ClusterPolicy %q: %w", p.Name, st.err)
			continue
		}
		for j := range deployed {
			rr := &deployed[j]
			report.Rules = append(report.Rules, RuleVerdict{
				Policy: p.Name, Rule: rr.Rule, Verdict: string(rr.Verdict), Reason: string(rr.Reason),
				VAPs: rr.ValidatingAdmissionPolicies, Message: rr.Message,
			})
		}
		for j := range st.vap.Rules {
			rr := &st.vap.Rules[j]
			st.rules[rr.Rule] = rr
			if fb := rr.Fallback; fb != nil {
				st.fallbackNames[fb.Rule.Name] = true
				for _, a := range fb.AdditionalRules {
					st.fallbackNames[a.Name] = true
				}
			}
		}
		for _, v := range st.vap.ValidatingAdmissionPolicies {
			st.vapRule[v.Name] = v.Annotations[translate.AnnotationRule]
			st.vapFailuresAreErrors[v.Name] = v.Annotations[translate.AnnotationEvaluationFailures] == "error"
		}
		for _, w := range st.vap.Warnings {
			r.warnings = append(r.warnings, fmt.Sprintf("%s: %s", p.Name, w))
		}
	}
	r.translateValidating(report)
}

// rowsFor checks test result i.
func (r *runner) rowsFor(ctx context.Context, i int) []Row {
	res := &r.suite.Test.Results[i]
	base := Row{Policy: res.Policy, Rule: res.Rule, Expected: res.Result}
	skipped := func(resource, reason string) []Row {
		row := base
		row.Resource, row.Status, row.Reason = resource, StatusSkipped, reason
		row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
		return []Row{row}
	}
	name := res.Policy
	if slash := strings.LastIndex(name, "/"); slash >= 0 {
		name = name[slash+1:] // Kyverno compares the policy name only
	}
	if states := r.vpolsNamed(name); len(states) > 0 && r.policies[name] == nil {
		return r.vpolRows(ctx, i, states)
	}
	if kind := nonKyvernoResult(res); kind != "" && (!res.IsValidatingPolicy || r.policies[name] == nil) {
		if res.IsValidatingPolicy {
			for _, ig := range r.suite.Ignored {
				if ig.Name == res.Policy || strings.HasSuffix(ig.Name, "/"+name) || ig.Name == name {
					return skipped("", ig.Reason)
				}
			}
			row := base
			row.Status, row.Reason = StatusFail, fmt.Sprintf("ValidatingPolicy %q is not among the test's policies (Kyverno's CLI reports it as not found)", res.Policy)
			row.VAP, row.Engine = PathResult{Result: None}, PathResult{Result: None}
			return []Row{row}
		}
		return skipped("", fmt.Sprintf("a %s result: kyvap translates Kyverno ClusterPolicies and ValidatingPolicies only", kind))
	}
	st := r.policies[name]
	if st == nil {
		for _, ig := range r.suite.Ignored {
			if ig.Name == res.Policy || strings.HasSuffix(ig.Name, "/"+name) || ig.Name == name {
				return skipped("", ig.Reason)
			}
		}
		row := base
		row.Status, row.Reason = StatusFail, fmt.Sprintf("policy %q is not among the test's policies (Kyverno's CLI reports it as not found)", res.Policy)
		row.VAP, row.Engine = PathResult{Result: None}, PathResult{Result: None}
		return []Row{row}
	}
	if st.err != nil {
		row := base
		row.Status, row.Reason = StatusFail, st.err.Error()
		row.VAP, row.Engine = PathResult{Result: None}, PathResult{Result: None}
		return []Row{row}
	}
	if res.Rule != "" && st.rule(res.Rule) == nil {
		return r.missingRuleRows(i, base, name)
	}
	var rows []Row
	selected, warnings := r.suite.SelectResources(i)
	r.warnings = append(r.warnings, warnings...)
	for _, resource := range selected {
		if why := r.unserved(resource); why != "" {
			rows = append(rows, skipped(resource.Key(), why)...)
			continue
		}
		spec := r.suite.requestFor(name, resource, res.Operation)
		row := base
		row.Resource = resource.Key()
		row.Operation = string(spec.operation)
		ev := r.evaluate(ctx, spec)
		if ev.err != nil {
			row.Status, row.Reason = StatusFail, ev.err.Error()
			row.VAP, row.Engine = PathResult{Result: None}, PathResult{Result: None}
			rows = append(rows, row)
			continue
		}
		rows = append(rows, r.compare(st, res, row, resource.Object.GetKind(), ev)...)
	}
	return rows
}

// missingRuleRows are the rows of result i, which names a rule its policy
// does not have (a misspelt name). Kyverno's CLI finds no rule response
// for it, counts each resource as excluded and passes the row
// (cmd/cli/kubectl-kyverno/commands/test/output.go): so does kyvap, with a
// warning; Options.Strict fails the rows instead.
func (r *runner) missingRuleRows(i int, base Row, policy string) []Row {
	res := &r.suite.Test.Results[i]
	r.warnings = append(r.warnings, fmt.Sprintf("results[%d]: policy %q has no rule %q; Kyverno's CLI counts its resources as excluded (passed), and so does kyvap unless --strict", i, policy, res.Rule))
	selected, warnings := r.suite.SelectResources(i)
	r.warnings = append(r.warnings, warnings...)
	rows := make([]Row, 0, len(selected))
	for _, resource := range selected {
		row := base
		row.Resource = resource.Key()
		row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
		if r.opts.Strict {
			row.Status, row.Reason = StatusFail, fmt.Sprintf("policy %q has no rule %q (--strict; Kyverno's CLI passes the row as excluded)", policy, res.Rule)
		} else {
			row.Status, row.Reason = StatusPass, fmt.Sprintf("excluded: policy %q has no rule %q, as Kyverno's CLI counts it (--strict fails it)", policy, res.Rule)
		}
		rows = append(rows, row)
	}
	return rows
}

// unserved says why no API server of the targeted version can be sent the
// resource, or "": a kind of a built-in API group (one the resolver serves
// other kinds of) that is not served in that group/version, such as
// policy/v1beta1 PodSecurityPolicy, removed in Kubernetes 1.25.
func (r *runner) unserved(resource *Resource) string {
	return r.suite.unservedBy(r.resolver, resource)
}

// Unserved says why no API server of the Kubernetes version kyvap targets
// can be sent the resource (its kind is not served in a built-in API
// group it names, such as batch/v1beta1 CronJob), or "".
func (s *Suite) Unserved(resource *Resource) string {
	return s.unservedBy(kyverno.NewStaticResolver(s.CRDs...), resource)
}

func (s *Suite) unservedBy(resolver kyverno.KindResolver, resource *Resource) string {
	gvk := resource.Object.GroupVersionKind()
	if _, ok := resolveObject(resolver, gvk); ok {
		return ""
	}
	if s.Values != nil {
		for _, s := range s.Values.Subresources {
			if s.Subresource.Group == gvk.Group && s.Subresource.Version == gvk.Version && s.Subresource.Kind == gvk.Kind {
				return ""
			}
		}
	}
	group := gvk.Group
	if group == "" {
		group = "core"
	}
	if gvk.Group != "" {
		if others, err := resolver.Resolve(gvk.Group + "/*/*"); err != nil || len(others) == 0 {
			return "" // an unknown group: kyvap assumes a custom resource (with a warning)
		}
	}
	return fmt.Sprintf("%s is not served by the Kubernetes version kyvap targets (API group %s): no API server of that version sends this request, so neither path can be compared", gvk, group)
}

// nonKyvernoResult names the policy type of a result that is not about a
// Kyverno policy, or "".
func nonKyvernoResult(res *TestResult) string {
	switch {
	case res.IsValidatingAdmissionPolicy:
		return "ValidatingAdmissionPolicy"
	case res.IsMutatingAdmissionPolicy:
		return "MutatingAdmissionPolicy"
	case res.IsValidatingPolicy:
		return "ValidatingPolicy"
	case res.IsDeletingPolicy:
		return "DeletingPolicy"
	case res.IsImageValidatingPolicy:
		return "ImageValidatingPolicy"
	case res.IsGeneratingPolicy:
		return "GeneratingPolicy"
	case res.IsMutatingPolicy:
		return "MutatingPolicy"
	}
	return ""
}

// baseRule strips the autogen prefixes from a reported rule name.
func baseRule(name string) string {
	if rest, ok := strings.CutPrefix(name, autogenCronJobPrefix); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(name, autogenPrefix); ok {
		return rest
	}
	return name
}

// RuleSelected reports whether a rule result named reported answers a test
// result naming want, as Kyverno's lookupRuleResponses: the rule itself or
// one of its autogen variants; every rule when the test names none.
func RuleSelected(want, reported string) bool {
	return want == "" || reported == want || reported == autogenPrefix+want || reported == autogenCronJobPrefix+want
}

// SelectResources picks the resources test result i checks, as Kyverno's
// printTestResult: entries "name" or "namespace/name", and resourceSpecs
// (consulted only when resources is set, as in Kyverno); when nothing is
// selected, every resource of the test (Kyverno checks them all then). The
// warnings name listed resources that do not exist, since that usually is
// a typo.
func (s *Suite) SelectResources(i int) (selected []*Resource, warnings []string) {
	res := &s.Test.Results[i]
	seen := map[int]bool{}
	add := func(j int) {
		if !seen[j] {
			seen[j] = true
			selected = append(selected, &s.Resources[j])
		}
	}
	if res.Resources != nil {
		for _, want := range res.Resources {
			ns, name, hasNS := strings.Cut(want, "/")
			if !hasNS {
				name = want
			}
			found := false
			for j := range s.Resources {
				obj := &s.Resources[j].Object
				if name == obj.GetName() && (!hasNS || ns == obj.GetNamespace()) {
					add(j)
					found = true
				}
			}
			if !found {
				warnings = append(warnings, fmt.Sprintf("results[%d]: resource %q is not among the test's resources", i, want))
			}
		}
		for _, spec := range res.ResourceSpecs {
			gv := spec.Version
			if spec.Group != "" {
				gv = spec.Group + "/" + spec.Version
			}
			for j := range s.Resources {
				obj := &s.Resources[j].Object
				if obj.GetAPIVersion() == gv && obj.GetNamespace() == spec.Namespace && obj.GetName() == spec.Name {
					add(j)
				}
			}
		}
	}
	if len(selected) == 0 {
		if len(res.Resources) > 0 || len(res.ResourceSpecs) > 0 {
			warnings = append(warnings, fmt.Sprintf("results[%d]: no listed resource exists; every resource is checked, as Kyverno's CLI does", i))
		}
		for j := range s.Resources {
			add(j)
		}
	}
	return selected, warnings
}

// evaluate runs both paths for a request, once per distinct request.
func (r *runner) evaluate(ctx context.Context, spec requestSpec) *evaluation {
	key := spec.key()
	if ev, ok := r.evaluations[key]; ok {
		return ev
	}
	ev := &evaluation{}
	r.evaluations[key] = ev
	req, notes, err := r.builder.admissionRequest(spec)
	if err != nil {
		ev.err = err
		return ev
	}
	for _, n := range notes {
		r.addWarning(n)
	}
	if ev.vap, err = r.paths.vap(ctx, req); err != nil {
		ev.err = fmt.Errorf("VAP path: %w", err)
		return ev
	}
	if ev.engine, ev.vpolEngine, err = r.paths.engineResults(ctx, req); err != nil {
		ev.err = fmt.Errorf("engine path: %w", err)
	}
	if r.vpaths != nil {
		if ev.vpol, err = r.vpaths.evaluate(ctx, req); err != nil {
			ev.vpolErr = fmt.Errorf("VAP path (ValidatingPolicies): %w", err)
		}
	}
	return ev
}

// addWarning adds a warning once.
func (r *runner) addWarning(w string) {
	for _, x := range r.warnings {
		if x == w {
			return
		}
	}
	r.warnings = append(r.warnings, w)
}

// compare builds the rows of one result and resource: one per rule name a
// path reported (the rule or its autogen variants), or one "excluded" row
// when neither path has a result (which passes, as in Kyverno's CLI).
// kind is the resource's.
func (r *runner) compare(st *policyState, res *TestResult, base Row, kind string, ev *evaluation) []Row {
	names := map[string]bool{}
	for name := range ev.vap[st.policy.Name] {
		if RuleSelected(res.Rule, name) {
			names[name] = true
		}
	}
	for name := range ev.engine[st.policy.Name] {
		if RuleSelected(res.Rule, name) {
			names[name] = true
		}
	}
	if res.Rule != "" {
		if rr := st.rule(res.Rule); rr != nil {
			if reason := skipReason(rr); reason != "" {
				row := base
				row.Status, row.Reason = StatusSkipped, reason
				row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
				return []Row{row}
			}
		}
	}
	if len(names) == 0 {
		row := base
		row.VAP, row.Engine = PathResult{Result: None}, PathResult{Result: None}
		row.Status, row.Reason = StatusPass, "excluded: no rule matched the resource (Kyverno's CLI counts this as a pass)"
		switch {
		case res.Kind != "" && kind != res.Kind && !r.opts.Strict:
			// A resource of another kind that shares the name the result
			// lists (Kyverno's CLI selects by name): the expectation is the
			// named kind's, and Kyverno's CLI passes this one as excluded.
			row.Reason = fmt.Sprintf("excluded: a %s of the name the result lists for a %s; no rule matched it, and Kyverno's CLI counts it as a pass (--strict fails it)", kind, res.Kind)
		case res.Result == "fail" || (res.Result == "pass" && r.opts.Strict):
			// Kyverno's CLI would count an excluded resource as a pass
			// whatever the expectation; a test expecting the rule to fail
			// expects it to match, so kyvap reports the difference (and,
			// with --strict, for an expected pass too).
			row.Status, row.Reason = StatusFail, fmt.Sprintf("no rule matched the resource on either path, while the test expects %s (Kyverno's CLI would show it as an excluded pass)", res.Result)
		case res.Result == "pass":
			// Nothing denies the resource, as the test expects: Kyverno's
			// CLI passes the row as excluded (a result naming a resource
			// the resources do not hold, say), and so does kyvap.
			row.Reason = "excluded: no rule matched the resource, and Kyverno's CLI counts the expected pass as met (--strict fails it)"
		}
		return []Row{row}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Slice(sorted, func(i, j int) bool { return ruleOrder(sorted[i], sorted[j]) })
	var rows []Row
	for _, name := range sorted {
		row := base
		if name != res.Rule {
			row.ReportedRule = name
		}
		if rr := st.rule(name); rr != nil && res.Rule == "" {
			if reason := skipReason(rr); reason != "" {
				row.Status, row.Reason = StatusSkipped, reason
				row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
				rows = append(rows, row)
				continue
			}
		}
		row.VAP = lookup(ev.vap, st.policy.Name, name)
		row.Engine = lookup(ev.engine, st.policy.Name, name)
		if st.fallbackNames[name] && row.VAP.Result == None {
			row.VAP = PathResult{Result: Fallback, Message: "left to the fallback engine by the translation"}
		}
		if rr := st.rule(name); rr != nil && rr.Reason == model.ReasonEmptyRule && row.VAP.Result == None {
			// Nothing to emit: the rule admits everything, pass or skip.
			row.VAP = PathResult{Result: NotApplicable, Message: "the rule has no expressions: no ValidatingAdmissionPolicy, every request is admitted"}
		}
		if r.noUser && matchesOnUser(st.policy, baseRule(name)) {
			row.VAP = PathResult{Result: NotApplicable, Message: "the test gives no user, so Kyverno ignores the rule's user filters (its background-scan behaviour); admission requests always have a user"}
		}
		var reasons []string
		check := func(label string, p *PathResult) {
			if p.Result == Fallback || p.Result == NotApplicable {
				return
			}
			ok := string(p.Result) == res.Result
			if p.Result == None {
				// The other path reported on the rule, this one did not
				// match: Kyverno's CLI shows such a resource as an
				// excluded pass, which meets pass and skip only.
				ok = res.Result == "pass" || res.Result == "skip"
			}
			p.Match = &ok
			if !ok {
				reasons = append(reasons, mismatch(label, res.Result, p))
			}
		}
		check("VAP path", &row.VAP)
		check("engine", &row.Engine)
		row.Status = StatusPass
		if len(reasons) > 0 {
			row.Status, row.Reason = StatusFail, strings.Join(reasons, "; ")
		}
		rows = append(rows, row)
	}
	return rows
}

// mismatch explains why a path's result is not the expected one.
func mismatch(label, want string, p *PathResult) string {
	msg := fmt.Sprintf("%s: want %s, got %s", label, want, p.Result)
	switch {
	case want == "warn":
		msg += " (Kyverno's CLI never reports warn for a ClusterPolicy validate rule: it compares results without audit-warn, and its engine gives failures as fail)"
	case p.Result == None:
		msg += " (the rule did not match the resource on this path, while the other path reports on it)"
	}
	if p.Message != "" {
		msg += ": " + p.Message
	}
	return msg
}

// lookup is a path's result for a reported rule name, None if it has none.
func lookup(m map[string]map[string]PathResult, policy, rule string) PathResult {
	if p, ok := m[policy][rule]; ok {
		return p
	}
	return PathResult{Result: None}
}

// ruleOrder sorts a rule before its autogen variants, then by name.
func ruleOrder(a, b string) bool {
	rank := func(s string) int {
		switch {
		case strings.HasPrefix(s, autogenCronJobPrefix):
			return 2
		case strings.HasPrefix(s, autogenPrefix):
			return 1
		}
		return 0
	}
	if ba, bb := baseRule(a), baseRule(b); ba != bb {
		return ba < bb
	}
	return rank(a) < rank(b)
}

// skipReason says why a rule's results cannot be evaluated by kyvap, or "".
func skipReason(rr *translate.RuleResult) string {
	switch rr.Verdict {
	case translate.VerdictNotHandled:
		return fmt.Sprintf("%s: not a CEL rule kyvap enforces; Kyverno evaluates it", rr.Reason)
	case translate.VerdictInvalid:
		if rr.Reason == model.ReasonAutogenAnnotationInvalid {
			return fmt.Sprintf("%s: Kyverno refuses the policy", rr.Reason)
		}
		return fmt.Sprintf("%s: the rule's CEL does not compile", rr.Reason)
	}
	if rr.Fallback != nil && rr.Fallback.NotEnforced != "" {
		return fmt.Sprintf("%s: the rule needs Kyverno's JMESPath engine", rr.Reason)
	}
	return ""
}

// matchesOnUser reports whether the rule's match block filters on the
// requesting user (subjects, roles or clusterRoles).
func matchesOnUser(p *kyvernov1.ClusterPolicy, rule string) bool {
	for i := range p.Spec.Rules {
		r := &p.Spec.Rules[i]
		if r.Name != rule {
			continue
		}
		m := &r.MatchResources
		if !m.UserInfo.IsEmpty() {
			return true
		}
		for _, f := range append(append(kyvernov1.ResourceFilters{}, m.Any...), m.All...) {
			if !f.UserInfo.IsEmpty() {
				return true
			}
		}
	}
	return false
}

// rule is the translation of a rule as results name it: the rule itself
// (users may name a rule autogen-*), else the rule an autogen variant comes
// from.
func (st *policyState) rule(name string) *translate.RuleResult {
	if rr := st.rules[name]; rr != nil {
		return rr
	}
	return st.rules[baseRule(name)]
}
