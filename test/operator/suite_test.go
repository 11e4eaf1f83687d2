// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package operator tests kyvap's reconciler end to end against the real
// control plane (kube-apiserver, etcd and kube-controller-manager's garbage
// collector): the API server enforces what the operator generates.
package operator

import (
	"os"
	"testing"

	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

// generateOn is what the shipped manager runs with (cmd/manager): VAPs,
// their expressions specialized to the built-in types they read.
var generateOn = translate.Options{GenerateValidatingAdmissionPolicy: true, TypedObjects: true}
