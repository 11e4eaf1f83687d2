// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyvernochart

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestRender renders the pinned Kyverno chart: the values checked are the
// ones the benchmark relies on, and would change if the chart's defaults or
// its naming did.
func TestRender(t *testing.T) {
	c, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	for name, ctr := range map[string]Container{"admission": c.AdmissionController, "reports": c.ReportsController} {
		t.Logf("%s controller: args %q, env %q, limits %v, requests %v", name, ctr.Args, ctr.Env, quantities(ctr.Resources.Limits), quantities(ctr.Resources.Requests))
	}
	t.Logf("ConfigMap kyverno: %q", c.ConfigMap)
	t.Logf("ConfigMap kyverno-metrics: %q", c.MetricsConfigMap)

	admission := c.AdmissionController.Args
	if want := "--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca"; !slices.Contains(admission, want) {
		t.Errorf("admission controller args %q, want %s among them", admission, want)
	}
	if v, ok := Flag(admission, "generateValidatingAdmissionPolicy"); !ok || v != "true" {
		t.Errorf("admission controller --generateValidatingAdmissionPolicy = %q (set: %v), want the chart's default true", v, ok)
	}
	if c.ConfigMap["resourceFilters"] == "" {
		t.Errorf("ConfigMap kyverno has no resourceFilters; its keys: %v", slices.Sorted(maps.Keys(c.ConfigMap)))
	}
	if len(c.ReportsController.Args) == 0 {
		t.Error("the reports controller has no args")
	}
	if c.MetricsConfigMap == nil {
		t.Error("no ConfigMap kyverno-metrics data")
	}
}

// TestRenderDirMissingChart: a wrong directory is an error naming it, not an
// empty configuration.
func TestRenderDirMissingChart(t *testing.T) {
	dir := t.TempDir()
	if _, err := RenderDir(dir); err == nil {
		t.Fatalf("RenderDir(%s) of an empty directory succeeded", dir)
	}
}

func TestExtractContainer(t *testing.T) {
	pod := &corev1.PodSpec{Containers: []corev1.Container{
		{Name: "sidecar", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("64Mi"),
		}}},
		{
			Name: "main",
			Args: []string{"--a=1"},
			Env: []corev1.EnvVar{
				{Name: "LITERAL", Value: "x"},
				{Name: "EMPTY"},
				{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
				{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "SIDECAR_MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "sidecar", Resource: "limits.memory"}}},
				{Name: "REQ_CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu"}}},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("384Mi"),
				corev1.ResourceCPU:    resource.MustParse("1500m"),
			}},
		},
	}}
	got, err := extractContainer(pod, "main")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"LITERAL":     "x",
		"EMPTY":       "",
		"MEM":         "402653184",
		"CPU":         "2",
		"MEM_MI":      "384",
		"SIDECAR_MEM": "67108864",
	}
	if diff := cmp.Diff(want, got.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--a=1"}, got.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if _, err := extractContainer(pod, "absent"); err == nil {
		t.Error("no error for an absent container")
	}
}

func TestFlag(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		name   string
		want   string
		wantOK bool
	}{
		{[]string{"--a=1", "--b=2"}, "b", "2", true},
		{[]string{"--a=1", "--a=2"}, "a", "2", true},
		{[]string{"-a=1"}, "a", "1", true},
		{[]string{"--a="}, "a", "", true},
		{[]string{"--a=x=y"}, "a", "x=y", true},
		{[]string{"--enableTracing"}, "enableTracing", "true", true},
		{[]string{"--ab=1"}, "a", "", false},
		{[]string{"--a=1"}, "ab", "", false},
		{[]string{"a=1"}, "a", "", false},
		{nil, "a", "", false},
	} {
		got, ok := Flag(tc.args, tc.name)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("Flag(%q, %q) = %q, %v; want %q, %v", tc.args, tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestWithoutFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		names []string
		want  []string
	}{
		{[]string{"--a=1", "--b=2", "--c"}, []string{"a", "c"}, []string{"--b=2"}},
		{[]string{"--a=1", "-a=2", "--ab=3"}, []string{"a"}, []string{"--ab=3"}},
		{[]string{"--a=1"}, nil, []string{"--a=1"}},
		{nil, []string{"a"}, []string{}},
	} {
		in := slices.Clone(tc.args)
		got := WithoutFlags(in, tc.names...)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("WithoutFlags(%q, %q) (-want +got):\n%s", tc.args, tc.names, diff)
		}
		if !slices.Equal(in, tc.args) {
			t.Errorf("WithoutFlags modified its argument: %q, was %q", in, tc.args)
		}
	}
}

func quantities(l corev1.ResourceList) map[corev1.ResourceName]string {
	out := map[corev1.ResourceName]string{}
	for name, q := range l {
		out[name] = q.String()
	}
	return out
}
