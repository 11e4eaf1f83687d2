// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyvap/kyvap/internal/discovery"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/migrate"
)

const convertUsage = `Usage:
  kyvap convert -f FILE|DIR|- [-f ...] [-o DIR] [flags]

Converts Kyverno ClusterPolicies and namespaced Policies (kyverno.io/v1 or
v2beta1: validate.cel rules, and classic rules, pattern, anyPattern, deny and
foreach with JMESPath preconditions and context variables, compiled to CEL) into
ValidatingPolicies and
NamespacedValidatingPolicies (policies.kyverno.io/v1), one per rule, named
<policy>-<rule>. Each carries what Kyverno's engine does with the rule: match
and exclude (wildcards, names, namespaces, selectors, operations),
celPreconditions, validationFailureAction, failurePolicy, variables,
messages, background and admission, and its pod-controller variants (as
spec.autogen when Kyverno's ValidatingPolicy autogen gives exactly the same
variants, otherwise as policies of their own). It is the form kyvap's
translator proves equal to Kyverno's verdicts; nothing is approximated.

Policies: with -f naming policy files (or directories without a test), the
converted policies go to stdout as commented YAML ready for
"kubectl apply -f -", or with -o DIR into DIR, one file per source policy.

Tests: with -f naming a directory that holds Kyverno CLI tests
(kyverno-test.yaml, searched recursively) and -o DIR, every test is written
to DIR under its relative directory as a self-contained folder: the
converted policies (policies.yaml), the test's resources, values, variables
and user info files, and a kyverno-test.yaml whose results address the
converted policies (isValidatingPolicy: true; a row of a pod-controller
variant addresses the policy that evaluates that controller). Run it with
kyvap test or Kyverno's CLI.

Kinds: a policy's kinds resolve from Kubernetes' own kinds, then CRDs (those
among a test's files, then --crd), then the cluster's discovery (--cluster),
then, for a test, the apiVersion and kind of its own resources (the plural
guessed as Kubernetes guesses it from a kind). Each resolution of a custom
kind is said on stderr and in the converted test's header, with its source;
a kind none of them knows is refused (KindUnresolved).

Refused, with the reason, never approximated: rules that are neither
validate.cel nor a classic rule the classic compiler takes
(PatternNotExpressible and JMESPathNotExpressible name the construct), context
entries that read outside the request, roles and
clusterRoles, paramKind, validationFailureActionOverrides, spec.applyRules One,
and kyverno.io PolicyExceptions without an exact policies.kyverno.io form
(JMESPath conditions, background: false). Each is listed on stderr and as a
"# NOT CONVERTED" comment. A kyverno.io PolicyException with podSecurity
controls is folded into the converted policies of the rules it names.

Flags:
  -f FILE                          input file, directory or "-" (repeatable, required)
  -o DIR                           output directory (required for tests)
  --crd FILE|DIR                   CustomResourceDefinitions that resolve custom kinds
                                   (repeatable); a converted test carries those it used
  --cluster                        also resolve kinds from the discovery of the cluster of
                                   the current kubeconfig (or --kubeconfig; read only)
  --kubeconfig FILE                kubeconfig for --cluster (default: $KUBECONFIG,
                                   ~/.kube/config)
  --context NAME                   kubeconfig context for --cluster
  --check                          after converting tests, run the source and the
                                   converted tests through kyvap's evaluation (as
                                   kyvap test) and exit 1 on any failing row, so CI
                                   can gate a migration
  --inline-kyverno-config VALUE    fold Kyverno's global configuration into every converted
                                   policy (its resource filters, excluded users and groups,
                                   webhook match conditions and selectors), for clusters
                                   where Kyverno's configuration is not applied to
                                   ValidatingPolicies as you want it: chart-defaults
                                   (Kyverno's Helm-chart values) or a ConfigMap file;
                                   policies only (default: left to Kyverno)
  --skip-unconvertible             exit 0 even when something is not converted (it is
                                   still reported); a test row of an unconverted rule
                                   is left out of the converted test
  --cel-compatibility-version V    check expressions at this CEL compatibility version

Exit status:
  0  everything converted
  1  something was not converted (see stderr), unless --skip-unconvertible
  2  unusable input or flags
`

