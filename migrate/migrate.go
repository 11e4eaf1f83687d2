// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package migrate runs kyvap convert over files: policies to
// ValidatingPolicies, and Kyverno CLI tests to converted test folders whose
// rows are settled against kyvap's evaluation (docs/convert.md). The CLI
// and the conformance tests share it.
package migrate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/convert"
	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest"
)

// Exit codes of a conversion.
const (
	exitOK            = 0
	exitInvalidRule   = 1
	exitUnusableInput = 2
)

// Options are what a conversion reads and where it writes.
type Options struct {
	// Files and CRDFiles are the -f and --crd paths ("-": stdin).
	Files, CRDFiles []string
	// Out is the output directory ("" for stdout, policies only).
	Out string
	// CELVersion is the CEL compatibility version expressions are checked at.
	CELVersion string
	// KyvernoConfig is folded into converted policies (policies only).
	KyvernoConfig *kyverno.Config
	// Cluster resolves kinds from a live cluster's discovery (--cluster);
	// nil offline.
	Cluster kyverno.KindResolver
}

// New returns a converter reporting on stderr.
func New(opts Options, stderr io.Writer) *Converter {
	return &Converter{flags: opts, stderr: stderr}
}

// Rows is the accounting of the source tests' rows so far.
func (c *Converter) Rows() RowCounts { return c.rows }

// Unconverted counts what was left behind so far.
func (c *Converter) Unconverted() int { return c.unconverted }

// Converter holds one run's flags and what it reports.
type Converter struct {
	flags Options
	// crdFiles are the CRDs of --crd, which resolve the kinds of every
	// test.
	crdFiles []apiextensionsv1.CustomResourceDefinition
	stderr   io.Writer
	// unconverted counts what was left behind.
	unconverted int
	// rows counts the result rows of converted tests, one per resource.
	rows RowCounts
}

// RowCounts account for every (result, resource) pair of the source tests'
// ClusterPolicy results: source = converted + leftOut + unconverted.
type RowCounts struct {
	Source, Converted, LeftOut, Unconverted int
	// Differs are converted rows whose verdict kyvap finds different.
	Differs int
}

// pairs is the number of (result, resource) pairs of a row.
func pairs(row policytest.TestResult) int {
	if n := len(row.Resources); n > 0 {
		return n
	}
	return 1
}

// Check runs the source tests and the converted ones through kyvap's
// evaluation (both paths, as kyvap test): the converted rows carry the
// source's expected verdicts (changed only where the notes say), so both
// passing is the same verdicts. It prints both summaries and returns 1 on
// any failing row.
func (c *Converter) Check(files []string, stdout io.Writer) int {
	run := func(label string, paths []string) int {
		failed, passed := 0, 0
		for _, path := range paths {
			suites, err := policytest.Load(path)
			if err != nil {
				fmt.Fprintf(c.stderr, "kyvap convert: --check: %v\n", err)
				failed++
				continue
			}
			for i := range suites {
				report := policytest.Run(context.Background(), &suites[i], policytest.Options{CompatibilityVersion: c.flags.CELVersion})
				for _, row := range report.Rows {
					switch row.Status {
					case policytest.StatusPass:
						passed++
					case policytest.StatusFail:
						failed++
						fmt.Fprintf(stdout, "check: %s: %s %s %s: want %s, VAP %s, engine %s\n", label, suites[i].Path, row.Policy, row.Resource, row.Expected, row.VAP.Result, row.Engine.Result)
					}
				}
			}
		}
		fmt.Fprintf(stdout, "check: %s: %d rows passed, %d failed\n", label, passed, failed)
		return failed
	}
	failed := run("source", files) + run("converted", []string{c.flags.Out})
	if failed > 0 || c.rows.Differs > 0 {
		return exitInvalidRule
	}
	return exitOK
}

// FindTests lists the test files under the -f directories.
func (c *Converter) FindTests() []string {
	var files []string
	for _, path := range c.flags.Files {
		if info, err := os.Stat(path); err != nil || !info.IsDir() {
			continue
		}
		_ = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == policytest.DefaultFileName {
				files = append(files, p)
			}
			return nil
		})
	}
	return files
}

