// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package model is kyvap's one policy model, the intermediate form of its
// compiler: every front-end (frontend/clusterpolicy, frontend/
// validatingpolicy) lowers its input kind into a Policy made of VAP-shaped
// rules, and every back-end (translate, engine, convert, scan) reads that.
//
// The shape is what the translator proves a rule to be: match constraints,
// match conditions, variables, validations, audit annotations, a failure
// policy and validation actions — the fields of a ValidatingAdmissionPolicy
// and its binding — plus what Kyverno adds around them: the namespace a
// namespaced policy is confined to, its CEL PolicyExceptions, its pod
// controller variants (autogen), whether it runs at admission and in
// background scans, and the Kyverno CEL libraries it calls. What a
// front-end does not lower it explains with a Reason (reasons.go).
// docs/policy-model.md explains the design, docs/architecture.md the house.
//
// The package holds types and their invariants only; it imports no other
// package of kyvap, so every floor above can use it.
package model

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kind is the kind of the object a Policy was lowered from.
type Kind string

// The input kinds.
const (
	KindClusterPolicy              Kind = "ClusterPolicy"
	KindPolicy                     Kind = "Policy"
	KindValidatingPolicy           Kind = "ValidatingPolicy"
	KindNamespacedValidatingPolicy Kind = "NamespacedValidatingPolicy"
)

// Source identifies the object a Policy was lowered from.
type Source struct {
	Kind       Kind
	APIVersion string
	// Namespace is empty for cluster-scoped kinds.
	Namespace  string
	Name       string
	UID        types.UID
	Generation int64
}

// Namespaced reports whether the source is a namespaced object, whose
// rules may only ever apply in its own namespace.
func (s Source) Namespaced() bool { return s.Namespace != "" }

// String is Kind/name or Kind/namespace/name.
func (s Source) String() string {
	if s.Namespace == "" {
		return string(s.Kind) + "/" + s.Name
	}
	return string(s.Kind) + "/" + s.Namespace + "/" + s.Name
}

// Policy is one input policy, lowered.
type Policy struct {
	Source Source
	// Rules in the source's order; a rule's pod-controller variants follow it.
	Rules []Rule
	// NextExpiry is the earliest future expiry of an exception folded into
	// the rules: the policy must be lowered again at that time.
	NextExpiry *time.Time
}

