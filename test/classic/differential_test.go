// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package classic proves frontend/classic against Kyverno: every pattern of
// the cases below is compiled to CEL and judged against resources generated
// around it (each field dropped, nulled, retyped, replaced by values near
// the pattern's), and the verdicts must be those of Kyverno's own pattern
// matcher (pkg/engine/validate MatchPattern of v1.19.1, built outside
// kyvap's module by hack/build-kyverno.sh pattern-oracle).
package classic

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/classic"
	"github.com/kyvap/kyvap/test/celtest"
	"github.com/kyvap/kyvap/test/kyvernooracle"
)

// patterns are the cases, each a validate.pattern as a policy writes it.
var patterns = map[string]string{
	"privileged-containers": `
spec:
  =(ephemeralContainers):
  - =(securityContext):
      =(privileged): "false"
  =(initContainers):
  - =(securityContext):
      =(privileged): "false"
  containers:
  - =(securityContext):
      =(privileged): "false"`,
	"latest-tag": `
spec:
  containers:
  - image: "!*:latest"`,
	"image-tag-required": `
spec:
  containers:
  - image: "*:*"`,
	"require-labels": `
metadata:
  labels:
    app.kubernetes.io/name: "?*"
    team: "*"`,
	"host-namespaces": `
spec:
  =(hostPID): "false"
  =(hostIPC): "false"
  =(hostNetwork): "false"`,
	"no-host-path": `
spec:
  =(volumes):
  - X(hostPath): "null"`,
	"pull-policy-alternatives": `
spec:
  containers:
  - imagePullPolicy: "IfNotPresent | Never"`,
	"and-conditions": `
metadata:
  name: "prod-* & !*-tmp"`,
	"booleans": `
spec:
  automountServiceAccountToken: false
  =(enableServiceLinks): true`,
	"null-pattern": `
spec:
  nodeName: null`,
	"scalar-list": `
spec:
  args: "--*"`,
	"empty-list-pattern": `
spec:
  items: []`,
	"wildcards-only": `
data:
  key: "???"`,
	"conditional-container": `
spec:
  containers:
  - (name): "check-*"
    readinessProbe:
      httpGet:
        path: "?*"`,
	"conditional-root": `
metadata:
  (name): "prod-*"
  labels:
    team: "?*"
spec:
  X(hostNetwork): "null"`,
	"conditional-nested-values": `
spec:
  (securityContext):
    (runAsNonRoot): false
  containers:
  - image: "registry.example/*"`,
	"conditional-with-equality": `
spec:
  containers:
  - (image): "*:latest"
    =(imagePullPolicy): "Always"
    X(command): "null"
    name: "?*"`,
	"conditional-siblings": `
spec:
  initContainers:
  - (name): "init-*"
    image: "!*:latest"
  containers:
  - (image): "app/*"
    (workingDir): "/srv*"
    ports: "*"`,
	"global-type": `
metadata:
  annotations:
    service.beta.kubernetes.io/aws-load-balancer-security-groups: "?*"
spec:
  <(type): LoadBalancer`,
	"global-in-list": `
spec:
  containers:
  - <(image): "*:latest"
    imagePullPolicy: Always`,
	"global-and-conditional": `
spec:
  <(hostNetwork): true
  (dnsPolicy): "ClusterFirst*"
  containers:
  - (name): "*"
    <(securityContext):
      privileged: "false"`,
	"conditional-under-equality": `
spec:
  =(initContainers):
  - (image): "*:latest"
    imagePullPolicy: Always
  containers:
  - name: "?*"`,
	"global-under-equality": `
spec:
  =(template):
    spec:
      <(hostNetwork): true
      dnsPolicy: "ClusterFirstWithHostNet"`,
	"add-if-not-present-literal": `
metadata:
  labels:
    +(team): "?*"
    app: "*"`,
	"numbers": `
spec:
  replicas: 3
  ratio: 0.5
  =(hostPort): 0
  big: 1e15
  negative: -2`,
	"operators-numbers": `
spec:
  replicas: ">0"
  minReadySeconds: ">=1 & <=5"
  revisionHistoryLimit: "1-3"
  progressDeadlineSeconds: "10!-20"
  paused: "!0"`,
	"operators-durations": `
spec:
  timeout: "<1h"
  interval: "!10s"
  grace: ">=100ms | 0"`,
	"operators-quantities": `
spec:
  memory: "<=1.5Gi"
  cpu: ">=100m"
  storage: "1Gi"
  weight: "-10--8"`,
	"operators-in-anchors": `
spec:
  containers:
  - (name): "web-*"
    livenessProbe:
      periodSeconds: ">0"
      =(timeoutSeconds): "<=10"`,
	"conditional-map-value": `
spec:
  (selector):
    app: "web"
  serviceName: "!legacy"`,
}