// ConvertPolicies converts policy files to stdout or -o.
func (c *Converter) ConvertPolicies(stdin io.Reader, stdout io.Writer) int {
	var set manifest.Set
	for _, path := range c.flags.Files {
		if err := set.ReadPath(path, stdin, manifest.AcceptAll); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
	}
	for _, path := range c.flags.CRDFiles {
		if err := set.ReadPath(path, stdin, manifest.AcceptCRDsOnly); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
	}
	if len(set.Policies) == 0 {
		fmt.Fprintf(c.stderr, "kyvap convert: no ClusterPolicy or Policy in %s\n", strings.Join(c.flags.Files, ", "))
		return exitUnusableInput
	}
	c.crdFiles = set.CRDs
	resolver := c.resolver(nil, nil)
	opts := convert.Options{Resolver: resolver, CompatibilityVersion: c.flags.CELVersion, KyvernoConfig: c.flags.KyvernoConfig, Exceptions: set.Exceptions}
	defer func() {
		for _, n := range resolver.notes() {
			fmt.Fprintf(c.stderr, "kyvap convert: %s\n", n)
		}
	}()
	var stream bytes.Buffer
	var results []convert.Result
	for i := range set.Policies {
		res, err := convert.Policy(&set.Policies[i], opts)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
		results = append(results, res)
		c.report(&res)
		out, err := convert.YAML(res)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
		if c.flags.Out == "" {
			stream.Write(out)
			continue
		}
		if err := writeFile(filepath.Join(c.flags.Out, fileName(&res)), out); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
	}
	if len(set.Exceptions) > 0 {
		out, err := convert.ExceptionYAML(c.exceptions(set.Exceptions, results, opts))
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
		if c.flags.Out == "" {
			stream.Write(out)
		} else if err := writeFile(filepath.Join(c.flags.Out, "exceptions.yaml"), out); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
	}
	if _, err := stdout.Write(stream.Bytes()); err != nil {
		fmt.Fprintf(c.stderr, "kyvap convert: writing output: %v\n", err)
		return exitUnusableInput
	}
	return c.exitCode()
}

func (c *Converter) exitCode() int {
	if c.unconverted > 0 {
		return exitInvalidRule
	}
	return exitOK
}

// exceptions converts kyverno.io PolicyExceptions and reports each.
func (c *Converter) exceptions(exceptions []kyvernov2.PolicyException, results []convert.Result, opts convert.Options) []convert.ExceptionResult {
	var out []convert.ExceptionResult
	for i := range exceptions {
		r := convert.Exception(&exceptions[i], results, opts)
		if len(r.FoldedInto) > 0 {
			fmt.Fprintf(c.stderr, "PolicyException %s: its podSecurity controls folded into %s\n", r.Source, strings.Join(r.FoldedInto, ", "))
			out = append(out, r)
			continue
		}
		if r.Exception == nil {
			c.unconverted++
			fmt.Fprintf(c.stderr, "NOT CONVERTED: PolicyException %s: %s\n", r.Source, r.Reason)
		} else {
			refs := make([]string, len(r.Exception.Spec.PolicyRefs))
			for j, ref := range r.Exception.Spec.PolicyRefs {
				refs[j] = ref.Name
			}
			fmt.Fprintf(c.stderr, "PolicyException %s: converted, naming %s\n", r.Source, strings.Join(refs, ", "))
		}
		out = append(out, r)
	}
	return out
}

// report prints one line per rule of a converted policy.
func (c *Converter) report(res *convert.Result) {
	for _, w := range res.Warnings {
		fmt.Fprintf(c.stderr, "%s: warning: %s\n", res.Source, w)
	}
	for _, p := range res.Policies {
		line := fmt.Sprintf("%s, rule %s: converted -> %s", res.Source, p.Rule, p.Name())
		if len(p.Variants) > 0 {
			line += " (with " + strings.Join(p.Variants, ", ") + " as spec.autogen)"
		}
		fmt.Fprintln(c.stderr, line)
	}
	for _, u := range res.Unconverted {
		c.unconverted++
		fmt.Fprintf(c.stderr, "NOT CONVERTED: %s, rule %s: %s\n", res.Source, u.Rule, u.Reason)
	}
}

var notFileChars = regexp.MustCompile(`[^a-z0-9.-]+`)

