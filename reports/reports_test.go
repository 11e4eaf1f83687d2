// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package reports

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResultForReadsThePolicysAnnotations(t *testing.T) {
	now := time.Unix(1700000000, 0)
	policy := &metav1.ObjectMeta{Name: "require-labels", Annotations: map[string]string{
		AnnotationCategory: "Best Practices", AnnotationSeverity: "medium",
	}}
	got := ResultFor(policy, "check-team", StatusFail, "a team label is required", "background scan", now)
	want := Result{
		Source: "kyvap", Policy: "require-labels", Rule: "check-team", Result: StatusFail, Message: "a team label is required",
		Scored: true, Category: "Best Practices", Severity: "medium", Timestamp: metav1.Timestamp{Seconds: 1700000000},
		Properties: map[string]string{"process": "background scan"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	policy.Annotations = map[string]string{AnnotationScored: "false", AnnotationSeverity: "urgent"}
	got = ResultFor(policy, "r", StatusPass, "", "admission review", now)
	if got.Scored || got.Severity != "" || got.Category != "" {
		t.Errorf("scored %v, severity %q, category %q; want false and empty (Kyverno drops unknown severities)", got.Scored, got.Severity, got.Category)
	}
}

func TestForBuildsKyvernosLayout(t *testing.T) {
	at := func(s int64) metav1.Timestamp { return metav1.Timestamp{Seconds: s} }
	results := []Result{
		{Source: Source, Policy: "b", Rule: "r1", Result: StatusPass, Timestamp: at(5)},
		{Source: Source, Policy: "a", Rule: "r2", Result: StatusFail, Timestamp: at(5)},
		{Source: Source, Policy: "a", Rule: "r1", Result: StatusError, Timestamp: at(5)},
		{Source: Source, Policy: "a", Rule: "r1", Result: StatusSkip, Timestamp: at(4)},
	}
	original := append([]Result(nil), results...)
	cm := Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "settings", UID: "1234"}
	got := For(cm, results)
	if diff := cmp.Diff(original, results); diff != "" {
		t.Errorf("For modified its input (-want +got):\n%s", diff)
	}
	want := &PolicyReport{
		TypeMeta: metav1.TypeMeta{APIVersion: "wgpolicyk8s.io/v1alpha2", Kind: "PolicyReport"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "kyvap-1234", Namespace: "team",
			Labels:          map[string]string{"app.kubernetes.io/managed-by": "kyvap", "kyvap.io/resource.uid": "1234"},
			Annotations:     map[string]string{"kyvap.io/background-results": Fingerprint(results)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", UID: "1234"}},
		},
		Scope:   &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "settings", UID: "1234"},
		Summary: Summary{Pass: 1, Fail: 1, Error: 1, Skip: 1},
		Results: []Result{results[3], results[2], results[1], results[0]},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	node := For(Resource{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "n-uid"}, nil)
	if node.Kind != "ClusterPolicyReport" || node.Namespace != "" || node.Name != "kyvap-n-uid" || node.Summary != (Summary{}) {
		t.Errorf("cluster-scoped resource: %+v", node)
	}
}

func TestStableKeepsTheTimestampsOfUnchangedResults(t *testing.T) {
	old := []Result{
		{Source: Source, Policy: "p", Rule: "a", Result: StatusFail, Message: "m", Timestamp: metav1.Timestamp{Seconds: 1}},
		{Source: Source, Policy: "p", Rule: "b", Result: StatusPass, Timestamp: metav1.Timestamp{Seconds: 1}},
	}
	next := []Result{
		{Source: Source, Policy: "p", Rule: "a", Result: StatusFail, Message: "m", Timestamp: metav1.Timestamp{Seconds: 9}},
		{Source: Source, Policy: "p", Rule: "b", Result: StatusFail, Message: "now failing", Timestamp: metav1.Timestamp{Seconds: 9}},
	}
	got := Stable(old, next)
	if got[0].Timestamp.Seconds != 1 || got[1].Timestamp.Seconds != 9 {
		t.Errorf("timestamps %d, %d; want 1 (unchanged result) and 9 (changed)", got[0].Timestamp.Seconds, got[1].Timestamp.Seconds)
	}
	if next[0].Timestamp.Seconds != 9 {
		t.Error("Stable modified its input")
	}
	r := Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "n", Name: "c", UID: "u"}
	if diff := cmp.Diff(For(r, old), For(r, Stable(old, old))); diff != "" {
		t.Errorf("a rescan that finds the same results builds another report (-want +got):\n%s", diff)
	}
}

func TestFingerprintIgnoresTimestampsAndOrder(t *testing.T) {
	a := Result{Source: Source, Policy: "p", Rule: "a", Result: StatusFail, Message: "m", Timestamp: metav1.Timestamp{Seconds: 1}}
	b := Result{Source: Source, Policy: "p", Rule: "b", Result: StatusPass, Timestamp: metav1.Timestamp{Seconds: 1}}
	later := a
	later.Timestamp.Seconds = 99
	if Fingerprint([]Result{a, b}) != Fingerprint([]Result{b, later}) {
		t.Error("the same results in another order, rescanned later, have another fingerprint")
	}
	changed := a
	changed.Message = "other"
	if Fingerprint([]Result{a, b}) == Fingerprint([]Result{changed, b}) {
		t.Error("a changed message keeps the fingerprint")
	}
	if Fingerprint(nil) != "" || Fingerprint([]Result{a}) == "" {
		t.Error("only no results have the empty fingerprint")
	}
}

func TestForKeepsAdmissionResultsApart(t *testing.T) {
	bg := Result{Source: Source, Policy: "p", Rule: "a", Result: StatusPass, Properties: map[string]string{"process": ProcessBackground}}
	adm := Result{Source: Source, Policy: "q", Rule: "b", Result: StatusFail, Properties: map[string]string{"process": ProcessAdmission}}
	r := Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "n", Name: "c", UID: "u"}
	got := For(r, []Result{adm, bg})
	if got.Labels[LabelAdmissionResults] != "true" {
		t.Errorf("labels %v: want %s", got.Labels, LabelAdmissionResults)
	}
	if got.Annotations[AnnotationBackgroundResults] != Fingerprint([]Result{bg}) {
		t.Errorf("the fingerprint covers admission results too: %v", got.Annotations)
	}
	if only := For(r, []Result{adm}); only.Annotations != nil || only.Summary.Fail != 1 {
		t.Errorf("admission results only: annotations %v, summary %+v", only.Annotations, only.Summary)
	}
}

func TestResultMessagesAreBounded(t *testing.T) {
	long := strings.Repeat("é", MaxMessage)
	got := ResultFor(&metav1.ObjectMeta{Name: "p"}, "r", StatusFail, long, ProcessBackground, time.Now()).Message
	if len(got) > MaxMessage || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d ending in ...", len(got), utf8.ValidString(got), MaxMessage)
	}
}
