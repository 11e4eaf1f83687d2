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

// conditionalException names max-five with JMESPath conditions, which a VAP
// cannot express: the rule falls back when the exception is given.
const conditionalException = `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: big-ones, namespace: kyverno}
spec:
  exceptions: [{policyName: replicas, ruleNames: [max-five]}]
  match: {any: [{resources: {kinds: [Deployment]}}]}
  conditions: {any: [{key: "{{ request.object.metadata.name }}", operator: Equals, value: big}]}
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
	if want := "replicas/max-five: Translated -> kyvap-replicas-max-five\n"; res.stderr != want {
		t.Errorf("stderr = %q, want %q", res.stderr, want)
	}
	objs := parseStream(t, res.stdout)
	want := []string{"ValidatingAdmissionPolicy/kyvap-replicas-max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas-max-five-0"}
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
	for _, want := range []string{"expression: object.spec.replicas <= 5", "message: at most 5 replicas", "policyName: kyvap-replicas-max-five\n", "- Deny"} {
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
			wantStderr: []string{"replicas/max-five: Translated -> kyvap-replicas-max-five"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-replicas-max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas-max-five-0"},
		},
		{
			name:       "v1 List from kubectl get",
			args:       []string{"-f", path("kubectl-get.yaml")},
			wantStderr: []string{"replicas/max-five: Translated -> kyvap-replicas-max-five"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-replicas-max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas-max-five-0"},
		},
		{
			name:       "custom kind without its CRD falls back",
			args:       []string{"-f", path("widgets.yaml")},
			wantStderr: []string{"widgets/sized: Fallback (KindUnresolved): "},
		},
		{
			name:       "custom kind resolved by --crd",
			args:       []string{"-f", path("widgets.yaml"), "--crd", path("crd.yaml")},
			wantStderr: []string{"widgets/sized: Translated -> kyvap-widgets-sized"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-widgets-sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets-sized-0"},
		},
		{
			name:       "custom kind resolved by a CRD given with -f",
			args:       []string{"-f", path("crd.yaml"), "-f", path("widgets.yaml")},
			wantStderr: []string{"widgets/sized: Translated -> kyvap-widgets-sized"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-widgets-sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets-sized-0"},
		},
		{
			name:       "exception naming the rule",
			args:       []string{"-f", path("replicas.yaml"), "-f", path("exception.yaml")},
			wantStderr: []string{"replicas/max-five: Fallback (ExceptionNotExpressible): "},
		},
		{
			name:       "directory: yaml, yml and json files in name order, other files ignored",
			args:       []string{"-f", bundle},
			wantStderr: []string{"replicas/max-five: Fallback (ExceptionNotExpressible): ", "widgets/sized: Translated -> kyvap-widgets-sized"},
			wantIDs:    []string{"ValidatingAdmissionPolicy/kyvap-widgets-sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets-sized-0"},
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
		"ValidatingAdmissionPolicy/kyvap-replicas-max-five", "ValidatingAdmissionPolicyBinding/kyvap-replicas-max-five-0",
		"ValidatingAdmissionPolicy/kyvap-widgets-sized", "ValidatingAdmissionPolicyBinding/kyvap-widgets-sized-0",
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
		"kind.yaml":    replicasPolicy + "---\napiVersion: kyverno.io/v1\nkind: Policy\nmetadata: {name: ns-policy, namespace: default}\n",
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
		{"unknown kind names file and document", []string{"-f", path("kind.yaml")}, 2, path("kind.yaml") + ":15: document 2: unsupported kind kyverno.io/v1 Policy"},
		{"duplicate key", []string{"-f", path("dup.yaml")}, 2, path("dup.yaml") + `:2: document 1: invalid YAML: key "a" already set in map`},
		{"type error names the field", []string{"-f", path("type.yaml")}, 2, `ClusterPolicy "typed": field spec.rules: cannot use a JSON string`},
		{"missing file", []string{"-f", path("missing.yaml")}, 2, path("missing.yaml") + ": no such file or directory"},
		{"no policy", []string{"-f", path("empty.yaml"), "-f", path("crd.yaml")}, 2, "no kyverno.io/v1 ClusterPolicy in"},
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
	if res.code != 0 || !strings.Contains(res.stdout, "kyvap translate -f FILE") || !strings.Contains(res.stdout, "Exit status:") {
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
