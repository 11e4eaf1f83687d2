// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/policytest"
)

// Floors of TestKyvernoCLICorpus, the measured values of the last change
// that raised them: a change that evaluates fewer rows, or enforces fewer
// policies by VAPs alone, fails until it says why here.
const (
	minEvaluatedClassicRows = 138
	minVAPOnlyPolicies      = 55
)

// TestKyvernoCLICorpus runs `kyvap test` (in process) on every CLI test of
// Kyverno's module (test/cli) and measures the classic compiler on it:
// every row of a classic rule (pattern, anyPattern, deny, foreach) that
// reads nothing outside the request (no context entry but variables) is
// eligible; evaluated rows must agree with Kyverno's expectation on both
// paths, and their number is reported, with the policies of such rules
// that VAPs enforce entirely.
func TestKyvernoCLICorpus(t *testing.T) {
	root := filepath.Join(kyvernoModule(t), "test", "cli")
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "kyverno-test.yaml" {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var eligible, evaluated, failed, unloadable int
	skipped := map[string]int{}
	policies := map[string]bool{} // classic policies: enforced by VAPs alone?
	outside := map[string]bool{}  // classic policies with a rule reading outside the request
	for _, file := range files {
		suites, err := policytest.LoadFile(file)
		if err != nil {
			unloadable++
			continue
		}
		for i := range suites {
			s := &suites[i]
			classic := classicRules(s)
			report := policytest.Run(context.Background(), s, policytest.Options{})
			vapOnly := map[string]bool{}
			messages := map[string]string{}
			for _, v := range report.Rules {
				messages[v.Policy+"/"+v.Rule] = v.Message
				external, ok := classic[v.Policy+"/"+v.Rule]
				if !ok {
					continue
				}
				key := s.Path + "#" + v.Policy
				if external {
					// A policy reading outside the request is not one of
					// those the VAP-only goal counts.
					outside[key] = true
				}
				if _, seen := vapOnly[key]; !seen {
					vapOnly[key] = true
				}
				vapOnly[key] = vapOnly[key] && len(v.VAPs) > 0
				if len(v.VAPs) == 0 && os.Getenv("KYVAP_CORPUS_REASONS") != "" {
					t.Logf("not by a VAP: %s/%s: %s", v.Policy, v.Rule, v.Message)
				}
			}
			for k, v := range vapOnly {
				policies[k] = policies[k] || v
				if _, seen := policies[k]; !seen {
					policies[k] = v
				}
			}
			for _, row := range report.Rows {
				external, ok := classic[row.Policy+"/"+strings.TrimPrefix(strings.TrimPrefix(row.Rule, "autogen-cronjob-"), "autogen-")]
				if !ok || external {
					continue
				}
				eligible++
				switch row.Status {
				case policytest.StatusSkipped:
					reason := row.Reason
					if i := strings.Index(reason, ":"); i > 0 {
						reason = reason[:i]
					}
					skipped[reason]++
					if os.Getenv("KYVAP_CORPUS_REASONS") != "" {
						t.Logf("skipped: %s/%s: %s", row.Policy, row.Rule, messages[row.Policy+"/"+row.Rule])
					}
				case policytest.StatusFail:
					failed++
					t.Errorf("%s: %s/%s %s: %s (VAP %s, engine %s): %s", file, row.Policy, row.Rule, row.Resource, row.Expected, row.VAP.Result, row.Engine.Result, row.Reason)
				default:
					evaluated++
				}
			}
		}
	}
	vapPolicies, requestOnly := 0, 0
	for k, v := range policies {
		if outside[k] {
			continue
		}
		requestOnly++
		if v {
			vapPolicies++
		}
	}
	t.Logf("Kyverno's test/cli: %d test files (%d not loadable: other kinds of tests); %d rows of classic rules reading only the request: %d evaluated (%.0f%%), %d failed, skipped by reason %v", len(files), unloadable, eligible, evaluated, 100*float64(evaluated)/float64(max(eligible, 1)), failed, skipped)
	t.Logf("policies with classic rules: %d; reading only the request: %d, enforced entirely by VAPs: %d (%.0f%%)", len(policies), requestOnly, vapPolicies, 100*float64(vapPolicies)/float64(max(requestOnly, 1)))
	if evaluated < minEvaluatedClassicRows {
		t.Errorf("%d classic rows evaluated, fewer than the floor %d", evaluated, minEvaluatedClassicRows)
	}
	if vapPolicies < minVAPOnlyPolicies {
		t.Errorf("%d classic policies enforced by VAPs alone, fewer than the floor %d", vapPolicies, minVAPOnlyPolicies)
	}
}

// classicRules are the suite's classic validate rules, by policy/rule,
// each with whether it reads outside the request (a context entry other
// than a variable: an API call, a ConfigMap, an image registry, a global
// context entry).
func classicRules(s *policytest.Suite) map[string]bool {
	out := map[string]bool{}
	for i := range s.Policies {
		p := &s.Policies[i]
		for j := range p.Spec.Rules {
			r := &p.Spec.Rules[j]
			v := r.Validation
			if v == nil || v.CEL != nil || v.PodSecurity != nil || v.Manifests != nil || v.Assert != nil {
				continue
			}
			if v.RawPattern == nil && v.RawAnyPattern == nil && v.Deny == nil && len(v.ForEachValidation) == 0 {
				continue
			}
			out[p.Name+"/"+r.Name] = readsOutside(r)
		}
	}
	return out
}

func readsOutside(r *kyvernov1.Rule) bool {
	entries := append([]apiextensionsv1.JSON(nil), r.Context...)
	for _, f := range r.Validation.ForEachValidation {
		var foreach struct {
			Context []apiextensionsv1.JSON `json:"context"`
		}
		_ = json.Unmarshal(f.Raw, &foreach)
		entries = append(entries, foreach.Context...)
	}
	for _, c := range entries {
		var entry map[string]json.RawMessage
		if json.Unmarshal(c.Raw, &entry) != nil {
			return true
		}
		if _, ok := entry["variable"]; !ok {
			return true
		}
	}
	return false
}
