// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

// policyCases are whole ClusterPolicies of classic rules on Pods, as the
// library writes them: foreach with deny, patterns and preconditions,
// context variables and rule preconditions, allowExistingViolations.
var policyCases = map[string]string{
	"foreach-deny": `
spec:
  validationFailureAction: Enforce
  rules:
  - name: no-latest
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "container {{ request.object.metadata.name }} uses latest"
      foreach:
      - list: request.object.spec.containers
        deny:
          conditions:
            any:
            - key: "{{ element.image }}"
              operator: Equals
              value: "*:latest"`,
	"foreach-all-containers-pattern": `
spec:
  validationFailureAction: Audit
  rules:
  - name: privileged
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.[initContainers, containers][]
        pattern:
          =(securityContext):
            =(privileged): "false"`,
	"foreach-preconditions-index": `
spec:
  validationFailureAction: Enforce
  rules:
  - name: first-named-app
    match: {any: [{resources: {kinds: [Pod]}}]}
    preconditions:
      all:
      - key: "{{ request.object.metadata.labels.team || '' }}"
        operator: NotEquals
        value: ""
    validate:
      foreach:
      - list: request.object.spec.containers
        preconditions:
          any:
          - key: "{{ elementIndex }}"
            operator: Equals
            value: 0
        deny:
          conditions:
            all:
            - key: "{{ element.name }}"
              operator: NotEquals
              value: app
      - list: request.object.spec.volumes
        elementScope: true
        pattern:
          X(hostPath): "null"`,
	"context-and-deny": `
spec:
  validationFailureAction: Audit
  rules:
  - name: team
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: team
      variable:
        jmesPath: request.object.metadata.labels.team
        default: none
    validate:
      deny:
        conditions:
          any:
          - key: "{{ team }}"
            operator: AnyIn
            value: [legacy, "sandbox-*"]`,
	"conditional-anchors": `
spec:
  validationFailureAction: Enforce
  rules:
  - name: probes
    match: {any: [{resources: {kinds: [Pod]}}]}
    preconditions:
      all:
      - key: "{{ request.object.metadata.labels.tier || '' }}"
        operator: NotEquals
        value: batch
    validate:
      pattern:
        metadata:
          (labels):
            app: "?*"
        spec:
          containers:
          - (name): "web-*"
            =(imagePullPolicy): Always
            readinessProbe:
              periodSeconds: "*"`,
	"pattern-existing-violations": `
spec:
  validationFailureAction: Enforce
  rules:
  - name: probes
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      pattern:
        spec:
          containers:
          - (name): "web-*"
            readinessProbe:
              periodSeconds: "*"`,
	"foreach-anchors": `
spec:
  validationFailureAction: Audit
  rules:
  - name: latest-pull-always
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers
        pattern:
          (name): "web-*"
          <(image): "*:latest"
          imagePullPolicy: Always`,
	"global-anypattern": `
spec:
  validationFailureAction: Audit
  rules:
  - name: public
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      anyPattern:
      - metadata:
          annotations:
            security-groups: "?*"
        spec:
          <(hostNetwork): true
      - spec:
          <(hostNetwork): true
          dnsPolicy: "ClusterFirstWithHostNet"`,
	"scalar-list-pattern": `
spec:
  validationFailureAction: Enforce
  rules:
  - name: args
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers[].args[]
        pattern:
          spec:
            containers:
            - name: "?*"`,
}

