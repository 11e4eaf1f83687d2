// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package policytest runs Kyverno CLI test suites (kyverno-test.yaml,
// cli.kyverno.io/v1alpha1 Test) against what kyvap makes of the policies.
//
// Load finds and reads the suites (policies, resources, exceptions, values,
// user info, parameter resources); Run translates each ClusterPolicy (and
// ValidatingPolicy, see below) as the operator does and evaluates every
// expected result through two paths:
//
//   - the VAP path: the generated ValidatingAdmissionPolicies and bindings,
//     evaluated in-process as kube-apiserver evaluates them (policytest/vapsim).
//     Rules (or pod-controller variants) that the translation leaves to the
//     fallback engine are marked Fallback there;
//   - the engine path: kyvap's fallback engine (engine) with every
//     CEL rule handed to it (VAP generation off).
//
// Each path's result is compared with the expectation. When neither path
// reports on the rule, the row passes, as Kyverno's CLI counts such a
// resource as excluded; when only one does, the other path's "none" meets
// pass and skip only. Report and Results are JSON-serialisable and have a
// text form; Suite.AdmissionRequest, Suite.Namespaces and
// Suite.SelectResources expose the inputs so that other harnesses (e.g. an
// envtest suite) can replay the same cases.
//
// The semantics follow Kyverno v1.19.1's CLI (cmd/cli/kubectl-kyverno):
//
//   - discovery: files named kyverno-test.yaml (--file-name) anywhere under
//     the directory, several Test documents per file (test/load.go); test,
//     values and user-info files are decoded strictly, and the deprecated
//     schema (no apiVersion/kind, top-level name) is refused
//     (deprecations/);
//   - resources: a namespaced kind without a namespace gets "default"
//     (resource/resource.go); duplicates by group, kind, namespace and name
//     are dropped (resource/duplicate.go); resources and paramResources are
//     the parameter objects (commands/test/test.go's fake cluster);
//   - requests: CREATE unless the result's operation or the values'
//     request.operation (global, or per policy and resource) says UPDATE or
//     DELETE; UPDATE has the resource as object and oldObject, DELETE as
//     oldObject only (processor/operation.go); values request.object and
//     request.oldObject are merged into them (processor.makePolicyContext);
//     the user and roles come from the user-info file, none by default;
//     namespace labels come from the values' namespaceSelector and
//     namespaces entries;
//   - results: a result names resources as "name" or "namespace/name" (the
//     kind is not used), and all resources when none of them exists; a rule
//     name also matches its autogen-<rule> and autogen-cronjob-<rule>
//     variants (commands/test/output.go, test.go lookupRuleResponses); a
//     resource no selected rule reports on is "excluded" and meets any
//     expectation; statuses map as in report.ComputePolicyReportResult
//     without audit-warn, so warn never arises for a ClusterPolicy validate
//     rule;
//   - rule statuses (pkg/engine/handlers/validation/validate_cel.go): a
//     PolicyException or a false celPrecondition is skip; a denying
//     decision is fail, including CEL errors (Kyverno builds the validator
//     with a nil failure policy, i.e. Fail); a parameter problem is error.
//
// ValidatingPolicies and NamespacedValidatingPolicies (policies.kyverno.io
// v1alpha1, v1beta1, v1; with the policies.kyverno.io PolicyExceptions of
// the exceptions files) are lowered to the policy model and translated with
// translate.TranslatePolicy; their results run on the VAP path only, with
// Kyverno CLI's mapping (vpol.go): rule names ignored, autogen variants
// reported under the policy name, exceptions before matchConditions, a CEL
// error is error, background-only policies evaluated in-process.
//
// RunCluster (kyvap test --cluster) replays the suites on a live cluster
// running kyvap: ClusterPolicies, ValidatingPolicies and
// NamespacedValidatingPolicies (with both kinds of PolicyExceptions) are
// created one policy at a time and every request is sent to the API server
// as a dry run (cluster.go, cluster_run.go, cluster_vpol.go).
//
// Results kyvap cannot evaluate (rules that are not CEL, rules that need
// Kyverno's JMESPath engine or its CEL libraries, CEL that does not
// compile, other policy kinds) are Skipped with the reason and do not fail
// a run.
package policytest
