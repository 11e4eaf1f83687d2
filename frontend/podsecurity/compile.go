// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"strconv"
	"strings"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/model"
)

// Compiled is a podSecurity subrule compiled on one pod.
type Compiled struct {
	// Profile is the subrule's level and version.
	Profile Profile
	// Checks are the checks Kyverno runs at the profile, each with the
	// predicate Violates joins.
	Checks []Selected
	// Violates is the CEL predicate that holds where the pod violates the
	// subrule: some check does not allow the pod, once the subrule's own
	// exclusions removed what they remove. It never fails to evaluate on
	// a pod of Kubernetes' types.
	Violates string
	// ViolatesExcepted is Violates once the matching exceptions'
	// exclusions removed what they remove too: where it holds, Kyverno's
	// verdict is fail; where Violates holds but it does not, Kyverno skips
	// the rule ("rule is skipped due to policy exceptions"). It is Violates
	// when there are no exceptions.
	ViolatesExcepted string
}

// Exception is a PolicyException with podSecurity controls naming the
// rule. Where it matches the request, and no matching exception lacks
// podSecurity controls (those skip the rule, whatever the pod), Kyverno
// applies its controls as exclusions after the subrule's own
// (validate_pss.go: ApplyPodSecurityExclusion on the checks EvaluatePod
// left), which is the same as applying both lists at once: each exclusion
// removes errors by comparing the pod with its own copy of it, whatever
// the others removed.
type Exception struct {
	// Name is the exception's namespace/name.
	Name string
	// Applies is the CEL predicate, never failing to evaluate, that holds
	// where the exception matches the request (its match and conditions).
	Applies string
	// Exclude are its podSecurity controls.
	Exclude []kyvernov1.PodSecurityStandard
}

// Compile compiles a podSecurity subrule on the pod, with its exclusions
// (exclusions.go) and the podSecurity controls of the exceptions naming
// it; exclusions kyvap does not compile are refused by name.
func Compile(ps *kyvernov1.PodSecurity, pod Pod, exceptions ...Exception) (Compiled, *model.Refusal) {
	profile, fl := ParseProfile(ps.Level, ps.Version)
	if fl != nil {
		return Compiled{}, fl
	}
	own := make([]exclusion, len(ps.Exclude))
	for i, e := range ps.Exclude {
		own[i] = exclusion{PodSecurityStandard: e, index: i}
	}
	all := own
	applies := make([]string, 0, len(exceptions))
	for i, ex := range exceptions {
		if len(ex.Exclude) == 0 {
			continue
		}
		// The exceptions' predicates are evaluated once, bound as the
		// list gs, not in each container's count.
		guard := "gs[" + strconv.Itoa(len(applies)) + "]"
		applies = append(applies, exceptions[i].Applies)
		for j, e := range ex.Exclude {
			all = append(all, exclusion{PodSecurityStandard: e, exception: ex.Name, index: j, applies: guard})
		}
	}
	if fl := checkExclusions(profile.Level, all); fl != nil {
		return Compiled{}, fl
	}
	checks := Checks(profile)
	violates, fl := violated(checks, own)
	if fl != nil {
		return Compiled{}, fl
	}
	compiled := Compiled{Profile: profile, Checks: checks, Violates: pod.bind(violates)}
	compiled.ViolatesExcepted = compiled.Violates
	if len(applies) > 0 {
		excepted, fl := violated(Checks(profile), all)
		if fl != nil {
			return Compiled{}, fl
		}
		compiled.ViolatesExcepted = "[[" + strings.Join(applies, ", ") + "]].all(gs, " + pod.bind(excepted) + ")"
	}
	return compiled, nil
}

// violated is the predicate, on the bound pod, that some check fails the
// pod once the exclusions removed what they remove; checks' violated
// become those of their exclusions.
func violated(checks []Selected, excludes []exclusion) (string, *model.Refusal) {
	predicates := make([]string, len(checks))
	for i := range checks {
		if of := exclusionsOf(checks[i].ID, excludes); len(of) > 0 {
			excluded, ok := excludedCheck(checks[i].ID, checks[i].Minor, of)
			if !ok {
				return "", model.Refuse(model.ReasonPodSecurityNotExpressible, "%s (control %q): check %s has no compiled exclusion", of[0].name(), of[0].ControlName, checks[i].ID)
			}
			checks[i].violated = excluded
		}
		predicates[i] = checks[i].violated(bound{})
	}
	return anyOf(predicates...), nil
}