func TestPatternsAgreeWithKyverno(t *testing.T) {
	cases := map[string][]byte{}
	for name, p := range patterns {
		raw, err := yaml.YAMLToJSON([]byte(p))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases[name] = raw
	}
	compare(t, cases, true, 500)
}

// TestKyvernoCorpusPatternsAgreeWithKyverno runs the comparison on every
// validate.pattern of the ClusterPolicies and Policies in Kyverno's own
// tests (test/ of its module) that the compiler takes.
func TestKyvernoCorpusPatternsAgreeWithKyverno(t *testing.T) {
	cases, refused := corpusPatterns(t, kyvernoModule(t))
	if len(cases) < 50 {
		t.Fatalf("only %d patterns of Kyverno's tests compile (%d refused)", len(cases), refused)
	}
	t.Logf("%d distinct patterns of Kyverno's tests compiled, %d refused", len(cases), refused)
	compare(t, cases, false, 3000)
}

// compare compiles each pattern, judges the resources generated around it
// with the CEL and with Kyverno's matcher, and fails on any disagreement
// (or on a refusal, when mustCompile).
func compare(t *testing.T, cases map[string][]byte, mustCompile bool, atLeast int) {
	t.Helper()
	oracle := buildOracle(t)
	env := celEnv(t)
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	compared, disagreements := 0, 0
	verdicts := map[string]int{}
	for _, name := range names {
		raw := cases[name]
		verdict, fl := classic.PatternVerdict(raw, "object")
		if fl != nil {
			if mustCompile {
				t.Errorf("%s: refused: %s: %s", name, fl.Reason, fl.Message)
			}
			continue
		}
		passes, skips, fails := compile(t, env, verdict.Passes), compile(t, env, verdict.Skips), compile(t, env, verdict.Fails)
		var pattern any
		if err := json.Unmarshal(raw, &pattern); err != nil {
			t.Fatal(err)
		}
		resources := around(pattern)
		kyverno := ask(t, oracle, raw, resources)
		for i, resource := range resources {
			compared++
			verdicts[kyverno[i]]++
			got := "fail"
			switch {
			case evaluate(t, fails, resource):
				got = "error"
				if _, err := evaluateErr(passes, resource); err == nil {
					got = "error, but the verdict evaluates"
				}
			case evaluate(t, passes, resource):
				got = "pass"
			case evaluate(t, skips, resource):
				got = "skip"
			}
			if got != kyverno[i] {
				disagreements++
				if disagreements <= 20 {
					t.Errorf("%s: %s: Kyverno says %s, kyvap's CEL %s", name, resource, kyverno[i], got)
				}
			}
		}
	}
	t.Logf("%d patterns, %d resources compared (Kyverno: %v), %d disagreements", len(names), compared, verdicts, disagreements)
	if compared < atLeast {
		t.Errorf("only %d resources compared", compared)
	}
}

