// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import "testing"

func TestFallbackSyncReadiness(t *testing.T) {
	r := &FallbackSyncReconciler{}
	if r.Checker(nil) == nil {
		t.Fatal("ready before the cache synced")
	}
	r.loads.done("early") // loaded before the start-up list was taken
	r.loads.expect([]string{"early", "a", "b"})
	if err := r.Checker(nil); err == nil || err.Error() != "2 ClusterPolicies not loaded into the fallback engine yet" {
		t.Fatalf("Checker = %v, want 2 pending", err)
	}
	r.loads.done("a")
	r.loads.done("b")
	if err := r.Checker(nil); err != nil {
		t.Fatalf("not ready after every policy loaded: %v", err)
	}
	r.loads.done("later") // policies created afterwards do not matter
	if err := r.Checker(nil); err != nil {
		t.Fatal(err)
	}

	empty := &FallbackSyncReconciler{}
	empty.loads.expect(nil)
	if err := empty.Checker(nil); err != nil {
		t.Fatalf("a cluster without policies is ready at once: %v", err)
	}
}
