// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest/vapsim"
	"github.com/kyvap/kyvap/translate"
)

// exceptionsPolicy has two Enforce podSecurity rules with exclusions of
// their own, without autogen. allowExistingViolations judges the old
// object of an UPDATE for baseline (whose exceptions match by labels, which
// an UPDATE changes); restricted, with ten excepted controls, sets it to
// false: with it, the old object's verdict would double a precondition
// past the 100,000 code points the API server parses (kyvap refuses such a
// rule by its size).
const exceptionsPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: pss-exceptions
  annotations:
    pod-policies.kyverno.io/autogen-controllers: none
spec:
  background: false
  rules:
  - name: baseline
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Enforce
      podSecurity:
        level: baseline
        version: latest
        exclude:
        - controlName: HostPath Volumes
          restrictedField: spec.volumes[*].hostPath
          values: ["/data"]
  - name: restricted
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Enforce
      allowExistingViolations: false
      podSecurity:
        level: restricted
        version: latest
        exclude:
        - controlName: Seccomp
`

// podSecurityExceptions name the rules, matching by namespace, name,
// labels (which an UPDATE can change, so the old object can match where
// the new one does not) and a condition on the object: with podSecurity
// controls of pod-level and container-level controls (several per
// exception, and several exceptions on one pod), and without (a skip).
const podSecurityExceptions = `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: staging, namespace: kyverno}
spec:
  exceptions: [{policyName: pss-exceptions, ruleNames: [baseline, restricted]}]
  match: {any: [{resources: {namespaces: [staging]}}]}
  podSecurity:
  - {controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/log*"]}
  - {controlName: Privileged Containers, images: ["app-1*"]}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: labelled, namespace: kyverno}
spec:
  exceptions: [{policyName: pss-exceptions, ruleNames: ["*"]}]
  match: {any: [{resources: {kinds: [Pod], selector: {matchLabels: {exempt: "yes"}}}}]}
  podSecurity:
  - {controlName: Host Namespaces}
  - {controlName: Capabilities, images: ["*"]}
  - {controlName: Running as Non-root user, images: ["app-*"]}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: infra, namespace: kyverno}
spec:
  exceptions: [{policyName: pss-exceptions, ruleNames: [restricted]}]
  match: {any: [{resources: {kinds: [Pod]}}]}
  conditions:
    any:
    - {key: "{{ request.object.metadata.labels.team || '' }}", operator: Equals, value: infra}
  podSecurity:
  - {controlName: Host Ports, images: ["*"], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["80"]}
  - {controlName: Running as Non-root, images: ["app-2*"]}
  - {controlName: Volume Types}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: web, namespace: kyverno}
spec:
  exceptions: [{policyName: pss-exceptions, ruleNames: [restricted]}]
  match: {any: [{resources: {kinds: [Pod], names: ["web-*"]}}]}
  podSecurity:
  - {controlName: Privilege Escalation, images: ["*"]}
  - {controlName: Sysctls, restrictedField: "spec.securityContext.sysctls[*].name", values: ["kernel.*"]}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: skipped, namespace: kyverno}
spec:
  exceptions: [{policyName: pss-exceptions, ruleNames: [baseline]}]
  match: {any: [{resources: {kinds: [Pod], selector: {matchLabels: {skip: "yes"}}}}]}
