// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/internal/handback"
	"github.com/kyvap/kyvap/operator"
)

const handbackUsage = `Usage:
  kyvap handback [flags]

Hands a cluster's ClusterPolicies back to Kyverno when kyvap is uninstalled. Run it
after the operator has stopped (a running operator writes the status again):

  - every policy whose status kyvap wrote gets status.validatingadmissionpolicy
    generated: false (a running Kyverno skips a generated policy entirely) and loses
    kyvap's kyvap.io/Enforced condition;
  - kyvap's ValidatingWebhookConfiguration is deleted;
  - with --delete-vaps, kyvap's ValidatingAdmissionPolicies and bindings too.
    Without it they stay (owned by their policies, deleted with them) and keep
    enforcing beside Kyverno with the same verdicts, so no rule is ever enforced by
    nobody; run again with --delete-vaps once Kyverno's webhook configuration
    registers the policies.

Flags:
  --kubeconfig FILE   kubeconfig (default: $KUBECONFIG, ~/.kube/config)
  --context NAME      kubeconfig context
  --delete-vaps       also delete kyvap's VAPs and bindings

Exit status: 0 done, 1 something could not be done (said on stderr; run again),
2 usage or kubeconfig error.
`

func runHandback(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("handback", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kubeconfig := fs.String("kubeconfig", "", "")
	context_ := fs.String("context", "", "")
	deleteVAPs := fs.Bool("delete-vaps", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected arguments %v", fs.Args())
		}
		fmt.Fprintf(stderr, "kyvap handback: %v\n\n%s", err, handbackUsage)
		return exitUnusableInput
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if *kubeconfig != "" {
		rules.ExplicitPath = *kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *context_}).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "kyvap handback: loading the kubeconfig: %v\n", err)
		return exitUnusableInput
	}
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		fmt.Fprintf(stderr, "kyvap handback: %v\n", err)
		return exitUnusableInput
	}
	res, err := handback.Run(context.Background(), c, handback.Options{DeleteVAPs: *deleteVAPs})
	fmt.Fprintf(stdout, "handed back to Kyverno: %d ClusterPolicies", len(res.Policies))
	if len(res.Policies) > 0 {
		fmt.Fprintf(stdout, " (%s)", strings.Join(res.Policies, ", "))
	}
	fmt.Fprintln(stdout)
	if res.WebhookConfiguration {
		fmt.Fprintln(stdout, "deleted kyvap's webhook configuration")
	}
	if *deleteVAPs {
		fmt.Fprintf(stdout, "deleted %d ValidatingAdmissionPolicies and %d bindings\n", res.VAPs, res.Bindings)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kyvap handback: %v\n", err)
		return 1
	}
	return exitOK
}
