// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/podsecurity"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// compilePodSecurity compiles a podSecurity subrule, with the podSecurity
// controls of the exceptions naming it (matched at root), on the object at
// root (object, oldObject) of a rule matching kinds. Kyverno reads the pod by the
// object's kind (getSpec). A kind without a pod (Kyverno's evaluation
// fails on it), a wildcard, and kinds whose pods sit in different places
// are refused.
func compilePodSecurity(ps *kyvernov1.PodSecurity, kinds []string, root string, exceptions []podsecurity.Exception) (podsecurity.Compiled, *model.Refusal) {
	predicates := map[string]podsecurity.Compiled{}
	for _, spelled := range kinds {
		kind := spelled[strings.LastIndex(spelled, "/")+1:]
		pod, ok := podsecurity.PodOf(root, kind)
		if !ok {
			return podsecurity.Compiled{}, model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity on kind %q: Kyverno finds a pod only in a Pod, a pod controller's template and a CronJob's job template, and its evaluation fails on other kinds", spelled)
		}
		place := strings.Join(pod.Spec, ".")
		if _, done := predicates[place]; !done {
			compiled, fl := podsecurity.Compile(ps, pod, exceptions...)
			if fl != nil {
				return podsecurity.Compiled{}, fl
			}
			predicates[place] = compiled
		}
	}
	places := make([]string, 0, len(predicates))
	for place := range predicates {
		places = append(places, place)
	}
	sort.Strings(places)
	switch len(places) {
	case 0:
		return podsecurity.Compiled{}, model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity on a rule that names no kind")
	case 1:
		return predicates[places[0]], nil
	}
	// Kyverno reads the pod by the object's kind; a choice by object.kind
	// gave a verdict Kyverno's chainsaw test of a rule on Pods and
	// Deployments does not (an UPDATE of a Deployment violating before and
	// after: kyvap denied, Kyverno admitted), not explained yet.
	named := append([]string(nil), kinds...)
	sort.Strings(named)
	return podsecurity.Compiled{}, model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity on kinds whose pods Kyverno reads in different places (%s): not compiled yet", strings.Join(named, ", "))
}

// podSecurityProfile is the subrule's level and version as Kyverno's
// message writes them ("baseline:latest"; "baseline:" for an unset
// version).
func podSecurityProfile(ps *kyvernov1.PodSecurity) string {
	return ps.Level + ":" + ps.Version
}

// podSecurityExceptions are the PolicyExceptions naming a podSecurity
// rule (or variant), as its compiled podSecurity reads them
// (validate_pss.go). An exception without podSecurity controls skips the
// rule where it matches: on the request, it is a condition of the rule's
// VAP as any exception is (lower); on the old object of an UPDATE, where
// Kyverno's validateOldObject matches the exceptions again, it makes the
// old object's verdict a skip, which does not admit the UPDATE as an
// existing violation. An exception with podSecurity controls adds them to
// the rule's exclusions where it matches.
type podSecurityExceptions struct {
	// onObject and onOldObject are the exceptions with podSecurity
	// controls, matched on the request and on the old object.
	onObject, onOldObject []podsecurity.Exception
	// skipOldObject holds where an exception without podSecurity
	// controls matches the old object ("false" where none does).
	skipOldObject string
}

// podSecurityExceptions gathers the exceptions naming the rule; one whose
// match has no CEL form is refused, naming it.
func (l *Lowering) podSecurityExceptions(r *kyvernov1.Rule) (podSecurityExceptions, *model.Refusal) {
	out := podSecurityExceptions{skipOldObject: "false"}
	var skips []string
	for _, ex := range l.ExceptionsFor(r.Name) {
		refuse := func(err error) (podSecurityExceptions, *model.Refusal) {
			return podSecurityExceptions{}, model.Refuse(model.ReasonExceptionNotExpressible, "PolicyException %s/%s: %v", ex.Namespace, ex.Name, err)
		}
		onObject, err := exceptionApplies(l.resolver, &ex, false)
		if errors.Is(err, ErrExceptionMatchesNothing) {
			continue
		}
		if err != nil {
			return refuse(err)
		}
		onOldObject, err := exceptionApplies(l.resolver, &ex, true)
		if err != nil {
			return refuse(err)
		}
		if len(ex.Spec.PodSecurity) == 0 {
			skips = append(skips, onOldObject)
			continue
		}
		name := ex.Namespace + "/" + ex.Name
		out.onObject = append(out.onObject, podsecurity.Exception{Name: name, Applies: onObject, Exclude: ex.Spec.PodSecurity})
		out.onOldObject = append(out.onOldObject, podsecurity.Exception{Name: name, Applies: onOldObject, Exclude: ex.Spec.PodSecurity})
	}
	if len(skips) > 0 {
		out.skipOldObject = kyverno.CELOr(skips)
	}
	return out, nil
}

// podSecurityDifferences are the rule's warnings saying where Kyverno's
// verdicts (which the compiled rule gives) differ from upstream Pod
// Security Admission's, one line each.
func podSecurityDifferences(rule *kyvernov1.Rule, variants []kyvernov1.Rule) []string {
	ps := rule.Validation.PodSecurity
	profile, fl := podsecurity.ParseProfile(ps.Level, ps.Version)
	if fl != nil {
		return nil
	}
	cronJob := false
	for _, r := range append([]kyvernov1.Rule{*rule}, variants...) {
		for _, filter := range append(append([]kyvernov1.ResourceFilter(nil), r.MatchResources.Any...), r.MatchResources.All...) {
			for _, kind := range filter.Resources.Kinds {
				cronJob = cronJob || kind[strings.LastIndex(kind, "/")+1:] == "CronJob"
			}
		}
		cronJob = cronJob || slices.Contains(r.MatchResources.Resources.Kinds, "CronJob")
	}
	lines := podsecurity.Differences(profile, cronJob)
	for i := range lines {
		lines[i] = fmt.Sprintf("rule %q: %s", rule.Name, lines[i])
	}
	return lines
}
