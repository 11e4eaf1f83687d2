// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"context"
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// ValidatingPolicies and NamespacedValidatingPolicies in a --cluster replay:
// each policy is created (a NamespacedValidatingPolicy in its namespace),
// kyvap's status awaited in status.conditionStatus.conditions, and the
// requests of its results sent as for a ClusterPolicy. The API server
// differs from Kyverno's CLI where kyvap test (offline) reproduces the CLI:
//
//   - a rule that is no VAP but kyvap's webhook enforces (a Kyverno CEL
//     library kyvap's engine implements) is judged by the webhook's answer,
//     "Policy <name> failed: ..." (or "error"), as Kyverno words it;
//   - a policy with a rule kyvap does not enforce (Kyverno CEL libraries
//     its engine lacks, CEL that does not compile, ...) or that is background-only
//     (evaluation.admission.enabled: false) has its rows skipped: no VAP
//     answers for it;
//   - a policy whose bindings only Audit has its rows skipped: the API
//     server admits and records the verdict in the audit log, which a dry
//     run does not return (Warn is a warning, Deny a denial: both are read);
//   - a NamespacedValidatingPolicy's resources outside its namespace: the
//     CLI applies the policy there, a cluster does not, so the API server
//     must admit them, whatever the expected result;
//   - rule names are ignored (as the CLI does): any of the policy's VAPs
//     naming the request is the policy's fail.

// replayVpol checks the results of one ValidatingPolicy or
// NamespacedValidatingPolicy; label names it in the rows when several
// policies share its name.
func (r *runner) replayVpol(ctx context.Context, c *Cluster, in *Installation, st *vpolState, results []int, label bool) ([]Row, error) {
	var rows []Row
	var requests []clusterRequest
	skip := vpolClusterSkip(st)
	for _, i := range results {
		res := &r.suite.Test.Results[i]
		base := Row{Policy: res.Policy, Rule: res.Rule, Expected: res.Result}
		if label {
			base.ReportedRule = st.label()
		}
		if skip != "" {
			rows = append(rows, skippedRow(base, "", skip))
			continue
		}
		selected, warnings := r.suite.SelectResources(i)
		r.warnings = append(r.warnings, warnings...)
		for _, resource := range selected {
			if why := r.unserved(resource); why != "" {
				rows = append(rows, skippedRow(base, resource.Key(), why))
				continue
			}
			if ns := resource.Object.GetNamespace(); r.suite.NamespaceMissing(ns) && policyReadsNamespaceObject(st) {
				rows = append(rows, skippedRow(base, resource.Key(), fmt.Sprintf("namespace %s is not among the test's context Namespaces: a cluster without it refuses the request before any admission policy (the replay creates it for the other policies), and Kyverno's CLI reads it as null", ns)))
				continue
			}
			cr, row := r.request(base, res, "", resource)
			if row != nil {
				rows = append(rows, *row)
				continue
			}
			if ns := st.vp.Namespace(); st.vp.Namespaced != nil && resource.Object.GetNamespace() != ns {
				cr.admit = fmt.Sprintf("outside the NamespacedValidatingPolicy's namespace %s: Kyverno's CLI applies it in every namespace (expected %s), a cluster only in its own", ns, res.Result)
			}
			requests = append(requests, *cr)
		}
	}
	// Requests the policy denies (or warns about) first: once the API
	// server names the policy, its VAPs are in force, and the admissions
	// that follow (pass, skip, other namespaces) are its verdict rather
	// than a VAP not yet loaded.
	rank := func(cr *clusterRequest) int {
		switch {
		case cr.admit != "":
			return 2
		case cr.res.Result == "fail" || cr.res.Result == "error":
			return 0
		}
		return 1
	}
	sort.SliceStable(requests, func(a, b int) bool { return rank(&requests[a]) < rank(&requests[b]) })
	target := &replayTarget{
		install: func(ctx context.Context) error { return in.AddValidatingPolicy(ctx, st.vp, PolicyStatusTimeout) },
		vapRules: func(ctx context.Context) (map[string]string, error) {
			return in.vpolVAPRules(ctx, st)
		},
		judge: func(a Answer, cr *clusterRequest, vapRules map[string]string) PathResult {
			return judgeVpol(a, st, cr, vapRules)
		},
	}
	checked, err := r.sendRequests(ctx, c, in, target, requests)
	return append(rows, checked...), err
}

