// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package clusterpolicy is the front-end of Kyverno's kyverno.io policies,
// ClusterPolicy and namespaced Policy: it lowers their validate.cel rules,
// and the pod-controller variants Kyverno generates for them, into rules of
// the policy model with ClusterPolicy semantics. Everything Kyverno's engine
// applies around a rule's CEL is lowered with it: match and exclude blocks
// (match.go), the PolicyExceptions naming the rule, Kyverno's global
// configuration, a namespaced Policy's confinement, preconditions,
// failure-action overrides as bindings (actions.go), params, and autogen
// (autogen.go). A rule without an exact ValidatingAdmissionPolicy form is
// never approximated: its Outcome says why (Fate, model.Refusal).
//
// Screen and Lower take a policy one rule at a time, for a caller that
// decides in between who enforces a rule (the translator); Lower lowers a
// whole policy. The caller gathers the exceptions and resolves kinds
// (kyverno.KindResolver); the package never reads a cluster, never mutates
// its input, and is deterministic.
package clusterpolicy