// fileName is the output file of one source policy.
func fileName(res *convert.Result) string {
	name := strings.ToLower(string(res.Source.Kind)) + "-" + res.Source.Name
	if res.Source.Namespace != "" {
		name = strings.ToLower(string(res.Source.Kind)) + "-" + res.Source.Namespace + "-" + res.Source.Name
	}
	return name + ".yaml"
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// ConvertTests converts every test file into -o.
func (c *Converter) ConvertTests(files []string) int {
	if c.flags.Out == "" {
		fmt.Fprintf(c.stderr, "kyvap convert: the input holds Kyverno CLI tests (%s): give -o DIR to write the converted tests\n", files[0])
		return exitUnusableInput
	}
	var set manifest.Set
	for _, path := range c.flags.CRDFiles {
		if path == manifest.Stdin {
			fmt.Fprintf(c.stderr, "kyvap convert: --crd - (stdin) converts policies only; give tests their CRDs as files\n")
			return exitUnusableInput
		}
		if err := set.ReadPath(path, nil, manifest.AcceptCRDsOnly); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
	}
	c.crdFiles = set.CRDs
	code := exitOK
	for _, file := range files {
		suites, err := policytest.LoadFile(file)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
		rel, err := c.relative(file)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %v\n", err)
			return exitUnusableInput
		}
		for i := range suites {
			dir := filepath.Join(c.flags.Out, rel)
			if len(suites) > 1 {
				// One folder per test of a file holding several.
				dir = filepath.Join(dir, fmt.Sprintf("%d-%s", i+1, strings.Trim(notFileChars.ReplaceAllString(strings.ToLower(suites[i].Name), "-"), "-")))
			}
			if code := c.convertSuite(&suites[i], dir); code == exitUnusableInput {
				return code
			}
		}
	}
	fmt.Fprintf(c.stderr, "converted %d of %d ClusterPolicy result rows (one per resource): %d left out with the reason above, %d not converted, %d with a different verdict\n",
		c.rows.Converted, c.rows.Source, c.rows.LeftOut, c.rows.Unconverted, c.rows.Differs)
	if code == exitOK {
		code = c.exitCode()
	}
	return code
}

// relative is a test file's directory relative to the -f directory it was
// found under.
func (c *Converter) relative(file string) (string, error) {
	for _, root := range c.flags.Files {
		if rel, err := filepath.Rel(root, filepath.Dir(file)); err == nil && !strings.HasPrefix(rel, "..") {
			return rel, nil
		}
	}
	return "", fmt.Errorf("%s is outside the input directories", file)
}

