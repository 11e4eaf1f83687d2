// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"net/http"
)

type pathKey struct{}

// withPath keeps the HTTP path in the request context: the path says which
// configured webhook (failure policy and timeout) the API server called.
func withPath(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, pathKey{}, r.URL.Path)
}

func pathFrom(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(pathKey{}).(string)
	return p, ok
}
