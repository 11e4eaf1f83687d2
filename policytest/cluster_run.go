// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/translate"
)

var nonName = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// ForeignDenial starts the reason of a row skipped because something other
// than the policy under test denied its request.
const ForeignDenial = "another policy of the cluster denied the request first"

// Names of rules in the API server's answers: a VAP's denial and warning
// name the VAP; kyvap's webhook names the policy and rule.
var (
	vapInAnswer     = regexp.MustCompile(`ValidatingAdmissionPolicy '([^']+)'`)
	webhookInAnswer = regexp.MustCompile(`ClusterPolicy '([^']+)' rule '([^']+)'`)
)

// RunCluster replays the suite against a live cluster running kyvap and
// compares the API server's answers with the expected results. It creates
// the suite's namespaces, parameters, exceptions and CRDs, then one policy
// at a time (so that one policy's denial cannot hide another's): the old
// objects of its UPDATE and DELETE requests, the policy, a wait for kyvap's
// status, every request of its results as a server-side dry run (as the
// suite's user when it has one), and the removal of the policy. Everything
// it created is deleted before it returns, also when ctx is cancelled.
//
// An expected fail must be named by the API server (the denial under
// Enforce, a warning under Audit); pass and skip must not be (the API
// server cannot tell them apart); error must be named unless the policy's
// failurePolicy is Ignore. Rows kyvap does not enforce are skipped, with
// the reason, as in Run.
//
// ValidatingPolicies and NamespacedValidatingPolicies are replayed the
// same way, one policy at a time, after the ClusterPolicies (see
// cluster_vpol.go for where the API server's answer differs from Kyverno's
// CLI: policies kyvap does not enforce, background-only and Audit-only
// policies are skipped; a NamespacedValidatingPolicy's resources in other
// namespaces must be admitted).
func RunCluster(ctx context.Context, s *Suite, c *Cluster, opts Options) Report {
	r := newRunner(s, opts)
	r.cluster = true
	report := Report{Name: s.Name, Path: s.Path, Document: s.Document, Rows: []Row{}, Cluster: true}
	r.translate(&report)
	fail := func(format string, args ...any) Report {
		row := Row{Status: StatusFail, Reason: fmt.Sprintf(format, args...)}
		report.Rows = append(report.Rows, row)
		report.Summary.count(row)
		report.Warnings = append(append([]string(nil), s.Warnings...), r.warnings...)
		return report
	}
	in, err := c.Install(ctx, s)
	defer func() {
		if err := in.Remove(); err != nil {
			report.Warnings = append(report.Warnings, "cleaning up: "+err.Error())
		}
	}()
	if err != nil {
		return fail("installing the suite's objects: %v", err)
	}
	byPolicy := map[string][]int{}
	for i, res := range s.Test.Results {
		name := res.Policy
		if slash := strings.LastIndex(name, "/"); slash >= 0 {
			name = name[slash+1:]
		}
		byPolicy[name] = append(byPolicy[name], i)
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		rows, err := r.replayPolicy(ctx, c, in, p, byPolicy[p.Name])
		if err != nil {
			return fail("ClusterPolicy %s: %v", p.Name, err)
		}
		delete(byPolicy, p.Name)
		for _, row := range rows {
			report.Summary.count(row)
			report.Rows = append(report.Rows, row)
		}
		if ctx.Err() != nil {
			return fail("interrupted: %v", ctx.Err())
		}
	}
	// ValidatingPolicies and NamespacedValidatingPolicies (a name that is
	// also a ClusterPolicy's is the ClusterPolicy's, as offline).
	count := map[string]int{}
	for _, st := range r.vpols {
		count[st.vp.Name()]++
	}
	for _, st := range r.vpols {
		name := st.vp.Name()
		if r.policies[name] != nil {
			continue
		}
		rows, err := r.replayVpol(ctx, c, in, st, byPolicy[name], count[name] > 1)
		if err != nil {
			return fail("%s %s: %v", st.vp.Kind, st.vp.Key(), err)
		}
		for _, row := range rows {
			report.Summary.count(row)
			report.Rows = append(report.Rows, row)
		}
		if ctx.Err() != nil {
			return fail("interrupted: %v", ctx.Err())
		}
	}
	for _, st := range r.vpols {
		if r.policies[st.vp.Name()] == nil {
			delete(byPolicy, st.vp.Name())
		}
	}
	// Results naming no policy of the suite: as offline.
	var rest []int
	for _, idx := range byPolicy {
		rest = append(rest, idx...)
	}
	sort.Ints(rest)
	for _, i := range rest {
		for _, row := range r.rowsFor(ctx, i) {
			row.Cluster = &PathResult{Result: None}
			report.Summary.count(row)
			report.Rows = append(report.Rows, row)
		}
	}
	report.Warnings = append(append(append([]string(nil), s.Warnings...), r.warnings...), report.Warnings...)
	return report
}

