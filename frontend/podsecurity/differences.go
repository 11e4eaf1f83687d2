// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import "fmt"

// Differences are the ways Kyverno's verdicts at the profile differ from
// upstream Pod Security Admission's at the same level and version
// (k8s.io/pod-security-admission v0.37), one line each, for `kyvap
// translate` and the policy's status: the compiled rule gives Kyverno's.
// cronJob says the rule (or a variant of it) judges CronJobs.
func Differences(p Profile, cronJob bool) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("podSecurity %s: Kyverno's verdict differs from upstream Pod Security Admission: "+format, append([]any{p}, args...)...))
	}
	if p.Level == LevelPrivileged {
		add("Kyverno runs every check at level privileged, where upstream admits every pod")
		return out
	}
	restricted := p.Level == LevelRestricted
	if p.Minor == latestMinor {
		add("procMount is not relaxed for pods with hostUsers: false (upstream from v1.35)")
		if restricted {
			add("runAsNonRoot and runAsUser are not relaxed for pods with hostUsers: false (upstream from v1.35)")
		}
		add("sysctls are allowed as of v1.32 (upstream allows more from v1.37)")
	} else {
		add("the hostProbesAndHostLifecycle check applies (upstream from v1.34)")
		if restricted && p.Minor < 22 {
			add("the capabilities_restricted check applies (upstream from v1.22)")
		}
		if restricted && p.Minor < 23 {
			add("the runAsUser check applies (upstream from v1.23)")
		}
	}
	if cronJob {
		add("a CronJob's pod metadata (AppArmor annotations) is read from spec.jobTemplate.metadata, not from its pod template's")
	}
	return out
}
