package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/kyvap/kyvap/cmd/kyvap/clitest"
)

const testUsage = `Usage:
  kyvap test [flags] DIR...

Runs Kyverno CLI test suites (kyverno-test.yaml, cli.kyverno.io/v1alpha1 Test)
against what kyvap makes of the policies: every expected result is evaluated
through the generated ValidatingAdmissionPolicies and bindings (as kube-apiserver
evaluates them) and through kyvap's fallback engine, and both are compared with
the expectation. DIR is searched recursively for test files; it may also name a
test file.

Flags:
  -f, --file-name NAME      test file name to look for (default kyverno-test.yaml)
  -o text|json              output: a table per test and a summary (default), or JSON
  --kube-version V          the target cluster's CEL compatibility version, e.g. 1.37
                            (default: the newest this build knows)
  --require-tests           fail (exit 2) when no test file is found

Exit status:
  0  every result as expected (results kyvap cannot evaluate are counted as skipped)
  1  some result differs from the expectation on a path
  2  unusable input: unreadable or invalid test, policy, resource, values or
     user-info file (file:line), bad flags
`

// exitTestFailed is kyvap test's status when a result differs from its
// expectation (exitOK and exitUnusableInput are shared with translate).
const exitTestFailed = 1

// testFlags are the parsed flags of kyvap test.
type testFlags struct {
	dirs         []string
	fileName     string
	output       string
	kubeVersion  string
	requireTests bool
}

// parseTestFlags parses args; help is true for -h.
func parseTestFlags(args []string) (f testFlags, help bool, err error) {
	fs := flag.NewFlagSet("kyvap test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.fileName, "file-name", clitest.DefaultFileName, "")
	fs.StringVar(&f.fileName, "f", clitest.DefaultFileName, "")
	fs.StringVar(&f.output, "o", "text", "")
	fs.StringVar(&f.kubeVersion, "kube-version", "", "")
	fs.BoolVar(&f.requireTests, "require-tests", false, "")
	// Flags may follow the directories, as with Kyverno's CLI.
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return f, errors.Is(err, flag.ErrHelp), err
		}
		if fs.NArg() == 0 {
			break
		}
		f.dirs = append(f.dirs, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(f.dirs) == 0:
		return f, false, errors.New("no test directory given")
	case f.output != "text" && f.output != "json":
		return f, false, fmt.Errorf("-o %s: want text or json", f.output)
	case f.fileName == "":
		return f, false, errors.New("--file-name must not be empty")
	}
	return f, false, nil
}

// runTest is `kyvap test`; it returns the exit code.
func runTest(args []string, stdout, stderr io.Writer) int {
	f, help, err := parseTestFlags(args)
	if help {
		fmt.Fprint(stdout, testUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "kyvap test: %v\n\n%s", err, testUsage)
		return exitUnusableInput
	}
	var suites []clitest.Suite
	var loadErrs []error
	for _, dir := range f.dirs {
		s, err := clitest.LoadNamed(dir, f.fileName)
		suites = append(suites, s...)
		if err != nil {
			loadErrs = append(loadErrs, err)
		}
	}
	if len(loadErrs) > 0 {
		for _, err := range loadErrs {
			fmt.Fprintf(stderr, "kyvap test: %v\n", err)
		}
		return exitUnusableInput
	}
	if len(suites) == 0 {
		if f.requireTests {
			fmt.Fprintf(stderr, "kyvap test: no %s found\n", f.fileName)
			return exitUnusableInput
		}
		fmt.Fprintf(stderr, "kyvap test: no %s found\n", f.fileName)
	}
	reports := make([]clitest.Report, 0, len(suites))
	for i := range suites {
		reports = append(reports, clitest.Run(context.Background(), &suites[i], clitest.Options{CompatibilityVersion: f.kubeVersion}))
	}
	results := clitest.NewResults(reports)
	if f.output == "json" {
		err = results.WriteJSON(stdout)
	} else {
		err = results.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kyvap test: writing output: %v\n", err)
		return exitUnusableInput
	}
	if results.Summary.Failed > 0 {
		return exitTestFailed
	}
	return exitOK
}
