// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package validatingpolicy is the front-end of Kyverno's policies.kyverno.io
// policies, ValidatingPolicy and NamespacedValidatingPolicy: it lowers a
// policy, with the CEL PolicyExceptions its caller gathered, into the policy
// model (lower.go), with the pod-controller variants Kyverno's autogen
// generates (autogen.go) and the Kyverno CEL libraries each rule calls.
//
// It is pure: no cluster (the caller lists the exceptions), no clock but the
// time it is given, never a mutated input, deterministic output.
package validatingpolicy
