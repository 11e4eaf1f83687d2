// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kyverno is the one home of the small pieces of Kyverno's semantics
// that both the translator (translate/) and the fallback engine
// (kyverno/match, engine/) need: wildcard matching, the kind-spelling parser,
// autogen rule names, which PolicyException entries name a rule, and when
// preconditions hold no condition.
//
// Each helper mirrors a named file of github.com/kyverno/kyverno v1.19.1 (or
// the go-wildcard module Kyverno uses), so that a translated rule and a rule
// the fallback engine evaluates select exactly what Kyverno would select; a
// second copy of any of them could drift, and then the two enforcement paths
// would disagree. Deliberate deviations are documented where they occur.
//
// The package is pure: it depends only on k8s.io/apimachinery and kyvap's
// api/ types, so the pure translator can use it.
package kyverno
