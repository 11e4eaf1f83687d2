// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package memory returns the heap of a finished burst to the system.
//
// The manager's memory is mostly informer caches and compiled plans, but a
// burst of new policies type-checks kilobytes of CEL each, and the Go
// runtime keeps the heap that burst used: its background scavenger returns
// it at about 1% of a CPU, over minutes. A pod is sized for what it keeps,
// so the Releaser hands it back once the burst is over.
package memory

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Defaults of a Releaser.
const (
	// DefaultInterval is how often the heap is looked at.
	DefaultInterval = 5 * time.Second
	// DefaultIdleAllocation is the most a process may allocate in one
	// interval and still count as idle: an idle manager allocates a few
	// hundred KiB per second (informer resyncs, leases, metrics), a burst
	// tens of MiB.
	DefaultIdleAllocation = 8 << 20
	// DefaultReclaimable is the least heap beyond the live heap worth a
	// release: a release is a full garbage collection.
	DefaultReclaimable = 16 << 20
)

// Sample is what a Releaser reads of the runtime.
type Sample struct {
	// Allocated is the cumulative bytes allocated on the heap.
	Allocated uint64
	// Retained is the heap the process holds from the system: objects,
	// free and unused spans, not what was already released.
	Retained uint64
	// Live is the heap the last garbage collection found reachable.
	Live uint64
}

// Releaser returns the heap beyond the live heap to the system once the
// process is idle after a burst: when, over one interval, it allocated less
// than IdleAllocation and retains at least Reclaimable beyond its live
// heap. An idle process that has released its heap retains about its live
// heap, so it does not release again until the next burst.
type Releaser struct {
	Interval       time.Duration
	IdleAllocation uint64
	Reclaimable    uint64
	Log            logr.Logger

	// read and release are the runtime's, replaced in tests.
	read    func() Sample
	release func()

	last     Sample
	started  bool
	releases atomic.Int64
}

// NewReleaser is a Releaser with the defaults, reading the Go runtime.
func NewReleaser(log logr.Logger) *Releaser {
	return &Releaser{
		Interval:       DefaultInterval,
		IdleAllocation: DefaultIdleAllocation,
		Reclaimable:    DefaultReclaimable,
		Log:            log,
		read:           ReadRuntime,
		release:        debug.FreeOSMemory,
	}
}

// NeedLeaderElection is false: every replica has its own heap.
func (*Releaser) NeedLeaderElection() bool { return false }

// Start looks at the heap every interval until ctx ends.
func (r *Releaser) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(context.Context) { r.Tick() }, r.Interval)
	return nil
}

// Tick reads the heap and releases it when the process is idle after a
// burst. It reports whether it released.
func (r *Releaser) Tick() bool {
	now := r.read()
	prev, started := r.last, r.started
	r.last, r.started = now, true
	if !started {
		return false
	}
	allocated := now.Allocated - prev.Allocated
	if allocated >= r.IdleAllocation || now.Retained < now.Live+r.Reclaimable {
		return false
	}
	r.release()
	r.releases.Add(1)
	after := r.read()
	r.last = after
	r.Log.V(1).Info("returned the heap of a finished burst to the system",
		"retainedMiB", now.Retained>>20, "liveMiB", after.Live>>20, "retainedAfterMiB", after.Retained>>20)
	return true
}

// Releases is the number of releases so far; it may be read while the
// Releaser runs.
func (r *Releaser) Releases() int64 { return r.releases.Load() }

// runtimeMetrics are the runtime/metrics a Sample is made of.
var runtimeMetrics = []string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/unused:bytes",
	"/gc/heap/live:bytes",
}

// ReadRuntime samples the Go runtime's heap.
func ReadRuntime() Sample {
	samples := make([]metrics.Sample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	value := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	return Sample{
		Allocated: value(0),
		Retained:  value(1) + value(2) + value(3),
		Live:      value(4),
	}
}