// convertSuite writes one converted test folder.
func (c *Converter) convertSuite(s *policytest.Suite, dir string) int {
	label := s.Path
	sourceRows := 0
	for _, row := range s.Test.Results {
		if !row.IsValidatingPolicy && !row.IsValidatingAdmissionPolicy && !row.IsMutatingAdmissionPolicy && !row.IsDeletingPolicy &&
			!row.IsImageValidatingPolicy && !row.IsGeneratingPolicy && !row.IsMutatingPolicy {
			sourceRows += pairs(row)
		}
	}
	if len(s.Policies) > 0 {
		c.rows.Source += sourceRows
	}
	if len(s.Policies) > 0 && len(s.ValidatingPolicies) > 0 {
		c.rows.Unconverted += sourceRows
	}
	switch {
	case len(s.Policies) == 0:
		fmt.Fprintf(c.stderr, "%s: no ClusterPolicy or Policy to convert; skipped\n", label)
		return exitOK
	case len(s.ValidatingPolicies) > 0:
		c.unconverted++
		fmt.Fprintf(c.stderr, "NOT CONVERTED: %s: the test mixes ValidatingPolicies with ClusterPolicies; convert tests of ClusterPolicies only\n", label)
		return exitOK
	}
	resolver := c.resolver(s.CRDs, s)
	opts := convert.Options{Resolver: resolver, CompatibilityVersion: c.flags.CELVersion, Exceptions: s.Exceptions}
	results := map[string]*convert.Result{}
	var policies bytes.Buffer
	for i := range s.Policies {
		res, err := convert.Policy(&s.Policies[i], opts)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
			return exitUnusableInput
		}
		c.report(&res)
		out, err := convert.YAML(res)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
			return exitUnusableInput
		}
		policies.Write(out)
		results[policyKey(&s.Policies[i])] = &res
	}
	for _, ig := range s.Ignored {
		c.unconverted++
		fmt.Fprintf(c.stderr, "NOT CONVERTED: %s: policy %s: %s\n", label, ig.Name, ig.Reason)
	}
	test := s.Test
	test.Policies = []string{"policies.yaml"}
	files := map[string][]byte{"policies.yaml": policies.Bytes()}
	if len(s.Exceptions) > 0 {
		var list []convert.Result
		for i := range s.Policies {
			list = append(list, *results[policyKey(&s.Policies[i])])
		}
		converted := c.exceptions(s.Exceptions, list, opts)
		onTheirOwn := 0
		for _, r := range converted {
			switch {
			case r.Exception != nil:
				onTheirOwn++
			case len(r.FoldedInto) == 0:
				c.rows.Unconverted += sourceRows
				fmt.Fprintf(c.stderr, "NOT CONVERTED: %s: the test's PolicyException %s is not converted, so its rows would change verdict\n", label, r.Source)
				return exitOK
			}
		}
		out, err := convert.ExceptionYAML(converted)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
			return exitUnusableInput
		}
		if onTheirOwn > 0 {
			// Folded ones are only named there, in a comment.
			test.PolicyExceptions = []string{"exceptions.yaml"}
			files["exceptions.yaml"] = out
		} else {
			test.PolicyExceptions = nil
		}
	}
	copies := fileCopier{from: s.Dir, files: files}
	test.Resources = copies.all(test.Resources)
	test.ParamResources = copies.all(test.ParamResources)
	test.ClusterResources = copies.all(test.ClusterResources)
	test.Variables = copies.one(test.Variables)
	test.UserInfo = copies.one(test.UserInfo)
	test.Context = copies.one(test.Context)
	if copies.err != nil {
		fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, copies.err)
		return exitUnusableInput
	}
	// Values address policies by name: they now address the converted ones.
	if test.Values != nil {
		values := *test.Values // renameValues builds a new Policies list
		test.Values = &values
		renameValues(test.Values, results)
	}
	if test.Variables != "" {
		var values policytest.Values
		if err := yaml.Unmarshal(files[test.Variables], &values); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %s: %s: %v\n", label, test.Variables, err)
			return exitUnusableInput
		}
		renameValues(&values.ValuesSpec, results)
		out, err := yaml.Marshal(values)
		if err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
			return exitUnusableInput
		}
		files[test.Variables] = out
	}
	test.Results = nil
	var leftOut []string
	for _, row := range s.Test.Results {
		converted, notes, why := convertRowResources(s, row, results)
		if why != "" {
			c.unconverted++
			c.rows.Unconverted += pairs(row)
			fmt.Fprintf(c.stderr, "NOT CONVERTED: %s: result of policy %s, rule %s, resources %v: %s\n", label, row.Policy, row.Rule, row.Resources, why)
			continue
		}
		c.rows.LeftOut += len(notes)
		leftOut = append(leftOut, notes...)
		test.Results = append(test.Results, converted...)
	}
	if crds := resolver.carriedCRDs(); len(crds) > 0 {
		if err := carryCRDs(s, &test, files, crds); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
			return exitUnusableInput
		}
	}
	addNamespaces(s, &test, files, results)
	header := fmt.Sprintf("# Converted by kyvap convert from %s: the same results, addressed to the\n# ValidatingPolicies converted from its ClusterPolicies.\n", s.Path)
	if err := writeTest(dir, header, &test, files); err != nil {
		fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
		return exitUnusableInput
	}
	passesWithoutResult := map[string]bool{}
	for _, res := range results {
		for i := range res.Policies {
			if res.Policies[i].PassesWithoutResult {
				passesWithoutResult[res.Policies[i].Name()] = true
			}
		}
	}
	settled, notes, err := c.settle(dir, &test, passesWithoutResult)
	if err != nil {
		fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
		return exitUnusableInput
	}
	notes = append(append(resolver.notes(), leftOut...), notes...)
	for _, row := range settled.Results {
		if row.IsValidatingPolicy {
			c.rows.Converted += pairs(row)
		}
	}
	if len(notes) > 0 {
		for _, n := range notes {
			fmt.Fprintf(c.stderr, "%s: %s\n", label, n)
			header += "#\n# " + strings.Join(strings.Fields(n), " ") + "\n"
		}
		if err := writeTest(dir, header, settled, map[string][]byte{}); err != nil {
			fmt.Fprintf(c.stderr, "kyvap convert: %s: %v\n", label, err)
			return exitUnusableInput
		}
	}
	return exitOK
}

// resolver resolves kinds from the built-in table, the CRD manifests, the
// cluster's discovery (--cluster) and, for a test, its resources (see
// kinds.go).
func (c *Converter) resolver(testCRDs []apiextensionsv1.CustomResourceDefinition, s *policytest.Suite) *sourcedResolver {
	sources := []kindSource{{name: sourceBuiltin, resolver: kyverno.NewStaticResolver()}, crdSource(sourceTestCRDs, testCRDs), crdSource(sourceCRDs, c.crdFiles)}
	if c.flags.Cluster != nil {
		sources = append(sources, kindSource{name: sourceCluster, resolver: c.flags.Cluster})
	}
	if s != nil {
		sources = append(sources, resourcesSource(s, newSourcedResolver(sources...)))
	}
	return newSourcedResolver(sources...)
}