// clusterRequest is one request of a policy's results.
type clusterRequest struct {
	row Row
	res *TestResult
	req *admissionv1.AdmissionRequest
	// obj is what is sent; old the stored object an UPDATE or DELETE needs.
	obj, old *unstructured.Unstructured
	// admit: the API server must admit the request whatever the expected
	// result (a NamespacedValidatingPolicy's resource in another
	// namespace), and why.
	admit string
}

// replayTarget is the policy a set of requests is checked against: how it
// is installed (and kyvap's status awaited), its VAPs in the cluster (name
// → rule), and how an answer is judged.
type replayTarget struct {
	install  func(ctx context.Context) error
	vapRules func(ctx context.Context) (map[string]string, error)
	judge    func(a Answer, cr *clusterRequest, vapRules map[string]string) PathResult
}

// request builds the request of one resource of a result, or the row that
// says why it is not sent.
// policy is "" for a ValidatingPolicy, whose request no per-policy value
// shapes (vpolRequestFor).
func (r *runner) request(base Row, res *TestResult, policy string, resource *Resource) (*clusterRequest, *Row) {
	spec := r.suite.vpolRequestFor(resource, res.Operation)
	if policy != "" {
		spec = r.suite.requestFor(policy, resource, res.Operation)
	}
	row := base
	row.Resource, row.Operation = resource.Key(), string(spec.operation)
	req, _, err := r.builder.admissionRequest(spec)
	if err != nil {
		row.Status, row.Reason = StatusFail, err.Error()
		return nil, &row
	}
	if req.SubResource != "" {
		row := skippedRow(base, resource.Key(), "a subresource request: kyvap test --cluster sends objects through their own resource only")
		return nil, &row
	}
	obj, old, err := RequestObjects(req)
	if err != nil {
		row.Status, row.Reason = StatusFail, err.Error()
		return nil, &row
	}
	if spec.operation == admissionv1.Delete {
		obj = old
	}
	return &clusterRequest{row: row, res: res, req: req, obj: obj, old: old}, nil
}

