// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/test/celtest"
	"github.com/kyvap/kyvap/translate"
)

// costChecks are the same checks written twice: as Kyverno's library
// writes them in the classic language, compiled by kyvap, and as a person
// writes them in CEL (the form docs/performance.md's CEL policies use).
var costChecks = []struct {
	name, classic, handWritten string
}{
	{"disallow-privileged-containers", `
pattern:
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
		`[object.spec.containers, has(object.spec.initContainers) ? object.spec.initContainers : [], has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : []].all(l, l.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged))`},
	{"disallow-latest-tag", `
pattern:
  spec:
    containers:
    - image: "!*:latest"`,
		`object.spec.containers.all(c, !c.image.endsWith(':latest'))`},
	{"disallow-host-namespaces", `
pattern:
  spec:
    =(hostPID): "false"
    =(hostIPC): "false"
    =(hostNetwork): "false"`,
		`!(has(object.spec.hostPID) && object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC) && !(has(object.spec.hostNetwork) && object.spec.hostNetwork)`},
	{"block-retired-teams (deny, AnyIn)", `
deny:
  conditions:
    any:
    - key: "{{ request.object.metadata.labels.team || '' }}"
      operator: AnyIn
      value: ["legacy", "sandbox-*"]`,
		// Kyverno's AnyIn also reads the key as a wildcard pattern
		// against each value (a label "sandbox*" is in ["sandbox-*"]), but
		// no label value the API server admits holds a '*' or a '?'.
		`!(has(object.metadata.labels) && 'team' in object.metadata.labels && (object.metadata.labels['team'] == 'legacy' || object.metadata.labels['team'].startsWith('sandbox-')))`},
	{"no-latest (foreach, deny)", `
foreach:
- list: request.object.spec.containers
  deny:
    conditions:
      any:
      - key: "{{ element.image }}"
        operator: Equals
        value: "*:latest"`,
		`object.spec.containers.all(c, !c.image.endsWith(':latest'))`},
}

// verdictPods are more Pods on which every form of a check must agree,
// beside costPods (their cost is not counted): labels around the
// retired teams (valid label values: the API server admits no other) and
// images around the latest tag.
var verdictPods = []string{
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w1","namespace":"default","labels":{"team":"sandbox-"}},"spec":{"containers":[{"name":"a","image":"nginx:latest-1"}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w2","namespace":"default","labels":{"team":"legacy2"}},"spec":{"containers":[{"name":"a","image":"nginx"},{"name":"b","image":"x:latest"}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w3","namespace":"default","labels":{"team":""}},"spec":{"containers":[{"name":"a","image":"a:1"}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w4","namespace":"default","labels":{"team":"sandbox-1"}},"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:latest"}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w5","namespace":"default","labels":{"team":"sandbox"}},"spec":{"containers":[{"name":"a","image":"a:1"}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w6","namespace":"default"},"spec":{"containers":[{"name":"a","image":"a:1"}]}}`,
}