// Files a converted test gets for the CRDs it carries.
const (
	carriedCRDsFile      = "kyvap-crds.yaml"
	carriedResourcesFile = "kyvap-cluster-resources.yaml"
)

// carryCRDs adds the CRDs to the converted test, as a ClusterResource file
// naming a CRD file, the way Kyverno's CLI reads CRDs. With cluster
// resources, Kyverno's CLI runs the test against a fake cluster, which
// must hold the namespaces the resources live in: the file carries them
// too, with the labels the test gives them (its values) and the name label
// every namespace has.
func carryCRDs(s *policytest.Suite, test *policytest.Test, files map[string][]byte, crds []apiextensionsv1.CustomResourceDefinition) error {
	var docs [][]byte
	for i := range crds {
		out, err := yaml.Marshal(&crds[i])
		if err != nil {
			return err
		}
		docs = append(docs, out)
	}
	files[carriedCRDsFile] = bytes.Join(docs, []byte("---\n"))
	type clusterResourceSpec struct {
		CRDs      []string           `json:"crds"`
		Resources []corev1.Namespace `json:"resources,omitempty"`
	}
	type clusterResource struct {
		APIVersion string              `json:"apiVersion"`
		Kind       string              `json:"kind"`
		Spec       clusterResourceSpec `json:"spec"`
	}
	cr := clusterResource{APIVersion: policytest.APIVersion, Kind: "ClusterResource", Spec: clusterResourceSpec{CRDs: []string{carriedCRDsFile}}}
	if len(test.ClusterResources) == 0 {
		for _, ns := range s.Namespaces() {
			ns.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
			cr.Spec.Resources = append(cr.Spec.Resources, ns)
		}
	}
	out, err := yaml.Marshal(cr)
	if err != nil {
		return err
	}
	files[carriedResourcesFile] = append([]byte("# The CRDs kyvap convert resolved the policies' kinds with (--crd, --cluster), and the\n# namespaces Kyverno's CLI then needs in its fake cluster.\n"), out...)
	test.ClusterResources = append(test.ClusterResources, carriedResourcesFile)
	return nil
}

// writeTest writes a test file and the files beside it into dir.
func writeTest(dir, header string, test *policytest.Test, files map[string][]byte) error {
	out, err := yaml.Marshal(test)
	if err != nil {
		return err
	}
	files[policytest.DefaultFileName] = append([]byte(header), out...)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := writeFile(filepath.Join(dir, name), files[name]); err != nil {
			return err
		}
	}
	return nil
}

