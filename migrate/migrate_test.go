// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package migrate

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest"
)

// TestConvertCorpus converts every other test of the repository's verdict
// corpus (in path order, the even ones) and runs the
// converted folders: every row kept
// passes kyvap's evaluation (both paths), and every row of the source is
// accounted for: converted, left out with a reason, or not converted. The
// converted folders were checked with Kyverno v1.19.1's CLI
// (docs/convert.md). test/conformance converts the odd ones, settles them
// and replays them on the real API server (TestClusterReplayConverted):
// the whole corpus is converted once per test run (converting it twice
// cost 40 minutes of CPU, most of it settling each row).
func TestConvertCorpus(t *testing.T) {
	out := t.TempDir()
	var stderr bytes.Buffer
	c := New(Options{Files: []string{"../test/conformance"}, Out: out}, &stderr)
	all := c.FindTests()
	sort.Strings(all)
	var slice []string
	for i := 0; i < len(all); i += 2 {
		slice = append(slice, all[i])
	}
	if len(slice) < 40 {
		t.Fatalf("only %d tests in the slice of %d", len(slice), len(all))
	}
	code := c.ConvertTests(slice)
	if code != exitOK && code != exitInvalidRule {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	rows := c.Rows()
	t.Logf("%+v", rows)
	if rows.Source != rows.Converted+rows.LeftOut+rows.Unconverted {
		t.Fatalf("rows not accounted for: %+v", rows)
	}
	if rows.Differs != 0 || rows.Converted < 50 {
		t.Fatalf("rows: %+v; stderr:\n%s", rows, stderr.String())
	}
	suites, err := policytest.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i := range suites {
		report := policytest.Run(context.Background(), &suites[i], policytest.Options{})
		for _, row := range report.Rows {
			checked++
			if row.Status != policytest.StatusPass {
				t.Errorf("%s: %s %s: %s (VAP %s, engine %s): %s", suites[i].Path, row.Policy, row.Resource, row.Status, row.VAP.Result, row.Engine.Result, row.Reason)
			}
		}
	}
	if checked != rows.Converted {
		t.Errorf("%d rows checked, %d converted", checked, rows.Converted)
	}
}

// TestRowOfAnUnservedVersionIsLeftOut: a source row about a resource of a
// version no API server kyvap targets serves (batch/v1beta1 CronJob) is
// left out of the converted test with the reason: the converted policy
// matches the served versions only, and Kyverno's CLI would report the row
// "Not found".
func TestRowOfAnUnservedVersionIsLeftOut(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: unserved-version}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: no-latest, rule: no-latest, kind: CronJob, resources: [served, old], result: fail}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: no-latest}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: no-latest
    match: {any: [{resources: {kinds: [CronJob]}}]}
    validate:
      cel:
        expressions: [{expression: "object.spec.jobTemplate.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))", message: no latest}]
`,
		"resources.yaml": `apiVersion: batch/v1
kind: CronJob
metadata: {name: served, namespace: default}
spec:
  schedule: "* * * * *"
  jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: "nginx:latest"}]}}}}
---
apiVersion: batch/v1beta1
kind: CronJob
metadata: {name: old, namespace: default}
spec:
  schedule: "* * * * *"
  jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: "nginx:latest"}]}}}}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, rows, stderr := convertSuite(t, src)
	if rows.Converted != 1 || rows.LeftOut != 1 || rows.Unconverted != 0 {
		t.Fatalf("rows %+v, want the served CronJob converted and the batch/v1beta1 one left out; stderr:\n%s", rows, stderr.String())
	}
	if !strings.Contains(stderr.String(), "resource old: left out: batch/v1beta1, Kind=CronJob is not served") {
		t.Errorf("stderr does not say why the old CronJob's row was left out:\n%s", stderr.String())
	}
	suites, err := policytest.Load(out)
	if err != nil || len(suites) != 1 {
		t.Fatalf("loading the converted test: %v (%d suites)", err, len(suites))
	}
	for _, res := range suites[0].Test.Results {
		if slices.Contains(res.Resources, "old") {
			t.Errorf("the converted test keeps a row for the batch/v1beta1 CronJob: %+v", res)
		}
	}
}

