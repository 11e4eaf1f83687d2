// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/classic"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/vap"
)

// conditionCases are deny conditions and preconditions as policies write
// them, one per operator and form the compiler takes.
var conditionCases = map[string]string{
	"team-anyin-default": `
any:
- key: "{{ request.object.metadata.labels.team || '' }}"
  operator: AnyIn
  value: ["payments", "web-*", ""]`,
	"type-function": `
any:
- key: "{{ type(request.object.spec.replicas) }}"
  operator: Equals
  value: number
- key: "{{ type(request.object.metadata.labels) }}"
  operator: AnyIn
  value: [object, "null"]`,
	"split-join-replace-notnull": `
any:
- key: "{{ split(request.object.spec.image, ':') }}"
  operator: AnyIn
  value: [latest, "v1*"]
- key: "{{ replace_all(request.object.metadata.name, '-', '.') }}"
  operator: Equals
  value: "web.*"
- key: "{{ join('/', request.object.spec.args) }}"
  operator: Equals
  value: "--a/*"
- key: "{{ not_null(request.object.metadata.labels.team, request.object.metadata.name, 'none') }}"
  operator: Equals
  value: payments`,
	"merge-function": `
any:
- key: '{{ request.object.metadata.labels | merge(@, ` + "`" + `{"test": ""}` + "`" + `) }}'
  operator: NotEquals
  value:
    team: payments
    test: ""
- key: "{{ merge(request.object.spec, request.object.metadata.labels, request.object.metadata.annotations).team }}"
  operator: Equals
  value: "web-*"
- key: "{{ length(merge(request.object.metadata.labels)) }}"
  operator: GreaterThan
  value: 1`,
	"runtime-membership-values": `
any:
- key: payments
  operator: AnyIn
  value: "{{ request.object.spec.teams }}"
- key: web-a
  operator: AllIn
  value: "{{ request.object.metadata.labels.team }}"
- key: a
  operator: In
  value: "{{ request.object.spec.args }}"
- key: a
  operator: NotIn
  value: "{{ request.object.metadata.annotations.list }}"`,
	"nested-label-variables": `
any:
- key: "{{ regex_match('^[a-z]+-[0-9]$', '{{ request.object.metadata.labels.team }}') }}"
  operator: Equals
  value: true
- key: "{{ starts_with('team-{{request.object.metadata.labels.team}}', 'team-w') }}"
  operator: Equals
  value: true`,
	"bool-key-runtime-value": `
any:
- key: true
  operator: AnyIn
  value: "{{ request.object.spec.args[].regex_match('\\bjcmd\\b', @) }}"
- key: false
  operator: NotIn
  value: "{{ request.object.metadata.annotations.list }}"`,
	"abs-function": `
all:
- key: "{{ abs(request.object.spec.replicas) }}"
  operator: GreaterThan
  value: 2`,
	"team-anynotin": `
all:
- key: "{{ request.object.metadata.labels.team }}"
  operator: AnyNotIn
  value: ["payments", "web-*"]`,
	"name-equals-wildcard": `
any:
- key: "{{ request.object.metadata.name }}"
  operator: Equals
  value: "prod-*"`,
	"name-notequals": `
all:
- key: "{{ request.object.metadata.name }}"
  operator: NotEquals
  value: "default"`,
	"operation-and-field": `
all:
- key: "{{ request.operation }}"
  operator: AnyIn
  value: [CREATE, UPDATE]
- key: "{{ request.object.spec.replicas || '' }}"
  operator: Equals
  value: "1"`,
	"quantity-equals": `
any:
- key: "{{ request.object.spec.memory }}"
  operator: Equals
  value: "1Gi"`,
	"bool-equals": `
all:
- key: "{{ request.object.spec.hostNetwork || ` + "`false`" + ` }}"
  operator: Equals
  value: true`,
	"list-key-allin": `
any:
- key: "{{ request.object.spec.finalizers }}"
  operator: AllIn
  value: ["kubernetes", "example.com/*"]`,
	"list-key-allnotin": `
any:
- key: "{{ request.object.spec.finalizers }}"
  operator: AllNotIn
  value: ["kubernetes"]`,
	"string-value-json-array": `
any:
- key: "{{ request.object.metadata.namespace }}"
  operator: AnyIn
  value: '["kube-system", "kube-public"]'`,
	"string-value-plain": `
any:
- key: "{{ request.object.metadata.namespace }}"
  operator: AllNotIn
  value: "kube-*"`,
	"number-values-list": `
any:
- key: "{{ request.object.spec.port }}"
  operator: AnyIn
  value: [80, 443, "8080"]`,
	"old-style-list": `
- key: "{{ request.object.metadata.labels.env }}"
  operator: NotEquals
  value: ""
- key: "{{ request.object.metadata.labels.tier || 'none' }}"
  operator: AnyNotIn
  value: ["frontend"]`,
	"any-and-all": `
any:
- key: "{{ request.object.metadata.labels.a }}"
  operator: Equals
  value: "x"
- key: "{{ request.object.metadata.labels.b }}"
  operator: Equals
  value: "y"
all:
- key: "{{ request.object.metadata.labels.c || '' }}"
  operator: NotEquals
  value: "z"`,
	"old-object": `
any:
- key: "{{ request.oldObject.metadata.labels.team || '' }}"
  operator: NotEquals
  value: "{{ request.object.metadata.labels.team || '' }}"`,
	"literal-null-equals": `
any:
- key: "{{ request.object.spec.x }}"
  operator: Equals
  value: null`,
	"containers-count": `
any:
- key: "{{ request.object.spec.containers[] | length(@) }}"
  operator: GreaterThan
  value: "2"
- key: "{{ length(request.object.metadata.labels || ` + "`{}`" + `) }}"
  operator: LessThanOrEquals
  value: 0
- key: "{{ request.object.spec.containers | length(@) }}"
  operator: GreaterThanOrEquals
  value: "1m"`,
	"images-projection": `
any:
- key: "{{ request.object.spec.containers[].image }}"
  operator: AnyNotIn
  value: ["nginx:*", "registry.example.com/*"]`,
	"first-container": `
all:
- key: "{{ request.object.spec.containers[0].name || '' }}"
  operator: NotEquals
  value: "app"
- key: "{{ request.object.spec.containers[-1].image }}"
  operator: Equals
  value: "*:latest"`,
	"all-containers": `
any:
- key: "{{ request.object.spec.[initContainers, containers][].image }}"
  operator: AllIn
  value: ["nginx:*"]
- key: "{{ request.object.spec.[initContainers, containers][] | length(@) }}"
  operator: LessThan
  value: 1`,
	"request-fields": `
all:
- key: "{{ request.userInfo.groups || ` + "`[]`" + ` }}"
  operator: AllNotIn
  value: ["system:masters"]
- key: "{{ request.namespace || '' }}"
  operator: NotEquals
  value: "kube-system"
- key: "{{ request.userInfo.username }}"
  operator: Equals
  value: "system:serviceaccount:*"`,
	"filters": `
any:
- key: "{{ request.object.spec.volumes[?contains(keys(@), 'emptyDir')].name }}"
  operator: AnyIn
  value: ["cache", "tmp-*"]
- key: "{{ request.object.spec.containers[?image == 'nginx:latest'].name }}"
  operator: AnyIn
  value: ["app"]
- key: "{{ length(request.object.spec.containers[?!securityContext]) }}"
  operator: GreaterThan
  value: 1
- key: "{{ request.object.spec.containers[?name && image].name | length(@) }}"
  operator: LessThan
  value: 1
- key: "{{ request.object.spec.containers[?port > ` + "`1000`" + `].port }}"
  operator: AnyIn
  value: ["8080"]`,
	"string-functions": `
all:
- key: "{{ starts_with(request.object.metadata.name, 'prod-') }}"
  operator: Equals
  value: true
- key: "{{ ends_with(request.object.metadata.name || '', '-tmp') }}"
  operator: NotEquals
  value: true
- key: "{{ contains(request.object.metadata.name || '', 'x') }}"
  operator: Equals
  value: false
- key: "{{ contains(request.object.spec.finalizers || ` + "`[]`" + `, 'kubernetes') }}"
  operator: Equals
  value: false`,
	"pipe-field": `
any:
- key: "{{ request.object.metadata | labels.team }}"
  operator: Equals
  value: "web"`,
	// A string key read as a duration, a quantity, a float, a version.
	"lifetime-greaterthan-duration": `
any:
- key: "{{ request.object.metadata.annotations.lifetime }}"
  operator: GreaterThan
  value: 8h`,
	"lifetime-lessthanorequals-seconds": `
any:
- key: "{{ request.object.metadata.annotations.lifetime }}"
  operator: LessThanOrEquals
  value: 3600`,
	"memory-greaterthanorequals-quantity": `
any:
- key: "{{ request.object.spec.memory }}"
  operator: GreaterThanOrEquals
  value: 1Gi`,
	"version-lessthan-semver": `
any:
- key: "{{ request.object.spec.version }}"
  operator: LessThan
  value: 1.2.3`,
	"ratio-greaterthan-float-string": `
any:
- key: "{{ request.object.spec.ratio }}"
  operator: GreaterThan
  value: "1.5"`,
	"timeout-equals-seconds": `
any:
- key: "{{ request.object.spec.timeout }}"
  operator: Equals
  value: 3600`,
	"timeout-equals-notequals-duration": `
all:
- key: "{{ request.object.spec.timeout }}"
  operator: NotEquals
  value: 90m
- key: "{{ request.object.spec.period }}"
  operator: Equals
  value: 1h`,
	// A value known at run time, and a literal key.
	"label-notequals-old-label": `
any:
- key: "{{ request.object.metadata.labels.team }}"
  operator: NotEquals
  value: "{{ request.oldObject.metadata.labels.team }}"`,
	"spec-equals-spec-value": `
any:
- key: "{{ request.object.spec.timeout }}"
  operator: Equals
  value: "{{ request.object.spec.period }}"`,
	"literal-key-equals-data": `
all:
- key: admin
  operator: Equals
  value: "{{ request.object.data.lock || '' }}"`,
	"literal-keys": `
any:
- key: 1h
  operator: Equals
  value: "{{ request.object.spec.period }}"
- key: 3600.5
  operator: NotEquals
  value: "{{ request.object.spec.timeout }}"
- key: [a]
  operator: AnyIn
  value: [a, b]
- key: web
  operator: Equals
  value: "w*"`,
	// The deprecated In and NotIn.
	"in-list": `
any:
- key: "{{ request.object.spec.args }}"
  operator: In
  value: [a, "b*", 1]`,
	"notin-list": `
any:
- key: "{{ request.object.spec.args }}"
  operator: NotIn
  value: [a, kubernetes]`,
	"in-string-and-json": `
all:
- key: "{{ request.object.spec.args }}"
  operator: In
  value: "a*"
- key: "{{ request.object.metadata.name }}"
  operator: NotIn
  value: '["web", "prod-web"]'
- key: "{{ request.operation }}"
  operator: In
  value: [UPDATE, CREATE]`,
	"in-mixed-values": `
any:
- key: "{{ request.object.spec.args }}"
  operator: NotIn
  value: [a, 1, true]
- key: "{{ request.object.spec.args }}"
  operator: In
  value: "not json"`,
	// Maps and lists holding variables, and compared as values.
	"list-key-with-variables": `
any:
- key:
  - "{{ request.object.metadata.labels.app }}"
  operator: NotIn
  value: [busybox, busybox1]
- key: ["{{ request.object.metadata.name }}", x]
  operator: AnyIn
  value: [web, "prod-*"]`,
	"map-key-equals-map": `
any:
- key:
    a: "{{ request.object.spec.a }}"
    b: [x, "{{ request.object.spec.b }}"]
  operator: Equals
  value:
    a: 1
    b: [x, "on"]
- key: "{{ request.object.spec.a }}"
  operator: NotEquals
  value: [a, 1]`,
	// Integers in literal values are int64 to Kyverno: their string form
	// has no exponent; no map or list of them equals a JSON value.
	"integer-literals": `
any:
- key: "{{ request.object.spec.replicas }}"
  operator: AnyIn
  value: [1000000, 1.5e6, "2000000"]
- key: "{{ request.object.spec.args }}"
  operator: Equals
  value: [1, "a"]
- key: "{{ request.object.spec.args }}"
  operator: NotEquals
  value: {a: 1}
- key: "{{ request.object.spec.replicas }}"
  operator: Equals
  value: 1000000`,
	// Kyverno's JMESPath functions that only kyvap's engine evaluates.
	"regex-and-pattern-match": `
any:
- key: "{{ regex_match('^prod-[a-z]+$', request.object.metadata.name) }}"
  operator: Equals
  value: true
- key: "{{ pattern_match('w?b*', request.object.metadata.labels.team) }}"
  operator: Equals
  value: true
- key: "{{ regex_match('^1([.]5)?$', request.object.spec.replicas) }}"
  operator: Equals
  value: true
- key: "{{ pattern_match('16777217', request.object.spec.replicas) }}"
  operator: Equals
  value: false
- key: "{{ pattern_match('1*e*', request.object.spec.replicas) }}"
  operator: Equals
  value: false
- key: "{{ pattern_match('+In*', request.object.spec.replicas) }}"
  operator: Equals
  value: true`,
	"parse-and-decode": `
any:
- key: "{{ parse_json(request.object.metadata.annotations.test).a }}"
  operator: Equals
  value: x
- key: "{{ request.object.metadata.annotations.test | parse_yaml(@).b }}"
  operator: AnyIn
  value: ["2"]
- key: "{{ base64_decode(request.object.metadata.annotations.test) }}"
  operator: Equals
  value: xyz
- key: "{{ path_canonicalize(request.object.metadata.annotations.test) }}"
  operator: Equals
  value: /b/c
- key: "{{ request.object.metadata.name }}"
  operator: AnyIn
  value: ['{"a": "x"}', "a: x\nb: [1, 2]", "eHl6", "eHl", "/a/../b//c/", "{", "a: [", "null", "1"]`,
	"to-string-number-max": `
any:
- key: "{{ max([to_number(regex_replace_all('h.*', request.object.spec.duration, '')), to_number('2400')]) }}"
  operator: GreaterThan
  value: 2400
- key: "{{ to_string(request.object.spec.a) }}"
  operator: AnyIn
  value: ["null", "1", '{"a":"b"}', "true", "x"]
- key: "{{ to_string(request.object.spec.a) }}"
  operator: Equals
  value: '["a"]'
- key: "{{ max(request.object.spec.a) }}"
  operator: Equals
  value: b
- key: "{{ to_number(request.object.spec.a) }}"
  operator: Equals
  value: 1.5
- key: "{{ request.object.metadata.name }}"
  operator: AnyIn
  value: ["2500h", "100h30m", "2400", "1e3h"]`,
	"nested-or": "\nany:\n- key: \"{{ request.object.spec.a || request.object.spec.b || `[]` }}\"\n  operator: AnyIn\n  value: [\"on\"]",
}