// settle runs every converted result, resource by resource, through
// kyvap's evaluation of the converted folder, and accounts for the two
// places where Kyverno reports a ValidatingPolicy differently from the
// ClusterPolicy it came from (the admission verdict is the same):
//   - a resource the policy does not match: a ClusterPolicy rule reports
//     skip, Kyverno's CLI gives a ValidatingPolicy no result (and counts a
//     row expecting one as not found): the resource is left out;
//   - a CEL error: a ClusterPolicy rule with failurePolicy Fail reports
//     fail, a ValidatingPolicy error (both deny): the row expects error;
//
// and one difference kyvap's conversion keeps (docs/convert.md): a
// foreach none of whose elements applied has no result in a
// ClusterPolicy, and the converted policy (passesWithoutResult, by name)
// passes there: the row expects pass.
//
// Any other difference is reported as a verdict difference and counted as
// not converted. It returns the settled test and one note per change.
func (c *Converter) settle(dir string, test *policytest.Test, passesWithoutResult map[string]bool) (*policytest.Test, []string, error) {
	suites, err := policytest.LoadFile(filepath.Join(dir, policytest.DefaultFileName))
	if err != nil {
		return nil, nil, err
	}
	if len(suites) != 1 {
		return nil, nil, fmt.Errorf("the converted test holds %d tests", len(suites))
	}
	out := *test
	out.Results = nil
	// Every row is settled apart (a result of one resource each), in one
	// run: translating the policies once per row cost seconds a row.
	suite := suites[0]
	suite.Test.Results = nil
	for _, res := range test.Results {
		if !res.IsValidatingPolicy {
			continue
		}
		for _, resource := range res.Resources {
			one := res
			one.Resources = []string{resource}
			suite.Test.Results = append(suite.Test.Results, one)
		}
	}
	rowsOf := make([][]policytest.Row, len(suite.Test.Results))
	if len(suite.Test.Results) > 0 {
		report := policytest.Run(context.Background(), &suite, policytest.Options{CompatibilityVersion: c.flags.CELVersion})
		for _, row := range report.Rows {
			rowsOf[row.Result] = append(rowsOf[row.Result], row)
		}
	}
	next := 0
	var notes []string
	for _, res := range test.Results {
		if !res.IsValidatingPolicy || len(res.Resources) == 0 {
			out.Results = append(out.Results, res)
			continue
		}
		kept, asError, asPass := res, res, res
		kept.Resources, asError.Resources, asPass.Resources = nil, nil, nil
		asError.Result, asPass.Result = string(policytest.Error), string(policytest.Pass)
		for _, resource := range res.Resources {
			rows := rowsOf[next]
			next++
			outcome := settleRow(rows, res.Result)
			if outcome == rowDiffers && passesWithoutResult[res.Policy] && passesEverywhere(rows, res.Result) {
				outcome = rowNoResult
			}
			switch outcome {
			case rowKept:
				kept.Resources = append(kept.Resources, resource)
			case rowUnmatched:
				c.rows.LeftOut++
				notes = append(notes, fmt.Sprintf("policy %s, resource %s: left out: the ClusterPolicy's rule reports skip for a resource it does not match, and Kyverno's CLI gives a ValidatingPolicy no result there", res.Policy, resource))
			case rowNoResult:
				asPass.Resources = append(asPass.Resources, resource)
				notes = append(notes, fmt.Sprintf("policy %s, resource %s: expects pass instead of skip: no element of the ClusterPolicy's foreach applied (no result), where a ValidatingPolicy passes", res.Policy, resource))
			case rowError:
				asError.Resources = append(asError.Resources, resource)
				notes = append(notes, fmt.Sprintf("policy %s, resource %s: expects error instead of fail: a ValidatingPolicy reports a CEL error as error, a ClusterPolicy rule with failurePolicy Fail as fail; both deny at admission", res.Policy, resource))
			default:
				kept.Resources = append(kept.Resources, resource)
				c.unconverted++
				c.rows.Differs++
				notes = append(notes, fmt.Sprintf("NOT CONVERTED: policy %s, resource %s: the converted policy's verdict differs from the original's %s: %s", res.Policy, resource, res.Result, rowSummary(rows)))
			}
		}
		if len(kept.Resources) > 0 {
			out.Results = append(out.Results, kept)
		}
		if len(asError.Resources) > 0 {
			out.Results = append(out.Results, asError)
		}
		if len(asPass.Resources) > 0 {
			out.Results = append(out.Results, asPass)
		}
	}
	return &out, notes, nil
}

// How settle treats a converted row.
type rowOutcome int

const (
	rowKept rowOutcome = iota
	rowUnmatched
	rowError
	rowNoResult
	rowDiffers
)

// passesEverywhere says whether a row expecting skip passes on both of
// kyvap's paths in every evaluated row.
func passesEverywhere(rows []policytest.Row, expected string) bool {
	if expected != string(policytest.Skip) || len(rows) == 0 {
		return false
	}
	for _, row := range rows {
		if row.VAP.Result != policytest.Pass || row.Engine.Result != policytest.Pass {
			return false
		}
	}
	return true
}

func settleRow(rows []policytest.Row, expected string) rowOutcome {
	if len(rows) == 0 {
		return rowDiffers
	}
	outcome := rowKept
	for _, row := range rows {
		switch {
		case row.Status != policytest.StatusFail:
		case expected == string(policytest.Skip) && row.VAP.Result == policytest.None && row.Engine.Result == policytest.None:
			outcome = max(outcome, rowUnmatched)
		case expected == string(policytest.Fail) && row.Engine.Result == policytest.Error && row.VAP.Result != policytest.Fail:
			outcome = max(outcome, rowError)
		default:
			return rowDiffers
		}
	}
	return outcome
}

func rowSummary(rows []policytest.Row) string {
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("VAP %s, engine %s", r.VAP.Result, r.Engine.Result))
	}
	return strings.Join(parts, "; ")
}

// policyKey is how test rows name a policy: a namespaced Policy as
// namespace/name or name, a ClusterPolicy by name.
func policyKey(p *kyvernov1.ClusterPolicy) string { return p.Name }