// writeSuite writes files into a new directory and returns it.
func writeSuite(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gizmoSuite is a test of a policy on a custom kind, Gizmo, whose
// resources carry example.com/v1.
var gizmoSuite = map[string]string{
	"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: gizmos}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: gizmo-size, rule: small, kind: Gizmo, resources: [big], result: fail}
- {policy: gizmo-size, rule: small, kind: Gizmo, resources: [small], result: pass}
`,
	"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: gizmo-size}
spec:
  validationFailureAction: Enforce
  rules:
  - name: small
    match: {any: [{resources: {kinds: [Gizmo]}}]}
    validate:
      cel:
        expressions: [{expression: "object.spec.size < 10", message: too big}]
`,
	"resources.yaml": `apiVersion: example.com/v1
kind: Gizmo
metadata: {name: big, namespace: default}
spec: {size: 20}
---
apiVersion: example.com/v1
kind: Gizmo
metadata: {name: small, namespace: default}
spec: {size: 1}
`,
}

const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmoes.example.com}
spec:
  group: example.com
  names: {kind: Gizmo, plural: gizmoes, singular: gizmo, listKind: GizmoList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestCustomKindsResolvedFromWhatTheUserGives: a policy on a custom kind
// converts, its kind resolved from a CRD manifest (--crd), else a cluster's
// discovery, else the test's own resources (the plural guessed); the
// conversion says which, and the converted test passes. Without any, the
// rule is refused (KindUnresolved).
func TestCustomKindsResolvedFromWhatTheUserGives(t *testing.T) {
	src := writeSuite(t, gizmoSuite)
	crdFile := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(crdFile, []byte(gizmoCRD), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := kyverno.NewResolver([]kyverno.Resource{{Group: "example.com", Version: "v1", Resource: "gizmoz", Kind: "Gizmo", Namespaced: true}})
	for _, tc := range []struct {
		name     string
		opts     Options
		source   string
		resource string
	}{
		{"the test's resources", Options{}, "the test's resources", "gizmos"},
		{"a CRD manifest", Options{CRDFiles: []string{crdFile}}, "CRD manifests (--crd)", "gizmoes"},
		{"a cluster's discovery", Options{Cluster: cluster}, "the cluster's discovery", "gizmoz"},
		{"a CRD manifest before the cluster", Options{CRDFiles: []string{crdFile}, Cluster: cluster}, "CRD manifests (--crd)", "gizmoes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Files, tc.opts.Out = []string{src}, t.TempDir()
			var stderr bytes.Buffer
			c := New(tc.opts, &stderr)
			c.ConvertTests(c.FindTests())
			if rows := c.Rows(); rows.Converted != 2 || rows.Unconverted != 0 {
				t.Fatalf("rows %+v; stderr:\n%s", rows, stderr.String())
			}
			want := `kind "Gizmo" resolved from ` + tc.source + ": example.com/v1 " + tc.resource
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
			}
			policies, err := os.ReadFile(filepath.Join(tc.opts.Out, "policies.yaml"))
			if err != nil || !strings.Contains(string(policies), "- "+tc.resource+"\n") || strings.Count(string(policies), "- gizmo") != 1 {
				t.Errorf("the converted policy does not match %s (%v):\n%s", tc.resource, err, policies)
			}
			suites, err := policytest.Load(tc.opts.Out)
			if err != nil || len(suites) != 1 {
				t.Fatalf("loading the converted test: %v", err)
			}
			for _, row := range policytest.Run(context.Background(), &suites[0], policytest.Options{}).Rows {
				if row.Status != policytest.StatusPass {
					t.Errorf("converted row %s: %s (%s)", row.Resource, row.Status, row.Reason)
				}
			}
		})
	}

	// No source knows the kind: refused with the reason.
	files := maps.Clone(gizmoSuite)
	files["resources.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: default}\n"
	var stderr bytes.Buffer
	c := New(Options{Files: []string{writeSuite(t, files)}, Out: t.TempDir()}, &stderr)
	c.ConvertTests(c.FindTests())
	if !strings.Contains(stderr.String(), "KindUnresolved") || c.Unconverted() == 0 {
		t.Errorf("a kind nobody knows was not refused:\n%s", stderr.String())
	}
}

// TestForEachWithoutResultExpectsPass: a source row expecting skip where
// no element of a foreach applied (the ClusterPolicy's rule has no result)
// is converted expecting pass, with the reason: the converted
// ValidatingPolicy passes there (docs/convert.md). A skip of another kind
// (a resource the rule does not match) is still left out.
func TestForEachWithoutResultExpectsPass(t *testing.T) {
	src := writeSuite(t, map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: foreach-no-result}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: web-pull-always, rule: web-pull-always, kind: Pod, resources: [web-always], result: pass}
- {policy: web-pull-always, rule: web-pull-always, kind: Pod, resources: [web-never], result: fail}
- {policy: web-pull-always, rule: web-pull-always, kind: Pod, resources: [no-web], result: skip}
- {policy: web-pull-always, rule: web-pull-always, kind: ConfigMap, resources: [settings], result: skip}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: web-pull-always}
spec:
  validationFailureAction: Audit
  background: false
  rules:
  - name: web-pull-always
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers
        pattern:
          (name): "web-*"
          imagePullPolicy: Always