// contextCases are condition blocks with the rule's context variables:
// "context" holds the entries, "conditions" the block.
var contextCases = map[string]string{
	"default-and-jmespath-with-variables": `
context:
- name: objName
  variable:
    default: "{{ request.object.metadata.name }}"
    jmesPath: request.object.metadata.generateName
- name: jpExpression
  variable:
    value: name
- name: picked
  variable:
    jmesPath: "{{ jpExpression }}"
    value:
      name: "{{ request.object.metadata.labels.team }}"
- name: fallback
  variable:
    default:
      team: "{{ request.object.metadata.labels.team || 'none' }}"
    jmesPath: request.object.spec.missing
conditions:
  any:
  - key: "{{ objName }}"
    operator: Equals
    value: web
  - key: "{{ picked }}"
    operator: Equals
    value: payments
  - key: "{{ fallback.team }}"
    operator: Equals
    value: none`,
	"map-with-variables-fields": `
context:
- name: obj
  variable:
    value:
      notName: not-example
- name: obj
  variable:
    value:
      name: "{{ request.object.metadata.labels.team }}"
      inner:
        port: "{{ request.object.spec.port }}"
        fixed: [1, "a"]
      value: "{{ obj }}"
conditions:
  any:
  - key: "{{ to_string(obj.notName) }}"
    operator: NotEquals
    value: "null"
  - key: "{{ obj.name }}"
    operator: Equals
    value: payments
  - key: "{{ to_string(obj.value.notName) }}"
    operator: Equals
    value: not-example
  - key: "{{ obj.inner.port }}"
    operator: GreaterThan
    value: 80
  - key: "{{ to_string(obj.inner.fixed) }}"
    operator: Equals
    value: '[1,"a"]'
  - key: "{{ obj.missing || 'none' }}"
    operator: Equals
    value: none`,
	"items": `
context:
- name: fixed
  variable:
    jmesPath: items(@, 'key', 'value')
    value:
      b: 2
      a: 1
- name: labels
  variable:
    jmesPath: items(request.object.metadata.labels, 'k', 'v')
- name: args
  variable:
    jmesPath: items(request.object.spec.args, 'i', 'i')
conditions:
  any:
  - key: "{{ fixed }}"
    operator: NotEquals
    value: [{key: a, value: 1}, {key: b, value: 2}]
  - key: "{{ labels }}"
    operator: Equals
    value: [{k: team, v: web}]
  - key: "{{ length(args) }}"
    operator: GreaterThan
    value: 1
  - key: "{{ args[0].i || 'none' }}"
    operator: Equals
    value: "a"`,
	"map-value-with-variables": `
context:
- name: obj
  variable:
    value:
      name: "{{ request.object.metadata.name }}"
      labels: ["{{ request.object.metadata.labels.team }}", fixed]
- name: objName
  variable:
    jmesPath: name
    value:
      name: "{{ request.object.metadata.name }}"
conditions:
  any:
  - key: "{{ obj.name }}"
    operator: NotEquals
    value: web
  - key: "{{ obj.labels }}"
    operator: AnyIn
    value: ["payments"]
  - key: "{{ objName }}"
    operator: Equals
    value: "prod-*"`,
	"value-variable": `
context:
- name: team
  variable:
    value: "{{ request.object.metadata.labels.team }}"
conditions:
  any:
  - key: "{{ team }}"
    operator: AnyIn
    value: ["payments", "web-*"]`,
	"jmespath-with-default": `
context:
- name: replicas
  variable:
    jmesPath: request.object.spec.replicas
    default: 1
conditions:
  all:
  - key: "{{ replicas }}"
    operator: Equals
    value: "1"`,
	"jmespath-without-default": `
context:
- name: labels
  variable:
    jmesPath: request.object.metadata.labels
conditions:
  any:
  - key: "{{ labels.team || 'none' }}"
    operator: NotEquals
    value: "web"`,
	"value-and-jmespath": `
context:
- name: obj
  variable:
    value:
      name: fixed
      tier: "gold"
    jmesPath: tier
conditions:
  any:
  - key: "{{ obj }}"
    operator: Equals
    value: "gold"`,
	"variable-of-variable": `
context:
- name: meta
  variable:
    jmesPath: request.object.metadata
- name: team
  variable:
    jmesPath: meta.labels.team
    default: ""
conditions:
  any:
  - key: "{{ team }}"
    operator: Equals
    value: ""`,
	"unused-failing-variable": `
context:
- name: missing
  variable:
    jmesPath: request.object.spec.nothing
conditions:
  any:
  - key: "{{ request.operation }}"
    operator: Equals
    value: CREATE
  - key: "{{ missing }}"
    operator: Equals
    value: "x"`,
}

