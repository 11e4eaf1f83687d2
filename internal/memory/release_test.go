// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package memory

import (
	"runtime"
	"testing"

	"github.com/go-logr/logr"
)

const mib = 1 << 20

// scripted is a Releaser reading samples from a script; a release sets the
// retained heap to the live heap, as the runtime's does.
func scripted(samples ...Sample) (*Releaser, *[]Sample) {
	script := &samples
	var current Sample
	r := &Releaser{IdleAllocation: DefaultIdleAllocation, Reclaimable: DefaultReclaimable, Log: logr.Discard()}
	r.read = func() Sample {
		if len(*script) > 0 {
			current, *script = (*script)[0], (*script)[1:]
		}
		return current
	}
	r.release = func() { current.Retained = current.Live }
	return r, script
}

func TestReleaserReleasesOnceAfterABurst(t *testing.T) {
	r, _ := scripted(
		Sample{Allocated: 0, Retained: 30 * mib, Live: 20 * mib},
		// A burst: 200 MiB allocated in one interval, 90 MiB retained.
		Sample{Allocated: 200 * mib, Retained: 90 * mib, Live: 60 * mib},
		// Over: 1 MiB allocated, the last GC found 24 MiB live.
		Sample{Allocated: 201 * mib, Retained: 90 * mib, Live: 24 * mib},
		// Idle again, nothing more to release.
		Sample{Allocated: 202 * mib, Retained: 26 * mib, Live: 24 * mib},
		Sample{Allocated: 203 * mib, Retained: 30 * mib, Live: 24 * mib},
	)
	var got []bool
	for range 5 {
		got = append(got, r.Tick())
	}
	want := []bool{false, false, true, false, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("releases by tick = %v, want %v", got, want)
		}
	}
	if r.Releases() != 1 {
		t.Errorf("Releases() = %d, want 1", r.Releases())
	}
}

func TestReleaserLeavesABusyOrSmallHeap(t *testing.T) {
	for _, tc := range []struct {
		name string
		next Sample
	}{
		{"busy: 8 MiB allocated in the interval", Sample{Allocated: 8 * mib, Retained: 200 * mib, Live: 20 * mib}},
		{"idle, 15 MiB beyond the live heap", Sample{Allocated: 1 * mib, Retained: 35 * mib, Live: 20 * mib}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := scripted(Sample{}, tc.next)
			r.Tick()
			if r.Tick() {
				t.Errorf("released with %+v", tc.next)
			}
		})
	}
}

// TestReleaserReturnsTheRuntimesHeap runs a Releaser on this process: the
// garbage of a burst is returned to the system.
func TestReleaserReturnsTheRuntimesHeap(t *testing.T) {
	r := NewReleaser(logr.Discard())
	// The test binary's own start-up allocations may not count as idle:
	// a first tick sets the baseline, so sample until one idle interval.
	r.Tick()
	allocateAndDrop(64)
	runtime.GC() // the burst is garbage: the last GC found it dead
	r.Tick()     // the burst's interval: busy
	before := ReadRuntime()
	if before.Retained < before.Live+32*mib {
		t.Fatalf("the burst left only %d MiB beyond the live heap", (before.Retained-before.Live)/mib)
	}
	if !r.Tick() {
		t.Fatalf("an idle interval after the burst did not release: %+v", ReadRuntime())
	}
	after := ReadRuntime()
	if after.Retained > before.Retained-32*mib {
		t.Errorf("retained %d MiB after the release, %d MiB before", after.Retained/mib, before.Retained/mib)
	}
}

// sink keeps the compiler from eliding allocateAndDrop's allocations.
var sink int

// allocateAndDrop allocates n MiB, all live at once as in a burst of
// translations, touches every page so that it is resident, and drops it.
func allocateAndDrop(n int) {
	burst := make([][]byte, n)
	for k := range burst {
		burst[k] = make([]byte, mib)
		for i := 0; i < mib; i += 4096 {
			burst[k][i] = 1
		}
	}
	for _, b := range burst {
		sink += int(b[mib-4096])
	}
}
