// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podsecurity compiles Kyverno's validate.podSecurity subrule (the
// Pod Security Standards at a level and version) to CEL that gives the
// verdicts of Kyverno v1.19.1, which are not those of upstream Pod
// Security Admission. Kyverno (pkg/pss in its module) runs the checks of
// a fork of k8s.io/pod-security-admission (github.com/kyverno/
// pod-security-admission, v0.34 era) its own way:
//
//   - at "baseline" it runs the baseline checks; at "restricted", and at
//     "privileged" too, it runs every check, baseline and restricted
//     alike, ignoring the restricted checks' overrides of baseline ones
//     (so restricted volume types and hostPath volumes both fail a
//     hostPath volume);
//   - of a check's versions it takes the newest whose minimum is at or
//     below the rule's version, and the first when there is none: a check
//     newer than the rule's version still applies (host probes at v1.19);
//   - the fork has no procMount relaxation for user namespaces
//     (hostUsers: false), its sysctls stop at the v1.32 list, and its
//     restricted volume types allow image volumes.
//
// Each check is a CEL predicate on the pod's metadata and spec, read where
// Kyverno reads them (a Pod's own, a controller's template, a CronJob's
// job template with the job template's metadata). A construct without an
// exact form (an exclusion, for now) is refused, naming it.
//
// The package is pure and deterministic.
package podsecurity
