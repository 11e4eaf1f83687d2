// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// replicasPolicy has one rule on Deployments: one VAP, one binding.
const replicasPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: replicas
spec:
  validationFailureAction: Enforce
  rules:
  - name: max-five
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate:
      cel:
        expressions:
        - {expression: "object.spec.replicas <= 5", message: "at most 5 replicas"}
`

// widgetPolicy matches a custom kind, resolvable only with its CRD.
const widgetPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: widgets}
spec:
  validationFailureAction: Audit
  rules:
  - name: sized
    match: {any: [{resources: {kinds: [Widget]}}]}
    validate: {cel: {expressions: [{expression: "has(object.spec.size)"}]}}
`

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// conditionalException names max-five with JMESPath conditions that have
// no CEL form (base64_decode): the rule falls back when the exception is
// given.
const conditionalException = `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: big-ones, namespace: kyverno}
spec:
  exceptions: [{policyName: replicas, ruleNames: [max-five]}]
  match: {any: [{resources: {kinds: [Deployment]}}]}
  conditions: {any: [{key: "{{ base64_decode(request.object.metadata.name) }}", operator: Equals, value: big}]}
`

// invalidPolicy has CEL that does not compile: no engine can run the rule.
const invalidPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: broken}
spec:
  rules:
  - name: typo
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {cel: {expressions: [{expression: "object.data.size() <"}]}}
`

// writeFiles creates files (name → content) in a new directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(stdin string, args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// outputObject is what the tests read back from the YAML stream.
type outputObject struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       map[string]any `json:"spec"`
	Status     any            `json:"status"`
}

func (o outputObject) id() string { return o.Kind + "/" + o.Metadata["name"].(string) }

// parseStream splits the YAML stream on the "---" lines the CLI writes.
func parseStream(t *testing.T, stream string) []outputObject {
	t.Helper()
	if stream == "" {
		return nil
	}
	var objs []outputObject
	for _, doc := range strings.Split(stream, "---\n") {
		var o outputObject
		if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
			t.Fatalf("output document does not parse: %v\n%s", err, doc)
		}
		objs = append(objs, o)
	}
	return objs
}

func ids(objs []outputObject) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.id())
	}
	return out
}

func TestTranslateOutput(t *testing.T) {
	dir := writeFiles(t, map[string]string{"policy.yaml": replicasPolicy})
	res := runCLI("", "translate", "-f", filepath.Join(dir, "policy.yaml"))
	if res.code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", res.code, res.stderr)
	}
	if want := "replicas/max-five: Translated -> kyvap-replicas.max-five\n"; res.stderr != want {
		t.Errorf("stderr = %q, want %q", res.stderr, want)
	}
	objs := parseStream(t, res.stdout)
	want := []string{"ValidatingAdmissionPolicy/kyvap-replicas.max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas.max-five-0"}
	if got := ids(objs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("objects = %v, want %v", got, want)
	}
	for _, o := range objs {
		if o.APIVersion != "admissionregistration.k8s.io/v1" {
			t.Errorf("%s: apiVersion %q", o.id(), o.APIVersion)
		}
		if o.Status != nil {
			t.Errorf("%s: carries a status: %v", o.id(), o.Status)
		}
		for _, dropped := range []string{"ownerReferences", "creationTimestamp"} {
			if _, ok := o.Metadata[dropped]; ok {
				t.Errorf("%s: metadata.%s = %v, want it left out", o.id(), dropped, o.Metadata[dropped])
			}
		}
	}
	for _, want := range []string{"expression: object.spec.replicas <= 5", "message: at most 5 replicas", "policyName: kyvap-replicas.max-five\n", "- Deny"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
		}
	}
}

func TestTranslateKeepsOwnerReferencesWithUID(t *testing.T) {
	withUID := strings.Replace(replicasPolicy, "  name: replicas\n", "  name: replicas\n  uid: 6f1c1fd8-5d0e-4d5c-9a53-4c4e0f0d6a11\n", 1)
	res := runCLI(withUID, "translate", "-f", "-")
	if res.code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", res.code, res.stderr)
	}
	for _, o := range parseStream(t, res.stdout) {
		refs, _ := o.Metadata["ownerReferences"].([]any)
		if len(refs) != 1 || refs[0].(map[string]any)["uid"] != "6f1c1fd8-5d0e-4d5c-9a53-4c4e0f0d6a11" {
			t.Errorf("%s: ownerReferences = %v, want the policy's", o.id(), refs)
		}
	}
}

func TestTranslateInputs(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"replicas.yaml":    replicasPolicy,
		"widgets.yaml":     widgetPolicy,
		"crd.yaml":         widgetCRD,
		"exception.yaml":   conditionalException,
		"kubectl-get.yaml": "apiVersion: v1\nkind: List\nitems:\n" + indentAsListItem(replicasPolicy),
	})
	// bundle holds one of each kind, in every accepted extension.
	bundle := writeFiles(t, map[string]string{
		"a-policy.yaml":   replicasPolicy,
		"b-exception.yml": conditionalException,
		"c-widgets.json":  mustJSON(t, widgetPolicy),
		"d-crd.yaml":      widgetCRD,
		"README.md":       "not a manifest: ignored",
	})
	path := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name  string
		stdin string
		args  []string
		// wantStderr are the verdict lines, in order.
		wantStderr []string
		wantIDs    []string
	}{
		{
			name:       "stdin",
			stdin:      replicasPolicy,
			args:       []string{"-f", "-"},
			wantStderr: []string{"replicas/max-five: Translated -> kyvap-replicas.max-five"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-replicas.max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas.max-five-0"},
		},
		{
			name:       "v1 List from kubectl get",
			args:       []string{"-f", path("kubectl-get.yaml")},
			wantStderr: []string{"replicas/max-five: Translated -> kyvap-replicas.max-five"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-replicas.max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas.max-five-0"},
		},
		{
			name:       "custom kind without its CRD falls back",
			args:       []string{"-f", path("widgets.yaml")},
			wantStderr: []string{"widgets/sized: Fallback (KindUnresolved): "},
		},
		{
			name:       "custom kind resolved by --crd",
			args:       []string{"-f", path("widgets.yaml"), "--crd", path("crd.yaml")},
			wantStderr: []string{"widgets/sized: Translated -> kyvap-widgets.sized"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-widgets.sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets.sized-0"},
		},
		{
			name:       "custom kind resolved by a CRD given with -f",
			args:       []string{"-f", path("crd.yaml"), "-f", path("widgets.yaml")},
			wantStderr: []string{"widgets/sized: Translated -> kyvap-widgets.sized"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-widgets.sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets.sized-0"},
		},
		{
			name:       "exception naming the rule",
			args:       []string{"-f", path("replicas.yaml"), "-f", path("exception.yaml")},
			wantStderr: []string{"replicas/max-five: Fallback (ExceptionNotExpressible): "},
		},
		{
			name:       "directory: yaml, yml and json files in name order, other files ignored",
			args:       []string{"-f", bundle},
			wantStderr: []string{"replicas/max-five: Fallback (ExceptionNotExpressible): ", "widgets/sized: Translated -> kyvap-widgets.sized"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-widgets.sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets.sized-0"},
		},
		{
			name:       "--generate=false",
			args:       []string{"-f", path("replicas.yaml"), "--generate=false"},
			wantStderr: []string{"replicas/max-five: Fallback (GenerationDisabled): "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(tt.stdin, append([]string{"translate"}, tt.args...)...)
			if res.code != 0 {
				t.Fatalf("exit code %d, stderr:\n%s", res.code, res.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n")
			if len(lines) != len(tt.wantStderr) {
				t.Fatalf("stderr lines = %q, want %d lines starting %q", lines, len(tt.wantStderr), tt.wantStderr)
			}
			for i, want := range tt.wantStderr {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("stderr line %d = %q, want prefix %q", i, lines[i], want)
				}
			}
			if got := ids(parseStream(t, res.stdout)); strings.Join(got, " ") != strings.Join(tt.wantIDs, " ") {
				t.Errorf("objects = %v, want %v", got, tt.wantIDs)
			}
		})
	}
}

func TestTranslateJSONIsAList(t *testing.T) {
	res := runCLI(replicasPolicy+"---\n"+widgetCRD+"---\n"+widgetPolicy, "translate", "-f", "-", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", res.code, res.stderr)
	}
	var list struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Items      []outputObject `json:"items"`
	}
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		t.Fatalf("stdout is not a List: %v\n%s", err, res.stdout)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("apiVersion/kind = %s/%s, want v1/List", list.APIVersion, list.Kind)
	}
	want := []string{
		"ValidatingAdmissionPolicy/kyvap-replicas.max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas.max-five-0",
		"ValidatingAdmissionPolicy/kyvap-widgets.sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets.sized-0",
	}
	if got := ids(list.Items); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("items = %v, want %v (policies in input order)", got, want)
	}
}

func TestTranslateIsDeterministic(t *testing.T) {
	args := []string{"translate", "-f", "../../translate/testdata/overrides/policy.yaml",
		"-f", "../../translate/testdata/exceptions/policy.yaml", "-f", "../../translate/testdata/exceptions/exceptions.yaml"}
	first, second := runCLI("", args...), runCLI("", args...)
	if first.code != 0 || first.stdout == "" {
		t.Fatalf("exit code %d, stdout %d bytes, stderr:\n%s", first.code, len(first.stdout), first.stderr)
	}
	if first != second {
		t.Error("two runs on the same input differ")
	}
}

func TestTranslateFailures(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		// Document 2 starts on line 6; its unclosed mapping is on line 9.
		"bad.yaml":     replicasPolicy[:strings.Index(replicasPolicy, "spec:")] + "---\n# a comment\napiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x\n",
		"kind.yaml":    replicasPolicy + "---\napiVersion: kyverno.io/v2\nkind: CleanupPolicy\nmetadata: {name: ns-policy, namespace: default}\n",
		"dup.yaml":     "a: 1\na: 2\n",
		"type.yaml":    "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: typed}\nspec: {rules: everything}\n",
		"invalid.yaml": invalidPolicy,
		"empty.yaml":   "# nothing here\n",
		"crd.yaml":     widgetCRD,
		"policy.yaml":  replicasPolicy,
	})
	path := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"bad YAML names file and absolute line", []string{"-f", path("bad.yaml")}, 2, path("bad.yaml") + ":9: document 2: invalid YAML: "},
		{"unknown kind names file and document", []string{"-f", path("kind.yaml")}, 2, path("kind.yaml") + ":15: document 2: unsupported kind kyverno.io/v2 CleanupPolicy"},
		{"duplicate key", []string{"-f", path("dup.yaml")}, 2, path("dup.yaml") + `:2: document 1: invalid YAML: key "a" already set in map`},
		{"type error names the field", []string{"-f", path("type.yaml")}, 2, `ClusterPolicy "typed": field spec.rules: cannot use a JSON string`},
		{"missing file", []string{"-f", path("missing.yaml")}, 2, path("missing.yaml") + ": no such file or directory"},
		{"no policy", []string{"-f", path("empty.yaml"), "-f", path("crd.yaml")}, 2, "no ClusterPolicy, Policy, ValidatingPolicy or NamespacedValidatingPolicy in"},
		{"same policy twice", []string{"-f", path("policy.yaml"), "-f", path("policy.yaml")}, 2, `two ClusterPolicies are named "replicas"`},
		{"policy given as --crd", []string{"-f", path("policy.yaml"), "--crd", path("policy.yaml")}, 2, "a --crd file holds apiextensions.k8s.io/v1 CustomResourceDefinitions"},
		{"no -f", nil, 2, "no input: give at least one -f FILE"},
		{"bad -o", []string{"-f", path("policy.yaml"), "-o", "xml"}, 2, "-o xml: want yaml or json"},
		{"positional argument", []string{path("policy.yaml")}, 2, "unexpected argument"},
		{"unknown flag", []string{"--frobnicate"}, 2, "flag provided but not defined: -frobnicate"},
		{"stdin twice", []string{"-f", "-", "-f", "-"}, 2, `stdin ("-") can be read only once`},
		{"invalid rule exits 1", []string{"-f", path("invalid.yaml"), "-f", path("policy.yaml")}, 1, "broken/typo: Invalid (CELCompileError): "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI("", append([]string{"translate"}, tt.args...)...)
			if res.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", res.code, tt.wantCode)
			}
			if !strings.Contains(res.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", res.stderr, tt.wantStderr)
			}
			if tt.wantCode == 2 && res.stdout != "" {
				t.Errorf("stdout = %q on unusable input, want nothing", res.stdout)
			}
		})
	}
}

func TestTranslateInvalidRuleStillPrintsTheRest(t *testing.T) {
	res := runCLI(invalidPolicy+"---\n"+replicasPolicy, "translate", "-f", "-")
	if res.code != 1 {
		t.Errorf("exit code = %d, want 1", res.code)
	}
	if got := ids(parseStream(t, res.stdout)); len(got) != 2 {
		t.Errorf("objects = %v, want the replicas VAP and binding", got)
	}
}

func TestTranslateHelp(t *testing.T) {
	res := runCLI("", "translate", "-h")
	if res.code != 0 || !strings.Contains(res.stdout, "kyvap translate -f FILE") || !strings.Contains(res.stdout, "Exit status:") || !strings.Contains(res.stdout, "--kyverno-config VALUE") {
		t.Errorf("translate -h: exit %d, stdout %q", res.code, res.stdout)
	}
}

// mustJSON converts a YAML manifest to indented JSON (tabs, as jq writes).
func mustJSON(t *testing.T, manifest string) string {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "\t"); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// indentAsListItem turns a manifest into one item of a YAML list.
func indentAsListItem(manifest string) string {
	lines := strings.Split(strings.TrimSuffix(manifest, "\n"), "\n")
	for i := range lines {
		prefix := "  "
		if i == 0 {
			prefix = "- "
		}
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// matchConditionNames lists the names of a VAP's spec.matchConditions.
func matchConditionNames(o outputObject) []string {
	var names []string
	conditions, _ := o.Spec["matchConditions"].([]any)
	for _, c := range conditions {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	return names
}

// matchCondition returns the expression of a VAP's match condition, or "".
func matchCondition(o outputObject, name string) string {
	conditions, _ := o.Spec["matchConditions"].([]any)
	for _, c := range conditions {
		if m := c.(map[string]any); m["name"] == name {
			return m["expression"].(string)
		}
	}
	return ""
}

// bindingNamespaceSelector returns a binding's
// spec.matchResources.namespaceSelector as JSON, or "".
func bindingNamespaceSelector(t *testing.T, o outputObject) string {
	t.Helper()
	mr, _ := o.Spec["matchResources"].(map[string]any)
	if mr["namespaceSelector"] == nil {
		return ""
	}
	out, err := json.Marshal(mr["namespaceSelector"])
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// vapAndBinding runs kyvap translate on replicasPolicy with args and
// returns its VAP and its binding.
func vapAndBinding(t *testing.T, args ...string) (vap, binding outputObject, stderr string) {
	t.Helper()
	dir := writeFiles(t, map[string]string{"policy.yaml": replicasPolicy})
	res := runCLI("", append([]string{"translate", "-f", filepath.Join(dir, "policy.yaml")}, args...)...)
	if res.code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", res.code, res.stderr)
	}
	objs := parseStream(t, res.stdout)
	if len(objs) != 2 || objs[0].Kind != "ValidatingAdmissionPolicy" || objs[1].Kind != "ValidatingAdmissionPolicyBinding" {
		t.Fatalf("objects = %v, want a VAP and its binding", ids(objs))
	}
	return objs[0], objs[1], res.stderr
}

func TestTranslateKyvernoConfig(t *testing.T) {
	const kubeSystemExcluded = `{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system"]}`
	t.Run("default: the chart defaults, as the operator without a ConfigMap", func(t *testing.T) {
		for _, args := range [][]string{nil, {"--kyverno-config", "chart-defaults"}} {
			vap, binding, _ := vapAndBinding(t, args...)
			if got, want := strings.Join(matchConditionNames(vap), " "), "kyverno-excluded-subjects kyverno-resource-filters"; got != want {
				t.Errorf("%v: matchConditions = %q, want %q", args, got, want)
			}
			if expr := matchCondition(vap, "kyverno-resource-filters"); !strings.Contains(expr, `"kube-system"`) || !strings.HasPrefix(expr, "!") {
				t.Errorf("%v: kyverno-resource-filters = %q, want it to skip kube-system", args, expr)
			}
			if expr := matchCondition(vap, "kyverno-excluded-subjects"); !strings.Contains(expr, `"system:nodes"`) {
				t.Errorf("%v: kyverno-excluded-subjects = %q, want it to skip system:nodes", args, expr)
			}
			if sel := bindingNamespaceSelector(t, binding); !strings.Contains(sel, kubeSystemExcluded) {
				t.Errorf("%v: binding namespaceSelector = %s, want it to contain %s", args, sel, kubeSystemExcluded)
			}
		}
	})
	t.Run("none: no configuration, as kyverno test", func(t *testing.T) {
		vap, binding, _ := vapAndBinding(t, "--kyverno-config", "none")
		if names := matchConditionNames(vap); len(names) != 0 {
			t.Errorf("matchConditions = %v, want none", names)
		}
		if mr := binding.Spec["matchResources"]; mr != nil {
			t.Errorf("binding matchResources = %v, want none", mr)
		}
	})
	t.Run("a ConfigMap file replaces the chart defaults", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"kyverno.yaml": `# kubectl get configmap -n kyverno kyverno -o yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: kyverno, namespace: kyverno, resourceVersion: "42"}
data:
  resourceFilters: "[Deployment,default,skip-*]"
  excludeGroups: "ci, !admins"
  webhooks: '{"namespaceSelector":{"matchLabels":{"team":"a"}}}'
  defaultRegistry: docker.io
`})
		vap, binding, stderr := vapAndBinding(t, "--kyverno-config", filepath.Join(dir, "kyverno.yaml"))
		if want := "replicas/max-five: Translated -> kyvap-replicas.max-five\n"; stderr != want {
			t.Errorf("stderr = %q, want %q", stderr, want)
		}
		filters := matchCondition(vap, "kyverno-resource-filters")
		if !strings.Contains(filters, `.startsWith("skip-")`) || !strings.Contains(filters, `"default"`) || strings.Contains(filters, "kube-system") {
			t.Errorf("kyverno-resource-filters = %q, want the file's filter (default, skip-*) and not the chart's", filters)
		}
		if subjects := matchCondition(vap, "kyverno-excluded-subjects"); !strings.Contains(subjects, `"ci"`) || !strings.Contains(subjects, `"admins"`) {
			t.Errorf("kyverno-excluded-subjects = %q, want ci excluded and admins included", subjects)
		}
		if sel := bindingNamespaceSelector(t, binding); !strings.Contains(sel, `"team"`) || strings.Contains(sel, "kube-system") {
			t.Errorf("binding namespaceSelector = %s, want the file's team selector only", sel)
		}
	})
	t.Run("values Kyverno ignores are warnings", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"kyverno.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kyverno}\ndata:\n  resourceFilters: \"[Deployment,default,skip-*][a,b,c,d]\"\n  webhooks: \"{not json\"\n"})
		path := filepath.Join(dir, "kyverno.yaml")
		vap, binding, stderr := vapAndBinding(t, "--kyverno-config", path)
		for _, want := range []string{
			"kyvap translate: warning: --kyverno-config " + path + ": resourceFilters: [a,b,c,d] is not [kind,namespace,name]",
			"kyvap translate: warning: --kyverno-config " + path + ": webhooks: ",
			"replicas/max-five: Translated -> kyvap-replicas.max-five\n",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, want)
			}
		}
		if !strings.Contains(matchCondition(vap, "kyverno-resource-filters"), `.startsWith("skip-")`) {
			t.Errorf("the valid filter is lost: matchConditions = %v", vap.Spec["matchConditions"])
		}
		if mr := binding.Spec["matchResources"]; mr != nil {
			t.Errorf("binding matchResources = %v, want none (the webhooks value is ignored)", mr)
		}
	})
}

