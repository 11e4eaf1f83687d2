// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

// ConditionType is kyvap's own condition on a ClusterPolicy, distinct from
// Kyverno's "Ready".
const ConditionType = "kyvap.io/Enforced"

// Reasons of the kyvap.io/Enforced condition (and of the Events emitted when
// it changes). Machine-readable and stable.
const (
	// ReasonAllRulesTranslated: every CEL rule is enforced by generated VAPs.
	ReasonAllRulesTranslated = "AllRulesTranslated"
	// ReasonFallback: some CEL rules (or parts) are left to kyvap's webhook.
	ReasonFallback = "RulesOnFallback"
	// ReasonGenerationDisabled: --generate-validating-admission-policy=false.
	ReasonGenerationDisabled = "GenerationDisabled"
	// ReasonNoCELRules: the policy has no CEL validate rule for kyvap.
	ReasonNoCELRules = "NoCELRules"
	// ReasonNotForKyvap: nothing of a ValidatingPolicy is for kyvap to
	// enforce at admission (background only, JSON payloads, or left to
	// Kyverno's own VAP generator); each rule's clause says which.
	ReasonNotForKyvap = "NotForKyvap"
	// ReasonInvalidRules: some CEL rules cannot run anywhere (e.g. CEL that
	// does not compile); they are not enforced.
	ReasonInvalidRules = "InvalidRules"
	// ReasonNameConflict: an object kyvap would generate already exists and
	// belongs to someone else; it was left alone.
	ReasonNameConflict = "NameConflict"
	// ReasonApplyFailed: the API server refused a write; retried.
	ReasonApplyFailed = "ApplyFailed"
)

// HandbackMessage is status.validatingadmissionpolicy.message of a policy
// handed back to Kyverno by `kyvap handback`: kyvap wrote it, so a later
// kyvap install takes the field over again.
const HandbackMessage = "kyvap is uninstalled: Kyverno enforces this policy"

// FieldManager is the server-side apply field manager of every kyvap write.
const FieldManager = "kyvap"

// Event reasons not tied to a condition transition.
const (
	// EventDriftReverted: a generated object was edited or deleted and was restored.
	EventDriftReverted = "DriftReverted"
)