func TestContextVariablesAgreeWithKyverno(t *testing.T) {
	cases := map[string][]byte{}
	for name, c := range contextCases {
		raw, err := yaml.YAMLToJSON([]byte(c))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases[name] = raw
	}
	compareConditions(t, cases, map[string]bool{}, 500)
}

func TestConditionsAgreeWithKyverno(t *testing.T) {
	cases := map[string][]byte{}
	for name, c := range conditionCases {
		raw, err := yaml.YAMLToJSON([]byte(c))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases[name] = raw
	}
	compareConditions(t, cases, map[string]bool{"old-object": true}, 2000)
}

// TestKyvernoCorpusConditionsAgreeWithKyverno runs the comparison on the
// deny conditions and preconditions of the ClusterPolicies and Policies
// in Kyverno's own tests that the compiler takes.
func TestKyvernoCorpusConditionsAgreeWithKyverno(t *testing.T) {
	cases, refused := corpusConditions(t, kyvernoModule(t))
	if len(cases) < 20 {
		t.Fatalf("only %d condition blocks of Kyverno's tests compile (%d refused)", len(cases), refused)
	}
	t.Logf("%d distinct condition blocks of Kyverno's tests compiled, %d refused", len(cases), refused)
	compareConditions(t, cases, nil, 2000)
}