`,
		"resources.yaml": `apiVersion: v1
kind: Pod
metadata: {name: web-always, namespace: default}
spec: {containers: [{name: web-1, image: nginx, imagePullPolicy: Always}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-never, namespace: default}
spec: {containers: [{name: web-1, image: nginx, imagePullPolicy: Never}]}
---
apiVersion: v1
kind: Pod
metadata: {name: no-web, namespace: default}
spec: {containers: [{name: db, image: postgres, imagePullPolicy: Never}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
`,
	})
	out, rows, stderr := convertSuite(t, src)
	if rows.Converted != 3 || rows.LeftOut != 1 || rows.Differs != 0 || rows.Unconverted != 0 {
		t.Fatalf("rows %+v, want 3 converted (no-web expecting pass) and the ConfigMap left out; stderr:\n%s", rows, stderr.String())
	}
	if !strings.Contains(stderr.String(), "resource no-web: expects pass instead of skip: no element of the ClusterPolicy's foreach applied") {
		t.Errorf("stderr does not say why no-web's row expects pass:\n%s", stderr.String())
	}
	checkConverted(t, out, map[string]string{"web-always": "pass", "web-never": "fail", "no-web": "pass"})
}

// checkConverted checks the one converted test in out: its expectations
// by resource are want, and each of its rows passes kyvap's evaluation
// (both paths). It returns the converted test.
func checkConverted(t *testing.T, out string, want map[string]string) *policytest.Suite {
	t.Helper()
	suites, err := policytest.Load(out)
	if err != nil || len(suites) != 1 {
		t.Fatalf("loading the converted test: %v (%d suites)", err, len(suites))
	}
	expected := map[string]string{}
	for _, res := range suites[0].Test.Results {
		for _, r := range res.Resources {
			expected[r] = res.Result
		}
	}
	if !maps.Equal(expected, want) {
		t.Errorf("converted expectations %v, want %v", expected, want)
	}
	report := policytest.Run(context.Background(), &suites[0], policytest.Options{})
	if len(report.Rows) != len(want) {
		t.Errorf("%d converted rows evaluated, want %d", len(report.Rows), len(want))
	}
	for _, row := range report.Rows {
		if row.Status != policytest.StatusPass {
			t.Errorf("converted row %s on %s: %s (VAP %s, engine %s): %s", row.Policy, row.Resource, row.Status, row.VAP.Result, row.Engine.Result, row.Reason)
		}
	}
	return &suites[0]
}

// TestPodSecurityExceptionsAreFolded: a PolicyException with podSecurity
// controls (Kyverno's test/cli/test-exceptions/exceptions-3, with a plain
// exception beside it) is folded into the converted policy of the rule it
// names, which says so; the plain one is converted on its own; the
// converted test keeps every row, with the same expectations, and passes
// (Kyverno's CLI passes the same conversion: docs/convert.md).
func TestPodSecurityExceptionsAreFolded(t *testing.T) {
	src := writeSuite(t, map[string]string{
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: exceptions-3}
policies: [policy.yaml]
resources: [resources.yaml]
exceptions: [exception.yaml]
results:
- {policy: psa, rule: baseline, kind: Pod, resources: [bad-pod], result: fail}
- {policy: psa, rule: baseline, kind: Pod, resources: [good-pod], result: pass}
- {policy: psa, rule: baseline, kind: Pod, resources: [excluded-pod, other-volume], result: skip}
- {policy: psa, rule: baseline, kind: Pod, resources: [excluded-other-path], result: fail}
`,
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: psa}
spec:
  background: true
  rules:
  - name: baseline
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Enforce
      podSecurity: {level: baseline, version: latest}
`,
		"exception.yaml": `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: pod-security-exception, namespace: policy-exception-ns}
spec:
  exceptions: [{policyName: psa, ruleNames: [baseline]}]
  match: {any: [{resources: {namespaces: [staging-ns]}}]}
  podSecurity:
  - {controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/lib1"]}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: other, namespace: policy-exception-ns}
spec:
  exceptions: [{policyName: psa, ruleNames: [baseline]}]
  match: {any: [{resources: {kinds: [Pod], names: [other-*]}}]}
`,
		"resources.yaml": `apiVersion: v1
kind: Pod
metadata: {name: good-pod, namespace: default}
spec: {containers: [{name: nginx, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bad-pod, namespace: default}
spec:
  containers: [{name: nginx, image: nginx}]
  volumes: [{name: host, hostPath: {path: /var/lib1}}]
---
apiVersion: v1
kind: Pod
metadata: {name: excluded-pod, namespace: staging-ns}
spec:
  containers: [{name: nginx, image: nginx}]
  volumes: [{name: host, hostPath: {path: /var/lib1}}]
---
apiVersion: v1
kind: Pod
metadata: {name: excluded-other-path, namespace: staging-ns}
spec:
  containers: [{name: nginx, image: nginx}]
  volumes: [{name: host, hostPath: {path: /etc}}]
---
apiVersion: v1
kind: Pod
metadata: {name: other-volume, namespace: default}
spec:
  containers: [{name: nginx, image: nginx}]
  volumes: [{name: host, hostPath: {path: /etc}}]
`,
	})
	out, rows, stderr := convertSuite(t, src)
	if rows.Converted != 5 || rows.LeftOut != 0 || rows.Differs != 0 || rows.Unconverted != 0 {
		t.Fatalf("rows %+v, want 5 converted; stderr:\n%s", rows, stderr.String())
	}
	for _, line := range []string{
		"PolicyException policy-exception-ns/pod-security-exception: its podSecurity controls folded into psa-baseline",
		"PolicyException policy-exception-ns/other: converted, naming psa-baseline",
	} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr does not say %q:\n%s", line, stderr.String())
		}
	}
	var written []string
	if err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "policies.yaml" {
			written = append(written, path)
		}
		return err
	}); err != nil || len(written) != 1 {
		t.Fatalf("converted policies: %v %v", written, err)
	}
	policies, err := os.ReadFile(written[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(policies), "# with the podSecurity controls of PolicyExceptions policy-exception-ns/pod-security-exception folded in.") {
		t.Errorf("the converted policy does not name the folded exception:\n%.600s", policies)
	}
	suite := checkConverted(t, out, map[string]string{"bad-pod": "fail", "good-pod": "pass", "excluded-pod": "skip", "other-volume": "skip", "excluded-other-path": "fail"})
	if len(suite.Exceptions) != 0 || len(suite.CELExceptions) != 1 {
		t.Errorf("the converted test has %d kyverno.io and %d policies.kyverno.io PolicyExceptions, want the plain one alone, converted", len(suite.Exceptions), len(suite.CELExceptions))
	}
}

// convertSuite converts the tests under src into a new directory, out, and
// returns it, the row counts and what the converter wrote on stderr.
func convertSuite(t *testing.T, src string) (string, RowCounts, *bytes.Buffer) {
	t.Helper()
	out := t.TempDir()
	var stderr bytes.Buffer
	c := New(Options{Files: []string{src}, Out: out}, &stderr)
	c.ConvertTests(c.FindTests())
	return out, c.Rows(), &stderr
}
