// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import "sync"

// Memo remembers the results of a pure function: a concurrency-safe map of
// at most Limit entries. When full it starts again empty, which keeps it
// bounded without bookkeeping: forgetting a result only costs computing it
// again. Keys are small (hashes of the inputs), so that its memory does not
// grow with the size of what was computed from.
type Memo[K comparable, V any] struct {
	// Limit is the most entries held.
	Limit int

	mu      sync.Mutex
	entries map[K]V
}

// Get returns the remembered result of k.
func (m *Memo[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.entries[k]
	return v, ok
}

// Put remembers the result of k.
func (m *Memo[K, V]) Put(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil || len(m.entries) >= m.Limit {
		m.entries = make(map[K]V)
	}
	m.entries[k] = v
}

// Len is the number of remembered results.
func (m *Memo[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