// compareConditions compiles each block, judges requests generated around
// it with the CEL and with Kyverno's condition evaluation, and fails on
// any disagreement, on a failure where Kyverno has none (or none where it
// has one), or on a refusal of a block not in mayRefuse (nil: any may).
func compareConditions(t *testing.T, cases map[string][]byte, mayRefuse map[string]bool, atLeast int) {
	t.Helper()
	oracle := buildOracle(t)
	env := requestEnv(t)
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	compared, disagreements := 0, 0
	var noVerdicts noVerdictCounts
	verdicts := map[string]int{}
	for _, name := range names {
		raw, contextEntries := splitContext(cases[name])
		scope := classic.RequestScope
		if len(contextEntries) > 0 {
			variables, fl := classic.ParseContext(contextEntries)
			if fl != nil {
				if mayRefuse != nil && !mayRefuse[name] {
					t.Errorf("%s: context refused: %s", name, fl.Message)
				}
				continue
			}
			scope.Variables = variables
		}
		predicate, fl := classic.Conditions(raw, scope)
		if fl != nil {
			if mayRefuse != nil && !mayRefuse[name] {
				t.Errorf("%s: refused: %s: %s", name, fl.Reason, fl.Message)
			}
			continue
		}
		holds, fails := compile(t, env, predicate.Holds), compile(t, env, predicate.Fails)
		cpu, panics, invalid := cpuDependence(t, env, predicate.Holds), noVerdict(t, env, predicate.Holds, classic.KyvernoPanics), noVerdict(t, env, predicate.Holds, classic.InvalidLabelValue)
		requests := requestsAround(cases[name])
		kyverno := askConditions(t, oracle, raw, contextEntries, requests)
		for i, r := range requests {
			compared++
			verdicts[kyverno[i]]++
			got := evaluateRequest(holds, r)
			failsGot := evaluateRequest(fails, r)
			if skip, disagree := noVerdicts.skip(t, name, r, kyverno[i], got, cpu, panics, invalid); skip {
				if disagree {
					disagreements++
				}
				continue
			}
			if got != kyverno[i] || failsGot != fmt.Sprint(kyverno[i] == "error") {
				disagreements++
				if disagreements <= 20 {
					data, _ := json.Marshal(r)
					t.Errorf("%s: %s: Kyverno says %s, kyvap's CEL %s (fails: %s)", name, data, kyverno[i], got, failsGot)
				}
			}
		}
	}
	t.Logf("%d condition blocks, %d requests compared (Kyverno: %v), %d disagreements; %s", len(names), compared, verdicts, disagreements, noVerdicts)
	if compared < atLeast {
		t.Errorf("only %d requests compared", compared)
	}
}

