// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package classic is the compiler of Kyverno's classic validation language
// (validate.pattern, anyPattern, deny with JMESPath, foreach) to CEL: it
// reproduces, expression by expression, the verdicts of Kyverno v1.19.1's
// engine (pkg/engine/validate, pkg/engine/anchor, pkg/engine/pattern,
// pkg/engine/operator in its module), so that a classic rule lowers into
// the policy model like a validate.cel rule.
//
// A construct without an exact CEL form is refused with a model.Refusal
// naming it, never approximated. The compiler grows construct by
// construct; what it accepts today is listed in docs/translation.md
// ("Classic rules"), each form proven against Kyverno's own pattern
// matcher by test/classic's differential run.
//
// The package is pure and deterministic.
package classic
