// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestDrainClosesConnectionsAndFailsReadiness(t *testing.T) {
	var d drain
	h := d.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	serve := func() *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate/fail/10", nil))
		return rec.Result()
	}
	if got := serve().Header.Get("Connection"); got != "" || d.Checker(nil) != nil {
		t.Fatalf("before the drain: Connection %q, readiness %v", got, d.Checker(nil))
	}
	d.on.Store(true)
	resp := serve()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Connection") != "close" {
		t.Errorf("while draining: status %d, Connection %q; want 200 and close", resp.StatusCode, resp.Header.Get("Connection"))
	}
	if d.Checker(nil) == nil {
		t.Error("readiness must fail while draining")
	}
}
