// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/frontend/validatingpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

const translateUsage = `Usage:
  kyvap translate -f FILE [-f FILE ...] [--crd FILE ...] [flags]

Translates the CEL rules of Kyverno ClusterPolicies (and their classic rules, pattern,
anyPattern, deny and foreach with JMESPath preconditions and context variables,
compiled to CEL), ValidatingPolicies and
NamespacedValidatingPolicies into ValidatingAdmissionPolicies and bindings, as the
operator would, without a cluster.

Input (-f, repeatable): a file, a directory (its *.yaml, *.yml and *.json files, in
name order) or "-" for stdin. Each holds YAML documents or JSON objects:
kyverno.io/v1 (or v2beta1) ClusterPolicy, policies.kyverno.io ValidatingPolicy and
NamespacedValidatingPolicy (v1alpha1, v1beta1, v1), kyverno.io/v2 (or v2beta1) and
policies.kyverno.io PolicyException,
apiextensions.k8s.io/v1 CustomResourceDefinition (as with --crd), or a v1 List of
them (kubectl get -o yaml). Every policy is translated with all the exceptions
given; the translator keeps those that name its rules (a CEL PolicyException that
expires is applied until then). A ValidatingPolicy's rules are reported as
"ValidatingPolicy/name/policy" and its pod-controller variants as
".../autogen-defaults" and ".../autogen-cronjobs".

Output: stdout gets the VAPs and bindings, ready for "kubectl apply -f -": policies in
input order, each VAP followed by its bindings. Owner references to a policy without
a UID (one read from a file) are left out, because the API server refuses them; the
operator sets them in the cluster. stderr gets one line per rule with its verdict
("policy/rule: Translated -> vap", "policy/rule: Fallback (Reason): message", ...)
and the translator's warnings.

Flags:
  -f FILE                          input file, directory or "-" (repeatable, required)
  --crd FILE                       CustomResourceDefinitions that resolve custom kinds
                                   (repeatable; file, directory or "-")
  -o yaml|json                     output format: a YAML stream (default) or a v1 List
  --generate=true|false            generate VAPs (default true); false hands every CEL
                                   rule to the fallback engine, as the operator's flag
  --cel-compatibility-version V    target cluster's CEL compatibility version, e.g. 1.37
                                   (default: the newest this build knows)
  --respect-generate-field         only rules with validate.cel.generate: true become VAPs
  --kyverno-config VALUE           Kyverno's global configuration (resource filters,
                                   excluded users and groups, webhook selectors, match
                                   conditions) that every VAP and binding applies:
                                   chart-defaults (default: Kyverno's Helm-chart values,
                                   what the operator applies when no ConfigMap exists),
                                   none (no configuration, as kyverno test and kyvap test),
                                   or a file holding a ConfigMap such as Kyverno's
                                   (kubectl get cm -n kyverno kyverno -o yaml); values
                                   Kyverno would ignore are warnings on stderr

Exit status:
  0  translated (rules may fall back to kyvap's webhook or be left to Kyverno)
  1  translated, but some rule is Invalid: no engine can enforce it until it is fixed
  2  unusable input or flags: unreadable file, invalid YAML (file:line), unsupported
     kind, no policy, two policies of a kind with the same name
`

// Exit codes of kyvap translate.
const (
	exitOK            = 0
	exitInvalidRule   = 1
	exitUnusableInput = 2
)

// pathList is a repeatable flag.
type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, ",") }
func (p *pathList) Set(v string) error { *p = append(*p, v); return nil }

// translateFlags are the parsed flags of kyvap translate.
type translateFlags struct {
	files, crdFiles pathList
	output          string
	// kyvernoConfig is --kyverno-config; it becomes opts.KyvernoConfig.
	kyvernoConfig string
	opts          translate.Options
}

