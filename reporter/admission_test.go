// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package reporter

import (
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/reports"
)

func TestRecordKeepsWhatCreatesOrChangesAResource(t *testing.T) {
	object := runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"c","namespace":"n","uid":"u1"}}`)}
	request := func(change func(*admissionv1.AdmissionRequest)) *admissionv1.AdmissionRequest {
		r := &admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "n", Name: "c", Object: object,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		}
		if change != nil {
			change(r)
		}
		return r
	}
	outcomes := []engine.Outcome{{Policy: "p", Rule: "r", Result: engine.Fail}}
	for _, tc := range []struct {
		name    string
		request *admissionv1.AdmissionRequest
		want    bool
	}{
		{"create", request(nil), true},
		{"update", request(func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update }), true},
		{"dry run", request(func(r *admissionv1.AdmissionRequest) { r.DryRun = ptr.To(true) }), false},
		{"delete", request(func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Delete }), false},
		{"subresource", request(func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" }), false},
		{"no uid yet", request(func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"metadata":{"name":"c"}}`) }), false},
	} {
		a := &AdmissionRecorder{}
		a.enable()
		a.Record(tc.request, outcomes)
		want := map[reports.Resource]int{}
		if tc.want {
			want[reports.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "n", Name: "c", UID: "u1"}] = 1
		}
		got := map[reports.Resource]int{}
		for k, v := range a.pending {
			got[k] = len(v)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: pending %v, want %v", tc.name, got, want)
		}
	}
	var disabled *AdmissionRecorder
	disabled.Record(request(nil), outcomes) // no CRDs: nothing, no panic
}

func TestLatestPerPolicyReplacesAPolicysOutcomes(t *testing.T) {
	previous := []engine.Outcome{{Policy: "a", Rule: "r1", Result: engine.Fail}, {Policy: "a", Rule: "r2", Result: engine.Pass}, {Policy: "b", Rule: "r", Result: engine.Pass}}
	next := []engine.Outcome{{Policy: "a", Rule: "r1", Result: engine.Pass}}
	got := latestPerPolicy(previous, next)
	want := []engine.Outcome{{Policy: "b", Rule: "r", Result: engine.Pass}, {Policy: "a", Rule: "r1", Result: engine.Pass}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestRecordIsBounded(t *testing.T) {
	a := &AdmissionRecorder{}
	a.enable()
	outcomes := []engine.Outcome{{Policy: "p", Rule: "r", Result: engine.Pass}}
	for i := range MaxPendingAdmissionResults + 10 {
		a.Record(&admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: "n", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Object: runtime.RawExtension{Raw: fmt.Appendf(nil, `{"metadata":{"name":"c%d","uid":"u%d"}}`, i, i)},
		}, outcomes)
	}
	if len(a.pending) != MaxPendingAdmissionResults {
		t.Errorf("%d resources pending, want at most %d", len(a.pending), MaxPendingAdmissionResults)
	}
}
