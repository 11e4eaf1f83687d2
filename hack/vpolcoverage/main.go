// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command vpolcoverage measures how much of a corpus of ValidatingPolicies
// and NamespacedValidatingPolicies kyvap enforces entirely with
// ValidatingAdmissionPolicies, and says for each other policy what it needs.
//
//	go run ./hack/vpolcoverage [-resource-reads] DIR...
//
// -resource-reads counts Kyverno's resource library as kyvap's engine
// evaluates it with the manager's --resource-library-reads.
//
// Every *.yaml file under each DIR is read; documents that are not
// policies.kyverno.io ValidatingPolicies, NamespacedValidatingPolicies or
// PolicyExceptions are skipped (a corpus mixes them with resources and test
// files). Exceptions apply to the policies they name, as in a cluster.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/frontend/validatingpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

// firstTime reports whether the object was not seen yet (same kind,
// namespace, name and spec).
func firstTime(seen map[string]bool, kind, namespace, name string, spec any) bool {
	data, _ := json.Marshal(spec)
	key := kind + "/" + namespace + "/" + name + "/" + string(data)
	if seen[key] {
		return false
	}
	seen[key] = true
	return true
}

func main() {
	resourceReads := flag.Bool("resource-reads", false, "count the resource library as evaluated (--resource-library-reads)")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: vpolcoverage [-resource-reads] DIR...")
		os.Exit(2)
	}
	var set manifest.Set
	var files, skipped int
	seen := map[string]bool{}
	for _, root := range flag.Args() {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			for _, doc := range manifest.SplitDocuments(data) {
				var one manifest.Set
				if one.Read(path, doc.Data, manifest.AcceptAll) != nil {
					skipped++
					continue
				}
				// A test's assert files repeat a policy with only a status,
				// and several steps apply the same policy: count each once.
				for _, p := range one.ValidatingPolicies {
					if len(p.Spec.Validations) > 0 && firstTime(seen, "vpol", p.Namespace, p.Name, p.Spec) {
						set.ValidatingPolicies = append(set.ValidatingPolicies, p)
					}
				}
				for _, p := range one.NamespacedValidatingPolicies {
					if len(p.Spec.Validations) > 0 && firstTime(seen, "nvpol", p.Namespace, p.Name, p.Spec) {
						set.NamespacedValidatingPolicies = append(set.NamespacedValidatingPolicies, p)
					}
				}
				for _, ex := range one.CELExceptions {
					if firstTime(seen, "polex", ex.Namespace, ex.Name, ex.Spec) {
						set.CELExceptions = append(set.CELExceptions, ex)
					}
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	var policies []model.Policy
	now := time.Now()
	for i := range set.ValidatingPolicies {
		policies = append(policies, validatingpolicy.Lower(&set.ValidatingPolicies[i], set.CELExceptions, now))
	}
	for i := range set.NamespacedValidatingPolicies {
		policies = append(policies, validatingpolicy.LowerNamespaced(&set.NamespacedValidatingPolicies[i], set.CELExceptions, now))
	}
	opts := translate.Options{GenerateValidatingAdmissionPolicy: true, Engine: translate.EngineCapabilities{Resources: *resourceReads}}
	needs := map[string]int{}
	var vapOnly, byKyvap, admission, rules, vapRules int
	var lines []string
	for _, p := range policies {
		plan := translate.TranslatePolicy(p, kyverno.NewStaticResolver(), opts)
		all, kyvapAll, atAdmission := true, true, false
		var reasons []string
		for i, r := range plan.Rules {
			rules++
			if r.Reason == model.ReasonKyvernoLibrary {
				r.Reason = model.Reason(string(r.Reason) + " (" + strings.Join(p.Rules[i].Libraries, ", ") + ")")
			}
			switch r.Verdict {
			case translate.VerdictTranslated:
				vapRules++
				atAdmission = true
			case translate.VerdictNotHandled:
			default:
				all, atAdmission = false, true
				reasons = append(reasons, r.Rule+": "+string(r.Reason))
				needs[string(r.Reason)]++
				// kyvap's webhook takes a rule its engine evaluates.
				if r.Verdict != translate.VerdictFallback || r.Fallback == nil || r.Fallback.NotEnforced != "" {
					kyvapAll = false
				}
			}
		}
		if !atAdmission {
			lines = append(lines, fmt.Sprintf("  %-60s not at admission", p.Source))
			continue
		}
		admission++
		if kyvapAll {
			byKyvap++
		}
		if all {
			vapOnly++
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-60s %s", p.Source, strings.Join(reasons, "; ")))
	}
	sort.Strings(lines)
	fmt.Printf("files read: %d (documents skipped: %d)\n", files, skipped)
	fmt.Printf("policies: %d (%d ValidatingPolicy, %d NamespacedValidatingPolicy), exceptions: %d\n", len(policies), len(set.ValidatingPolicies), len(set.NamespacedValidatingPolicies), len(set.CELExceptions))
	if admission > 0 {
		fmt.Printf("enforced at admission entirely by VAPs: %d of %d (%.1f%%)\n", vapOnly, admission, 100*float64(vapOnly)/float64(admission))
		fmt.Printf("enforced at admission entirely by kyvap (VAPs and its webhook): %d of %d (%.1f%%)\n", byKyvap, admission, 100*float64(byKyvap)/float64(admission))
	}
	fmt.Printf("rules (policies and pod-controller variants): %d, as VAPs: %d\n", rules, vapRules)
	var keys []string
	for k := range needs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  rules needing %s: %d\n", k, needs[k])
	}
	fmt.Println("policies not entirely VAPs:")
	for _, l := range lines {
		fmt.Println(l)
	}
}