// parseTranslateFlags parses args; help is true for -h.
func parseTranslateFlags(args []string) (f translateFlags, help bool, err error) {
	fs := flag.NewFlagSet("kyvap translate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, with our usage text
	fs.Var(&f.files, "f", "")
	fs.Var(&f.crdFiles, "crd", "")
	fs.StringVar(&f.output, "o", "yaml", "")
	fs.BoolVar(&f.opts.GenerateValidatingAdmissionPolicy, "generate", true, "")
	f.opts.TypedObjects = true
	fs.StringVar(&f.opts.CompatibilityVersion, "cel-compatibility-version", "", "")
	fs.BoolVar(&f.opts.RespectGenerateField, "respect-generate-field", false, "")
	fs.StringVar(&f.kyvernoConfig, "kyverno-config", kyvernoConfigChartDefaults, "")
	if err := fs.Parse(args); err != nil {
		return f, errors.Is(err, flag.ErrHelp), err
	}
	switch {
	case fs.NArg() > 0:
		return f, false, fmt.Errorf("unexpected argument %q (inputs are given with -f)", fs.Arg(0))
	case len(f.files) == 0:
		return f, false, errors.New("no input: give at least one -f FILE")
	case f.output != "yaml" && f.output != "json":
		return f, false, fmt.Errorf("-o %s: want yaml or json", f.output)
	case countStdin(f.files)+countStdin(f.crdFiles) > 1:
		return f, false, errors.New(`stdin ("-") can be read only once`)
	}
	return f, false, nil
}

func countStdin(paths []string) int {
	n := 0
	for _, p := range paths {
		if p == manifest.Stdin {
			n++
		}
	}
	return n
}

// runTranslate is `kyvap translate`; it returns the exit code.
func runTranslate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, help, err := parseTranslateFlags(args)
	if help {
		fmt.Fprint(stdout, translateUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "kyvap translate: %v\n\n%s", err, translateUsage)
		return exitUnusableInput
	}
	cfg, warnings, err := loadKyvernoConfig(f.kyvernoConfig)
	if err != nil {
		fmt.Fprintf(stderr, "kyvap translate: %v\n", err)
		return exitUnusableInput
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "kyvap translate: warning: %s\n", w)
	}
	f.opts.KyvernoConfig = cfg
	set, err := readInputs(f, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "kyvap translate: %v\n", err)
		return exitUnusableInput
	}
	plans, err := translateAll(set, f.opts)
	if err != nil {
		fmt.Fprintf(stderr, "kyvap translate: %v\n", err)
		return exitUnusableInput
	}
	out, err := render(plans, f.output)
	if err != nil {
		fmt.Fprintf(stderr, "kyvap translate: %v\n", err)
		return exitUnusableInput
	}
	invalid := reportVerdicts(stderr, plans)
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "kyvap translate: writing output: %v\n", err)
		return exitUnusableInput
	}
	if invalid {
		return exitInvalidRule
	}
	return exitOK
}

// readInputs reads every -f and --crd path, and checks there is something
// to translate.
func readInputs(f translateFlags, stdin io.Reader) (manifest.Set, error) {
	var set manifest.Set
	for _, path := range f.files {
		if err := set.ReadPath(path, stdin, manifest.AcceptAll); err != nil {
			return set, err
		}
	}
	for _, path := range f.crdFiles {
		if err := set.ReadPath(path, stdin, manifest.AcceptCRDsOnly); err != nil {
			return set, err
		}
	}
	if len(set.Policies)+len(set.ValidatingPolicies)+len(set.NamespacedValidatingPolicies) == 0 {
		return set, fmt.Errorf("no ClusterPolicy, Policy, ValidatingPolicy or NamespacedValidatingPolicy in %s", strings.Join(f.files, ", "))
	}
	seen := map[string]bool{}
	check := func(kind, key string) error {
		if seen[kind+"/"+key] {
			return fmt.Errorf("two %s are named %q; their VAPs would overwrite each other", strings.Replace(kind+"s", "ys", "ies", 1), key)
		}
		seen[kind+"/"+key] = true
		return nil
	}
	for _, p := range set.Policies {
		in := clusterpolicy.InputFor(&p, nil)
		kind := "ClusterPolicy"
		if in.Namespace != "" {
			kind = "Policy"
		}
		if err := check(kind, clusterpolicy.PolicyKey(in.Namespace, p.Name)); err != nil {
			return set, err
		}
	}
	for _, p := range set.ValidatingPolicies {
		if err := check("ValidatingPolicy", p.Name); err != nil {
			return set, err
		}
	}
	for _, p := range set.NamespacedValidatingPolicies {
		if err := check("NamespacedValidatingPolicy", p.Namespace+"/"+p.Name); err != nil {
			return set, err
		}
	}
	return set, nil
}

// translateAll translates every policy, in input order, with all exceptions.
func translateAll(set manifest.Set, opts translate.Options) ([]translate.Plan, error) {
	resolver := kyverno.NewStaticResolver(set.CRDs...)
	plans := make([]translate.Plan, 0, len(set.Policies))
	for i := range set.Policies {
		plan, err := translate.Translate(clusterpolicy.InputFor(&set.Policies[i], set.Exceptions), resolver, opts)
		if err != nil {
			return nil, fmt.Errorf("translating ClusterPolicy %q: %w", set.Policies[i].Name, err)
		}
		plans = append(plans, plan)
	}
	now := time.Now()
	for i := range set.ValidatingPolicies {
		plans = append(plans, modelPlan(validatingpolicy.Lower(&set.ValidatingPolicies[i], set.CELExceptions, now), resolver, opts))
	}
	for i := range set.NamespacedValidatingPolicies {
		plans = append(plans, modelPlan(validatingpolicy.LowerNamespaced(&set.NamespacedValidatingPolicies[i], set.CELExceptions, now), resolver, opts))
	}
	return append(plans, unmatchedExceptions(set)...), nil
}

