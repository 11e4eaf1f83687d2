// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import "fmt"

// Reason is a stable, machine-readable code explaining a verdict. The codes
// are listed here and documented in docs/translation.md.
type Reason string

// A Refusal says why a rule, or a part of one, has no rule in the model or
// no ValidatingAdmissionPolicy form: a reason code and one human-readable
// line. Nothing is dropped silently; every refusal reaches the status.
type Refusal struct {
	Reason  Reason
	Message string
}

// Refuse returns a Refusal with a formatted message.
func Refuse(reason Reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// The reason codes. They are stable: the operator writes them to the
// policy's status and users match on them; never rename one.
const (
	// ReasonNonCELRule: the rule is not a validate.cel rule; Kyverno keeps
	// enforcing it (verdict NotHandled).
	ReasonNonCELRule Reason = "NonCELRule"
	// ReasonAdmissionDisabled: spec.admission is false, so Kyverno never
	// applies the policy at admission; nothing to enforce (NotHandled).
	ReasonAdmissionDisabled Reason = "AdmissionDisabled"
	// ReasonGenerationDisabled: VAP generation is switched off for the
	// operator (Options.GenerateValidatingAdmissionPolicy false).
	ReasonGenerationDisabled Reason = "GenerationDisabled"
	// ReasonGenerateOptOut: the rule sets validate.cel.generate: false.
	ReasonGenerateOptOut Reason = "GenerateOptOut"
	// ReasonApplyRulesOne: spec.applyRules is One; which rule applies depends
	// on the other rules' outcomes, which independent VAPs cannot see.
	ReasonApplyRulesOne Reason = "ApplyRulesOne"
	// ReasonJMESPathPreconditions: the rule has JMESPath preconditions.
	ReasonJMESPathPreconditions Reason = "JMESPathPreconditions"
	// ReasonContextEntries: the rule declares context entries (API calls,
	// ConfigMaps, JMESPath variables).
	ReasonContextEntries Reason = "ContextEntries"
	// ReasonRolesOrClusterRoles: a match/exclude filter names roles or
	// clusterRoles, which need RBAC look-ups at admission time.
	ReasonRolesOrClusterRoles Reason = "RolesOrClusterRoles"
	// ReasonKyvernoConfigRoles: Kyverno's global configuration excludes
	// requests by the requester's roles, which need RBAC look-ups at
	// admission time.
	ReasonKyvernoConfigRoles Reason = "KyvernoConfigRoles"
	// ReasonKindUnresolved: a kind resolves to no served resource (retried
	// when discovery changes).
	ReasonKindUnresolved Reason = "KindUnresolved"
	// ReasonKindResolutionError: the kind resolver returned an error.
	ReasonKindResolutionError Reason = "KindResolutionError"
	// ReasonSelectorNotExpressible: a label selector uses Kyverno's wildcard
	// extension or is malformed.
	ReasonSelectorNotExpressible Reason = "SelectorNotExpressible"
	// ReasonMatchNotExpressible: a match/exclude shape has no exact VAP
	// equivalent (e.g. an empty match, or `all` filters without kinds).
	ReasonMatchNotExpressible Reason = "MatchNotExpressible"
	// ReasonOverrideNotExpressible: failure-action overrides that no set of
	// bindings can reproduce exactly (wildcard namespaces, too many pieces,
	// overrides that may apply to cluster-scoped or Namespace objects).
	ReasonOverrideNotExpressible Reason = "OverrideNotExpressible"
	// ReasonExceptionNotExpressible: a PolicyException naming the rule has
	// JMESPath conditions or a shape with no exact VAP equivalent.
	ReasonExceptionNotExpressible Reason = "ExceptionNotExpressible"
	// ReasonParamsNotExpressible: paramKind/paramRef that a VAP binding cannot
	// carry with Kyverno's semantics (e.g. paramKind without paramRef).
	ReasonParamsNotExpressible Reason = "ParamsNotExpressible"
	// ReasonCELCompileError: an expression of the rule does not compile at
	// any CEL version this build knows (verdict Invalid).
	ReasonCELCompileError Reason = "CELCompileError"
	// ReasonCELNotAtCompatibilityVersion: an expression compiles with the
	// newest CEL environment but not at the target cluster's compatibility
	// version; the fallback engine runs it.
	ReasonCELNotAtCompatibilityVersion Reason = "CELNotAtCompatibilityVersion"
	// ReasonCELNotInKyverno: an expression compiles with the newer CEL
	// environment of the cluster but not in Kyverno's (KyvernoCELVersion),
	// where the rule fails every request it matches; the fallback engine,
	// compiling in Kyverno's environment, reproduces that.
	ReasonCELNotInKyverno Reason = "CELNotInKyverno"
	// ReasonCELCostExceeded: an expression's minimum estimated cost exceeds
	// the API server's per-expression limit, so the API server would reject it.
	ReasonCELCostExceeded Reason = "CELCostExceeded"
	// ReasonVAPFieldInvalid: a field the API server validates (message with
	// line breaks, reason, variable or annotation key syntax...) would be
	// rejected in a VAP although Kyverno accepts it.
	ReasonVAPFieldInvalid Reason = "VAPFieldInvalid"
	// ReasonGeneratedCELError: an expression kyvap generated did not compile;
	// a kyvap bug, reported rather than emitted.
	ReasonGeneratedCELError Reason = "GeneratedCELError"
	// ReasonRequestNamespaceOfNamespace: the rule can match Namespace
	// objects and reads request.namespace, which Kyverno clears for them
	// and the API server sets to the Namespace's own name.
	ReasonRequestNamespaceOfNamespace Reason = "RequestNamespaceOfNamespace"
	// ReasonAutogenAnnotationInvalid: the policy's autogen-controllers
	// annotation is "all", which Kyverno refuses (verdict Invalid).
	ReasonAutogenAnnotationInvalid Reason = "AutogenAnnotationInvalid"
	// ReasonAutogenRuleName: a rule named autogen-* in a policy Kyverno
	// generates pod-controller variants for, on kinds where Kyverno never
	// evaluates it or where kyvap cannot tell (verdict Invalid).
	ReasonAutogenRuleName Reason = "AutogenRuleName"
	// ReasonDuplicateRuleName: several rules of the policy have the same
	// name, which Kyverno's admission refuses (its CRD does not); every rule
	// sharing the name is Invalid and generates nothing.
	ReasonDuplicateRuleName Reason = "DuplicateRuleName"
	// ReasonEmptyRule: the rule has no expressions; Kyverno passes every
	// request, so there is nothing to enforce.
	ReasonEmptyRule Reason = "EmptyRule"
)

// Reasons of Kyverno's classic rules (validate.pattern, anyPattern, deny,
// foreach), compiled by frontend/classic.
const (
	// ReasonPatternNotExpressible: a construct of the rule's pattern has
	// no exact CEL form (yet); the message names it. Kyverno enforces the
	// rule (NotHandled).
	ReasonPatternNotExpressible Reason = "PatternNotExpressible"
	// ReasonJMESPathNotExpressible: a condition of the rule (deny or
	// preconditions) uses a JMESPath form, an operator or an operand
	// without an exact CEL form (yet); the message names it. Kyverno
	// enforces the rule (NotHandled).
	ReasonJMESPathNotExpressible Reason = "JMESPathNotExpressible"
	// ReasonPodSecurityNotExpressible: a validate.podSecurity rule, or a
	// part of it (an exclusion, a level or version), has no exact CEL
	// form (yet); the message names it. Kyverno enforces the rule
	// (NotHandled).
	ReasonPodSecurityNotExpressible Reason = "PodSecurityNotExpressible"
)

// Reasons of the policy model's rules.
const (
	// ReasonKyvernoLibrary: an expression uses one of Kyverno's CEL
	// libraries (resource, http, globalContext, image, ...), which the API
	// server does not have.
	ReasonKyvernoLibrary Reason = "KyvernoLibrary"
	// ReasonEvaluationModeJSON: the policy evaluates JSON payloads, never
	// admission requests (NotHandled).
	ReasonEvaluationModeJSON Reason = "EvaluationModeJSON"
	// ReasonAutogenExtraction: a pod-controller variant for controllers whose
	// pod templates Kyverno finds by structural extraction.
	ReasonAutogenExtraction Reason = "AutogenExtraction"
	// ReasonExemptedByException: a PolicyException without conditions names
	// the policy: Kyverno exempts every request, nothing is enforced.
	ReasonExemptedByException Reason = "ExemptedByException"
	// ReasonPartialExceptions: the rule reads the `exceptions` variable that
	// PolicyExceptions with images or allowedValues feed.
	ReasonPartialExceptions Reason = "PartialExceptions"
	// ReasonNoMatchConstraints: the policy has no matchConstraints resource
	// rules; Kyverno refuses it (verdict Invalid).
	ReasonNoMatchConstraints Reason = "NoMatchConstraints"
	// ReasonKyvernoGeneratesVAP: the policy opts into Kyverno's own VAP
	// generator, which runs and makes its VAP (NotHandled).
	ReasonKyvernoGeneratesVAP Reason = "KyvernoGeneratesVAP"
)
