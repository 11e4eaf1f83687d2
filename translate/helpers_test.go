// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kyvap/kyvap/kyverno"
)

func TestStaticResolver(t *testing.T) {
	r := kyverno.NewStaticResolver(testCRDs()...)
	for kind, want := range map[string]int{"Pod": 1, "Pod/exec": 1, "Event": 2, "HorizontalPodAutoscaler": 2, "Widget": 1, "Gadget": 2, "Nope": 0, "Deployment/*": 3} {
		got, err := r.Resolve(kind)
		if err != nil || len(got) != want {
			t.Errorf("Resolve(%q) = %v, %v; want %d resources", kind, got, err, want)
		}
	}
}

func TestLabelValue(t *testing.T) {
	for _, v := range []string{"ok", strings.Repeat("x", 100), "has spaces", "-lead", "ü"} {
		if errs := validation.IsValidLabelValue(labelValue(v)); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q: %v", v, labelValue(v), errs)
		}
	}
	if labelValue("ok") != "ok" {
		t.Error("valid values must be kept")
	}
}