// convertRow finds the converted policies a result row may address (one,
// or one per region of a rule split by failure-action overrides), or says
// why there is none. A row of a policy that is not a ClusterPolicy is
// returned with no candidates.
func convertRow(row policytest.TestResult, results map[string]*convert.Result) ([]*convert.Converted, *convert.Result, string) {
	if row.IsValidatingAdmissionPolicy || row.IsMutatingAdmissionPolicy || row.IsValidatingPolicy || row.IsDeletingPolicy ||
		row.IsImageValidatingPolicy || row.IsGeneratingPolicy || row.IsMutatingPolicy {
		return nil, nil, ""
	}
	name := row.Policy
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:] // Kyverno compares the policy name only
	}
	res := results[name]
	if res == nil {
		return nil, nil, fmt.Sprintf("no converted policy %s in the test", row.Policy)
	}
	candidates, why := res.PolicyFor(row.Rule, row.Kind)
	return candidates, res, why
}

// addressed is a row addressed to one converted policy.
func addressed(row policytest.TestResult, res *convert.Result, c *convert.Converted) policytest.TestResult {
	row.Policy, row.Rule, row.IsValidatingPolicy = c.Name(), "", true
	if res.Source.Namespace != "" {
		row.Policy = res.Source.Namespace + "/" + c.Name()
	}
	return row
}

// regionOf picks, among the policies of a split rule, the one whose region
// holds the resources a row names (the first when none is found).
func regionOf(s *policytest.Suite, candidates []*convert.Converted, resources []*policytest.Resource) *convert.Converted {
	if len(candidates) == 1 {
		return candidates[0]
	}
	namespaces := map[string]map[string]string{}
	for _, ns := range s.Namespaces() {
		namespaces[ns.Name] = ns.Labels
	}
	for _, r := range resources {
		ns := r.Object.GetNamespace()
		labels := namespaces[ns]
		if r.Object.GetKind() == "Namespace" && r.Object.GetAPIVersion() == "v1" {
			ns, labels = "", r.Object.GetLabels()
		}
		for _, c := range candidates {
			if c.Applies(ns, labels) {
				return c
			}
		}
	}
	return candidates[0]
}

// fileCopier copies the files a test names into the converted folder,
// flattened to their base names (renamed on a clash).
type fileCopier struct {
	from  string
	files map[string][]byte
	// done maps a source path to its name in the folder.
	done map[string]string
	err  error
}

func (fc *fileCopier) one(path string) string {
	if path == "" || fc.err != nil {
		return path
	}
	if fc.done == nil {
		fc.done = map[string]string{}
	}
	src := path
	if !filepath.IsAbs(src) {
		src = filepath.Join(fc.from, path)
	}
	if name, ok := fc.done[src]; ok {
		return name
	}
	data, err := os.ReadFile(src)
	if err != nil {
		fc.err = err
		return path
	}
	base := filepath.Base(path)
	name := base
	for i := 2; fc.files[name] != nil; i++ {
		name = fmt.Sprintf("%d-%s", i, base)
	}
	fc.files[name] = data
	fc.done[src] = name
	return name
}

func (fc *fileCopier) all(paths []string) []string {
	if len(paths) == 0 {
		return paths
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = fc.one(p)
	}
	return out
}

// renameValues gives the values of a converted policy to every policy it
// was converted into.
func renameValues(values *policytest.ValuesSpec, results map[string]*convert.Result) {
	var policies []policytest.ValuesPolicy
	for _, p := range values.Policies {
		res := results[p.Name]
		if res == nil {
			policies = append(policies, p)
			continue
		}
		for _, c := range res.Policies {
			renamed := p
			renamed.Name = c.Name()
			policies = append(policies, renamed)
		}
	}
	values.Policies = policies
}