// vpolClusterSkip says why the API server cannot be asked about the
// policy's results, or "".
func vpolClusterSkip(st *vpolState) string {
	for _, rr := range st.plan.Rules {
		if rr.Verdict == translate.VerdictTranslated {
			continue
		}
		if rr.Verdict == translate.VerdictFallback && rr.Fallback != nil && rr.Fallback.NotEnforced == "" {
			continue // kyvap's webhook enforces it (judgeVpol reads its words)
		}
		if rr.Reason == model.ReasonAdmissionDisabled {
			return "background-only policy (evaluation.admission.enabled: false): kyvap deploys no VAP, nothing is enforced at admission, so the API server has no verdict to compare; kyvap test without --cluster evaluates it as Kyverno's CLI does"
		}
		return fmt.Sprintf("%s %s: %s; kyvap's status reports it as not enforced, so the API server has no verdict to compare", st.label(), rr.Rule, vpolSkipReason(st, rr.Rule))
	}
	enforced := len(st.plan.Bindings) == 0
	for _, b := range st.plan.Bindings {
		for _, a := range b.Spec.ValidationActions {
			if a == admissionregistrationv1.Deny || a == admissionregistrationv1.Warn {
				enforced = true
			}
		}
	}
	if !enforced {
		return "validationActions [Audit]: the API server admits the request and records the verdict in its audit log only, which a dry run does not return, so there is no verdict to compare (Warn and Deny are checked)"
	}
	return ""
}

// vpolVAPRules maps the names of the policy's VAPs in the cluster to their
// rules.
func (in *Installation) vpolVAPRules(ctx context.Context, st *vpolState) (map[string]string, error) {
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := in.c.List(ctx, &vaps, client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}); err != nil {
		return nil, err
	}
	src := st.lowered.Source
	out := map[string]string{}
	for _, v := range vaps.Items {
		a := v.Annotations
		if a[translate.AnnotationPolicyKind] == string(src.Kind) && a[translate.AnnotationPolicy] == src.Name && a[translate.AnnotationPolicyNamespace] == src.Namespace {
			out[v.Name] = a[translate.AnnotationRule]
		}
	}
	return out, nil
}

// judgeVpol reads the API server's answer for one expected result of a
// ValidatingPolicy: a denial or warning naming one of its VAPs is its fail.
func judgeVpol(a Answer, st *vpolState, cr *clusterRequest, vapRules map[string]string) PathResult {
	// kyvap's webhook answers for the rules that are no VAPs in Kyverno's
	// words (webhooks/resource/vpol/handler.go).
	byWebhook := []string{"Policy " + st.vp.Name() + " failed: ", "Policy " + st.vp.Name() + " error: "}
	named := func(text string) bool {
		for _, m := range vapInAnswer.FindAllStringSubmatch(text, -1) {
			if _, ok := vapRules[m[1]]; ok {
				return true
			}
		}
		for _, w := range byWebhook {
			if strings.Contains(text, w) {
				return true
			}
		}
		return false
	}
	denied := !a.Allowed && named(a.Denial)
	warned := false
	for _, w := range a.Warnings {
		warned = warned || named(w)
	}
	out := PathResult{Result: Pass, Message: a.String()}
	switch {
	case a.NotAdmissible != nil:
		out.Result = NotApplicable
	case denied || warned:
		out.Result = Fail
	case !a.Allowed:
		out.Result = NotApplicable
		out.Message = "another policy denied the request first: " + a.Denial
		f := false
		out.Match = &f
		return out
	}
	ok := false
	switch want := cr.res.Result; {
	case cr.admit != "":
		ok = out.Result == Pass
	case want == "fail":
		ok = out.Result == Fail
	case want == "pass" || want == "skip":
		ok = out.Result == Pass
	case want == "error":
		fp := st.vp.Spec().FailurePolicy
		ignore := fp != nil && *fp == admissionregistrationv1.Ignore
		ok = out.Result == Fail || (ignore && out.Result == Pass)
	case want == "warn":
		out.Message = strings.TrimSpace(out.Message + " (Kyverno's CLI never reports warn for a ValidatingPolicy)")
	}
	if out.Result == NotApplicable {
		ok = true
	}
	out.Match = &ok
	return out
}