// costPods are compliant Pods of 1 and 5 containers, and a failing one.
var costPods = []string{
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"one","namespace":"default","labels":{"team":"web"}},"spec":{"containers":[{"name":"app","image":"nginx:1.27","securityContext":{"privileged":false}}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"five","namespace":"default","labels":{"team":"web","app":"shop"}},"spec":{"initContainers":[{"name":"init","image":"busybox:1.36"}],"containers":[{"name":"a","image":"nginx:1.27"},{"name":"b","image":"envoy:1.30","securityContext":{"privileged":false}},{"name":"c","image":"redis:7"},{"name":"d","image":"busybox:1.36"},{"name":"e","image":"app:2.0"}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad","namespace":"default","labels":{"team":"legacy"}},"spec":{"hostNetwork":true,"containers":[{"name":"a","image":"nginx:latest","securityContext":{"privileged":true}}]}}`,
}

// compiledCheck is a check's rule as kyvap evaluates it: CEL
// preconditions and validations.
type compiledCheck struct {
	conditions, validations []string
}

// compileCheck lowers a rule (its validate block as YAML) of a Pod
// ClusterPolicy and returns its compiled CEL, and its cost estimate.
func compileCheck(t testing.TB, validate string) (compiledCheck, uint64) {
	t.Helper()
	l, err := clusterpolicy.New(clusterpolicy.InputFor(costPolicy(t, validate), nil), kyverno.NewStaticResolver(), clusterpolicy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := l.Screen(0)
	if o.Fate != clusterpolicy.Lowered || !o.Rule.HasValidateCEL() {
		t.Fatalf("not compiled: %v", o.Refusal)
	}
	var c compiledCheck
	for _, mc := range o.Rule.CELPreconditions {
		c.conditions = append(c.conditions, mc.Expression)
	}
	for _, v := range o.Rule.Validation.CEL.Expressions {
		c.validations = append(c.validations, v.Expression)
	}
	return c, translate.EstimateRuleCost(o.Rule).Units
}

// vapCheck is the same rule as the API server evaluates it: the match
// conditions and validations of the VAP the operator writes
// (translate.Options.TypedObjects, as cmd/manager sets it), whose
// expressions are specialized to the Pod type.
func vapCheck(t testing.TB, validate string) compiledCheck {
	t.Helper()
	policy := costPolicy(t, validate)
	plan, err := translate.Translate(clusterpolicy.InputFor(policy, nil), kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true, TypedObjects: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ValidatingAdmissionPolicies) != 1 {
		t.Fatalf("want one VAP, got %d", len(plan.ValidatingAdmissionPolicies))
	}
	var c compiledCheck
	spec := plan.ValidatingAdmissionPolicies[0].Spec
	if len(spec.Variables) > 0 {
		t.Fatalf("the cost harness evaluates no variables")
	}
	for _, mc := range spec.MatchConditions {
		c.conditions = append(c.conditions, mc.Expression)
	}
	for _, v := range spec.Validations {
		c.validations = append(c.validations, v.Expression)
	}
	return c
}

// costPolicy is a Pod ClusterPolicy of one rule (its validate block as
// YAML).
func costPolicy(t testing.TB, validate string) *kyvernov1.ClusterPolicy {
	t.Helper()
	doc := "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: cost\n  annotations:\n    pod-policies.kyverno.io/autogen-controllers: none\nspec:\n  validationFailureAction: Audit\n  rules:\n  - name: check\n    match: {any: [{resources: {kinds: [Pod], operations: [CREATE]}}]}\n    validate:\n" + indent(validate, "      ")
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var policy kyvernov1.ClusterPolicy
	if err := json.Unmarshal(data, &policy); err != nil {
		t.Fatal(err)
	}
	return &policy
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// programs compiles expressions with cost tracking.
func programs(t testing.TB, env *cel.Env, expressions []string) []cel.Program {
	t.Helper()
	return celtest.CostPrograms(t, env, expressions)
}

// run evaluates a check's preconditions, then (when they hold) its
// validations, on a CREATE of the pod: whether it passes, and the runtime
// cost CEL counted.
func run(t testing.TB, conditions, validations []cel.Program, pod map[string]any) (bool, uint64) {
	t.Helper()
	return celtest.Evaluate(t, conditions, validations, map[string]any{"object": pod, "oldObject": nil, "request": map[string]any{"operation": "CREATE", "userInfo": map[string]any{}}})
}

func decodePods(t testing.TB) []map[string]any {
	t.Helper()
	return decodeEach(t, costPods)
}

func decodeEach(t testing.TB, raws []string) []map[string]any {
	t.Helper()
	pods := make([]map[string]any, len(raws))
	for i, raw := range raws {
		pods[i] = roundTrip(mustJSON(t, raw)).(map[string]any)
	}
	return pods
}

func mustJSON(t testing.TB, raw string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCompiledCostAgainstHandWritten measures, for each check, the runtime
// cost CEL counts for kyvap's compiled rule (its preconditions included)
// and for the hand-written CEL of the same check, on the same Pods, with
// the cost estimate of each rule; the two must give the same verdicts.
// docs/performance.md has the table.
func TestCompiledCostAgainstHandWritten(t *testing.T) {
	env := requestEnv(t)
	pods := decodePods(t)
	var lines []string
	for _, check := range costChecks {
		compiled, compiledEstimate := compileCheck(t, check.classic)
		typed := vapCheck(t, check.classic)
		_, handEstimate := compileCheck(t, "cel:\n  expressions:\n  - expression: "+strconvQuote(check.handWritten))
		cc, cv := programs(t, env, compiled.conditions), programs(t, env, compiled.validations)
		tc, tv := programs(t, env, typed.conditions), programs(t, env, typed.validations)
		hv := programs(t, env, []string{check.handWritten})
		var compiledCost, typedCost, handCost uint64
		for i, pod := range pods {
			cp, c := run(t, cc, cv, pod)
			tp, ty := run(t, tc, tv, pod)
			hp, h := run(t, nil, hv, pod)
			if cp != hp || tp != hp {
				t.Errorf("%s: pod %d: compiled says %t, its VAP form %t, hand-written %t", check.name, i, cp, tp, hp)
			}
			compiledCost += c
			typedCost += ty
			handCost += h
		}
		for i, pod := range decodeEach(t, verdictPods) {
			cp, _ := run(t, cc, cv, pod)
			tp, _ := run(t, tc, tv, pod)
			hp, _ := run(t, nil, hv, pod)
			if cp != hp || tp != hp {
				t.Errorf("%s: verdict pod %d: compiled says %t, its VAP form %t, hand-written %t", check.name, i, cp, tp, hp)
			}
		}
		ratio := func(c uint64) float64 { return float64(c) / float64(max(handCost, 1)) }
		lines = append(lines, fmt.Sprintf("| %s | %d | %d | %d | %.1f | %.1f | %d | %d |", check.name, compiledCost, typedCost, handCost, ratio(compiledCost), ratio(typedCost), compiledEstimate, handEstimate))
	}
	sort.Strings(lines)
	t.Logf("runtime cost on the %d Pods (general form, VAP form, hand-written, ratios to hand-written), estimates (general, hand-written):\n%s", len(pods), strings.Join(lines, "\n"))
}

func strconvQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

// BenchmarkCompiledAgainstHandWritten times one evaluation of each check
// on the 5-container Pod: the general form, the VAP's and the
// hand-written CEL.
func BenchmarkCompiledAgainstHandWritten(b *testing.B) {
	env := requestEnv(b)
	pod := decodePods(b)[1]
	for _, check := range costChecks {
		compiled, _ := compileCheck(b, check.classic)
		typed := vapCheck(b, check.classic)
		cc, cv := programs(b, env, compiled.conditions), programs(b, env, compiled.validations)
		tc, tv := programs(b, env, typed.conditions), programs(b, env, typed.validations)
		hv := programs(b, env, []string{check.handWritten})
		b.Run(check.name+"/compiled", func(b *testing.B) {
			for range b.N {
				run(b, cc, cv, pod)
			}
		})
		b.Run(check.name+"/vap", func(b *testing.B) {
			for range b.N {
				run(b, tc, tv, pod)
			}
		})
		b.Run(check.name+"/hand-written", func(b *testing.B) {
			for range b.N {
				run(b, nil, hv, pod)
			}
		})
	}
}