// requestEnv is the API server's base CEL environment with the request's
// variables.
func requestEnv(t testing.TB) *cel.Env {
	t.Helper()
	set, err := vap.BaseEnvSet(vap.NewestCompatibilityVersion).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	// Kyverno's JMESPath functions that kyvap's engine evaluates: a rule
	// calling them is never a VAP, and its CEL compiles with them.
	env, err = env.Extend(cellib.EnvOptions([]string{"jmespath"})...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// admissionRequest is what the oracle reads and the CEL sees.
type admissionRequest struct {
	Operation string                    `json:"operation"`
	Name      string                    `json:"name,omitempty"`
	Namespace string                    `json:"namespace,omitempty"`
	UserInfo  authenticationv1.UserInfo `json:"userInfo"`
	Object    any                       `json:"object,omitempty"`
	OldObject any                       `json:"oldObject,omitempty"`
}

// requestVariable is the request's fields other than the objects, as JSON
// writes them (empty ones left out), which the API server's request
// variable holds too.
func requestVariable(r admissionRequest) map[string]any {
	data, _ := json.Marshal(admissionv1.AdmissionRequest{
		Operation: admissionv1.Operation(r.Operation), Name: r.Name, Namespace: r.Namespace, UserInfo: r.UserInfo,
	})
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	delete(out, "object")
	delete(out, "oldObject")
	return numbers(out).(map[string]any)
}

// evaluateRequest is true, false or error.
// noVerdictPrograms are a compiled expression with one of the failures
// where Kyverno has no verdict (classic.CPUDependent: it depends on the
// CPU; classic.KyvernoPanics: Kyverno panics) made a failure of its own,
// a division by zero, that a request's evaluation error names.
type noVerdictPrograms struct{ marked cel.Program }

func noVerdict(t *testing.T, env *cel.Env, expr, failure string) noVerdictPrograms {
	t.Helper()
	if !strings.Contains(expr, failure) {
		return noVerdictPrograms{}
	}
	const divisionByZero = "dyn(1 / (size(request.operation) - size(request.operation)))"
	return noVerdictPrograms{marked: compile(t, env, strings.ReplaceAll(expr, failure, divisionByZero))}
}

// noVerdictCounts counts the requests where Kyverno has no verdict, and
// those no cluster holds (a label value the API server rejects, which
// kyvap refuses where Kyverno pastes it into an expression).
type noVerdictCounts struct{ cpuDependent, panics, invalidLabels int }

func (n noVerdictCounts) String() string {
	return fmt.Sprintf("%d requests where Kyverno's verdict depends on its CPU, %d where it panics (kyvap fails them), %d with a label value no cluster holds pasted into an expression (kyvap refuses them)", n.cpuDependent, n.panics, n.invalidLabels)
}

// skip says whether a request is one where Kyverno has no verdict: it
// panics (kyvap's CEL must fail there, by classic.KyvernoPanics: else a
// disagreement, reported), or its verdict is its CPU's (the oracle's,
// amd64's) and kyvap's CEL fails by classic.CPUDependent, or it holds a
// label value the API server rejects and kyvap's CEL fails by
// classic.InvalidLabelValue.
func (n *noVerdictCounts) skip(t *testing.T, name string, r admissionRequest, kyverno, got string, cpu, panics, invalid noVerdictPrograms) (skip, disagree bool) {
	t.Helper()
	switch {
	case kyverno == "panic":
		n.panics++
		if got != "error" || !panics.reached(r) {
			data, _ := json.Marshal(r)
			t.Errorf("%s: %s: Kyverno panics, kyvap's CEL %s", name, data, got)
			return true, true
		}
		return true, false
	case got == "error" && cpu.reached(r):
		n.cpuDependent++
		return true, false
	case got == "error" && invalid.reached(r):
		n.invalidLabels++
		return true, false
	}
	return false, false
}

// cpuDependence is noVerdict of classic.CPUDependent.
func cpuDependence(t *testing.T, env *cel.Env, expr string) noVerdictPrograms {
	return noVerdict(t, env, expr, classic.CPUDependent)
}

// reached says whether the request's evaluation fails with the failure:
// for classic.CPUDependent, Kyverno's verdict is its CPU's there (the
// oracle's, amd64's), and kyvap's CEL fails.
func (p noVerdictPrograms) reached(r admissionRequest) bool {
	if p.marked == nil {
		return false
	}
	object, oldObject := roundTrip(r.Object), roundTrip(r.OldObject)
	_, _, err := p.marked.Eval(map[string]any{"object": object, "oldObject": oldObject, "request": requestVariable(r)})
	return err != nil && strings.Contains(err.Error(), "division by zero")
}

func evaluateRequest(program cel.Program, r admissionRequest) string {
	// As the API server reads them: integers as int64.
	object, oldObject := roundTrip(r.Object), roundTrip(r.OldObject)
	out, _, err := program.Eval(map[string]any{"object": object, "oldObject": oldObject, "request": requestVariable(r)})
	if err != nil {
		return "error"
	}
	b, ok := out.Value().(bool)
	if !ok {
		return "error"
	}
	return fmt.Sprint(b)
}

func roundTrip(v any) any {
	if v == nil {
		return nil
	}
	data, _ := json.Marshal(v)
	var out any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	_ = dec.Decode(&out)
	return numbers(out)
}

// numbers converts json.Number to int64 where integral, else float64.
func numbers(v any) any {
	switch typed := v.(type) {
	case map[string]any:
		for k, x := range typed {
			typed[k] = numbers(x)
		}
	case []any:
		for i, x := range typed {
			typed[i] = numbers(x)
		}
	case json.Number:
		if i, err := typed.Int64(); err == nil {
			return i
		}
		f, _ := typed.Float64()
		return f
	}
	return v
}

// splitContext separates a case holding context entries
// ({"context", "conditions"}) from a plain condition block.
func splitContext(raw []byte) ([]byte, [][]byte) {
	var withContext struct {
		Context    []json.RawMessage `json:"context"`
		Conditions json.RawMessage   `json:"conditions"`
	}
	if json.Unmarshal(raw, &withContext) != nil || withContext.Context == nil || withContext.Conditions == nil {
		return raw, nil
	}
	entries := make([][]byte, len(withContext.Context))
	for i, e := range withContext.Context {
		entries[i] = e
	}
	return withContext.Conditions, entries
}

func askConditions(t *testing.T, oracle string, conditions []byte, contextEntries [][]byte, requests []admissionRequest) []string {
	t.Helper()
	entries := make([]json.RawMessage, len(contextEntries))
	for i, e := range contextEntries {
		entries[i] = e
	}
	return runOracle(t, oracle, map[string]any{"conditions": json.RawMessage(conditions), "context": entries, "requests": requests}, len(requests))
}

// requestPath finds the object paths a condition block reads.
var requestPath = regexp.MustCompile(`request\.(object|oldObject)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)`)

// requestsAround generates admission requests around a condition block:
// for each path it reads, the path missing at each level, null at each
// level, and set to every value of a catalogue (the block's own values,
// values near them, and values of every JSON type), on CREATE, UPDATE and
// DELETE.
func requestsAround(raw []byte) []admissionRequest {
	var paths [][]string
	seen := map[string]bool{}
	for _, m := range requestPath.FindAllStringSubmatch(string(raw), -1) {
		if seen[m[2]] {
			continue
		}
		seen[m[2]] = true
		paths = append(paths, strings.Split(strings.TrimPrefix(m[2], "."), "."))
	}
	values := catalogue(raw)
	var objects []any
	objects = append(objects, map[string]any{}, map[string]any{"metadata": map[string]any{}})
	for _, path := range paths {
		for level := 1; level <= len(path); level++ {
			objects = append(objects, build(path[:level], nil, false), build(path[:level-1], nil, true))
		}
		for _, v := range values {
			objects = append(objects, build(path, v, true))
		}
	}
	// Every path set together, to each value: conditions on several
	// paths see them agree.
	if len(paths) > 1 {
		for _, v := range values {
			o := map[string]any{}
			for _, path := range paths {
				merge(o, build(path, v, true).(map[string]any))
			}
			objects = append(objects, o)
		}
	}
	// The first two paths set to every pair of a few values that
	// Kyverno's equality reads across types (durations, quantities,
	// numbers as strings, wildcards): a condition comparing two fields
	// sees them differ and agree.
	if len(paths) > 1 {
		pairs := []any{"1h", "60m", "3600", "3600s", int64(3600), 3600.5, "1Gi", "1024Mi", "w*", "web", "x?", "0", "-0", int64(0), 1e19, "1e19", "0x1p4", "16", true, "true", []any{"a"}, map[string]any{"a": "b"}}
		for _, a := range pairs {
			for _, b := range pairs {
				o := map[string]any{}
				merge(o, build(paths[0], a, true).(map[string]any))
				merge(o, build(paths[1], b, true).(map[string]any))
				objects = append(objects, o)
			}
		}
	}
	objects = slice(objects, len(raw))
	var requests []admissionRequest
	users := []authenticationv1.UserInfo{{}, {Username: "alice", Groups: []string{"system:masters", "dev"}}, {Username: "system:serviceaccount:ns:sa"}}
	for i, o := range objects {
		requests = append(requests, admissionRequest{Operation: "CREATE", Object: o})
		if i%2 == 0 {
			requests = append(requests, admissionRequest{Operation: "CREATE", Object: o, Name: "web", Namespace: "default", UserInfo: users[1+i/2%2]})
		}
		old := objects[(i+1)%len(objects)]
		requests = append(requests, admissionRequest{Operation: "UPDATE", Object: o, OldObject: old})
		if i%3 == 0 {
			requests = append(requests, admissionRequest{Operation: "DELETE", OldObject: o})
		}
	}
	return requests
}

// fullDifferential says whether the differential runs its full set
// (make differential: KYVAP_DIFFERENTIAL=full) or, in make test, a
// bounded slice of it.
var fullDifferential = os.Getenv("KYVAP_DIFFERENTIAL") == "full"

// slice is the objects generated around a block, all of them in the full
// run, else the bounded slice make test runs: the first objects (missing
// and null paths) and every third of the others, from an offset that
// differs between blocks (seed), so that every value is planted in some
// block.
func slice[T any](objects []T, seed int) []T {
	const head, stride = 8, 3
	if fullDifferential || len(objects) <= head {
		return objects
	}
	out := append([]T(nil), objects[:head]...)
	for i := head + seed%stride; i < len(objects); i += stride {
		out = append(out, objects[i])
	}
	return out
}

// build is an object with path set to v (set) or with the last key of
// path set to null (!set and v nil).
func build(path []string, v any, set bool) any {
	if len(path) == 0 {
		if !set {
			return map[string]any{}
		}
		return v
	}
	leaf := v
	for i := len(path) - 1; i >= 0; i-- {
		leaf = map[string]any{path[i]: leaf}
	}
	if !set {
		// The path present up to its last key, which is null.
		return leaf
	}
	return leaf
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if d, ok := dst[k].(map[string]any); ok {
			if s, ok := v.(map[string]any); ok {
				merge(d, s)
				continue
			}
		}
		dst[k] = v
	}
}

// catalogue is the values planted on the paths: the block's literal
// values, each with its wildcards filled in and near it, and values of
// every JSON type that Kyverno's operators read differently.
func catalogue(raw []byte) []any {
	var block any
	_ = json.Unmarshal(raw, &block)
	literals := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch typed := v.(type) {
		case map[string]any:
			for k, x := range typed {
				if k != "key" {
					walk(x)
				}
			}
		case []any:
			for _, x := range typed {
				walk(x)
			}
		case string:
			if !strings.Contains(typed, "{{") {
				literals[typed] = true
			}
		}
	}
	walk(block)
	values := []any{
		"", "a", "*", "x?", "1Gi", "1024Mi", "0", "1", "1.0", "1.5", "true", "false", "<nil>", "map[]", "[]", "CREATE",
		int64(0), int64(1), 1.5, int64(80), int64(8080), int64(1234567), true, false,
		[]any{}, []any{"a"}, []any{"kubernetes"}, []any{int64(1), "x"}, []any{nil}, []any{map[string]any{}},
		map[string]any{}, map[string]any{"a": "b"},
		// Lists of containers, and pod specs holding them.
		[]any{map[string]any{"name": "app", "image": "nginx:1.27"}},
		[]any{map[string]any{"name": "x", "image": "busybox:latest"}, map[string]any{"name": "app"}, nil},
		[]any{[]any{map[string]any{"image": "nested:latest"}}, "scalar"},
		map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27"}}, "initContainers": []any{map[string]any{"image": "busybox:latest"}}},
		map[string]any{"containers": []any{map[string]any{"image": "nginx:1"}}},
		map[string]any{"containers": "not-a-list", "initContainers": nil},
		map[string]any{"labels": map[string]any{"team": "web"}},
		[]any{map[string]any{"name": "cache", "emptyDir": map[string]any{}}, map[string]any{"name": "host", "hostPath": map[string]any{"path": "/"}}},
		[]any{map[string]any{"name": "app", "image": "nginx:latest", "port": int64(8080)}, map[string]any{"name": "side", "securityContext": map[string]any{}, "port": 80}},
		"prod-web", "prod-x-tmp", []any{"kubernetes", "x"},
		// JSON arrays of strings (and texts that are not) as a string
		// value, which the membership operators read.
		[]any{"ls", "jcmd 1"}, `["x", "a"]`, ` [ "payments" ,"web-a"] `, `null`, `[null]`, `["\u0061", "p\u0061yments"]`, `["a", 1]`, `["x,", ","]`, `["a"`, `{"a": "b"}`, `"a"`,
		// Durations, quantities, floats and versions, read in that order
		// by the numeric operators; floats that time.Duration wraps or
		// cannot hold.
		int64(16777217), 16777216.0, 0.1, "web", "wxb-1",
		"1000000", int64(1000000), 1.5e6, "1.5e+06", []any{int64(1), "a"}, map[string]any{"a": int64(1)},
		"8h", "7h59m59.999999999s", "8h0m0.000000001s", "28800", "28800.5", "-1s", "0s", "-0", "1ms", "1h", "60m", "3600s",
		"500m", "1G", "1e3", "1e19", "9223372037", "-9300000000", "1e300", "1e400", "Inf", "-inf", "NaN", "0x1p4", "1_000",
		// Around the least decimal ParseFloat rounds to infinity.
		"1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "-1.8e308", "0.00017976931348623158079372897140530341507993413271003782693617377898044496829276475094664901797758720709633028641669288791094655554785194040263065748867150582068190890200070838367627385484581771153176447573027006985557136695962284291481986083493647529271907416844436551070434271155969950809304288017790417449779e312",
		"179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791",
		"1.2.3", "1.2.3-rc.1", "1.2.4", "01.2.3", "v1.2.3", "1.2",
		// Doubles JSON writes with and without an exponent.
		1234567.5, 1.5e-5, 1e-7, 4e-6, 123456789012.25, -2.5e20, 1e21, int64(9007199254740993),
		28800.0, 28800.5, int64(3600), 3600.5, 9.3e9, -9.3e9, 1e19, -1e19, 1e300, int64(9223372036854775807),
	}
	keys := make([]string, 0, len(literals))
	for l := range literals {
		keys = append(keys, l)
	}
	sort.Strings(keys)
	for _, l := range keys {
		filled := strings.NewReplacer("*", "x", "?", "y").Replace(l)
		values = append(values, l, filled, l+"-", "-"+l, strings.ToUpper(l), []any{l}, []any{filled, "zzz"}, []any{l, l})
	}
	return values
}

