// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package reporter

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/scan"
	"github.com/kyvap/kyvap/translate"
)

// backgroundOnlyPolicy validates at background scans only (spec.admission
// false): Kyverno applies it there, so kyvap scans it.
const backgroundOnlyPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-team
spec:
  admission: false
  rules:
  - name: team-label
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      failureAction: Enforce
      cel:
        expressions:
        - {expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", message: "a team label is required"}
`

type staticResolvers struct{}

func (staticResolvers) Resolver() kyverno.KindResolver { return kyverno.NewStaticResolver() }

// TestScanInputsIgnoreStatusOnly: the reporter translates a policy again
// only when what its scanned rules come from changed; a status write (most
// of a policy's events) is not one.
func TestScanInputsIgnoreStatusOnly(t *testing.T) {
	policy := func() *kyvernov1.ClusterPolicy {
		var p kyvernov1.ClusterPolicy
		if err := yaml.UnmarshalStrict([]byte(backgroundOnlyPolicy), &p); err != nil {
			t.Fatal(err)
		}
		p.UID, p.Generation = "uid", 1
		return &p
	}
	opts, resolver := translate.Options{GenerateValidatingAdmissionPolicy: true}, kyverno.NewStaticResolver()
	base := scanInputs(policy(), opts, resolver, false)
	withStatus := policy()
	withStatus.ResourceVersion = "42"
	withStatus.Status.ValidatingAdmissionPolicy.Message = "a message"
	if scanInputs(withStatus, opts, resolver, false) != base {
		t.Error("a status write changes the scan inputs")
	}
	changes := map[string]func() string{
		"generation": func() string { p := policy(); p.Generation = 2; return scanInputs(p, opts, resolver, false) },
		"annotation": func() string {
			p := policy()
			p.Annotations = map[string]string{"pod-policies.kyverno.io/autogen-controllers": "none"}
			return scanInputs(p, opts, resolver, false)
		},
		"uid":      func() string { p := policy(); p.UID = "other"; return scanInputs(p, opts, resolver, false) },
		"options":  func() string { return scanInputs(policy(), translate.Options{}, resolver, false) },
		"resolver": func() string { return scanInputs(policy(), opts, kyverno.NewStaticResolver(), false) },
		"kyverno":  func() string { return scanInputs(policy(), opts, resolver, true) },
		// While Kyverno runs it scans the policies not marked generated.
		"generated": func() string {
			p := policy()
			p.Status.ValidatingAdmissionPolicy.Generated = true
			return scanInputs(p, opts, resolver, false)
		},
		"config": func() string {
			return scanInputs(policy(), translate.Options{GenerateValidatingAdmissionPolicy: true, KyvernoConfig: &kyverno.Config{}}, resolver, false)
		},
	}
	for name, changed := range changes {
		if changed() == base {
			t.Errorf("a change of the %s leaves the scan inputs unchanged", name)
		}
	}
	r := &Reporter{}
	if r.scannedFromInputs("p", base) {
		t.Error("inputs remembered before any scan")
	}
	r.rememberScanned("p", base)
	if !r.scannedFromInputs("p", base) || r.scannedFromInputs("p", "other") {
		t.Error("the remembered inputs are not the scanned ones")
	}
	r.rememberScanned("p", "")
	if r.scannedFromInputs("p", base) {
		t.Error("a deleted policy's inputs are still remembered")
	}
}

// TestBackgroundOnlyPolicyIsScanned: a policy with spec.admission false is
// applied by Kyverno in background scans only; kyvap scans it the same
// way, its rules evaluated as at admission.
func TestBackgroundOnlyPolicyIsScanned(t *testing.T) {
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(backgroundOnlyPolicy), &p); err != nil {
		t.Fatal(err)
	}
	r := &Reporter{Resolvers: staticResolvers{}, Options: func() translate.Options {
		return translate.Options{GenerateValidatingAdmissionPolicy: true}
	}}
	rules, err := r.rulesOf(&p, r.Options(), r.Resolvers.Resolver(), false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.Admission == nil || *p.Spec.Admission {
		t.Fatal("rulesOf changed the policy")
	}
	s := scan.New()
	s.SetPolicy(&p, rules)
	unlabelled := scan.Object{
		Resource:  &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "no-team", "namespace": "team-a"}}},
		GVR:       schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"kubernetes.io/metadata.name": "team-a"}}},
	}
	got, err := s.Scan(context.Background(), unlabelled, time.Now())
	if err != nil || len(got) != 1 || got[0].Result != reports.StatusFail {
		t.Errorf("scan of a ConfigMap without the label: %+v, %v; want one fail", got, err)
	}
}
