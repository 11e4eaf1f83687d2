// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"context"
	"runtime"
)

// slots bounds the translations that run at once to the CPUs the process
// may use. A translation is pure CPU (lowering, then type-checking every
// CEL expression), so more of them at once finish no sooner; but each one
// in flight holds its type-checking environments and its compiled forms, so
// a burst of policies reconciled 16 at a time held 16 translations' memory
// at its peak, which is what a pod must be sized for.
var slots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))

// acquireSlot waits for a translation slot, or for ctx to end; release
// returns the slot.
func acquireSlot(ctx context.Context) (release func(), err error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