// corpusConditions reads the distinct deny conditions and preconditions
// of every kyverno.io policy under dir/test that the compiler takes.
func corpusConditions(t *testing.T, dir string) (map[string][]byte, int) {
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
						Name          string
						Context       []json.RawMessage
						Preconditions json.RawMessage
						Validate      struct {
							Deny struct {
								Conditions json.RawMessage
							}
						}
					}
				}
			}
			if yaml.Unmarshal([]byte(doc), &p) != nil || (p.Kind != "ClusterPolicy" && p.Kind != "Policy") {
				continue
			}
			for _, r := range p.Spec.Rules {
				for i, raw := range []json.RawMessage{r.Preconditions, r.Validate.Deny.Conditions} {
					if len(raw) == 0 || string(raw) == "null" {
						continue
					}
					scope := classic.RequestScope
					if len(r.Context) > 0 {
						entries := make([][]byte, len(r.Context))
						for j := range r.Context {
							entries[j] = r.Context[j]
						}
						variables, fl := classic.ParseContext(entries)
						if fl != nil {
							refused++
							continue
						}
						scope.Variables = variables
						raw, _ = json.Marshal(map[string]any{"context": r.Context, "conditions": raw})
					}
					if seen[string(raw)] {
						continue
					}
					seen[string(raw)] = true
					conditions, _ := splitContext(raw)
					if _, fl := classic.Conditions(conditions, scope); fl != nil {
						refused++
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