// convertRowResources converts one result row, resource by resource where
// Kyverno's CLI treats the resources of a ValidatingPolicy differently
// from a ClusterPolicy's: a policy's per-resource request.operation value
// becomes the row's operation; a resource that needs the values'
// request.oldObject or is a subresource is left out (notes say why: the
// CLI gives a ValidatingPolicy's UPDATE the resource as its old object, and
// evaluates it without subresource). why is set when the row cannot be
// converted at all.
func convertRowResources(s *policytest.Suite, row policytest.TestResult, results map[string]*convert.Result) (out []policytest.TestResult, notes []string, why string) {
	candidates, res, why := convertRow(row, results)
	switch {
	case why != "":
		return nil, nil, why
	case len(candidates) == 0:
		return []policytest.TestResult{row}, nil, ""
	case len(row.Resources) == 0:
		return []policytest.TestResult{addressed(row, res, candidates[0])}, nil, ""
	}
	converted := addressed(row, res, candidates[0])
	name := row.Policy
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	noUser := s.UserInfo == nil || reflect.DeepEqual(*s.UserInfo, policytest.RequestInfo{})
	readsUser := false
	if res := results[name]; res != nil && noUser {
		for _, c := range res.Policies {
			if c.Name() == strings.TrimPrefix(converted.Policy, res.Source.Namespace+"/") {
				out, _ := convert.YAML(convert.Result{Source: res.Source, Policies: []convert.Converted{c}})
				readsUser = bytes.Contains(out, []byte("request.userInfo"))
			}
		}
	}
	for _, ref := range row.Resources {
		one := addressed(row, res, regionOf(s, candidates, s.ResourcesNamed(ref)))
		one.Resources = []string{ref}
		leave := ""
		if readsUser {
			leave = "the test gives no user: Kyverno's CLI then ignores a ClusterPolicy's subjects (its background-scan behaviour, for policies that Kyverno requires to have background off), while the ValidatingPolicy's condition reads the empty user"
		}
		for _, r := range s.ResourcesNamed(ref) {
			if why := s.Unserved(r); why != "" {
				// Kyverno's CLI reports the converted row "Not found": a
				// ValidatingPolicy matches the served versions only.
				leave = why + "; the converted policy matches only the versions served, so Kyverno's CLI reports the row as not found"
				break
			}
			values := s.PolicyValues(name, r.Object.GetName())
			if op, ok := values["request.operation"].(string); ok && one.Operation == "" {
				one.Operation = strings.ToUpper(op)
			}
			if _, ok := values["request.oldObject"]; ok {
				leave = "the values give it a request.oldObject, and Kyverno's CLI runs a ValidatingPolicy's UPDATE with the resource as its own old object"
			}
			if req, _, err := s.AdmissionRequest(name, r, one.Operation); err == nil && req.SubResource != "" {
				leave = "it is a subresource (" + req.Resource.Resource + "/" + req.SubResource + "), and Kyverno's CLI evaluates ValidatingPolicies without subresources"
			}
		}
		if leave != "" {
			notes = append(notes, fmt.Sprintf("policy %s, resource %s: left out: %s", one.Policy, ref, leave))
			continue
		}
		if n := len(out); n > 0 && sameRow(out[n-1], one) {
			out[n-1].Resources = append(out[n-1].Resources, ref)
			continue
		}
		out = append(out, one)
	}
	return out, notes, ""
}

// withNameLabel is labels (copied) with the label every namespace of a
// cluster has.
func withNameLabel(labels map[string]string, name string) map[string]string {
	out := map[string]string{corev1.LabelMetadataName: name}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// sameRow reports rows that differ at most in their resources.
func sameRow(a, b policytest.TestResult) bool {
	a.Resources, b.Resources = nil, nil
	return reflect.DeepEqual(a, b)
}

// addNamespaces gives Kyverno's CLI the namespaces of the test's resources
// as values when a converted policy reads namespaceObject or selects
// namespaces by name: the CLI gives a ClusterPolicy a Namespace object for
// every resource's namespace, a ValidatingPolicy only those the values
// name, and only the labels they list, while every namespace of a cluster
// carries kubernetes.io/metadata.name (which the regions of failure-action
// overrides select).
func addNamespaces(s *policytest.Suite, test *policytest.Test, files map[string][]byte, results map[string]*convert.Result) {
	reads := false
	for _, res := range results {
		out, err := convert.YAML(*res)
		if err == nil && (bytes.Contains(out, []byte("namespaceObject")) || bytes.Contains(out, []byte(corev1.LabelMetadataName))) {
			reads = true
		}
	}
	if !reads {
		return
	}
	add := func(values *policytest.ValuesSpec) {
		known := map[string]bool{}
		for i := range values.NamespaceSelectors {
			n := &values.NamespaceSelectors[i]
			known[n.Name] = true
			n.Labels = withNameLabel(n.Labels, n.Name)
		}
		for i := range values.Namespaces {
			n := &values.Namespaces[i]
			known[n.Name] = true
			n.Labels = withNameLabel(n.Labels, n.Name)
		}
		for _, ns := range s.Namespaces() {
			if !known[ns.Name] {
				known[ns.Name] = true
				values.NamespaceSelectors = append(values.NamespaceSelectors, policytest.NamespaceSelector{Name: ns.Name, Labels: withNameLabel(nil, ns.Name)})
			}
		}
	}
	switch {
	case test.Values != nil:
		add(test.Values)
	case test.Variables != "":
		var values policytest.Values
		if yaml.Unmarshal(files[test.Variables], &values) == nil {
			add(&values.ValuesSpec)
			if out, err := yaml.Marshal(values); err == nil {
				files[test.Variables] = out
			}
		}
	default:
		test.Values = &policytest.ValuesSpec{}
		add(test.Values)
	}
}