// TestPoliciesAgreeWithKyverno runs whole classic rules two ways on
// admission requests generated around them: Kyverno's engine (its
// admission path) and kyvap's (the rules compiled, on kyvap's engine, the
// VAPs' evaluator); each rule's status must agree, no result included.
func TestPoliciesAgreeWithKyverno(t *testing.T) {
	oracle := buildOracle(t)
	names := make([]string, 0, len(policyCases))
	for name := range policyCases {
		names = append(names, name)
	}
	sort.Strings(names)
	compared, disagreements := 0, 0
	statuses := map[string]int{}
	for _, name := range names {
		data, err := yaml.YAMLToJSON([]byte("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: " + name + "\n  annotations:\n    pod-policies.kyverno.io/autogen-controllers: none\n" + policyCases[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var policy kyvernov1.ClusterPolicy
		if err := json.Unmarshal(data, &policy); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		eng := kyvapEngine(t, &policy)
		requests := podRequests(append(requestsAround(data), patternRequests(&policy)...))
		kyverno := askPolicy(t, oracle, data, requests)
		for i, r := range requests {
			compared++
			got := kyvapStatuses(t, eng, r)
			for rule, status := range kyverno[i] {
				statuses[status]++
				_ = rule
			}
			if fmt.Sprint(got) != fmt.Sprint(kyverno[i]) {
				disagreements++
				if disagreements <= 20 || os.Getenv("KYVAP_ALL_DISAGREEMENTS") != "" {
					obj, _ := json.Marshal(r.Object)
					old, _ := json.Marshal(r.OldObject)
					t.Errorf("%s: %s %s (old %s): Kyverno says %v, kyvap %v", name, r.Operation, obj, old, kyverno[i], got)
				}
			}
		}
	}
	t.Logf("%d policies, %d requests compared (Kyverno's statuses: %v), %d disagreements", len(names), compared, statuses, disagreements)
	if compared < 500 {
		t.Errorf("only %d requests compared", compared)
	}
}

// patternRequests are requests around the patterns of the policy's rules
// (each of anyPattern's): each resource around a pattern created, updated
// from one that follows the pattern and to it, and deleted.
func patternRequests(policy *kyvernov1.ClusterPolicy) []admissionRequest {
	var out []admissionRequest
	for _, r := range policy.Spec.Rules {
		var patterns []any
		if v := r.Validation; v != nil && v.RawPattern != nil {
			var p any
			_ = json.Unmarshal(v.RawPattern.Raw, &p)
			patterns = append(patterns, p)
		}
		if v := r.Validation; v != nil && v.RawAnyPattern != nil {
			var ps []any
			_ = json.Unmarshal(v.RawAnyPattern.Raw, &ps)
			patterns = append(patterns, ps...)
		}
		for _, p := range patterns {
			follows := witness(p)
			for _, raw := range around(p) {
				var object any
				_ = json.Unmarshal(raw, &object)
				out = append(out,
					admissionRequest{Operation: "CREATE", Object: object},
					admissionRequest{Operation: "UPDATE", Object: object, OldObject: follows},
					admissionRequest{Operation: "UPDATE", Object: object, OldObject: object},
					admissionRequest{Operation: "DELETE", OldObject: object})
			}
		}
		// A foreach's element patterns, on lists at a plain path of the
		// object: each element around the pattern, alone and beside one
		// that follows it.
		if v := r.Validation; v != nil {
			for _, raw := range v.ForEachValidation {
				var entry struct {
					List    string `json:"list"`
					Pattern any    `json:"pattern"`
				}
				_ = json.Unmarshal(raw.Raw, &entry)
				m := requestPath.FindStringSubmatch(entry.List)
				if entry.Pattern == nil || m == nil || m[0] != entry.List || m[1] != "object" {
					continue
				}
				path := strings.Split(strings.TrimPrefix(m[2], "."), ".")
				follows := witness(entry.Pattern)
				for _, raw := range around(entry.Pattern) {
					var element any
					_ = json.Unmarshal(raw, &element)
					for _, list := range [][]any{{element}, {follows, element}, {element, follows}} {
						out = append(out, admissionRequest{Operation: "CREATE", Object: build(path, list, true)})
					}
				}
			}
		}
	}
	return out
}

// kyvapEngine is kyvap's engine with every rule of the policy, compiled.
func kyvapEngine(t *testing.T, policy *kyvernov1.ClusterPolicy) *engine.Engine {
	t.Helper()
	plan, err := translate.Translate(clusterpolicy.InputFor(policy, nil), kyverno.NewStaticResolver(), translate.Options{})
	if err != nil {
		t.Fatalf("%s: %v", policy.Name, err)
	}
	var rules []translate.FallbackRule
	for _, rr := range plan.Rules {
		if rr.Fallback == nil {
			t.Fatalf("%s/%s: not compiled: %+v", policy.Name, rr.Rule, rr)
		}
		if rr.Fallback.NotEnforced != "" {
			t.Fatalf("%s/%s: not compiled: %s: %s", policy.Name, rr.Rule, rr.Fallback.Reason, rr.Fallback.NotEnforced)
		}
		rules = append(rules, *rr.Fallback)
	}
	e := engine.New()
	e.SetFallbackRules(policy.Name, rules)
	return e
}

// kyvapStatuses are kyvap's engine's statuses of each rule on r.
func kyvapStatuses(t *testing.T, e *engine.Engine, r admissionRequest) map[string]string {
	t.Helper()
	req := admissionV1(r)
	outcomes, err := e.Evaluate(context.Background(), engine.Request{Admission: &req})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range outcomes {
		out[o.Rule] = string(o.Result)
	}
	return out
}

// podRequests makes each generated request one about a Pod: the objects
// get the Pod's kind and name (maps only; others are left out).
func podRequests(in []admissionRequest) []admissionRequest {
	var out []admissionRequest
	for _, r := range in {
		ok := true
		for _, o := range []*any{&r.Object, &r.OldObject} {
			if *o == nil {
				continue
			}
			m, isMap := (*o).(map[string]any)
			if !isMap {
				ok = false
				continue
			}
			copied := map[string]any{}
			for k, v := range m {
				copied[k] = v
			}
			meta, _ := copied["metadata"].(map[string]any)
			metaCopy := map[string]any{}
			for k, v := range meta {
				metaCopy[k] = v
			}
			metaCopy["name"], metaCopy["namespace"] = "pod", "default"
			copied["apiVersion"], copied["kind"], copied["metadata"] = "v1", "Pod", metaCopy
			*o = copied
		}
		if ok {
			r.Name, r.Namespace = "pod", "default"
			out = append(out, r)
		}
	}
	return out
}

// rawExtension is v as an admission request's object (none for nil).
func rawExtension(v any) runtime.RawExtension {
	if v == nil {
		return runtime.RawExtension{}
	}
	data, _ := json.Marshal(v)
	return runtime.RawExtension{Raw: data}
}

// admissionV1 is the admission request of a generated one, for a Pod.
func admissionV1(r admissionRequest) admissionv1.AdmissionRequest {
	raw := rawExtension
	return admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Operation: admissionv1.Operation(r.Operation),
		Name:      r.Name,
		Namespace: r.Namespace,
		UserInfo:  authenticationv1.UserInfo{Username: r.UserInfo.Username, Groups: r.UserInfo.Groups},
		Object:    raw(r.Object),
		OldObject: raw(r.OldObject),
	}
}

func askPolicy(t *testing.T, oracle string, policy []byte, requests []admissionRequest) []map[string]string {
	t.Helper()
	type oracleRequest struct {
		admissionRequest
		Kind     metav1.GroupVersionKind     `json:"kind"`
		Resource metav1.GroupVersionResource `json:"resource"`
	}
	rs := make([]oracleRequest, len(requests))
	for i, r := range requests {
		rs[i] = oracleRequest{admissionRequest: r, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}}
	}
	lines := runOracle(t, oracle, map[string]any{"policy": json.RawMessage(policy), "requests": rs}, len(requests))
	verdicts := make([]map[string]string, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &verdicts[i]); err != nil {
			t.Fatalf("the oracle: %q: %v", l, err)
		}
	}
	return verdicts
}
