// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version carries the build's version, set by the linker
// (-X github.com/kyvap/kyvap/internal/version.Version=...).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version; "dev" for local builds.
var Version = "dev"

// String describes the build in one line.
func String() string {
	revision := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	return fmt.Sprintf("kyvap %s (revision %s, %s, %s/%s)", Version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
