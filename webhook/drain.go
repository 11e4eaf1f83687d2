// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"errors"
	"net/http"
	"sync/atomic"
)

// drain is the webhook's shutdown: once on, every response asks the client
// to close its connection and the readiness check fails, while the server
// keeps answering. A client (the API server) then never sends a request on
// a kept-alive connection the server is about to close, which it would see
// as a failed call (EOF) and answer with the rule's failurePolicy; and the
// Service stops sending new connections to the replica.
type drain struct{ on atomic.Bool }

func (d *drain) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.on.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// Checker is a readiness check that fails while draining.
func (d *drain) Checker(*http.Request) error {
	if d.on.Load() {
		return errors.New("the webhook is shutting down")
	}
	return nil
}

// Drain starts the webhook's shutdown (see drain); the server keeps
// answering until the manager stops.
func (w *Webhook) Drain() { w.drain.on.Store(true) }

// Draining reports whether Drain was called.
func (w *Webhook) Draining() bool { return w.drain.on.Load() }
