// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kyverno is the one home of Kyverno's semantics that front-ends and
// back-ends share: wildcard matching, the kind-spelling parser and the
// resolver of kinds to served resources (KindResolver), autogen rule names,
// which PolicyException entries name a rule, when preconditions hold no
// condition, Kyverno's global configuration and the match conditions that
// apply it, its orValue compatibility, and the CEL forms of its matching
// (cel.go). Its CEL libraries are in kyverno/cellib, its runtime matching of
// kyverno.io rules in kyverno/match.
//
// Each helper mirrors a named file of github.com/kyverno/kyverno v1.19.1 (or
// the go-wildcard module Kyverno uses), so that a translated rule and a rule
// the fallback engine evaluates select exactly what Kyverno would select; a
// second copy of any of them could drift, and then the two enforcement paths
// would disagree. Deliberate deviations are documented where they occur.
//
// The package sits on the ground floor: it imports only kyvap's api/ and
// model types and package vap, and is pure.
package kyverno
