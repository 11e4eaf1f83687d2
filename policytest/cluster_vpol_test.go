// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The replay's skips of ValidatingPolicies the API server cannot answer
// for, checked offline on the corpus's suites.
func TestVpolClusterSkip(t *testing.T) {
	want := map[string]string{
		"vpol-basic/valid-images":                "", // the image library: kyvap's webhook answers
		"vpol-lib-resource/secret-ref":           "KyvernoLibrary",
		"vpol-basic/require-team-label":          "",
		"vpol-background-only/background-only":   "background-only policy",
		"vpol-background-only/admission-only":    "",
		"vpol-actions/audit-replicas":            "validationActions [Audit]",
		"vpol-actions/warn-replicas":             "",
		"vpol-actions/warn-audit-replicas":       "",
		"nvpol/require-owner":                    "",
		"vpol-autogen/pods-only":                 "",
		"vpol-exceptions/disallow-latest":        "",
		"vpol-message-expression/image-registry": "",
	}
	seen := map[string]bool{}
	for _, dir := range []string{"vpol-basic", "vpol-background-only", "vpol-actions", "nvpol", "vpol-autogen", "vpol-exceptions", "vpol-message-expression", "vpol-lib-resource"} {
		suites, err := Load("../test/conformance/" + dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range suites {
			r := newRunner(&suites[i], Options{})
			r.translate(&Report{})
			for _, st := range r.vpols {
				key := dir + "/" + st.vp.Name()
				w, ok := want[key]
				if !ok {
					continue
				}
				seen[key] = true
				got := vpolClusterSkip(st)
				if (w == "") != (got == "") || !strings.Contains(got, w) {
					t.Errorf("%s: skip %q, want %q", key, got, w)
				}
			}
		}
	}
	for key := range want {
		if !seen[key] {
			t.Errorf("%s: no such policy", key)
		}
	}
}

// A policy is created as written: an empty autogen controller list (no
// pod-controller variants) survives, which the Go type's omitempty drops.
func TestValidatingPolicyObject(t *testing.T) {
	suites, err := Load("../test/conformance/vpol-autogen")
	if err != nil {
		t.Fatal(err)
	}
	for _, vp := range suites[0].ValidatingPolicies {
		if vp.Name() != "pods-only" {
			continue
		}
		u, err := vp.object()
		if err != nil {
			t.Fatal(err)
		}
		controllers, found, err := unstructured.NestedSlice(u.Object, "spec", "autogen", "podControllers", "controllers")
		if err != nil || !found || len(controllers) != 0 {
			t.Errorf("controllers = %v (found %v, %v), want []", controllers, found, err)
		}
		if u.GetAPIVersion() != "policies.kyverno.io/v1" || u.GetKind() != "ValidatingPolicy" || u.GetNamespace() != "" {
			t.Errorf("object %s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
		}
		return
	}
	t.Fatal("pods-only not found")
}

func TestJudgeVpol(t *testing.T) {
	suites, err := Load("../test/conformance/nvpol")
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(&suites[0], Options{})
	r.translate(&Report{})
	st := r.vpols[0]
	vaps := map[string]string{"kyvap-require-owner.x": "policy"}
	denial := `configmaps "c" is forbidden: ValidatingAdmissionPolicy 'kyvap-require-owner.x' with binding 'b' denied request: no owner`
	warning := `Validation failed for ValidatingAdmissionPolicy 'kyvap-require-owner.x' with binding 'b': no owner`
	foreign := `configmaps "c" is forbidden: ValidatingAdmissionPolicy 'other' with binding 'b' denied request: no`
	cases := []struct {
		want, admit string
		answer      Answer
		result      Result
		match       bool
	}{
		{"fail", "", Answer{Denial: denial}, Fail, true},
		{"fail", "", Answer{Allowed: true, Warnings: []string{warning}}, Fail, true},
		{"fail", "", Answer{Allowed: true}, Pass, false},
		{"pass", "", Answer{Allowed: true}, Pass, true},
		{"skip", "", Answer{Denial: denial}, Fail, false},
		{"error", "", Answer{Denial: denial}, Fail, true},
		{"fail", "outside", Answer{Allowed: true}, Pass, true},
		{"fail", "outside", Answer{Denial: denial}, Fail, false},
		{"pass", "", Answer{Denial: foreign}, NotApplicable, false},
	}
	for i, c := range cases {
		cr := &clusterRequest{res: &TestResult{Result: c.want}, admit: c.admit, req: &admissionv1.AdmissionRequest{}}
		got := judgeVpol(c.answer, st, cr, vaps)
		if got.Result != c.result || *got.Match != c.match {
			t.Errorf("case %d: %s, match %v; want %s, %v", i, got.Result, *got.Match, c.result, c.match)
		}
	}
}
