// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"errors"
	"testing"
)

func TestLowerNil(t *testing.T) {
	if _, err := Lower(Input{}, nil, Options{}); !errors.Is(err, ErrNilPolicy) {
		t.Fatalf("err = %v, want ErrNilPolicy", err)
	}
}
