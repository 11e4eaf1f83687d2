// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestShippedConfigMapIsTheChartDefaults keeps config/'s copy of Kyverno's
// configuration, which kyvap reads without Kyverno, equal to the built-in
// defaults it reads when that copy is missing too.
func TestShippedConfigMapIsTheChartDefaults(t *testing.T) {
	data, err := os.ReadFile("../config/manager/kyverno-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var shipped corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &shipped); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ChartDefaultsConfigMap().Data, shipped.Data); diff != "" {
		t.Errorf("config/manager/kyverno-config.yaml differs from chartdefaults.yaml (-want +got):\n%s", diff)
	}
	if problems := func() []string { _, p := ParseConfig(shipped.Data); return p }(); len(problems) > 0 {
		t.Errorf("the shipped configuration has problems: %q", problems)
	}
}
