// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
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
	// Violates is the CEL predicate that holds where Kyverno's verdict is
	// fail: some check does not allow the pod. It never fails to
	// evaluate on a pod of Kubernetes' types.
	Violates string
}

// Compile compiles a podSecurity subrule on the pod, with its exclusions
// (exclusions.go); those kyvap does not compile are refused by name.
func Compile(ps *kyvernov1.PodSecurity, pod Pod) (Compiled, *model.Refusal) {
	profile, fl := ParseProfile(ps.Level, ps.Version)
	if fl != nil {
		return Compiled{}, fl
	}
	if fl := checkExclusions(profile.Level, ps.Exclude); fl != nil {
		return Compiled{}, fl
	}
	checks := Checks(profile)
	violated := make([]string, len(checks))
	for i := range checks {
		if excludes := exclusionsOf(checks[i].ID, ps.Exclude); len(excludes) > 0 {
			excluded, ok := excludedCheck(checks[i].ID, checks[i].Minor, excludes)
			if !ok {
				return Compiled{}, model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity exclude (control %q): check %s has no compiled exclusion", excludes[0].ControlName, checks[i].ID)
			}
			checks[i].violated = excluded
		}
		violated[i] = checks[i].violated(bound{})
	}
	return Compiled{Profile: profile, Checks: checks, Violates: pod.bind(anyOf(violated...))}, nil
}
