package translate

import (
	"crypto/sha256"
	"encoding/hex"
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
	// namePrefix keeps our names apart from Kyverno's own "cpol-".
	namePrefix = "kyvap-"
	// hashLength is the number of hex characters of a name suffix hash.
	hashLength = 10
	// bindingSuffixRoom is what VAP names leave free for "-<n>".
	bindingSuffixRoom = 4
)

// shortHash is a stable short digest of the parts, separated so that
// ("a-b","c") and ("a","b-c") differ.
func shortHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:hashLength]
}

// sanitizeDNS lower-cases s, replaces every character that may not appear
// in a DNS subdomain by '-', and trims each dot-separated label to start and
// end with an alphanumeric, dropping empty labels.
func sanitizeDNS(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	var labels []string
	for _, l := range strings.Split(b.String(), ".") {
		if l = strings.Trim(l, "-"); l != "" {
			labels = append(labels, l)
		}
	}
	return strings.Join(labels, ".")
}

// validName reports a DNS subdomain that leaves room for binding suffixes.
func validName(name string) bool {
	return len(name) <= validation.DNS1123SubdomainMaxLength-bindingSuffixRoom && len(validation.IsDNS1123Subdomain(name)) == 0
}

// vapName is the name of the VAP of a rule: kyvap-<policy>-<rule>, made a
// valid DNS subdomain that leaves room for binding suffixes. When the plain
// form had to be changed (invalid characters, length) a hash of the exact
// policy and rule names is appended, so distinct rules never collide.
func vapName(policy, rule string) string {
	plain := namePrefix + policy + "-" + rule
	if validName(plain) {
		return plain
	}
	suffix := "-" + shortHash(policy, rule)
	clean := sanitizeDNS(plain)
	if limit := validation.DNS1123SubdomainMaxLength - bindingSuffixRoom - len(suffix); len(clean) > limit {
		clean = sanitizeDNS(clean[:limit])
	}
	if name := clean + suffix; validName(name) {
		return name
	}
	return namePrefix + shortHash(policy, rule)
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