func TestTranslateKyvernoConfigFailures(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml":   replicasPolicy,
		"secret.yaml":   "apiVersion: v1\nkind: Secret\nmetadata: {name: kyverno}\n",
		"two.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"broken.yaml":   "apiVersion: v1\nkind: ConfigMap\ndata: {a: b\n",
		"typed.yaml":    "apiVersion: v1\nkind: ConfigMap\ndata:\n  excludeGroups: [a, b]\n",
		"comments.yaml": "# nothing\n",
	})
	path := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name       string
		value      string
		wantStderr string
	}{
		{"missing file", path("missing.yaml"), "--kyverno-config " + path("missing.yaml") + ": no such file or directory"},
		{"not a ConfigMap", path("policy.yaml"), "--kyverno-config " + path("policy.yaml") + ": holds kyverno.io/v1 ClusterPolicy, want a v1 ConfigMap"},
		{"a Secret", path("secret.yaml"), "--kyverno-config " + path("secret.yaml") + ": holds v1 Secret, want a v1 ConfigMap"},
		{"two objects", path("two.yaml"), "--kyverno-config " + path("two.yaml") + ": holds 2 objects, want one v1 ConfigMap"},
		{"no object", path("comments.yaml"), "--kyverno-config " + path("comments.yaml") + ": holds 0 objects"},
		{"invalid YAML", path("broken.yaml"), "--kyverno-config " + path("broken.yaml") + ": document 1 (from line 1): invalid YAML"},
		{"data that are not strings", path("typed.yaml"), "--kyverno-config " + path("typed.yaml") + ": invalid ConfigMap"},
		{"a directory", dir, "--kyverno-config " + dir + ": is a directory"},
		{"empty", "", "--kyverno-config: want chart-defaults, none or a ConfigMap file"},
		{"stdin", "-", "--kyverno-config: stdin is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI("", "translate", "-f", path("policy.yaml"), "--kyverno-config", tt.value)
			if res.code != exitUnusableInput {
				t.Errorf("exit code = %d, want %d", res.code, exitUnusableInput)
			}
			if !strings.Contains(res.stderr, "kyvap translate: "+tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", res.stderr, tt.wantStderr)
			}
			if res.stdout != "" {
				t.Errorf("stdout = %q, want nothing", res.stdout)
			}
		})
	}
}

