// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyvap/kyvap/internal/enforcement"
)

const statusUsage = `Usage:
  kyvap status [flags]
  kubectl kyvap status [flags]      (kyvap installed as kubectl-kyvap on the PATH)

Says, for every policy kyvap reads (ClusterPolicy, Policy, ValidatingPolicy,
NamespacedValidatingPolicy) in the cluster of the current kubeconfig, who
enforces each rule: its generated ValidatingAdmissionPolicies (VAP), kyvap's
webhook, both, Kyverno, or nobody, with the reason, as kyvap's operator wrote
it in the policy's kyvap.io/Enforced condition, and the VAPs it generated.

Flags:
  -o text|wide|json|yaml    output (default text; wide adds the reason and VAPs)
  --kubeconfig FILE         kubeconfig (default: $KUBECONFIG, ~/.kube/config)
  --context NAME            kubeconfig context

Exit status:
  0  every rule of every policy is enforced (by VAPs, kyvap's webhook or Kyverno)
  1  some rule is enforced by nobody, or kyvap has not processed a policy's
     current generation yet
  2  bad flags, or the cluster cannot be read
`

type statusFlags struct {
	output, kubeconfig, context string
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	var f statusFlags
	fs := flag.NewFlagSet("kyvap status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.output, "o", "text", "")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&f.context, "context", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, statusUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "kyvap status: %v\n\n%s", err, statusUsage)
		return exitUnusableInput
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "kyvap status: unexpected argument %q\n\n%s", fs.Arg(0), statusUsage)
		return exitUnusableInput
	case f.output != "text" && f.output != "wide" && f.output != "json" && f.output != "yaml":
		fmt.Fprintf(stderr, "kyvap status: -o %s: want text, wide, json or yaml\n", f.output)
		return exitUnusableInput
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "kyvap status: loading the kubeconfig: %v\n", err)
		return exitUnusableInput
	}
	policies, err := enforcement.ClusterStatus(context.Background(), cfg)
	if err != nil {
		fmt.Fprintf(stderr, "kyvap status: %v\n", err)
		return exitUnusableInput
	}
	if err := enforcement.Write(stdout, f.output, policies); err != nil {
		fmt.Fprintf(stderr, "kyvap status: writing output: %v\n", err)
		return exitUnusableInput
	}
	if enforcement.Unenforced(policies) {
		return exitInvalidRule
	}
	return exitOK
}