// replayPolicy checks the results of one policy.
func (r *runner) replayPolicy(ctx context.Context, c *Cluster, in *Installation, p *kyvernov1.ClusterPolicy, results []int) ([]Row, error) {
	var rows []Row
	var requests []clusterRequest
	for _, i := range results {
		res := &r.suite.Test.Results[i]
		base := Row{Policy: res.Policy, Rule: res.Rule, Expected: res.Result}
		if kind := nonKyvernoResult(res); kind != "" {
			rows = append(rows, skippedRow(base, "", fmt.Sprintf("a %s result: kyvap translates Kyverno ClusterPolicies only", kind)))
			continue
		}
		if reason := r.notEnforced(p, res.Rule); reason != "" {
			rows = append(rows, skippedRow(base, "", reason))
			continue
		}
		selected, warnings := r.suite.SelectResources(i)
		r.warnings = append(r.warnings, warnings...)
		for _, resource := range selected {
			if why := r.unserved(resource); why != "" {
				rows = append(rows, skippedRow(base, resource.Key(), why))
				continue
			}
			if r.noUser && matchesOnUser(p, baseRule(res.Rule)) {
				rows = append(rows, skippedRow(base, resource.Key(), "the test gives no user, so Kyverno ignores the rule's user filters (its background-scan behaviour); admission requests always have a user"))
				continue
			}
			cr, row := r.request(base, res, p.Name, resource)
			if row != nil {
				rows = append(rows, *row)
				continue
			}
			requests = append(requests, *cr)
		}
	}
	target := &replayTarget{
		install: func(ctx context.Context) error {
			return in.AddPolicies(ctx, []kyvernov1.ClusterPolicy{*p}, PolicyStatusTimeout)
		},
		vapRules: func(ctx context.Context) (map[string]string, error) { return in.vapRules(ctx, p.Name) },
		judge: func(a Answer, cr *clusterRequest, vapRules map[string]string) PathResult {
			return judge(a, p, cr.res, vapRules)
		},
	}
	checked, err := r.sendRequests(ctx, c, in, target, requests)
	return append(rows, checked...), err
}

// sendRequests checks the requests against the target: the CREATE
// requests first; then the old objects of the others are stored (before
// the policy exists, which might deny them) and the policy is installed
// again for them.
func (r *runner) sendRequests(ctx context.Context, c *Cluster, in *Installation, target *replayTarget, requests []clusterRequest) ([]Row, error) {
	var rows []Row
	var olds []client.Object
	defer func() {
		for _, o := range olds {
			_ = in.retried(context.Background(), func() error { return in.c.Delete(context.Background(), o) })
		}
	}()
	seenOld := map[string]bool{}
	var creates, others []clusterRequest
	for _, cr := range requests {
		if cr.req.Operation == admissionv1.Create {
			creates = append(creates, cr)
		} else {
			others = append(others, cr)
		}
	}
	checked, err := r.checkRequests(ctx, c, in, target, creates)
	if err != nil {
		return nil, err
	}
	rows = append(rows, checked...)
	var ready []clusterRequest
	for _, cr := range others {
		key := cr.row.Resource
		if !seenOld[key] {
			seenOld[key] = true
			old := cr.old.DeepCopy()
			old.SetResourceVersion("")
			created, err := in.createOld(ctx, old)
			if err != nil {
				row := cr.row
				row.Status, row.Reason = StatusFail, fmt.Sprintf("creating the old object: %v", err)
				rows = append(rows, row)
				continue
			}
			if created {
				olds = append(olds, old)
			}
		}
		ready = append(ready, cr)
	}
	checked, err = r.checkRequests(ctx, c, in, target, ready)
	if err != nil {
		return nil, err
	}
	return append(rows, checked...), nil
}