func TestTranslateKyvernoConfigJSON(t *testing.T) {
	dir := writeFiles(t, map[string]string{"kyverno.json": "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"ConfigMap\",\n\t\"metadata\": {\"name\": \"kyverno\"},\n\t\"data\": {\"resourceFilters\": \"[Deployment,default,skip-*]\"}\n}\n"})
	vap, _, _ := vapAndBinding(t, "--kyverno-config", filepath.Join(dir, "kyverno.json"))
	if filters := matchCondition(vap, "kyverno-resource-filters"); !strings.Contains(filters, `.startsWith("skip-")`) {
		t.Errorf("kyverno-resource-filters = %q, want the file's filter", filters)
	}
}

// The policies.kyverno.io kinds go through the policy model: a Pod
// ValidatingPolicy gets VAPs for its pod-controller variants, a namespaced
// one is confined to its namespace, a CEL exception folds in, a library
// call is said, and each verdict line names its kind.
func TestTranslateValidatingPolicies(t *testing.T) {
	input := `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: latest}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
---
apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedValidatingPolicy
metadata: {name: team, namespace: a}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "has(object.metadata.labels)"
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: lookups}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [services]}
  validations:
  - expression: "resource.List('v1', 'services', '').items.size() < 10"
---
apiVersion: policies.kyverno.io/v1alpha1
kind: PolicyException
metadata: {name: exempt, namespace: default}
spec:
  policyRefs: [{name: latest, kind: ValidatingPolicy}]
  matchConditions: [{name: by-name, expression: "object.metadata.name == 'exempt'"}]
`
	res := runCLI(input, "translate", "-f", "-", "--kyverno-config", "none")
	if res.code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"ValidatingPolicy/latest/policy: Translated -> kyvap-latest.vpol-policy.",
		"ValidatingPolicy/latest/autogen-defaults: Translated -> kyvap-latest.vpol-autogen-defaults.",
		"ValidatingPolicy/latest/autogen-cronjobs: Translated -> kyvap-latest.vpol-autogen-cronjobs.",
		"NamespacedValidatingPolicy/a/team/policy: Translated -> kyvap-a-team.nvpol-policy.",
		"ValidatingPolicy/lookups/policy: Fallback (KyvernoLibrary): uses Kyverno's CEL library resource",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	objs := parseStream(t, res.stdout)
	if len(objs) != 8 {
		t.Fatalf("got %d objects, want 4 VAPs and 4 bindings: %v", len(objs), ids(objs))
	}
	for _, want := range []string{"request.namespace == \"a\"", "object.metadata.name == 'exempt'", "object.spec.jobTemplate.spec.template.spec.containers", "kyvap.io/policy-kind: NamespacedValidatingPolicy"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(res.stdout, "resource.List") {
		t.Error("a library call reached the output")
	}
}

// TestTranslateWarnsAboutExceptionsNamingNoInputPolicy: a policies.kyverno.io
// PolicyException whose policyRefs name no policy of the input exempts
// nothing; kyvap translate says so, and exits 0.
func TestTranslateWarnsAboutExceptionsNamingNoInputPolicy(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml":     "apiVersion: policies.kyverno.io/v1\nkind: ValidatingPolicy\nmetadata: {name: present}\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]\n  validations: [{expression: 'true'}]\n",
		"exceptions.yaml": "apiVersion: policies.kyverno.io/v1\nkind: PolicyException\nmetadata: {name: mixed, namespace: default}\nspec:\n  policyRefs: [{name: present, kind: ValidatingPolicy}, {name: absent, kind: ValidatingPolicy}, {name: present, kind: NamespacedValidatingPolicy}]\n  matchConditions: [{name: a, expression: 'true'}]\n",
	})
	res := runCLI("", "translate", "-f", filepath.Join(dir, "policy.yaml"), "-f", filepath.Join(dir, "exceptions.yaml"))
	if res.code != 0 {
		t.Fatalf("exit code %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{
		`PolicyException/default/mixed: warning: policyRefs names ValidatingPolicy "absent", which is not among the input policies: it exempts nothing here`,
		`PolicyException/default/mixed: warning: policyRefs names NamespacedValidatingPolicy "present", which is not among the input policies`,
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr %q lacks %q", res.stderr, want)
		}
	}
	if strings.Contains(res.stderr, `names ValidatingPolicy "present"`) {
		t.Errorf("a reference to an input policy was reported: %s", res.stderr)
	}
}