`

// exceptionRequest is an admission request about a Pod, as the oracle
// reads it.
type exceptionRequest struct {
	Kind      metav1.GroupVersionKind     `json:"kind"`
	Resource  metav1.GroupVersionResource `json:"resource"`
	Operation string                      `json:"operation"`
	Name      string                      `json:"name"`
	Namespace string                      `json:"namespace"`
	Object    map[string]any              `json:"object,omitempty"`
	OldObject map[string]any              `json:"oldObject,omitempty"`
}

// TestExceptionsAgreeWithKyverno judges admission requests about the
// exclusion pods, in two namespaces, under names and labels the
// exceptions select and miss: CREATEs; UPDATEs whose old object is the
// same pod (an existing violation), the pod with other labels (an
// exception matching the old object only, or the new one only), and
// another pod; DELETEs. Kyverno's engine with the exceptions, and kyvap's
// engine with the rules compiled with them, must report the same status
// for each rule.
func TestExceptionsAgreeWithKyverno(t *testing.T) {
	var policy kyvernov1.ClusterPolicy
	policyJSON, err := yaml.YAMLToJSON([]byte(exceptionsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(policyJSON, &policy); err != nil {
		t.Fatal(err)
	}
	var exceptions []kyvernov2.PolicyException
	var exceptionsJSON []json.RawMessage
	for _, doc := range strings.Split(podSecurityExceptions, "\n---\n") {
		data, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var ex kyvernov2.PolicyException
		if err := json.Unmarshal(data, &ex); err != nil {
			t.Fatal(err)
		}
		exceptions = append(exceptions, ex)
		exceptionsJSON = append(exceptionsJSON, data)
	}
	plan, err := translate.Translate(clusterpolicy.InputFor(&policy, exceptions), kyverno.NewStaticResolver(), translate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rules []translate.FallbackRule
	for _, rr := range plan.Rules {
		if rr.Fallback == nil || rr.Fallback.NotEnforced != "" {
			t.Fatalf("rule %s not compiled: %+v", rr.Rule, rr)
		}
		rules = append(rules, *rr.Fallback)
	}
	if len(rules) != 2 {
		t.Fatalf("%d rules compiled, want 2", len(rules))
	}
	eng := engine.New()
	eng.SetFallbackRules(policy.Name, rules)
	vaps := exceptionVAPs(t, &policy, exceptions)

	requests := exceptionRequests()
	oracle := buildOracle(t)
	want := askKyvernoWithExceptions(t, oracle, policyJSON, exceptionsJSON, requests)
	statuses := map[string]int{}
	denials := map[bool]int{}
	disagreements := 0
	for i, r := range requests {
		got := kyvapRuleStatuses(t, eng, r)
		for _, status := range want[i] {
			statuses[status]++
		}
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			disagreements++
			if disagreements <= 20 {
				text, _ := json.Marshal(r)
				t.Errorf("Kyverno %v, kyvap's engine %v: %s", want[i], got, text)
			}
		}
		// The rules are Enforce: Kyverno denies where one fails.
		kyvernoDenies := false
		for _, status := range want[i] {
			kyvernoDenies = kyvernoDenies || status == "fail"
		}
		denials[kyvernoDenies]++
		if vapDenies := vapsDeny(t, vaps, r); vapDenies != kyvernoDenies {
			disagreements++
			if disagreements <= 20 {
				text, _ := json.Marshal(r)
				t.Errorf("Kyverno %v (denied=%t), kyvap's VAPs denied=%t: %s", want[i], kyvernoDenies, vapDenies, text)
			}
		}
	}
	t.Logf("%d requests, %d rule statuses compared with kyvap's engine (Kyverno's: %v), %d admissions with kyvap's VAPs (%d denied): %d disagreements", len(requests), statuses["pass"]+statuses["fail"]+statuses["skip"]+statuses["error"], statuses, len(requests), denials[true], disagreements)
	// Each status the exceptions decide must occur, or the comparison
	// proves nothing about them.
	for _, status := range []string{"pass", "fail", "skip"} {
		if statuses[status] < 30 {
			t.Errorf("only %d %s statuses", statuses[status], status)
		}
	}
	for _, denied := range []bool{true, false} {
		if denials[denied] < 30 {
			t.Errorf("only %d requests with denied=%t", denials[denied], denied)
		}
	}
}

// exceptionRequests are the requests: each sliceEvery-th exclusion pod
// (every one with KYVAP_DIFFERENTIAL=full), with a namespace, name and
// labels chosen by its index.
func exceptionRequests() []exceptionRequest {
	pods := exclusionPods()
	labelSets := []map[string]any{{}, {"exempt": "yes"}, {"team": "infra"}, {"skip": "yes"}, {"exempt": "yes", "team": "infra"}}
	placed := func(pod map[string]any, i int, labels map[string]any) map[string]any {
		out := deepCopy(pod)
		metadata := out["metadata"].(map[string]any)
		namespace := []string{"default", "staging"}[i%2]
		name, _ := metadata["name"].(string)
		if i%3 == 0 {
			name = "web-" + name
		}
		metadata["name"], metadata["namespace"] = name, namespace
		if len(labels) > 0 {
			metadata["labels"] = labels
		}
		return out
	}
	request := func(operation string, object, oldObject map[string]any) exceptionRequest {
		about := object
		if about == nil {
			about = oldObject
		}
		metadata := about["metadata"].(map[string]any)
		return exceptionRequest{
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Operation: operation, Name: metadata["name"].(string), Namespace: metadata["namespace"].(string),
			Object: object, OldObject: oldObject,
		}
	}
	var out []exceptionRequest
	for i, pod := range pods {
		if !full && i%sliceEvery != 0 {
			continue
		}
		labels := labelSets[(i/2)%len(labelSets)]
		object := placed(pod, i, labels)
		relabelled := placed(pod, i, labelSets[(i/2+1)%len(labelSets)])
		other := placed(pods[(i+1)%len(pods)], i, labels)
		out = append(out,
			request("CREATE", object, nil),
			request("UPDATE", object, object),
			request("UPDATE", object, relabelled),
			request("UPDATE", relabelled, object),
			request("UPDATE", object, other))
		if i%7 == 0 {
			out = append(out, request("DELETE", nil, object))
		}
	}
	return out
}

// askKyvernoWithExceptions is the status Kyverno's engine, finding the
// exceptions for the policy's rules, reports for each rule on each
// request.
func askKyvernoWithExceptions(t *testing.T, oracle string, policy []byte, exceptions []json.RawMessage, requests []exceptionRequest) []map[string]string {
	t.Helper()
	return runOracle(t, oracle, map[string]any{"policy": json.RawMessage(policy), "exceptions": exceptions, "requests": requests}, len(requests))
}

// kyvapRuleStatuses are kyvap's engine's statuses of each rule on r.
func kyvapRuleStatuses(t *testing.T, e *engine.Engine, r exceptionRequest) map[string]string {
	t.Helper()
	req := admissionRequest(r)
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace, Labels: map[string]string{corev1.LabelMetadataName: r.Namespace}}}
	outcomes, err := e.Evaluate(context.Background(), engine.Request{Admission: req, Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range outcomes {
		out[o.Rule] = string(o.Result)
	}
	return out
}

// exceptionVAPs are the VAPs and bindings the policy translates to with
// the exceptions: every rule must be one.
func exceptionVAPs(t *testing.T, policy *kyvernov1.ClusterPolicy, exceptions []kyvernov2.PolicyException) *vapsim.Simulator {
	t.Helper()
	plan, err := translate.Translate(clusterpolicy.InputFor(policy, exceptions), kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ValidatingAdmissionPolicies) != len(policy.Spec.Rules) {
		t.Fatalf("%d VAPs for %d rules: %+v", len(plan.ValidatingAdmissionPolicies), len(policy.Spec.Rules), plan.Rules)
	}
	return vapsim.New(plan.ValidatingAdmissionPolicies, plan.Bindings)
}

// vapsDeny says whether the VAPs, evaluated as kube-apiserver evaluates
// them, deny r.
func vapsDeny(t *testing.T, vaps *vapsim.Simulator, r exceptionRequest) bool {
	t.Helper()
	var namespaces []corev1.Namespace
	for _, name := range []string{"default", "staging"} {
		namespaces = append(namespaces, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}})
	}
	resp, err := vaps.Evaluate(context.Background(), vapsim.Request{Admission: admissionRequest(r), Namespaces: namespaces})
	if err != nil {
		t.Fatal(err)
	}
	return !resp.Allowed
}

// admissionRequest is r as the API server sends it.
func admissionRequest(r exceptionRequest) *admissionv1.AdmissionRequest {
	raw := func(v map[string]any) runtime.RawExtension {
		if v == nil {
			return runtime.RawExtension{}
		}
		data, _ := json.Marshal(v)
		return runtime.RawExtension{Raw: data}
	}
	return &admissionv1.AdmissionRequest{
		UID: "uid", Kind: r.Kind, Resource: r.Resource, Operation: admissionv1.Operation(r.Operation),
		Name: r.Name, Namespace: r.Namespace, Object: raw(r.Object), OldObject: raw(r.OldObject),
	}
}
