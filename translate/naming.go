// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels and annotations kyvap puts on what it generates.
const (
	// LabelManagedBy marks objects kyvap owns; its value is ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "kyvap"
	// LabelPolicy names the source ClusterPolicy (hashed form when the name
	// is not a valid label value; the full name is in AnnotationPolicy).
	LabelPolicy = "kyvap.io/policy"
	// LabelRule names the source rule (hashed form when needed; the full name
	// is in AnnotationRule).
	LabelRule = "kyvap.io/rule"
	// AnnotationPolicy carries the full source policy name.
	AnnotationPolicy = "kyvap.io/policy"
	// AnnotationRule carries the full source rule name.
	AnnotationRule = "kyvap.io/rule"
	// AnnotationEvaluationFailures, "error" on the VAP of a rule compiled
	// from Kyverno's classic language, says that its expression fails to
	// evaluate exactly where Kyverno's result is error (a variable that
	// failed), not a violation: the API server denies under Enforce as
	// Kyverno blocks, and reports and kyvap test say error.
	AnnotationEvaluationFailures = "kyvap.io/evaluation-failures"
	// namePrefix keeps our names apart from Kyverno's own "cpol-".
	namePrefix = "kyvap-"
	// hashLength is the number of hex characters of a name suffix hash.
	hashLength = 10
	// bindingSuffixRoom is what VAP names leave free for "-<n>".
	bindingSuffixRoom = 4
)

// shortHash is a stable short digest of a label value.
func shortHash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])[:hashLength]
}

// nameHash is a stable short digest of the parts, each length-prefixed so
// that no two different lists of parts are encoded alike.
func nameHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLength]
}

// dnsLabel matches what a name part may be to appear unchanged: lower-case
// alphanumerics and '-', starting and ending with an alphanumeric, no '.'.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// sanitizeLabel lower-cases s and replaces every character other than
// [a-z0-9-] (the '.' included) by '-', trimming '-' at both ends; empty
// when nothing is left.
func sanitizeLabel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// maxVAPName is the longest VAP name: a DNS subdomain that leaves room for
// the binding suffixes "-<n>".
const maxVAPName = validation.DNS1123SubdomainMaxLength - bindingSuffixRoom

// validName reports a DNS subdomain that leaves room for binding suffixes.
func validName(name string) bool {
	return len(name) <= maxVAPName && len(validation.IsDNS1123Subdomain(name)) == 0
}

// vapName is the name of the VAP of a rule (bindings append "-<n>").
//
// The mapping is injective:
//   - kyvap-<policy>.<rule> when both names are DNS labels (lower-case
//     alphanumerics and '-', no '.') and the result fits: exactly one '.',
//     so the split is unique;
//   - otherwise kyvap-<policy'>.<rule'>.<hash>, where policy' and rule' are
//     the names made DNS labels (lower-cased, other characters '-',
//     shortened to fit) and hash is a digest of the exact names: exactly two
//     '.', so it is never a plain name, and the hash tells apart the names
//     that read alike.
func vapName(policy, rule string) string {
	if plain := namePrefix + policy + "." + rule; dnsLabel.MatchString(policy) && dnsLabel.MatchString(rule) && validName(plain) {
		return plain
	}
	return hashedName(policy, rule, sanitizeLabel(rule), nameHash(policy, rule))
}

// VAPNamePrefix is a prefix of the name of every VAP (and binding) kyvap
// generates for the policy: "kyvap-<policy>." for a policy name that is a
// DNS label of up to 115 characters, a prefix of the hashed form otherwise.
func VAPNamePrefix(policy string) string {
	p := policyPart(policy)
	if len(p) > hashedPolicyKept {
		return namePrefix + strings.TrimRight(p[:hashedPolicyKept], "-")
	}
	return namePrefix + p + "."
}

// policyPart is the policy as the readable part of a hashed name: made a
// DNS label (a DNS label is kept as it is).
func policyPart(policy string) string {
	if p := sanitizeLabel(policy); p != "" {
		return p
	}
	return "policy"
}

// hashedBudget is what the two readable parts of a hashed name share, and
// hashedPolicyKept what the policy part always keeps of it.
const (
	hashedBudget     = maxVAPName - len(namePrefix) - len("..") - hashLength
	hashedPolicyKept = hashedBudget / 2
)

// shadowedVariantName is the VAP name of an autogen variant when a rule of
// the policy has the variant's name (see shadowedAutogenRule): always the
// hashed form, its hash over a third part, so it differs from the name of
// every rule, that one included.
func shadowedVariantName(policy, variant string) string {
	return hashedName(policy, variant, sanitizeLabel(variant)+"-autogen", nameHash(policy, variant, "autogen"))
}

// hashedName is kyvap-<policy'>.<readable>.<hash>, each part a non-empty
// DNS label, the two readable parts shortened to fit.
func hashedName(policy, rule, readable, hash string) string {
	p := policyPart(policy)
	r := strings.Trim(readable, "-")
	if r == "" {
		r = "rule"
	}
	if len(p)+len(r) > hashedBudget {
		if pMax := max(hashedPolicyKept, hashedBudget-len(r)); len(p) > pMax {
			p = strings.TrimRight(p[:pMax], "-")
		}
		if rMax := hashedBudget - len(p); len(r) > rMax {
			r = strings.TrimRight(r[:rMax], "-")
		}
	}
	if name := namePrefix + p + "." + r + "." + hash; validName(name) {
		return name
	}
	// Unreachable: both parts are non-empty DNS labels that fit.
	return namePrefix + "policy.rule." + nameHash(policy, rule)
}

// labelValue returns v when it is a valid label value, otherwise a stable
// valid form: a truncated sanitized prefix plus a hash.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	var b strings.Builder
	for _, r := range v {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	suffix := shortHash(v)
	clean := b.String()
	if max := validation.LabelValueMaxLength - len(suffix) - 1; len(clean) > max {
		clean = clean[:max]
	}
	clean = strings.Trim(clean, "-_.")
	if clean == "" {
		return suffix
	}
	return clean + "-" + suffix
}
