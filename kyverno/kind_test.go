// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKindSelector(t *testing.T) {
	tests := []struct {
		in      string
		want    KindSelector
		wantErr bool
	}{
		// The spellings of Kyverno's own TestParseKindSelector, then more.
		{in: "*", want: KindSelector{"*", "*", "*", ""}},
		{in: "*.*", want: KindSelector{"*", "*", "*", "*"}},
		{in: "Pod", want: KindSelector{"*", "*", "Pod", ""}},
		{in: "v1/Pod", want: KindSelector{"*", "v1", "Pod", ""}},
		{in: "Pod/exec", want: KindSelector{"*", "*", "Pod", "exec"}},
		{in: "Pod.exec", want: KindSelector{"*", "*", "Pod", "exec"}},
		{in: "batch/*/CronJob", want: KindSelector{"batch", "*", "CronJob", ""}},
		{in: "storage.k8s.io/v1/CSIDriver", want: KindSelector{"storage.k8s.io", "v1", "CSIDriver", ""}},
		{in: "tekton.dev/v1beta1/TaskRun/status", want: KindSelector{"tekton.dev", "v1beta1", "TaskRun", "status"}},
		{in: "v1/Pod.status", want: KindSelector{"*", "v1", "Pod", "status"}},
		{in: "v1/Pod/status", want: KindSelector{"*", "v1", "Pod", "status"}},
		{in: "Pod.status", want: KindSelector{"*", "*", "Pod", "status"}},
		{in: "Pod/status", want: KindSelector{"*", "*", "Pod", "status"}},
		{in: "apps/v1/Deployment", want: KindSelector{"apps", "v1", "Deployment", ""}},
		{in: "apps/v1/Deployment/scale", want: KindSelector{"apps", "v1", "Deployment", "scale"}},
		{in: "apps/v1/Deployment.scale", want: KindSelector{"apps", "v1", "Deployment", "scale"}},
		{in: "v1/ReplicationController/scale", want: KindSelector{"*", "v1", "ReplicationController", "scale"}},
		{in: "*/ReplicationController/scale", want: KindSelector{"*", "*", "ReplicationController", "scale"}},
		{in: "*/Deployment/scale", want: KindSelector{"*", "*", "Deployment", "scale"}},
		{in: "*/Deployment.scale", want: KindSelector{"*", "*", "Deployment", "scale"}},
		{in: "v1.demo/v1/Demo", want: KindSelector{"v1.demo", "v1", "Demo", ""}},
		{in: "*/*", want: KindSelector{"*", "*", "*", "*"}},
		{in: "*/scale", want: KindSelector{"*", "*", "*", "scale"}},
		{in: "*/status", want: KindSelector{"*", "*", "*", "status"}},
		{in: "Pod/*", want: KindSelector{"*", "*", "Pod", "*"}},
		{in: "*/*/*", want: KindSelector{"*", "*", "*", "*"}},
		{in: "*/*/*/*", want: KindSelector{"*", "*", "*", "*"}},
		{in: "v2beta1/HorizontalPodAutoscaler", want: KindSelector{"*", "v2beta1", "HorizontalPodAutoscaler", ""}},
		{in: "v10/Foo", want: KindSelector{"*", "*", "v10", "Foo"}},
		{in: "Pod/", want: KindSelector{"*", "*", "Pod", ""}},
		{in: "*/*/*/*/*", want: KindSelector{}, wantErr: true},
		{in: "", want: KindSelector{"*", "*", "", ""}, wantErr: true},
		{in: "v1/", want: KindSelector{"*", "v1", "", ""}, wantErr: true},
		{in: "/status", want: KindSelector{"*", "*", "", "status"}, wantErr: true},
		{in: "apps//Deployment", want: KindSelector{"apps", "", "Deployment", ""}, wantErr: true},
		{in: "apps//Deployment/scale", want: KindSelector{"apps", "", "Deployment", "scale"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseKindSelector(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseKindSelector(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseKindSelector(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// kyvernoVersionRegex is Kyverno's pkg/utils/kube/kind.go versionRegex.
var kyvernoVersionRegex = regexp.MustCompile(`^(v\d((alpha|beta)\d)?|\*)$`)

func TestIsVersion(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"*", true},
		{"v1", true},
		{"v2beta1", true},
		{"v1alpha3", true},
		{"", false},
		{"v", false},
		{"v10", false},
		{"v1beta", false},
		{"v1beta10", false},
		{"v1gamma1", false},
		{"V1", false},
		{"**", false},
		{"apps", false},
		{"v1\n", false},
	}
	for _, tt := range tests {
		got := IsVersion(tt.in)
		if got != tt.want {
			t.Errorf("IsVersion(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if re := kyvernoVersionRegex.MatchString(tt.in); re != got {
			t.Errorf("IsVersion(%q) = %v, Kyverno's versionRegex says %v", tt.in, got, re)
		}
	}
}
