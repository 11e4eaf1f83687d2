// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"

	"github.com/kyvap/kyvap/policytest"
)

const testUsage = `Usage:
  kyvap test [flags] DIR...

Runs Kyverno CLI test suites (kyverno-test.yaml, cli.kyverno.io/v1alpha1 Test)
against what kyvap makes of the policies: every expected result is evaluated
through the generated ValidatingAdmissionPolicies and bindings (as kube-apiserver
evaluates them) and through kyvap's fallback engine, and both are compared with
the expectation. DIR is searched recursively for test files; it may also name a
test file. Like kyverno test, none of Kyverno's global configuration (resource
filters, excluded users and groups, webhook selectors) is applied, as with
kyvap translate --kyverno-config none.

Flags:
  -f, --file-name NAME      test file name to look for (default kyverno-test.yaml)
  -o text|json|junit        output: a table per test and a summary (default), JSON, or
                            JUnit XML for CI systems (a testsuite per test, a testcase
                            per checked result, failures with each path's result)
  --detailed-results        add each result's message (the denial, the error) to the
                            text tables, as Kyverno's CLI
  --kube-version V          the target cluster's CEL compatibility version, e.g. 1.37
                            (default: the newest this build knows)
  --require-tests           fail (exit 2) when no test file is found
  --strict                  fail a result that names a rule its policy does not have
                            (by default it passes with a warning, as Kyverno's CLI
                            counts its resources as excluded)
  --cluster                 replay the suites against the live cluster of the current
                            kubeconfig (or --kubeconfig), which must run kyvap: each
                            suite's namespaces, parameters, exceptions, CRDs and
                            policies are created, every resource is sent as a
                            server-side dry run (as the suite's user, if any) and the
                            API server's answers are compared with the expected
                            results; everything created is deleted again, also on
                            Ctrl-C
  --kubeconfig FILE         kubeconfig for --cluster (default: $KUBECONFIG, ~/.kube/config)
  --context NAME            kubeconfig context for --cluster
  --allow-remote-cluster    let --cluster run against a server that is not on this
                            machine (it creates and deletes objects there)

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
	detailed     bool
	kubeVersion  string
	requireTests bool
	strict       bool
	cluster      bool
	kubeconfig   string
	context      string
	allowRemote  bool
}

// parseTestFlags parses args; help is true for -h.
func parseTestFlags(args []string) (f testFlags, help bool, err error) {
	fs := flag.NewFlagSet("kyvap test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.fileName, "file-name", policytest.DefaultFileName, "")
	fs.StringVar(&f.fileName, "f", policytest.DefaultFileName, "")
	fs.StringVar(&f.output, "o", "text", "")
	fs.BoolVar(&f.detailed, "detailed-results", false, "")
	fs.StringVar(&f.kubeVersion, "kube-version", "", "")
	fs.BoolVar(&f.requireTests, "require-tests", false, "")
	fs.BoolVar(&f.strict, "strict", false, "")
	fs.BoolVar(&f.cluster, "cluster", false, "")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&f.context, "context", "", "")
	fs.BoolVar(&f.allowRemote, "allow-remote-cluster", false, "")
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
	case f.output != "text" && f.output != "json" && f.output != "junit":
		return f, false, fmt.Errorf("-o %s: want text, json or junit", f.output)
	case f.fileName == "":
		return f, false, errors.New("--file-name must not be empty")
	case !f.cluster && (f.kubeconfig != "" || f.context != "" || f.allowRemote):
		return f, false, errors.New("--kubeconfig, --context and --allow-remote-cluster need --cluster")
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
	var suites []policytest.Suite
	var loadErrs []error
	for _, dir := range f.dirs {
		s, err := policytest.LoadNamed(dir, f.fileName)
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
	reports := make([]policytest.Report, 0, len(suites))
	if f.cluster {
		cluster, err := liveCluster(f)
		if err != nil {
			fmt.Fprintf(stderr, "kyvap test: %v\n", err)
			return exitUnusableInput
		}
		// Ctrl-C stops the replay; what it created is still deleted.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		for i := range suites {
			if ctx.Err() != nil {
				break
			}
			reports = append(reports, policytest.RunCluster(ctx, &suites[i], cluster, policytest.Options{CompatibilityVersion: f.kubeVersion, Strict: f.strict}))
		}
		if err := cluster.Close(); err != nil {
			fmt.Fprintf(stderr, "kyvap test: cleaning up: %v\n", err)
		}
	} else {
		for i := range suites {
			reports = append(reports, policytest.Run(context.Background(), &suites[i], policytest.Options{CompatibilityVersion: f.kubeVersion, Strict: f.strict}))
		}
	}
	results := policytest.NewResults(reports)
	results.Detailed = f.detailed
	switch f.output {
	case "json":
		err = results.WriteJSON(stdout)
	case "junit":
		err = results.WriteJUnit(stdout)
	default:
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

// liveCluster is the cluster of the kubeconfig, refused when it is not on
// this machine unless --allow-remote-cluster says so.
func liveCluster(f testFlags) (*policytest.Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--cluster: loading the kubeconfig: %w", err)
	}
	if !policytest.IsLocal(cfg) && !f.allowRemote {
		return nil, fmt.Errorf("--cluster: the API server %s is not on this machine; the replay creates and deletes objects there: pass --allow-remote-cluster to allow it", cfg.Host)
	}
	// Kyverno 1.19 marks kyverno.io/v1 deprecated: every request would print it.
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kyvernov1.AddToScheme(scheme))
	utilruntime.Must(kyvernov2.AddToScheme(scheme))
	utilruntime.Must(policiesv1.Install(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	return &policytest.Cluster{Config: cfg, Scheme: scheme}, nil
}
