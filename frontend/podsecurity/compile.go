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

// Compile compiles a podSecurity subrule on the pod. An exclusion is
// refused: Kyverno removes a control's field errors by re-evaluating the
// checks on a copy of the pod (pkg/pss ApplyPodSecurityExclusion), which
// kyvap does not compile yet.
func Compile(ps *kyvernov1.PodSecurity, pod Pod) (Compiled, *model.Refusal) {
	profile, fl := ParseProfile(ps.Level, ps.Version)
	if fl != nil {
		return Compiled{}, fl
	}
	if len(ps.Exclude) > 0 {
		return Compiled{}, model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity exclude (control %q): Kyverno removes the control's field errors by evaluating the checks again on a copy of the pod, which kyvap does not compile yet", ps.Exclude[0].ControlName)
	}
	checks := Checks(profile)
	violated := make([]string, len(checks))
	for i, c := range checks {
		violated[i] = c.violated(bound{})
	}
	return Compiled{Profile: profile, Checks: checks, Violates: pod.bind(anyOf(violated...))}, nil
}
