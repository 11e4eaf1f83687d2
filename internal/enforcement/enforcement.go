// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package enforcement reads back, from what the operator wrote, who
// enforces each rule of a policy: kyvap's condition message (one clause per
// rule that is not entirely a VAP, controllers/status.go) and the VAPs
// labelled with the policy's rules. kyvap status prints it.
package enforcement

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Enforcer says who enforces a rule.
type Enforcer string

// The enforcers.
const (
	// ByVAP: generated ValidatingAdmissionPolicies, by the API server.
	ByVAP Enforcer = "VAP"
	// ByVAPAndWebhook: part by VAPs, the rest by kyvap's webhook.
	ByVAPAndWebhook Enforcer = "VAP+webhook"
	// ByWebhook: kyvap's admission webhook.
	ByWebhook Enforcer = "webhook"
	// ByKyverno: left to Kyverno (its admission controller runs, or the
	// rule needs its JMESPath engine).
	ByKyverno Enforcer = "Kyverno"
	// ByNobody: not enforced at admission; Detail says why.
	ByNobody Enforcer = "nobody"
	// Unknown: a clause kyvap status does not recognise.
	Unknown Enforcer = "unknown"
)

// Rule is one rule and who enforces it.
type Rule struct {
	Name   string   `json:"rule"`
	By     Enforcer `json:"enforcedBy"`
	Detail string   `json:"detail,omitempty"`
	VAPs   []string `json:"vaps,omitempty"`
}

var (
	clauseStart = regexp.MustCompile(`(?:^|; )rule ("(?:[^"\\]|\\.)*"): `)
	moreRules   = regexp.MustCompile(`\.\.\. and (\d+) more rules`)
)

// Parse reads kyvap's condition message and the policy's VAPs (names by
// rule) into one Rule per rule, sorted by name. unlisted counts the rules
// the bounded message left out ("... and N more rules").
func Parse(message string, vapsByRule map[string][]string) (rules []Rule, unlisted int) {
	byName := map[string]*Rule{}
	starts := clauseStart.FindAllStringSubmatchIndex(message, -1)
	for i, m := range starts {
		name, err := strconv.Unquote(message[m[2]:m[3]])
		if err != nil {
			continue
		}
		end := len(message)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		text := message[m[1]:end]
		for _, trailer := range []string{"; warning: ", "; ... and ", "; ValidatingAdmissionPolicy "} {
			if i := strings.Index(text, trailer); i >= 0 {
				text = text[:i]
			}
		}
		byName[name] = &Rule{Name: name, By: classify(text), Detail: text}
	}
	for name, vaps := range vapsByRule {
		r := byName[name]
		if r == nil {
			r = &Rule{Name: name, By: ByVAP}
			byName[name] = r
		}
		r.VAPs = append([]string(nil), vaps...)
		sort.Strings(r.VAPs)
	}
	for _, r := range byName {
		rules = append(rules, *r)
	}
	sort.Slice(rules, func(i, j int) bool { return rules[i].Name < rules[j].Name })
	if m := moreRules.FindStringSubmatch(message); m != nil {
		unlisted, _ = strconv.Atoi(m[1])
	}
	return rules, unlisted
}

// classify reads a rule's clause (controllers/status.go wrote it).
func classify(text string) Enforcer {
	switch {
	case strings.HasPrefix(text, "partly enforced by ValidatingAdmissionPolicy"):
		if strings.Contains(text, "NOT ENFORCED") {
			return ByNobody // the rest is enforced by nobody
		}
		return ByVAPAndWebhook
	case strings.HasPrefix(text, "enforced by kyvap's webhook"):
		return ByWebhook
	case strings.HasPrefix(text, "left to Kyverno"):
		return ByKyverno
	case strings.HasPrefix(text, "NOT ENFORCED"), strings.HasPrefix(text, "not enforced"):
		return ByNobody
	}
	return Unknown
}