// unmatchedExceptions are warnings, one plan per policies.kyverno.io
// PolicyException, for the policyRefs that name no policy of the input:
// such a reference exempts nothing (as in Kyverno, where it may name a
// policy of the cluster the input does not hold).
func unmatchedExceptions(set manifest.Set) []translate.Plan {
	known := map[string]bool{}
	for _, p := range set.ValidatingPolicies {
		known[string(model.KindValidatingPolicy)+"/"+p.Name] = true
	}
	for _, p := range set.NamespacedValidatingPolicies {
		known[string(model.KindNamespacedValidatingPolicy)+"/"+p.Name] = true
	}
	var out []translate.Plan
	for _, ex := range set.CELExceptions {
		plan := translate.Plan{Policy: "PolicyException/" + ex.Namespace + "/" + ex.Name}
		for _, ref := range ex.Spec.PolicyRefs {
			if !known[ref.Kind+"/"+ref.Name] {
				plan.Warnings = append(plan.Warnings, fmt.Sprintf("policyRefs names %s %q, which is not among the input policies: it exempts nothing here", ref.Kind, ref.Name))
			}
		}
		if len(plan.Warnings) > 0 {
			out = append(out, plan)
		}
	}
	return out
}

// modelPlan translates a policy of the policy model; its plan is named
// Kind/name (Kind/namespace/name), so the verdict lines say which kind.
func modelPlan(p model.Policy, resolver kyverno.KindResolver, opts translate.Options) translate.Plan {
	plan := translate.TranslatePolicy(p, resolver, opts)
	plan.Policy = p.Source.String()
	return plan
}

// reportVerdicts writes one line per rule and per warning; it reports
// whether some rule is Invalid.
func reportVerdicts(w io.Writer, plans []translate.Plan) (invalid bool) {
	for _, plan := range plans {
		for _, r := range plan.Rules {
			fmt.Fprintln(w, verdictLine(plan.Policy, r))
			invalid = invalid || r.Verdict == translate.VerdictInvalid
		}
		for _, warning := range plan.Warnings {
			fmt.Fprintf(w, "%s: warning: %s\n", plan.Policy, warning)
		}
	}
	return invalid
}

// verdictLine is e.g. "pol/rule: Translated -> kyvap-pol.rule" or
// "pol/rule: Fallback (RolesOrClusterRoles): message".
func verdictLine(policy string, r translate.RuleResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s: %s", policy, r.Rule, r.Verdict)
	if r.Reason != "" {
		fmt.Fprintf(&b, " (%s)", r.Reason)
	}
	if len(r.ValidatingAdmissionPolicies) > 0 {
		fmt.Fprintf(&b, " -> %s", strings.Join(r.ValidatingAdmissionPolicies, ", "))
	}
	if r.Message != "" {
		fmt.Fprintf(&b, ": %s", r.Message)
	}
	return b.String()
}

// render serialises the plans' objects as a YAML stream or a v1 List.
func render(plans []translate.Plan, format string) ([]byte, error) {
	objs, err := applyableObjects(plans)
	if err != nil {
		return nil, err
	}
	if format == "json" {
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
		out, err := json.MarshalIndent(list, "", "  ")
		return append(out, '\n'), err
	}
	var b strings.Builder
	for i, obj := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		b.Write(out)
	}
	return []byte(b.String()), nil
}

// applyableObjects lists, per plan, each VAP followed by its bindings, as
// maps cleaned for kubectl apply.
func applyableObjects(plans []translate.Plan) ([]map[string]any, error) {
	var objs []map[string]any
	add := func(obj any) error {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		objs = append(objs, cleanForApply(m))
		return nil
	}
	for _, plan := range plans {
		emitted := make([]bool, len(plan.Bindings))
		for i := range plan.ValidatingAdmissionPolicies {
			vap := &plan.ValidatingAdmissionPolicies[i]
			if err := add(vap); err != nil {
				return nil, err
			}
			for j := range plan.Bindings {
				if plan.Bindings[j].Spec.PolicyName == vap.Name {
					if err := add(&plan.Bindings[j]); err != nil {
						return nil, err
					}
					emitted[j] = true
				}
			}
		}
		for j := range plan.Bindings { // a binding without its VAP, should one ever exist
			if !emitted[j] {
				if err := add(&plan.Bindings[j]); err != nil {
					return nil, err
				}
			}
		}
	}
	return objs, nil
}

// cleanForApply drops what a generated object must not carry into
// kubectl apply: an empty status, a null creationTimestamp, and owner
// references without a UID (the API server requires one).
func cleanForApply(obj map[string]any) map[string]any {
	delete(obj, "status")
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return obj
	}
	if meta["creationTimestamp"] == nil {
		delete(meta, "creationTimestamp")
	}
	refs, _ := meta["ownerReferences"].([]any)
	var kept []any
	for _, ref := range refs {
		if r, ok := ref.(map[string]any); ok && r["uid"] != "" && r["uid"] != nil {
			kept = append(kept, ref)
		}
	}
	if len(kept) == 0 {
		delete(meta, "ownerReferences")
	} else {
		meta["ownerReferences"] = kept
	}
	return obj
}
