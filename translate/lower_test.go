// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// TestLowerClusterPolicy checks, on every golden case, that the
// ClusterPolicy front-end's model holds exactly what the translator's VAPs
// say: each lowered rule is one VAP of the plan with the same fields, and
// one binding per model binding; that every outcome is the plan's rule
// result, in order, with the same reason; and that lowering ignores the
// opt-outs of generation and of admission (a background-only rule is
// lowered with Admission false), which choose who enforces a rule, not
// what it means.
func TestLowerClusterPolicy(t *testing.T) {
	lowered := 0
	for _, c := range loadGoldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			before := c.input.Policy.DeepCopy()
			lowerOpts := clusterpolicy.Options{CompatibilityVersion: c.opts.CompatibilityVersion, KyvernoConfig: c.opts.KyvernoConfig}
			res, err := clusterpolicy.Lower(c.input, kyverno.NewStaticResolver(testCRDs()...), lowerOpts)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Policy
			if diff := cmp.Diff(before, c.input.Policy); diff != "" {
				t.Fatalf("input mutated (-before +after):\n%s", diff)
			}
			again, _ := clusterpolicy.Lower(c.input, kyverno.NewStaticResolver(testCRDs()...), lowerOpts)
			if !bytes.Equal(marshalModel(t, p), marshalModel(t, again.Policy)) {
				t.Fatal("lowering is not deterministic")
			}
			wantKind := model.KindClusterPolicy
			if c.input.Namespace != "" {
				wantKind = model.KindPolicy
			}
			if p.Source.Kind != wantKind || p.Source.Name != c.input.Policy.Name || p.Source.Namespace != c.input.Namespace {
				t.Fatalf("source = %+v", p.Source)
			}
			// The translation of the same policy with every rule's
			// enforcement left to VAPs: generation on, no opt-out.
			in := c.input
			in.Policy = c.input.Policy.DeepCopy()
			delete(in.Policy.Annotations, AnnotationGenerate)
			in.Policy.Spec.Admission = nil
			opts := c.opts
			opts.GenerateValidatingAdmissionPolicy, opts.RespectGenerateField = true, false
			plan, err := Translate(in, kyverno.NewStaticResolver(testCRDs()...), opts)
			if err != nil {
				t.Fatal(err)
			}
			vaps := map[string][]admissionregistrationv1.ValidatingAdmissionPolicy{} // by rule name
			for _, v := range plan.ValidatingAdmissionPolicies {
				vaps[v.Annotations[AnnotationRule]] = append(vaps[v.Annotations[AnnotationRule]], v)
			}
			bindings := map[string]int{}
			for _, b := range plan.Bindings {
				bindings[b.Annotations[AnnotationRule]]++
			}
			if len(p.Rules) != len(plan.ValidatingAdmissionPolicies) {
				t.Fatalf("%d rules lowered, %d VAPs in the plan", len(p.Rules), len(plan.ValidatingAdmissionPolicies))
			}
			ids := map[string]bool{}
			for _, r := range p.Rules {
				lowered++
				if ids[r.ID] {
					t.Errorf("rule ID %q is not unique", r.ID)
				}
				ids[r.ID] = true
				if len(vaps[r.Name]) == 0 {
					t.Fatalf("rule %q has no VAP", r.Name)
				}
				if r.Semantics != model.SemanticsClusterPolicy || r.Namespace != c.input.Namespace || r.Admission != c.input.Policy.Spec.AdmissionEnabled() || len(r.Bindings) == 0 {
					t.Errorf("rule %q: semantics %q, namespace %q, admission %v, %d bindings", r.Name, r.Semantics, r.Namespace, r.Admission, len(r.Bindings))
				}
				if len(vaps[r.Name]) == 1 && bindings[r.Name] != len(r.Bindings) {
					t.Errorf("rule %q: %d model bindings, %d in the plan", r.Name, len(r.Bindings), bindings[r.Name])
				}
				got := admissionregistrationv1.ValidatingAdmissionPolicySpec{
					ParamKind: r.ParamKind, MatchConstraints: &r.MatchConstraints, Validations: r.Validations,
					Variables: r.Variables, FailurePolicy: &r.FailurePolicy, MatchConditions: r.MatchConditions,
				}
				var diff string
				for _, v := range vaps[r.Name] {
					if diff = cmp.Diff(v.Spec, got); diff == "" {
						break
					}
				}
				if diff != "" {
					t.Errorf("rule %q: model differs from its VAP (-vap +model):\n%s", r.Name, diff)
				}
			}
			if len(res.Outcomes) != len(plan.Rules) {
				t.Fatalf("%d outcomes, %d rule results in the plan", len(res.Outcomes), len(plan.Rules))
			}
			verdicts := map[clusterpolicy.Fate]Verdict{
				clusterpolicy.Lowered: VerdictTranslated, clusterpolicy.Empty: VerdictTranslated, clusterpolicy.NoVAPForm: VerdictFallback,
				clusterpolicy.Refused: VerdictInvalid, clusterpolicy.NotCEL: VerdictNotHandled,
			}
			for i, o := range res.Outcomes {
				rr := plan.Rules[i]
				var reason model.Reason
				if o.Refusal != nil {
					reason = o.Refusal.Reason
				}
				if o.Name != rr.Rule || verdicts[o.Fate] != rr.Verdict || reason != rr.Reason || (o.Fate == clusterpolicy.Lowered) != (len(rr.ValidatingAdmissionPolicies) > 0) {
					t.Errorf("outcome %d: %s %v %q; the plan says %s %s %q with %d VAPs", i, o.Name, o.Fate, reason, rr.Rule, rr.Verdict, rr.Reason, len(rr.ValidatingAdmissionPolicies))
				}
			}
			if len(res.Warnings) > len(plan.Warnings) || !slices.Equal(res.Warnings, plan.Warnings[:len(res.Warnings)]) {
				t.Errorf("the lowering's warnings are not the plan's first ones:\n%q\n%q", res.Warnings, plan.Warnings)
			}
		})
	}
	if lowered < 50 {
		t.Fatalf("only %d rules lowered over the golden cases", lowered)
	}
}

func marshalModel(t testing.TB, p model.Policy) []byte {
	out, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
