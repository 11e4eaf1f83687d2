// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"flag"
	"fmt"
	"io"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// RunSuite is the body of a suite's TestMain: it starts the control plane
// into *cp, runs the tests, stops everything and returns the exit code.
// Logs of controller-runtime (and of an operator run in-process) go to
// stderr when KYVAP_TEST_LOG is set and are discarded otherwise.
//
//	func TestMain(m *testing.M) { os.Exit(controlplane.RunSuite(m, controlplane.Options{}, &cp)) }
func RunSuite(m *testing.M, opts Options, cp **ControlPlane) int {
	logs := io.Discard
	if os.Getenv("KYVAP_TEST_LOG") != "" {
		logs = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	started, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	*cp = started
	code := m.Run()
	if err := started.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	return code
}

// RunBenchmarkSuite is RunSuite for a package of benchmarks: it starts the
// control plane only when -test.bench asks for benchmarks, so that `go test`
// without -bench, which runs none, starts no kube-apiserver (*cp stays nil;
// a Test of such a package must not need the control plane).
//
//	func TestMain(m *testing.M) { os.Exit(controlplane.RunBenchmarkSuite(m, controlplane.Options{}, &cp)) }
func RunBenchmarkSuite(m *testing.M, opts Options, cp **ControlPlane) int {
	flag.Parse()
	if !BenchmarksRequested() {
		return m.Run()
	}
	return RunSuite(m, opts, cp)
}

// BenchmarksRequested reports whether the test binary was asked to run
// benchmarks (-test.bench, i.e. go test -bench, is set). Call it after
// flag.Parse, in TestMain.
func BenchmarksRequested() bool {
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}
