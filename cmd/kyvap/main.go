// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kyvap previews and tests the ValidatingAdmissionPolicies kyvap
// generates from Kyverno policies, offline.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyvap/kyvap/internal/version"
)

const usage = `kyvap turns Kyverno CEL policies into ValidatingAdmissionPolicies.

Usage:
  kyvap <command> [flags]

Commands:
  translate   translate ClusterPolicies into VAPs and bindings, offline
              (kyvap translate -h for its flags)
  test        run Kyverno CLI test suites through the generated VAPs and
              the fallback engine (kyvap test -h for its flags)
  convert     migrate ClusterPolicies (and their Kyverno CLI tests) to
              ValidatingPolicies (kyvap convert -h for its flags)
  status      who enforces each rule of every policy in the cluster (also as
              kubectl kyvap status; kyvap status -h for its flags)
  handback    after uninstalling the operator, hand the policies back to
              Kyverno (kyvap handback -h for its flags)
  version     print the version
  help        print this help
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command and returns the process exit code: 0 on success,
// 2 on a usage error; each command documents its own codes.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// The cluster commands use controller-runtime's client, which logs
	// through its global logger: unset, it prints a goroutine stack
	// ("log.SetLogger(...) was never called") before the results.
	libraryLog.setOutput(stderr)
	ctrllog.SetLogger(cliLogger(&libraryLog))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "translate":
		return runTranslate(args[1:], stdin, stdout, stderr)
	case "test":
		return runTest(args[1:], stdout, stderr)
	case "convert":
		return runConvert(args[1:], stdin, stdout, stderr)
	case "status":
		return runStatus(args[1:], stdout, stderr)
	case "handback":
		return runHandback(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version.String())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kyvap: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// cliLogger is the CLI's logger for the libraries it uses: errors only, as
// text on stderr; the commands print their own results.
func cliLogger(stderr io.Writer) logr.Logger {
	return logr.FromSlogHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// libraryLog is where the libraries' log lines go: the stderr of the
// command running (controller-runtime takes its logger once per process).
var libraryLog outputSwitch

// outputSwitch is a writer whose destination can change.
type outputSwitch struct {
	mu  sync.Mutex
	out io.Writer
}

func (o *outputSwitch) setOutput(w io.Writer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.out = w
}

func (o *outputSwitch) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out == nil {
		return len(p), nil
	}
	return o.out.Write(p)
}