// kyvernoModule is the directory of Kyverno's module (the one the oracle
// is built from).
func kyvernoModule(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/kyverno/kyverno@v1.19.1").Output()
	if err != nil {
		t.Fatalf("go mod download github.com/kyverno/kyverno: %v", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download: %v (%s)", err, out)
	}
	return m.Dir
}

// corpusPatterns reads the distinct validate.pattern and anyPattern
// patterns of every kyverno.io policy under dir/test that the compiler
// takes, by file and rule, and counts those it refuses.
func corpusPatterns(t *testing.T, dir string) (map[string][]byte, int) {
	t.Helper()
	cases, seen, refused := map[string][]byte{}, map[string]bool{}, 0
	err := filepath.WalkDir(filepath.Join(dir, "test"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var p struct {
				Kind string
				Spec struct {
					Rules []struct {
						Name     string
						Validate struct {
							Pattern    json.RawMessage
							AnyPattern []json.RawMessage `json:"anyPattern"`
						}
					}
				}
			}
			if yaml.Unmarshal([]byte(doc), &p) != nil || (p.Kind != "ClusterPolicy" && p.Kind != "Policy") {
				continue
			}
			for _, r := range p.Spec.Rules {
				// A pattern, and each pattern of an anyPattern (compiled
				// alike: the anyPattern is their disjunction).
				for i, raw := range append([]json.RawMessage{r.Validate.Pattern}, r.Validate.AnyPattern...) {
					if len(raw) == 0 || string(raw) == "null" || seen[string(raw)] {
						continue
					}
					seen[string(raw)] = true
					if _, fl := classic.PatternVerdict(raw, "object"); fl != nil {
						refused++
						if os.Getenv("KYVAP_CORPUS_REASONS") != "" {
							t.Logf("refused: %s", fl.Message)
						}
						continue
					}
					rel, _ := filepath.Rel(dir, path)
					cases[fmt.Sprintf("%s#%s/%d", rel, r.Name, i)] = raw
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cases, refused
}

// buildOracle builds Kyverno's pattern matcher (reused when built).
func buildOracle(t *testing.T) string { return kyvernooracle.Build(t) }

// ask returns Kyverno's verdict on each resource.
func ask(t *testing.T, oracle string, pattern []byte, resources [][]byte) []string {
	t.Helper()
	raws := make([]json.RawMessage, len(resources))
	for i, r := range resources {
		raws[i] = r
	}
	return runOracle(t, oracle, map[string]any{"pattern": json.RawMessage(pattern), "resources": raws}, len(resources))
}

// runOracle runs the oracle on input (as JSON) and returns its answer,
// one line per case, of which there must be want.
func runOracle(t *testing.T, oracle string, input any, want int) []string {
	return kyvernooracle.Run(t, oracle, input, want)
}

// celEnv is the API server's base CEL environment with the object and
// the request.
func celEnv(t *testing.T) *cel.Env {
	t.Helper()
	return celtest.Env(t, "object", "request")
}

func compile(t *testing.T, env *cel.Env, expression string) cel.Program {
	t.Helper()
	return celtest.Program(t, env, expression)
}

// evaluate judges one resource as the API server reads it (integers as
// int64); an evaluation error is a test failure: the compiled forms never
// error.
func evaluate(t *testing.T, program cel.Program, resource []byte) bool {
	t.Helper()
	b, err := evaluateErr(program, resource)
	if err != nil {
		t.Errorf("%s: evaluation error: %v", resource, err)
	}
	return b
}

// evaluateErr evaluates a predicate on resource as the object of a
// CREATE.
func evaluateErr(program cel.Program, resource []byte) (bool, error) {
	var object map[string]any
	if err := utiljson.Unmarshal(resource, &object); err != nil {
		return false, err
	}
	out, _, err := program.Eval(map[string]any{"object": object, "request": map[string]any{"operation": "CREATE"}})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	return ok && b, nil
}

// around generates resources around a pattern: one that follows it, then
// each of its fields dropped, nulled and replaced by values of every type,
// including values near the pattern's own, and each list emptied and
// grown by an element that does not follow it.
func around(pattern any) [][]byte {
	base := witness(pattern)
	seen := map[string]bool{}
	var out [][]byte
	add := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		if !seen[string(data)] {
			seen[string(data)] = true
			out = append(out, data)
		}
	}
	add(base)
	for _, variant := range variants(base, pattern) {
		add(variant)
	}
	return out
}

// palette are the values every field is replaced by.
var palette = []any{nil, "", "x", "true", "false", true, false, int64(0), int64(1), int64(-3), 1.5, "0", "1.5", map[string]any{}, map[string]any{"k": "v"}, []any{}, []any{"x"}, []any{map[string]any{}}}

// variants returns copies of v with one change each, at every depth.
func variants(v any, pattern any) []any {
	var out []any
	switch typed := v.(type) {
	case map[string]any:
		patternMap, _ := pattern.(map[string]any)
		keys := make([]string, 0, len(typed))
		for k := range typed {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := patternFor(patternMap, k)
			without := copyMap(typed)
			delete(without, k)
			out = append(out, without)
			for _, replacement := range append(append([]any{}, palette...), near(sub)...) {
				changed := copyMap(typed)
				changed[k] = replacement
				out = append(out, changed)
			}
			for _, deeper := range variants(typed[k], sub) {
				changed := copyMap(typed)
				changed[k] = deeper
				out = append(out, changed)
			}
		}
		// Keys the pattern forbids or leaves optional, present.
		for pk, pv := range patternMap {
			if m, key := anchorOf(pk); m != "" {
				if _, ok := typed[key]; !ok {
					changed := copyMap(typed)
					changed[key] = witness(pv)
					out = append(out, changed)
				}
			}
		}
	case []any:
		var element any
		if p, ok := pattern.([]any); ok && len(p) > 0 {
			element = p[0]
		}
		out = append(out, []any{})
		for _, replacement := range append(append([]any{}, palette...), near(element)...) {
			out = append(out, append(append([]any{}, typed...), replacement))
		}
		if len(typed) > 0 {
			for _, deeper := range variants(typed[0], element) {
				out = append(out, append([]any{deeper}, typed[1:]...))
				// The change before an element that follows the pattern,
				// and after it (a skipped element next to an applied one).
				out = append(out, append([]any{deeper}, typed...), append(append([]any{}, typed...), deeper), []any{deeper, "x"})
			}
		}
	}
	return out
}

// witness builds a value that follows the pattern.
func witness(pattern any) any {
	switch typed := pattern.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, v := range typed {
			switch m, key := anchorOf(k); m {
			case "X":
				continue
			case "=", "(", "<":
				out[key] = witness(v)
			default:
				if s, ok := v.(string); ok && s == "*" {
					out[k] = "x"
					continue
				}
				out[k] = witness(v)
			}
		}
		return out
	case []any:
		if len(typed) == 0 {
			return []any{}
		}
		return []any{witness(typed[0])}
	case string:
		samples := near(typed)
		if len(samples) > 0 {
			return samples[0]
		}
		return typed
	}
	return pattern
}

// near are strings close to a value-string pattern: each operand with its
// wildcards filled, and changed at its start and end.
func near(pattern any) []any {
	s, ok := pattern.(string)
	if !ok {
		return nearNumber(pattern)
	}
	var out []any
	for _, alternative := range strings.Split(s, "|") {
		for _, condition := range strings.Split(alternative, "&") {
			operand := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(condition), "!"))
			filled := strings.NewReplacer("*", "", "?", "q").Replace(operand)
			out = append(out, filled, strings.NewReplacer("*", "abc", "?", "z").Replace(operand), "x"+filled, filled+"x", strings.ToUpper(filled))
		}
	}
	out = append(out, s, strings.TrimSpace(s))
	if strings.ContainsAny(s, "<>-!0123456789") {
		out = append(out, operandValues...)
	}
	return out
}

func init() {
	// near() of a number pattern: ParseFloat's forms.
	nearNumber = func(pattern any) []any {
		if _, ok := pattern.(float64); ok {
			return numberValues
		}
		return nil
	}
}

// nearNumber are the values near a number pattern.
var nearNumber func(any) []any

// operandValues are values around Kyverno's comparisons: durations (each
// unit, fractions, signs, the edges of ParseDuration's overflow), quantities,
// numbers and strings that are neither.
var operandValues = []any{
	"0", "+0", "-0", "00", "1", "5", "-5", "3", "10", "20", "15", "-9", "-10", "-8", "-11",
	"10s", "9s", "11s", "-10s", "1h30m", "1.5h", ".5s", "5.s", "1µs", "1μs", "1us", "100ms", "99ms", "1h1h", "59m59s", "3600s", "0h",
	"2562047h", "2562048h", "9223372036854775807ns", "9223372036854775808ns", "-9223372036854775808ns", "-9223372036854775809ns",
	"2562047h47m16.854775807s", "2562047h47m16.854775808s", "0.000000001s", "0.0000000000000000000001h", "1.9999999999999999999s",
	"0.00000000000000000000000000000000000000000000000001h", "1.00000000000000000000000000001s", "922337203685477580.9ns",
	"1Gi", "1024Mi", "1536Mi", "1.5Gi", "1610612737", "500m", "100m", "99m", "0.1", "1e3", "1E", "1.5", "1k", "2Ki",
	"abc", "", "1hm", "1 s", " 1s", "5m", "-5m", "1ms1", "1.5.5s", "1e3s",
	int64(0), int64(1), int64(5), int64(-1), int64(3), int64(10), int64(20), int64(-9), int64(1610612736), int64(1610612737),
	0.5, 1e-7, 2.9999995, 3.0000005, 0.0999995, 0.1000005, -9.5, 1e300, -1e300, true, false,
}

// numberValues are values around a number pattern: ParseFloat's forms
// (signs, underscores, exponents, hexadecimal, infinities, overflow and
// underflow) and numbers of every JSON type.
var numberValues = []any{
	"3", "+3", "3.0", "3.", "03", "3e0", "30e-1", "0.3e1", "3_0e-1", "3__0", "_3", "3_", "0x3p0", "0x1.8p1", "0X_3P0", "0x3", "0x1p1_0",
	"0", "-0", "+0", "0.0", "0e999999999999999999", "0x0p0", "0.5", ".5", "5e-1", "0x1p-1", "0.50000000000000000001",
	"1e15", "1000000000000000", "1E+15", "1e20", "1e400", "-1e400", "1e-400", "0x1p2000", "0x1p-2000", "1e", "1e+", ".", "",
	"inf", "-Inf", "infinity", "NaN", "+nan", "infin", "-2", "-2.0", "- 2", " 3", "3 ", "three",
	"0.00000000000000000000000000000000000000000000000000000000000000000000000000001e77",
	// ParseInt's range, for a pattern written as an integer (an int64).
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "0003", "-03", "+-3", "3.5",
	9.3e18, -9.3e18, 9223372036854775807.0, 3.5,
	int64(3), int64(0), int64(-2), int64(1), 3.0000000000000004, 0.5, 1e20, -2.0, true, nil, map[string]any{}, []any{int64(3)},
}

func patternFor(p map[string]any, key string) any {
	if p == nil {
		return nil
	}
	if v, ok := p[key]; ok {
		return v
	}
	for _, m := range []string{"=", "X", "", "<"} {
		if v, ok := p[m+"("+key+")"]; ok {
			return v
		}
	}
	return nil
}

// anchorOf is the modifier of an anchor key ("(" for a conditional
// anchor) and the key it anchors, or "" and the key.
func anchorOf(key string) (modifier, name string) {
	if len(key) > 2 && strings.HasSuffix(key, ")") {
		if strings.HasPrefix(key, "(") {
			return "(", key[1 : len(key)-1]
		}
		for _, m := range []string{"=", "X", "<"} {
			if len(key) > 3 && strings.HasPrefix(key, m+"(") {
				return m, key[2 : len(key)-1]
			}
		}
	}
	return "", key
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