// Rule is one unit of enforcement: what becomes one ValidatingAdmissionPolicy
// and its binding, or one rule of the fallback engine.
type Rule struct {
	// Name is the name results are reported under: the rule's name for a
	// ClusterPolicy, empty for a ValidatingPolicy (Kyverno reports those by
	// policy only).
	Name string
	// ID names the rule uniquely in its policy, for generated object names:
	// "policy" for a ValidatingPolicy itself, "autogen-<config>" for its
	// pod-controller variants.
	ID string
	// AutogenOf is the ID of the rule a pod-controller variant was derived
	// from; empty for a rule as written.
	AutogenOf string
	// Targets are the kinds a pod-controller variant applies to.
	Targets []string

	MatchConstraints admissionregistrationv1.MatchResources
	MatchConditions  []admissionregistrationv1.MatchCondition
	Variables        []admissionregistrationv1.Variable
	Validations      []admissionregistrationv1.Validation
	AuditAnnotations []admissionregistrationv1.AuditAnnotation
	FailurePolicy    admissionregistrationv1.FailurePolicyType
	Actions          []admissionregistrationv1.ValidationAction
	// Semantics is the Kyverno engine whose verdicts the rule follows.
	Semantics Semantics
	// ParamKind and ParamRef are a ClusterPolicy rule's parameters, as in a
	// ValidatingAdmissionPolicy and its binding (ParamRef's
	// parameterNotFoundAction set to what Kyverno does).
	ParamKind *admissionregistrationv1.ParamKind
	ParamRef  *admissionregistrationv1.ParamRef
	// Bindings, when set, replace Actions: the regions of the namespace
	// space, each with the actions Kyverno picks there (a ClusterPolicy
	// rule's validationFailureActionOverrides split it). Disjoint.
	Bindings []Binding
	// TimeoutSeconds is the webhook timeout Kyverno's webhook gives the
	// policy (spec.webhookConfiguration.timeoutSeconds); nil is Kyverno's
	// default. kyvap's webhook serves the rule with it when it enforces it.
	TimeoutSeconds *int32

	// Namespace confines the rule to one namespace (a namespaced policy's
	// own): it can never apply to a request in another namespace, nor to a
	// cluster-scoped object other than that Namespace itself.
	Namespace string
	// Exceptions are the CEL PolicyExceptions naming the policy, unexpired.
	Exceptions []Exception

	// Admission is false when the rule is not evaluated at admission
	// (evaluation.admission.enabled: false, or JSON mode).
	Admission bool
	// Background is whether background scans evaluate the rule.
	Background bool
	// Mode is Kyverno's evaluation mode: "Kubernetes" or "JSON".
	Mode string

	// KyvernoGenerates is true when Kyverno's own VAP generator, where it
	// runs, makes a VAP of this rule (a ValidatingPolicy that opts in with
	// spec.autogen.validatingAdmissionPolicy.enabled and has no
	// pod-controller variants: pkg/controllers/admissionpolicygenerator).
	KyvernoGenerates bool

	// Libraries are the Kyverno CEL libraries (and Kyverno-only variables)
	// the rule's expressions use, sorted: a rule using any cannot be a
	// ValidatingAdmissionPolicy.
	Libraries []string

	// Unsupported, when set, says why no engine of kyvap can evaluate the
	// rule (an autogen target found by structural extraction, ...).
	Unsupported string

	// FailuresAreErrors: an expression of the rule that fails to evaluate
	// is Kyverno's error status for the rule, not a violation. A classic
	// rule compiled by frontend/classic fails to evaluate exactly where
	// Kyverno's variable substitution fails, which Kyverno reports as an
	// error (blocking under Enforce, as the VAP's failure policy does).
	FailuresAreErrors bool
	// ExceptionGuard, when set, is a CEL predicate (never failing to
	// evaluate) that holds where the rule's PolicyExceptions do not apply
	// however they match: a compiled classic rule's JMESPath preconditions
	// fail to evaluate there, and Kyverno checks them before exceptions,
	// so the rule is an error, exempted or not.
	ExceptionGuard string
}

// Semantics names the Kyverno engine a rule's verdicts follow; the two
// differ where a ValidatingAdmissionPolicy leaves a choice (docs/policy-model.md).
type Semantics string

const (
	// SemanticsValidatingPolicy is Kyverno's ValidatingPolicy engine
	// (pkg/cel/policies/vpol): exceptions before matchConditions, the first
	// failing validation decides, an error denies under Deny whatever the
	// failurePolicy. The zero value.
	SemanticsValidatingPolicy Semantics = ""
	// SemanticsClusterPolicy is Kyverno's ClusterPolicy CEL handler
	// (pkg/engine/handlers/validation/validate_cel.go), a VAP validator run
	// after Kyverno's own match/exclude, PolicyExceptions and global
	// configuration — all of which a lowered rule carries folded into its
	// match constraints and match conditions.
	SemanticsClusterPolicy Semantics = "ClusterPolicy"
)

// Binding is one binding of a rule: where it applies, and with which
// actions.
type Binding struct {
	// Scope narrows the rule (nil: everywhere the rule matches).
	Scope   *admissionregistrationv1.MatchResources
	Actions []admissionregistrationv1.ValidationAction
}

// Exception is a CEL PolicyException as it applies to a rule.
type Exception struct {
	Namespace, Name string
	// MatchConditions must all hold for the exception to apply.
	MatchConditions []admissionregistrationv1.MatchCondition
	// Images and AllowedValues make the exception partial: it does not
	// exempt, it feeds the policy's `exceptions` variable.
	Images        []string
	AllowedValues []string
	ReportResult  string
	ExpiresAt     *time.Time
}

// Full reports whether the exception exempts the request outright (Kyverno:
// neither images nor allowedValues).
func (e Exception) Full() bool { return len(e.Images) == 0 && len(e.AllowedValues) == 0 }

// Key is namespace/name.
func (e Exception) Key() string {
	if e.Namespace == "" {
		return e.Name
	}
	return e.Namespace + "/" + e.Name
}

// Kyverno's evaluation modes (policies.kyverno.io EvaluationMode).
const (
	ModeKubernetes = "Kubernetes"
	ModeJSON       = "JSON"
)

// RuleIDPolicy is the ID of the rule a ValidatingPolicy is as written.
const RuleIDPolicy = "policy"
