// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package api_test

import (
	"bufio"
	"bytes"
)

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
