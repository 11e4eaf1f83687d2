// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// TestLowerClusterPolicy checks, on every golden case, that the policy
// model holds exactly what the VAPs say: each lowered rule is one VAP of
// the plan with the same fields, and one binding per model binding; that
// every rule the plan translates is lowered; and that lowering ignores only
// the opt-outs of generation and of admission (a background-only rule is
// lowered with Admission false).
func TestLowerClusterPolicy(t *testing.T) {
	lowered := 0
	for _, c := range loadGoldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			before := c.input.Policy.DeepCopy()
			p, plan, err := LowerClusterPolicy(c.input, kyverno.NewStaticResolver(testCRDs()...), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, c.input.Policy); diff != "" {
				t.Fatalf("input mutated (-before +after):\n%s", diff)
			}
			again, _, _ := LowerClusterPolicy(c.input, kyverno.NewStaticResolver(testCRDs()...), c.opts)
			if !bytes.Equal(marshalModel(t, p), marshalModel(t, again)) {
				t.Fatal("lowering is not deterministic")
			}
			wantKind := model.KindClusterPolicy
			if c.input.Namespace != "" {
				wantKind = model.KindPolicy
			}
			if p.Source.Kind != wantKind || p.Source.Name != c.input.Policy.Name || p.Source.Namespace != c.input.Namespace {
				t.Fatalf("source = %+v", p.Source)
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
				for _, vap := range vaps[r.Name] {
					if diff = cmp.Diff(vap.Spec, got); diff == "" {
						break
					}
				}
				if diff != "" {
					t.Errorf("rule %q: model differs from its VAP (-vap +model):\n%s", r.Name, diff)
				}
			}
			// With generation on and no opt-out, lowering is translation.
			opts := c.opts
			opts.GenerateValidatingAdmissionPolicy, opts.RespectGenerateField = true, false
			if c.input.Policy.Annotations[AnnotationGenerate] != "false" && c.input.Policy.Spec.AdmissionEnabled() {
				translated, _ := Translate(c.input, kyverno.NewStaticResolver(testCRDs()...), opts)
				if diff := cmp.Diff(translated, plan); diff != "" {
					t.Errorf("lowering's plan differs from translation's (-translate +lower):\n%s", diff)
				}
			}
			for _, rr := range plan.Rules {
				if rr.Verdict == VerdictTranslated && len(rr.ValidatingAdmissionPolicies) > 0 {
					if _, ok := vaps[rr.Rule]; !ok {
						t.Errorf("translated rule %q is not lowered", rr.Rule)
					}
				}
			}
		})
	}
	if lowered < 50 {
		t.Fatalf("only %d rules lowered over the golden cases", lowered)
	}
}

func TestLowerClusterPolicyNil(t *testing.T) {
	if _, _, err := LowerClusterPolicy(Input{}, nil, Options{}); !errors.Is(err, ErrNilPolicy) {
		t.Fatalf("err = %v, want ErrNilPolicy", err)
	}
}

func marshalModel(t testing.TB, p model.Policy) []byte {
	out, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