// convertFlags are the parsed flags of kyvap convert.
type convertFlags struct {
	files, crdFiles   pathList
	out               string
	skipUnconvertible bool
	check             bool
	celVersion        string
	inlineConfig      string
	cluster           bool
	kubeconfig        string
	context           string
}

func parseConvertFlags(args []string) (f convertFlags, help bool, err error) {
	fs := flag.NewFlagSet("kyvap convert", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&f.files, "f", "")
	fs.Var(&f.crdFiles, "crd", "")
	fs.StringVar(&f.out, "o", "", "")
	fs.BoolVar(&f.skipUnconvertible, "skip-unconvertible", false, "")
	fs.BoolVar(&f.check, "check", false, "")
	fs.StringVar(&f.inlineConfig, "inline-kyverno-config", "", "")
	fs.StringVar(&f.celVersion, "cel-compatibility-version", "", "")
	fs.BoolVar(&f.cluster, "cluster", false, "")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&f.context, "context", "", "")
	if err := fs.Parse(args); err != nil {
		return f, errors.Is(err, flag.ErrHelp), err
	}
	switch {
	case fs.NArg() > 0:
		return f, false, fmt.Errorf("unexpected argument %q (inputs are given with -f)", fs.Arg(0))
	case len(f.files) == 0:
		return f, false, errors.New("no input: give at least one -f FILE")
	case countStdin(f.files)+countStdin(f.crdFiles) > 1:
		return f, false, errors.New(`stdin ("-") can be read only once`)
	case !f.cluster && (f.kubeconfig != "" || f.context != ""):
		return f, false, errors.New("--kubeconfig and --context need --cluster")
	}
	return f, false, nil
}

// runConvert is `kyvap convert`; it returns the exit code.
func runConvert(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f, help, err := parseConvertFlags(args)
	if help {
		fmt.Fprint(stdout, convertUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "kyvap convert: %v\n\n%s", err, convertUsage)
		return exitUnusableInput
	}
	opts := migrate.Options{Files: f.files, CRDFiles: f.crdFiles, Out: f.out, CELVersion: f.celVersion}
	if f.inlineConfig != "" {
		cfg, warnings, err := loadKyvernoConfig(f.inlineConfig)
		if err != nil {
			fmt.Fprintf(stderr, "kyvap convert: %v\n", strings.Replace(err.Error(), "--kyverno-config", "--inline-kyverno-config", 1))
			return exitUnusableInput
		}
		for _, w := range warnings {
			fmt.Fprintf(stderr, "kyvap convert: warning: %s\n", w)
		}
		opts.KyvernoConfig = cfg
	}
	if f.cluster {
		resolver, err := clusterKinds(f.kubeconfig, f.context, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "kyvap convert: --cluster: %v\n", err)
			return exitUnusableInput
		}
		opts.Cluster = resolver
	}
	c := migrate.New(opts, stderr)
	var code int
	tests := c.FindTests()
	switch {
	case f.inlineConfig != "" && len(tests) > 0:
		fmt.Fprintf(stderr, "kyvap convert: --inline-kyverno-config converts policies only: Kyverno's CLI tests run without Kyverno's configuration\n")
		return exitUnusableInput
	case f.check && len(tests) == 0:
		fmt.Fprintf(stderr, "kyvap convert: --check needs Kyverno CLI tests (kyverno-test.yaml) under -f\n")
		return exitUnusableInput
	case len(tests) > 0:
		code = c.ConvertTests(tests)
		if code != exitUnusableInput && f.check {
			code = max(code, c.Check(tests, stdout))
		}
	default:
		code = c.ConvertPolicies(stdin, stdout)
	}
	if code == exitInvalidRule && f.skipUnconvertible {
		return exitOK
	}
	return code
}

// clusterKinds resolves kinds from the discovery of the kubeconfig's
// cluster (read only). Groups that do not answer are left out, with a
// warning.
func clusterKinds(kubeconfig, context string, stderr io.Writer) (kyverno.KindResolver, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	client, err := clientdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	resolver, partial, err := discovery.Resolver(client)
	if err != nil {
		return nil, err
	}
	if partial != nil {
		fmt.Fprintf(stderr, "kyvap convert: warning: some API groups of the cluster did not answer, their kinds are not resolved from it: %v\n", partial)
	}
	return resolver, nil
}
