// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package translate is the VAP back-end: it emits the
// ValidatingAdmissionPolicies and bindings of the rules of the policy model
// (TranslatePolicy), and says, rule by rule, where each is enforced and why
// (Plan). For a ClusterPolicy or namespaced Policy (Translate) it drives the
// ClusterPolicy front-end (frontend/clusterpolicy) itself, because the
// generation options choose, between the front-end's screening and its
// lowering, which rules kyvap's webhook enforces from the rule as written
// (FallbackRule) instead.
//
// The package is pure: it takes plain values (the policy, the exceptions that
// may apply to it, a KindResolver and Options) and returns a Plan. It never
// talks to a cluster, never mutates its input, and returns byte-identical
// output for the same input.
package translate

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Options tune a translation.
type Options struct {
	// Engine is what kyvap's engine evaluates beyond Kyverno's pure CEL
	// libraries (policy-model rules only).
	Engine EngineCapabilities
	// GenerateValidatingAdmissionPolicy false hands every CEL rule to the
	// fallback engine (the operator's --generate-validating-admission-policy).
	GenerateValidatingAdmissionPolicy bool
	// CompatibilityVersion is the target cluster's CEL compatibility version,
	// "<major>.<minor>" (e.g. "1.37"); empty means the newest this build knows.
	CompatibilityVersion string
	// RespectGenerateField applies Kyverno's opt-in: only rules with
	// validate.cel.generate: true become VAPs. Off by default, because
	// Kyverno's CRD defaults the field to false, so on a cluster an explicit
	// false cannot be told from an unset field; the explicit opt-out that
	// survives the API server is the policy annotation AnnotationGenerate.
	RespectGenerateField bool
	// KyvernoConfig is Kyverno's global configuration (resource filters,
	// excluded users and groups, webhook selectors and match conditions)
	// that every VAP and binding applies, as Kyverno's admission controller
	// applies it before any policy. Nil applies none, as `kyverno test`.
	KyvernoConfig *kyverno.Config
	// KyvernoGeneratesVAPs says that Kyverno's admission controller runs
	// with its own VAP generator: the ValidatingPolicy rules it turns into
	// VAPs (model.Rule.KyvernoGenerates) are left to it, so that no
	// validation gets two VAPs.
	KyvernoGeneratesVAPs bool
	// TypedObjects specializes each VAP's expressions to the objects the
	// API server gives it: where every resource the VAP matches is a
	// built-in one, the type tests that the built-in type decides are
	// folded (translate/specialize). The operator and `kyvap translate`
	// set it. Off, the expressions stay in their general form, which also
	// holds for objects the API server never decoded: `kyvap test`
	// evaluates that form on its resource files.
	TypedObjects bool
}

// AnnotationGenerate set to "false" on a ClusterPolicy keeps all its rules
// out of VAP generation (they go to the fallback engine).
const AnnotationGenerate = "kyvap.io/generate"

// Verdict says where a rule is enforced.
type Verdict string

const (
	// VerdictTranslated: the whole rule is enforced by generated VAPs.
	VerdictTranslated Verdict = "Translated"
	// VerdictFallback: all or part of the rule is enforced by kyvap's webhook
	// (RuleResult.Fallback); any part covered by VAPs is listed too.
	VerdictFallback Verdict = "Fallback"
	// VerdictNotHandled: not a CEL validate rule; Kyverno keeps enforcing it.
	VerdictNotHandled Verdict = "NotHandled"
	// VerdictInvalid: the rule cannot be run by any engine (e.g. CEL that does
	// not compile); nothing enforces it until the policy is fixed.
	VerdictInvalid Verdict = "Invalid"
)

// RuleResult is the outcome for one rule of the policy, in rule order.
type RuleResult struct {
	Rule    string
	Verdict Verdict
	// model.Reason and Message explain a verdict other than Translated; Message is
	// one human-readable line.
	Reason  model.Reason
	Message string
	// ValidatingAdmissionPolicies names the generated VAPs that enforce the
	// rule or part of it, sorted.
	ValidatingAdmissionPolicies []string
	// Fallback is what kyvap's webhook must enforce for this rule; nil when
	// the VAPs cover everything (or nothing can run the rule).
	Fallback *FallbackRule
}

// FallbackRule is a rule, or the part of a rule, handed to the fallback engine.
type FallbackRule struct {
	// Policy is the ClusterPolicy's name, or PolicyKey of a namespaced
	// Policy.
	Policy string
	// Namespace confines the rule to the resources of one namespace (a
	// namespaced Policy's).
	Namespace string `json:",omitempty"`
	// Rule is the Kyverno rule to enforce, a copy: for a pod-controller
	// remainder it is the autogen variant (match narrowed to the controllers,
	// expressions rewritten), otherwise the rule as written.
	Rule kyvernov1.Rule
	// AdditionalRules are further Kyverno rules for the same part, enforced
	// like Rule: the autogen variants (pod controllers, then CronJob). The
	// fallback engine does not run autogen itself; everything it must
	// enforce is listed here.
	AdditionalRules []kyvernov1.Rule
	// Spec carries the policy-level settings the engine needs (failure action
	// and overrides, failurePolicy, webhookTimeoutSeconds); Rules is empty.
	Spec kyvernov1.Spec
	// Exceptions are the PolicyExceptions that name this rule.
	Exceptions []kyvernov2.PolicyException
	Reason     model.Reason
	Message    string
	// NotEnforced says why kyvap's fallback engine cannot evaluate the rule
	// (it needs Kyverno's JMESPath engine), or is empty when the engine
	// enforces it. Such a rule is NOT ENFORCED by kyvap.
	NotEnforced string `json:",omitempty"`
	// FailuresAreErrors names the rules (Rule, AdditionalRules) compiled
	// from Kyverno's classic language: an expression of theirs that fails
	// to evaluate is Kyverno's error result, not a violation.
	FailuresAreErrors []string `json:",omitempty"`
	// ExceptionsNotOnDelete names the rules (Rule, AdditionalRules)
	// compiled from podSecurity subrules: Kyverno's podSecurity handler
	// returns no response on a DELETE before it looks for exceptions, so
	// there Exceptions skip nothing.
	ExceptionsNotOnDelete []string `json:",omitempty"`
	// WebhookExempt lists the protected resources the rule selects that
	// kyvap's webhook never receives (nodes, leases, events, reviews; see
	// WebhookLockOutCondition): the rule is not enforced on them.
	WebhookExempt []string `json:",omitempty"`
}

// Plan is the deterministic result of translating one ClusterPolicy.
type Plan struct {
	// Policy is the ClusterPolicy's name.
	Policy string
	// ValidatingAdmissionPolicies and Bindings are sorted by name, labelled
	// app.kubernetes.io/managed-by=kyvap plus the source policy and rule, and
	// owned by the ClusterPolicy.
	ValidatingAdmissionPolicies []admissionregistrationv1.ValidatingAdmissionPolicy
	Bindings                    []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// Rules has one entry per rule of the policy, in the policy's order,
	// each followed by the entries of its pod-controller variants when the
	// rule is translated (autogen-<rule>, autogen-cronjob-<rule>: the names
	// Kyverno reports them by). A rule that falls back carries its variants
	// in its FallbackRule instead.
	Rules []RuleResult
	// Warnings are things the user should know that change no verdict.
	Warnings []string
}