// checkRequests installs the policy, sends the requests and removes the
// policy again.
func (r *runner) checkRequests(ctx context.Context, c *Cluster, in *Installation, target *replayTarget, requests []clusterRequest) ([]Row, error) {
	if len(requests) == 0 {
		return nil, nil
	}
	var rows []Row
	if err := target.install(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = in.RemovePolicies(context.Background()) }()
	vapRules, err := target.vapRules(ctx)
	if err != nil {
		return nil, err
	}
	cfg := c.UserConfig(r.suite)
	settle := c.Settle
	if settle == 0 {
		settle = 15 * time.Second
	}
	for i := range requests {
		cr := &requests[i]
		var answer Answer
		var judged PathResult
		deadline := time.Now().Add(settle)
		for {
			answer = c.Ask(ctx, cfg, cr.req, cr.obj)
			judged = target.judge(answer, cr, vapRules)
			if judged.Result == NotApplicable {
				// A denial by a VAP the list did not hold: the policy's own
				// VAPs may have been listed before one of them was
				// (re)created; list them again before calling it foreign.
				if fresh, err := target.vapRules(ctx); err == nil {
					vapRules = fresh
					judged = target.judge(answer, cr, vapRules)
				}
			}
			if *judged.Match || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		row := cr.row
		row.Cluster = &judged
		row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
		want := cr.res.Result
		if cr.admit != "" {
			want = "admitted (" + cr.admit + ")"
		}
		switch {
		case answer.NotAdmissible != nil:
			row.Status, row.Reason = StatusSkipped, "the API server refuses the object before admission: "+firstLine(answer.NotAdmissible.Error())
			row.Cluster = &PathResult{Result: NotApplicable, Message: answer.NotAdmissible.Error()}
		case judged.Result == NotApplicable:
			row.Status, row.Reason = StatusSkipped, ForeignDenial+" ("+denier(answer.Denial)+")"
		case *judged.Match:
			row.Status = StatusPass
			row.Reason = judged.Message
			if cr.admit != "" {
				row.Reason = "admitted: " + cr.admit + "; " + judged.Message
			}
		default:
			row.Status, row.Reason = StatusFail, fmt.Sprintf("API server: want %s, got %s: %s", want, judged.Result, answer)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func skippedRow(base Row, resource, reason string) Row {
	row := base
	row.Resource, row.Status, row.Reason = resource, StatusSkipped, reason
	row.VAP, row.Engine = PathResult{Result: NotApplicable}, PathResult{Result: NotApplicable}
	row.Cluster = &PathResult{Result: NotApplicable}
	return row
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// notEnforced says why kyvap does not enforce the result's rule(s), or "".
func (r *runner) notEnforced(p *kyvernov1.ClusterPolicy, rule string) string {
	st := r.policies[p.Name]
	if st == nil || st.err != nil {
		return ""
	}
	if st.backgroundOnly {
		return "background-only (spec.admission: false): the API server never judges it at admission; kyvap's background scan reports it in PolicyReports, and kyvap test without --cluster gives the scan's verdict"
	}
	if rule == "" {
		return ""
	}
	if rr := st.rule(rule); rr != nil {
		return skipReason(rr)
	}
	return ""
}

// RequestObjects decodes the new and old object of a request.
func RequestObjects(req *admissionv1.AdmissionRequest) (obj, old *unstructured.Unstructured, err error) {
	decode := func(raw []byte) (*unstructured.Unstructured, error) {
		if len(raw) == 0 {
			return nil, nil
		}
		u := &unstructured.Unstructured{}
		return u, json.Unmarshal(raw, &u.Object)
	}
	if obj, err = decode(req.Object.Raw); err != nil {
		return nil, nil, err
	}
	if old, err = decode(req.OldObject.Raw); err != nil {
		return nil, nil, err
	}
	return obj, old, nil
}

// judge reads the API server's answer for one expected result: which of
// the policy's rules it names, and whether that is what the test expects.
func judge(a Answer, p *kyvernov1.ClusterPolicy, res *TestResult, vapRules map[string]string) PathResult {
	named := func(text string) []string {
		var rules []string
		for _, m := range vapInAnswer.FindAllStringSubmatch(text, -1) {
			if rule, ok := vapRules[m[1]]; ok {
				rules = append(rules, rule)
			}
		}
		for _, m := range webhookInAnswer.FindAllStringSubmatch(text, -1) {
			if m[1] == p.Name {
				rules = append(rules, m[2])
			}
		}
		return rules
	}
	selected := func(rules []string) bool {
		for _, rule := range rules {
			if RuleSelected(res.Rule, rule) {
				return true
			}
		}
		return false
	}
	denied := !a.Allowed && selected(named(a.Denial))
	warned := false
	for _, w := range a.Warnings {
		warned = warned || selected(named(w))
	}
	out := PathResult{Result: Pass, Message: a.String()}
	switch {
	case a.NotAdmissible != nil:
		out.Result = NotApplicable
	case denied || warned:
		out.Result = Fail
	case !a.Allowed && !otherFailureExpected(a, p):
		// Something else in the cluster (another policy, another webhook)
		// denied the request first: this policy's verdict is not visible.
		out.Result = NotApplicable
		out.Message = "another policy denied the request first: " + a.Denial
		f := false
		out.Match = &f
		return out
	case !a.Allowed:
		// Another rule of the policy denied first: the API server reports
		// one denial, so this rule's own verdict is not visible.
		out.Result = Skip
		out.Message = "denied by another rule of the policy (the API server reports one denial): " + a.Denial
	}
	ok := false
	switch res.Result {
	case "fail":
		ok = out.Result == Fail || (out.Result == Skip && otherFailureExpected(a, p))
	case "pass", "skip":
		ok = out.Result == Pass || out.Result == Skip
	case "error":
		ignore := p.Spec.FailurePolicy != nil && *p.Spec.FailurePolicy == kyvernov1.Ignore
		ok = out.Result == Fail || (ignore && out.Result == Pass)
	}
	if out.Result == NotApplicable {
		ok = true
	}
	out.Match = &ok
	return out
}

// otherFailureExpected: the denial came from some rule of the policy, which
// the API server reported instead of the expected one.
func otherFailureExpected(a Answer, p *kyvernov1.ClusterPolicy) bool {
	return !a.Allowed && (strings.Contains(a.Denial, "ValidatingAdmissionPolicy '"+translate.VAPNamePrefix(p.Name)) || strings.Contains(a.Denial, "ClusterPolicy '"+p.Name+"'"))
}

// vapRules maps the names of the policy's VAPs in the cluster to their rules.
func (in *Installation) vapRules(ctx context.Context, policy string) (map[string]string, error) {
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := in.c.List(ctx, &vaps, client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, v := range vaps.Items {
		if v.Annotations[translate.AnnotationPolicy] == policy {
			out[v.Name] = v.Annotations[translate.AnnotationRule]
		}
	}
	return out, nil
}

// addCRDs creates the suite's CRDs and waits until they are served.
func (in *Installation) addCRDs(ctx context.Context, crds []apiextensionsv1.CustomResourceDefinition) error {
	for i := range crds {
		crd := crds[i].DeepCopy()
		crd.ResourceVersion = ""
		if err := in.create(ctx, crd, true); err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: %w", crd.Name, err)
		}
	}
	for i := range crds {
		name := crds[i].Name
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := in.c.Get(wctx, client.ObjectKey{Name: name}, crd); err == nil && established(crd) {
				break
			}
			select {
			case <-wctx.Done():
				cancel()
				return fmt.Errorf("CustomResourceDefinition %s is not established", name)
			case <-time.After(200 * time.Millisecond):
			}
		}
		cancel()
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// StoreOldObject stores the old object of an UPDATE or DELETE request
// before the policies are added, for Remove to delete; one that exists
// already is used as it is (and left in place).
func (in *Installation) StoreOldObject(ctx context.Context, old *unstructured.Unstructured) error {
	obj := old.DeepCopy()
	obj.SetResourceVersion("")
	created, err := in.createOld(ctx, obj)
	if created {
		in.created = append(in.created, obj)
	}
	return err
}

// createOld stores the old object of an UPDATE or DELETE request; one
// that exists already is used as it is (and left in place).
func (in *Installation) createOld(ctx context.Context, old *unstructured.Unstructured) (created bool, err error) {
	err = in.retried(ctx, func() error { return in.c.Create(ctx, old.DeepCopy()) })
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// denier names what denied a request: the VAP, or the webhook's policy and
// rule, as the denial says.
func denier(denial string) string {
	if m := webhookInAnswer.FindStringSubmatch(denial); m != nil {
		return "ClusterPolicy " + m[1] + " rule " + m[2]
	}
	if m := vapInAnswer.FindStringSubmatch(denial); m != nil {
		return "ValidatingAdmissionPolicy " + m[1]
	}
	return firstLine(denial)
}
