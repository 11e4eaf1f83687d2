// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vapsim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/yaml"
)

type obj = map[string]any

// policies parses a multi-document YAML stream of VAPs and bindings.
func policies(t *testing.T, docs string) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var vaps []admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "ValidatingAdmissionPolicy":
			var v admissionregistrationv1.ValidatingAdmissionPolicy
			if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
				t.Fatal(err)
			}
			vaps = append(vaps, v)
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
				t.Fatal(err)
			}
			bindings = append(bindings, b)
		default:
			t.Fatalf("unexpected kind %q", tm.Kind)
		}
	}
	return vaps, bindings
}

func raw(o obj) runtime.RawExtension {
	if o == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: data}
}

var (
	podsGVR        = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	podGVK         = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	deploymentsGVR = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	deploymentGVK  = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	namespacesGVR  = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	namespaceGVK   = metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	nodesGVR       = metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}
	nodeGVK        = metav1.GroupVersionKind{Version: "v1", Kind: "Node"}
)

func request(op admissionv1.Operation, gvr metav1.GroupVersionResource, gvk metav1.GroupVersionKind, ns, name string, object, old obj) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      gvk,
		Resource:  gvr,
		Namespace: ns,
		Name:      name,
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev"}},
		Object:    raw(object),
		OldObject: raw(old),
	}
}

func object(apiVersion, kind, ns, name string, labels map[string]string, extra obj) obj {
	md := obj{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	if labels != nil {
		l := obj{}
		for k, v := range labels {
			l[k] = v
		}
		md["labels"] = l
	}
	o := obj{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

func pod(ns, name string, labels map[string]string) obj {
	return object("v1", "Pod", ns, name, labels, obj{"spec": obj{"containers": []any{obj{"name": "c", "image": "nginx"}}}})
}

func podCreate(ns, name string, labels map[string]string) *admissionv1.AdmissionRequest {
	return request(admissionv1.Create, podsGVR, podGVK, ns, name, pod(ns, name, labels), nil)
}

// deployment is a Deployment whose pods carry an app label.
func deployment(ns, name string, replicas int) obj {
	template := obj{"metadata": obj{"labels": obj{"app": name}}}
	return object("apps/v1", "Deployment", ns, name, nil, obj{"spec": obj{"replicas": replicas, "template": template}})
}

func deploymentCreate(ns, name string, replicas int) *admissionv1.AdmissionRequest {
	return request(admissionv1.Create, deploymentsGVR, deploymentGVK, ns, name, deployment(ns, name, replicas), nil)
}

func namespace(name string, labels map[string]string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func configMap(ns, name string, labels map[string]string, data map[string]string) unstructured.Unstructured {
	d := obj{}
	for k, v := range data {
		d[k] = v
	}
	return unstructured.Unstructured{Object: object("v1", "ConfigMap", ns, name, labels, obj{"data": d})}
}

// requirePodLabel denies pods without an app label on CREATE and UPDATE.
const requirePodLabel = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pod-label, labels: {kyvap.io/policy: p, kyvap.io/rule: r}}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "has(object.metadata.labels) && 'app' in object.metadata.labels"
    message: pods need an app label
`

const podLabelDeny = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: pod-label-binding}
spec: {policyName: pod-label, validationActions: [Deny]}
`

// replicaLimit compares a deployment's replicas with a ConfigMap parameter.
const replicaLimit = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    matchPolicy: Exact
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= int(params.data.max)"
    messageExpression: "'at most ' + params.data.max + ' replicas (' + params.metadata.name + ')'"
`

type testCase struct {
	name     string
	docs     string
	req      Request
	allowed  bool
	message  string
	reason   metav1.StatusReason
	code     int32
	warnings []string
	audit    map[string]string
	// policies maps policy → binding → summary (see summarize); nil skips.
	policies map[string]map[string]string
	check    func(t *testing.T, resp Response)
}

// summarize renders a binding result compactly for table comparisons.
func summarize(b BindingResult) string {
	var parts []string
	if !b.Matched {
		parts = append(parts, "unmatched")
	}
	if b.Evaluated {
		parts = append(parts, "evaluated")
	}
	if b.Params != nil {
		parts = append(parts, "params="+strings.Join(b.Params, ","))
	}
	for _, d := range b.Decisions {
		parts = append(parts, fmt.Sprintf("%s/%s: %s", d.Action, d.Evaluation, d.Message))
	}
	if b.ConfigError != "" {
		parts = append(parts, "config: "+b.ConfigError)
	}
	return strings.Join(parts, "; ")
}

func summarizeAll(resp Response) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, p := range resp.Policies {
		m := map[string]string{}
		if p.ConfigError != "" {
			m[""] = "config: " + p.ConfigError
		}
		for _, b := range p.Bindings {
			m[b.Binding] = summarize(b)
		}
		out[p.Policy] = m
	}
	return out
}

func runCases(t *testing.T, cases []testCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vaps, bindings := policies(t, tc.docs)
			sim := New(vaps, bindings)
			resp, err := sim.Evaluate(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v (message %q)", resp.Allowed, tc.allowed, resp.Message)
			}
			if resp.Message != tc.message {
				t.Errorf("message:\n got %q\nwant %q", resp.Message, tc.message)
			}
			if !tc.allowed {
				wantReason, wantCode := tc.reason, tc.code
				if wantReason == "" {
					wantReason, wantCode = metav1.StatusReasonInvalid, 422
				}
				if resp.Reason != wantReason || resp.Code != wantCode {
					t.Errorf("reason/code = %s/%d, want %s/%d", resp.Reason, resp.Code, wantReason, wantCode)
				}
				if resp.Status == nil || resp.Status.Message != resp.Message {
					t.Errorf("status %+v does not carry the message", resp.Status)
				}
			} else if resp.Status != nil || resp.Code != 0 || resp.Reason != "" {
				t.Errorf("allowed response with status %+v", resp.Status)
			}
			if diff := cmp.Diff(tc.warnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			wantAudit := tc.audit
			if wantAudit == nil {
				wantAudit = map[string]string{}
			}
			if diff := cmp.Diff(wantAudit, resp.AuditAnnotations); diff != "" {
				t.Errorf("audit annotations (-want +got):\n%s", diff)
			}
			if tc.policies != nil {
				if diff := cmp.Diff(tc.policies, summarizeAll(resp)); diff != "" {
					t.Errorf("policies (-want +got):\n%s", diff)
				}
			}
			if tc.check != nil {
				tc.check(t, resp)
			}
		})
	}
}

const podLabelDenied = `pods "p" is forbidden: ValidatingAdmissionPolicy 'pod-label' with binding 'pod-label-binding' denied request: pods need an app label`

func TestMatching(t *testing.T) {
	nsProd := namespace("prod", map[string]string{"env": "prod"})
	nsDev := namespace("dev", map[string]string{"env": "dev"})
	runCases(t, []testCase{
		{
			name:     "resource rule matches and denies",
			docs:     requirePodLabel + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("default", "p", nil)},
			message:  podLabelDenied,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "evaluated; deny/deny: pods need an app label"}},
			check: func(t *testing.T, resp Response) {
				p := resp.Policies[0]
				if p.Labels["kyvap.io/rule"] != "r" {
					t.Errorf("labels = %v", p.Labels)
				}
				if d := p.Bindings[0].Decisions[0]; d.Reason != metav1.StatusReasonInvalid {
					t.Errorf("decision reason = %q", d.Reason)
				}
				if diff := cmp.Diff([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, p.Bindings[0].Actions); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name:     "resource rule matches and admits",
			docs:     requirePodLabel + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("default", "p", map[string]string{"app": "x"})},
			allowed:  true,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "evaluated"}},
		},
		{
			name:     "operation not in rule",
			docs:     requirePodLabel + "---" + podLabelDeny,
			req:      Request{Admission: request(admissionv1.Delete, podsGVR, podGVK, "default", "p", nil, pod("default", "p", nil))},
			allowed:  true,
			policies: map[string]map[string]string{},
		},
		{
			name:     "other resource",
			docs:     requirePodLabel + "---" + podLabelDeny,
			req:      Request{Admission: deploymentCreate("default", "p", 1)},
			allowed:  true,
			policies: map[string]map[string]string{},
		},
		{
			name: "excludeResourceRules",
			docs: strings.Replace(requirePodLabel, "  validations:", `    excludeResourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [pods], resourceNames: [p]}
  validations:`, 1) + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("default", "p", nil)},
			allowed:  true,
			policies: map[string]map[string]string{},
		},
		{
			name: "excludeResourceRules for another name",
			docs: strings.Replace(requirePodLabel, "  validations:", `    excludeResourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [pods], resourceNames: [q]}
  validations:`, 1) + "---" + podLabelDeny,
			req:     Request{Admission: podCreate("default", "p", nil)},
			message: podLabelDenied,
		},
		{
			name:     "resourceNames match",
			docs:     strings.Replace(requirePodLabel, "resources: [pods]}", "resources: [pods], resourceNames: [p]}", 1) + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("default", "p", nil)},
			message:  podLabelDenied,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "evaluated; deny/deny: pods need an app label"}},
		},
		{
			name:     "resourceNames do not match",
			docs:     strings.Replace(requirePodLabel, "resources: [pods]}", "resources: [pods], resourceNames: [q]}", 1) + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("default", "p", nil)},
			allowed:  true,
			policies: map[string]map[string]string{},
		},
		{
			name:    "namespaceSelector matches",
			docs:    strings.Replace(requirePodLabel, "  matchConstraints:\n", "  matchConstraints:\n    namespaceSelector: {matchLabels: {env: prod}}\n", 1) + "---" + podLabelDeny,
			req:     Request{Admission: podCreate("prod", "p", nil), Namespaces: []corev1.Namespace{nsProd, nsDev}},
			message: strings.Replace(podLabelDenied, "pods \"p\"", "pods \"p\"", 1),
		},
		{
			name:     "namespaceSelector does not match",
			docs:     strings.Replace(requirePodLabel, "  matchConstraints:\n", "  matchConstraints:\n    namespaceSelector: {matchLabels: {env: prod}}\n", 1) + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("dev", "p", nil), Namespaces: []corev1.Namespace{nsProd, nsDev}},
			allowed:  true,
			policies: map[string]map[string]string{},
		},
		{
			name:     "namespaceSelector on the metadata.name label of an unknown namespace",
			docs:     strings.Replace(requirePodLabel, "  matchConstraints:\n", "  matchConstraints:\n    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}\n", 1) + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("team-a", "p", nil)},
			message:  podLabelDenied,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "evaluated; deny/deny: pods need an app label"}},
			check: func(t *testing.T, resp Response) {
				if len(resp.Notes) != 1 || !strings.Contains(resp.Notes[0], `"team-a" not among the known namespaces`) {
					t.Errorf("notes = %q", resp.Notes)
				}
			},
		},
		{
			name:     "namespaceSelector lets cluster-scoped resources through",
			docs:     strings.Replace(strings.Replace(requirePodLabel, "  matchConstraints:\n", "  matchConstraints:\n    namespaceSelector: {matchLabels: {env: prod}}\n", 1), "resources: [pods]", "resources: [nodes]", 1) + "---" + podLabelDeny,
			req:      Request{Admission: request(admissionv1.Create, nodesGVR, nodeGVK, "", "p", object("v1", "Node", "", "p", nil, nil), nil)},
			message:  `nodes "p" is forbidden: ValidatingAdmissionPolicy 'pod-label' with binding 'pod-label-binding' denied request: pods need an app label`,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "evaluated; deny/deny: pods need an app label"}},
		},
		{
			name:    "objectSelector matches the new object",
			docs:    strings.Replace(requirePodLabel, "  matchConstraints:\n", "  matchConstraints:\n    objectSelector: {matchLabels: {tier: web}}\n", 1) + "---" + podLabelDeny,
			req:     Request{Admission: podCreate("default", "p", map[string]string{"tier": "web"})},
			message: podLabelDenied,
		},
		{
			name:     "objectSelector does not match",
			docs:     strings.Replace(requirePodLabel, "  matchConstraints:\n", "  matchConstraints:\n    objectSelector: {matchLabels: {tier: web}}\n", 1) + "---" + podLabelDeny,
			req:      Request{Admission: podCreate("default", "p", map[string]string{"tier": "db"})},
			allowed:  true,
			policies: map[string]map[string]string{},
		},
		{
			name: "objectSelector matches the old object on UPDATE",
			docs: strings.Replace(requirePodLabel, "  matchConstraints:\n", "  matchConstraints:\n    objectSelector: {matchLabels: {tier: web}}\n", 1) + "---" + podLabelDeny,
			req: Request{Admission: request(admissionv1.Update, podsGVR, podGVK, "default", "p",
				pod("default", "p", map[string]string{"tier": "db"}), pod("default", "p", map[string]string{"tier": "web"}))},
			message: podLabelDenied,
		},
		{
			name: "binding matchResources selects a namespace",
			docs: requirePodLabel + `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: prod-only}
spec:
  policyName: pod-label
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: warn-everywhere}
spec: {policyName: pod-label, validationActions: [Warn]}
`,
			req:      Request{Admission: podCreate("dev", "p", nil), Namespaces: []corev1.Namespace{nsProd, nsDev}},
			allowed:  true,
			warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'pod-label' with binding 'warn-everywhere': pods need an app label"},
			policies: map[string]map[string]string{"pod-label": {
				"prod-only":       "unmatched",
				"warn-everywhere": "evaluated; deny/deny: pods need an app label",
			}},
		},
		{
			name: "binding matchResources excludes a resource",
			docs: requirePodLabel + `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: pod-label-binding}
spec:
  policyName: pod-label
  validationActions: [Deny]
  matchResources:
    excludeResourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
`,
			req:      Request{Admission: podCreate("default", "p", nil)},
			allowed:  true,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "unmatched"}},
		},
		{
			name: "policy without match constraints is a configuration error",
			docs: `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: pod-label}
spec:
  validations: [{expression: "false"}]
---` + podLabelDeny,
			req:      Request{Admission: podCreate("default", "p", nil)},
			message:  `pods "p" is forbidden: ValidatingAdmissionPolicy 'pod-label' denied request: failed to configure policy: policy contained no match constraints, a required field`,
			policies: map[string]map[string]string{"pod-label": {"": "config: failed to configure policy: policy contained no match constraints, a required field"}},
		},
		{
			name: "admission configuration resources are exempt",
			docs: strings.Replace(strings.Replace(requirePodLabel, `apiGroups: [""]`, `apiGroups: ["*"]`, 1), "resources: [pods]", `resources: ["*"]`, 1) + "---" + podLabelDeny,
			req: Request{Admission: request(admissionv1.Create,
				metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
				metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
				"", "x", object("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", "x", nil, nil), nil)},
			allowed:  true,
			policies: map[string]map[string]string{},
		},
	})
}

// conditional is pod-label with match conditions.
func conditional(failurePolicy, condition string) string {
	return strings.Replace(requirePodLabel, "spec:\n", fmt.Sprintf("spec:\n  failurePolicy: %s\n  matchConditions:\n  - {name: c, expression: %q}\n", failurePolicy, condition), 1) + "---" + podLabelDeny
}

func TestMatchConditions(t *testing.T) {
	const missingKey = "object.metadata.labels['nope'] == 'x'"
	runCases(t, []testCase{
		{
			name:     "true",
			docs:     conditional("Fail", "request.userInfo.username == 'alice'"),
			req:      Request{Admission: podCreate("default", "p", nil)},
			message:  podLabelDenied,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "evaluated; deny/deny: pods need an app label"}},
		},
		{
			name:     "false",
			docs:     conditional("Fail", "request.userInfo.username == 'bob'"),
			req:      Request{Admission: podCreate("default", "p", nil)},
			allowed:  true,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": ""}},
		},
		{
			name:     "error with Fail",
			docs:     conditional("Fail", missingKey),
			req:      Request{Admission: podCreate("default", "p", map[string]string{"app": "x"})},
			message:  `pods "p" is forbidden: ValidatingAdmissionPolicy 'pod-label' with binding 'pod-label-binding' denied request: expression 'object.metadata.labels['nope'] == 'x'' resulted in error: no such key: nope`,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": "evaluated; deny/error: expression 'object.metadata.labels['nope'] == 'x'' resulted in error: no such key: nope"}},
		},
		{
			// The API server's matcher treats an erroring condition under
			// Ignore as not matching: the validations do not run.
			name:     "error with Ignore",
			docs:     conditional("Ignore", missingKey),
			req:      Request{Admission: podCreate("default", "p", nil)},
			allowed:  true,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": ""}},
		},
		{
			name: "one false condition wins over an error",
			docs: strings.Replace(conditional("Fail", missingKey), "  matchConditions:\n", "  matchConditions:\n  - {name: f, expression: 'false'}\n", 1),
			req:  Request{Admission: podCreate("default", "p", nil)},
			// The API server's matcher: any false condition excludes the
			// request even when another condition errors.
			allowed:  true,
			policies: map[string]map[string]string{"pod-label": {"pod-label-binding": ""}},
		},
	})
}

func TestValidation(t *testing.T) {
	const policy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: ["*"], resources: [deployments]}
  variables:
  - {name: limit, expression: "5"}
  - {name: replicas, expression: "object.spec.replicas"}
  validations:
  - expression: "variables.replicas <= variables.limit"
    messageExpression: "'replicas ' + string(variables.replicas) + ' > ' + string(variables.limit)"
    reason: Forbidden
  - expression: "object.metadata.name != 'bad'"
  auditAnnotations:
  - {key: replicas, valueExpression: "string(object.spec.replicas)"}
  - {key: skipped, valueExpression: "null"}
`
	binding := func(actions string) string {
		return "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec: {policyName: replicas, validationActions: " + actions + "}\n"
	}
	runCases(t, []testCase{
		{
			name:     "Deny with messageExpression and reason",
			docs:     policy + binding("[Deny]"),
			req:      Request{Admission: deploymentCreate("default", "d", 7)},
			message:  `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'b' denied request: replicas 7 > 5`,
			reason:   metav1.StatusReasonForbidden,
			code:     403,
			audit:    map[string]string{"replicas/replicas": "7"},
			policies: map[string]map[string]string{"replicas": {"b": "evaluated; deny/deny: replicas 7 > 5"}},
		},
		{
			name:    "first failing validation names the denial",
			docs:    policy + binding("[Deny]"),
			req:     Request{Admission: deploymentCreate("default", "bad", 1)},
			message: `deployments.apps "bad" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'b' denied request: failed expression: object.metadata.name != 'bad'`,
			audit:   map[string]string{"replicas/replicas": "1"},
		},
		{
			name:     "Warn",
			docs:     policy + binding("[Warn]"),
			req:      Request{Admission: deploymentCreate("default", "d", 7)},
			allowed:  true,
			warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'replicas' with binding 'b': replicas 7 > 5"},
			audit:    map[string]string{"replicas/replicas": "7"},
		},
		{
			name:    "Audit",
			docs:    policy + binding("[Audit]"),
			req:     Request{Admission: deploymentCreate("default", "bad", 7)},
			allowed: true,
			audit: map[string]string{
				"replicas/replicas": "7",
				"validation.policy.admission.k8s.io/validation_failure": `[{"message":"replicas 7 \u003e 5","policy":"replicas","binding":"b","expressionIndex":0,"validationActions":["Audit"]},` +
					`{"message":"failed expression: object.metadata.name != 'bad'","policy":"replicas","binding":"b","expressionIndex":1,"validationActions":["Audit"]}]`,
			},
		},
		{
			name:     "Deny Audit and Warn together",
			docs:     policy + binding("[Deny, Audit, Warn]"),
			req:      Request{Admission: deploymentCreate("default", "d", 7)},
			message:  `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'b' denied request: replicas 7 > 5`,
			reason:   metav1.StatusReasonForbidden,
			code:     403,
			warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'replicas' with binding 'b': replicas 7 > 5"},
			audit: map[string]string{
				"replicas/replicas": "7",
				"validation.policy.admission.k8s.io/validation_failure": `[{"message":"replicas 7 \u003e 5","policy":"replicas","binding":"b","expressionIndex":0,"validationActions":["Deny","Audit","Warn"]}]`,
			},
		},
		{
			name:    "admitted",
			docs:    policy + binding("[Deny]"),
			req:     Request{Admission: deploymentCreate("default", "d", 3)},
			allowed: true,
			audit:   map[string]string{"replicas/replicas": "3"},
		},
		{
			name: "two bindings with equal annotations publish one value",
			docs: policy + binding("[Warn]") + strings.Replace(binding("[Warn]"), "name: b}", "name: c}", 1),
			req:  Request{Admission: deploymentCreate("default", "d", 7)},
			warnings: []string{
				"Validation failed for ValidatingAdmissionPolicy 'replicas' with binding 'b': replicas 7 > 5",
				"Validation failed for ValidatingAdmissionPolicy 'replicas' with binding 'c': replicas 7 > 5",
			},
			allowed: true,
			audit:   map[string]string{"replicas/replicas": "7"},
		},
		{
			name: "audit annotation error denies under Fail",
			docs: strings.Replace(policy, `valueExpression: "null"`, `valueExpression: "string(object.spec.nope)"`, 1) + binding("[Audit]"),
			req:  Request{Admission: deploymentCreate("default", "d", 3)},
			message: `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'b' denied request: ` +
				`expression 'string(object.spec.nope)' resulted in error: no such key: nope`,
			audit: map[string]string{"replicas/replicas": "3"},
		},
		{
			name: "runtime error in a validation",
			docs: strings.Replace(policy, `"object.metadata.name != 'bad'"`, `"object.spec.nope == 1"`, 1) + binding("[Deny]"),
			req:  Request{Admission: deploymentCreate("default", "d", 3)},
			message: `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'b' denied request: ` +
				`expression 'object.spec.nope == 1' resulted in error: no such key: nope`,
			audit: map[string]string{"replicas/replicas": "3"},
		},
	})
}

func TestVariablesContext(t *testing.T) {
	const policy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ctx}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: ["", apps], apiVersions: [v1], operations: ["*"], resources: [pods, namespaces, deployments]}
  validations:
  - expression: "namespaceObject == null || namespaceObject.metadata.labels['team'] == 'a'"
    messageExpression: "'namespace ' + (namespaceObject == null ? 'none' : namespaceObject.metadata.name) + ' is not team a'"
  - expression: "request.operation != 'DELETE' || !has(oldObject.metadata.labels) || oldObject.metadata.labels['protected'] != 'true'"
    messageExpression: "'cannot delete protected ' + oldObject.metadata.name + (object == null ? '' : ' (object set)')"
  - expression: "object == null || object.metadata.?labels[?'needs-authz'].orValue('') != 'true' || authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('escalate').allowed()"
    message: not authorized
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: ctx, validationActions: [Deny]}
`
	teamA := namespace("a", map[string]string{"team": "a"})
	teamB := namespace("b", map[string]string{"team": "b"})
	allowAll := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	})
	runCases(t, []testCase{
		{
			name:    "namespaceObject of the request namespace",
			docs:    policy,
			req:     Request{Admission: podCreate("b", "p", nil), Namespaces: []corev1.Namespace{teamA, teamB}},
			message: `pods "p" is forbidden: ValidatingAdmissionPolicy 'ctx' with binding 'b' denied request: namespace b is not team a`,
		},
		{
			name:    "namespaceObject allowed",
			docs:    policy,
			req:     Request{Admission: podCreate("a", "p", nil), Namespaces: []corev1.Namespace{teamA, teamB}},
			allowed: true,
		},
		{
			name:    "namespaceObject is null for Namespace objects",
			docs:    policy,
			req:     Request{Admission: request(admissionv1.Update, namespacesGVR, namespaceGVK, "b", "b", object("v1", "Namespace", "", "b", map[string]string{"team": "b"}, nil), object("v1", "Namespace", "", "b", nil, nil)), Namespaces: []corev1.Namespace{teamB}},
			allowed: true,
		},
		{
			name: "DELETE sees oldObject and a null object",
			docs: policy,
			req: Request{
				Admission:  request(admissionv1.Delete, podsGVR, podGVK, "a", "p", nil, pod("a", "p", map[string]string{"protected": "true"})),
				Namespaces: []corev1.Namespace{teamA},
			},
			message: `pods "p" is forbidden: ValidatingAdmissionPolicy 'ctx' with binding 'b' denied request: cannot delete protected p`,
		},
		{
			name: "DELETE of an unprotected object",
			docs: policy,
			req: Request{
				Admission:  request(admissionv1.Delete, podsGVR, podGVK, "a", "p", nil, pod("a", "p", nil)),
				Namespaces: []corev1.Namespace{teamA},
			},
			allowed: true,
		},
		{
			name: "DELETE of an unknown namespace uses its old object",
			docs: strings.Replace(policy, "  matchConstraints:\n", "  matchConstraints:\n    namespaceSelector: {matchLabels: {team: x}}\n", 1),
			req: Request{
				Admission: request(admissionv1.Delete, namespacesGVR, namespaceGVK, "", "gone", nil, object("v1", "Namespace", "", "gone", map[string]string{"team": "x", "protected": "true"}, nil)),
			},
			message: `namespaces "gone" is forbidden: ValidatingAdmissionPolicy 'ctx' with binding 'b' denied request: cannot delete protected gone`,
			check: func(t *testing.T, resp Response) {
				if len(resp.Notes) != 1 || !strings.Contains(resp.Notes[0], "oldObject") {
					t.Errorf("notes = %q", resp.Notes)
				}
			},
		},
		{
			name:    "authorizer absent says no",
			docs:    policy,
			req:     Request{Admission: podCreate("a", "p", map[string]string{"needs-authz": "true"}), Namespaces: []corev1.Namespace{teamA}},
			message: `pods "p" is forbidden: ValidatingAdmissionPolicy 'ctx' with binding 'b' denied request: not authorized`,
		},
		{
			name:    "authorizer allows",
			docs:    policy,
			req:     Request{Admission: podCreate("a", "p", map[string]string{"needs-authz": "true"}), Namespaces: []corev1.Namespace{teamA}, Authorizer: allowAll},
			allowed: true,
		},
	})
}

func TestParams(t *testing.T) {
	paramBinding := func(name, ref string) string {
		return "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: " + name + "}\nspec:\n  policyName: replica-limit\n  validationActions: [Deny]\n  paramRef: " + ref + "\n"
	}
	limit3 := configMap("default", "limit", map[string]string{"limits": "true"}, map[string]string{"max": "3"})
	limit5 := configMap("default", "limit5", map[string]string{"limits": "true"}, map[string]string{"max": "5"})
	elsewhere := configMap("other", "limit", map[string]string{"limits": "true"}, map[string]string{"max": "1"})
	params := []unstructured.Unstructured{limit3, limit5, elsewhere}
	runCases(t, []testCase{
		{
			name:     "by name, found, denies",
			docs:     replicaLimit + paramBinding("b", "{name: limit, namespace: default, parameterNotFoundAction: Deny}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 4), Params: params},
			message:  `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: at most 3 replicas (limit)`,
			policies: map[string]map[string]string{"replica-limit": {"b": "evaluated; params=default/limit; deny/deny: at most 3 replicas (limit)"}},
		},
		{
			name:     "by name, found, admits",
			docs:     replicaLimit + paramBinding("b", "{name: limit, namespace: default, parameterNotFoundAction: Deny}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 3), Params: params},
			allowed:  true,
			policies: map[string]map[string]string{"replica-limit": {"b": "evaluated; params=default/limit"}},
		},
		{
			name:     "by name in the request namespace",
			docs:     replicaLimit + paramBinding("b", "{name: limit, parameterNotFoundAction: Deny}"),
			req:      Request{Admission: deploymentCreate("other", "d", 2), Params: params},
			message:  `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: at most 1 replicas (limit)`,
			policies: map[string]map[string]string{"replica-limit": {"b": "evaluated; params=other/limit; deny/deny: at most 1 replicas (limit)"}},
		},
		{
			name:     "not found with Deny",
			docs:     replicaLimit + paramBinding("b", "{name: missing, namespace: default, parameterNotFoundAction: Deny}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 1), Params: params},
			message:  "deployments.apps \"d\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
			policies: map[string]map[string]string{"replica-limit": {"b": "config: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"}},
		},
		{
			name:     "not found with Deny under failurePolicy Ignore",
			docs:     strings.Replace(replicaLimit, "spec:\n", "spec:\n  failurePolicy: Ignore\n", 1) + paramBinding("b", "{name: missing, namespace: default, parameterNotFoundAction: Deny}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 1), Params: params},
			allowed:  true,
			policies: map[string]map[string]string{"replica-limit": {"b": "config: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"}},
		},
		{
			name:     "not found with Allow",
			docs:     replicaLimit + paramBinding("b", "{name: missing, namespace: default, parameterNotFoundAction: Allow}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 100), Params: params},
			allowed:  true,
			policies: map[string]map[string]string{"replica-limit": {"b": "params="}},
		},
		{
			name:     "selector evaluates every match",
			docs:     replicaLimit + paramBinding("b", "{selector: {matchLabels: {limits: 'true'}}, namespace: default, parameterNotFoundAction: Deny}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 4), Params: params},
			message:  `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: at most 3 replicas (limit)`,
			policies: map[string]map[string]string{"replica-limit": {"b": "evaluated; params=default/limit,default/limit5; deny/deny: at most 3 replicas (limit)"}},
		},
		{
			name:     "selector matching nothing with Allow",
			docs:     replicaLimit + paramBinding("b", "{selector: {matchLabels: {limits: 'nope'}}, namespace: default, parameterNotFoundAction: Allow}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 4), Params: params},
			allowed:  true,
			policies: map[string]map[string]string{"replica-limit": {"b": "params="}},
		},
		{
			name:    "neither name nor selector",
			docs:    replicaLimit + paramBinding("b", "{namespace: default, parameterNotFoundAction: Deny}"),
			req:     Request{Admission: deploymentCreate("apps", "d", 1), Params: params},
			message: `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: failed to configure binding: one of name or selector must be provided`,
		},
		{
			name:    "paramKind the RESTMapper does not know",
			docs:    replicaLimit + paramBinding("b", "{name: limit, namespace: default, parameterNotFoundAction: Deny}"),
			req:     Request{Admission: deploymentCreate("apps", "d", 1), Params: params, RESTMapper: meta.NewDefaultRESTMapper(nil)},
			message: `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replica-limit' denied request: failed to configure policy: failed to find resource referenced by paramKind: '/v1, Kind=ConfigMap'`,
			policies: map[string]map[string]string{"replica-limit": {
				"": "config: failed to configure policy: failed to find resource referenced by paramKind: '/v1, Kind=ConfigMap'",
			}},
		},
		{
			name: "paramKind from the RESTMapper",
			docs: replicaLimit + paramBinding("b", "{name: limit, namespace: default, parameterNotFoundAction: Deny}"),
			req: Request{Admission: deploymentCreate("apps", "d", 4), Params: params, RESTMapper: func() meta.RESTMapper {
				m := meta.NewDefaultRESTMapper(nil)
				m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
				return m
			}()},
			message: `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: at most 3 replicas (limit)`,
		},
		{
			name:    "paramRef.namespace with a cluster-scoped paramKind",
			docs:    strings.Replace(replicaLimit, "{apiVersion: v1, kind: ConfigMap}", "{apiVersion: example.com/v1, kind: Limit}", 1) + paramBinding("b", "{name: limit, namespace: default, parameterNotFoundAction: Deny}"),
			req:     Request{Admission: deploymentCreate("apps", "d", 4), Params: []unstructured.Unstructured{{Object: object("example.com/v1", "Limit", "", "limit", nil, obj{"data": obj{"max": "3"}})}}},
			message: "deployments.apps \"d\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: failed to configure binding: paramRef.namespace must not be provided for a cluster-scoped `paramKind`",
		},
		{
			name:     "cluster-scoped custom paramKind",
			docs:     strings.Replace(replicaLimit, "{apiVersion: v1, kind: ConfigMap}", "{apiVersion: example.com/v1, kind: Limit}", 1) + paramBinding("b", "{name: limit, parameterNotFoundAction: Deny}"),
			req:      Request{Admission: deploymentCreate("apps", "d", 4), Params: []unstructured.Unstructured{{Object: object("example.com/v1", "Limit", "", "limit", nil, obj{"data": obj{"max": "3"}})}}},
			message:  `deployments.apps "d" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'b' denied request: at most 3 replicas (limit)`,
			policies: map[string]map[string]string{"replica-limit": {"b": "evaluated; params=limit; deny/deny: at most 3 replicas (limit)"}},
		},
		{
			name: "params expose apiVersion and kind of typed objects",
			docs: strings.Replace(replicaLimit, `"object.spec.replicas <= int(params.data.max)"`, `"params.kind == 'ConfigMap' && params.apiVersion == 'v1' && object.spec.replicas <= int(params.data.max)"`, 1) +
				paramBinding("b", "{name: limit, namespace: default, parameterNotFoundAction: Deny}"),
			req:     Request{Admission: deploymentCreate("apps", "d", 2), Params: params},
			allowed: true,
		},
	})
}

func TestBadInput(t *testing.T) {
	vaps, bindings := policies(t, requirePodLabel+"---"+podLabelDeny)
	sim := New(vaps, bindings)
	if _, err := sim.Evaluate(context.Background(), Request{}); err == nil {
		t.Error("no error for a request without admission request")
	}
	bad := podCreate("default", "p", nil)
	bad.Object.Raw = []byte("{not json")
	if _, err := sim.Evaluate(context.Background(), Request{Admission: bad}); err == nil {
		t.Error("no error for an undecodable object")
	}
	vaps, bindings = policies(t, replicaLimit+`---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: replica-limit, validationActions: [Deny], paramRef: {name: limit, parameterNotFoundAction: Deny}}
`)
	sim = New(vaps, bindings)
	invalid := unstructured.Unstructured{Object: object("v1", "ConfigMap", "default", "limit", nil, obj{"data": obj{"max": obj{"nested": true}}})}
	if _, err := sim.Evaluate(context.Background(), Request{Admission: deploymentCreate("default", "d", 1), Params: []unstructured.Unstructured{invalid}}); err == nil {
		t.Error("no error for a ConfigMap that is not one")
	}
	if _, err := sim.Evaluate(context.Background(), Request{Admission: podCreate("default", "p", nil), Namespaces: []corev1.Namespace{{}}}); err == nil {
		t.Error("no error for a namespace without name")
	}
}

func TestOddRequestsDoNotPanic(t *testing.T) {
	vaps, bindings := policies(t, requirePodLabel+"---"+podLabelDeny+"---"+replicaLimit+`---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: replica-limit, validationActions: [Deny], paramRef: {name: limit, parameterNotFoundAction: Deny}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: everything}
spec:
  failurePolicy: Bogus
  matchConstraints:
    namespaceSelector: {matchExpressions: [{key: a, operator: Bogus}]}
    resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}]
  validations: [{expression: "object.metadata.name == 'x'"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: everything}
spec: {policyName: everything, validationActions: [Deny, Bogus]}
`)
	sim := New(vaps, bindings)
	nullObject := podCreate("default", "p", nil)
	nullObject.Object.Raw = []byte("null")
	for i, adm := range []*admissionv1.AdmissionRequest{
		{},
		{Operation: admissionv1.Create},
		nullObject,
		request(admissionv1.Delete, namespacesGVR, namespaceGVK, "", "gone", nil, nil),
		request(admissionv1.Create, deploymentsGVR, deploymentGVK, "", "", obj{}, nil),
		request(admissionv1.Connect, podsGVR, podGVK, "default", "p", nil, nil),
	} {
		resp, err := sim.Evaluate(context.Background(), Request{Admission: adm, Params: []unstructured.Unstructured{{Object: obj{"apiVersion": "v1", "kind": "ConfigMap"}}}})
		if err != nil {
			t.Logf("request %d: error %v", i, err)
			continue
		}
		t.Logf("request %d: allowed=%v %s", i, resp.Allowed, resp.Message)
	}
}

func TestNotes(t *testing.T) {
	vaps, bindings := policies(t, requirePodLabel+"---"+podLabelDeny+`---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: orphan}
spec: {policyName: missing, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: unbound}
spec:
  matchConstraints: {matchPolicy: Exact, resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "false"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  matchConstraints: {matchPolicy: Exact, resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "object.nope("}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: broken}
spec: {policyName: broken, validationActions: [Deny]}
`)
	before := vaps[0].DeepCopy()
	sim := New(vaps, bindings)
	if diff := cmp.Diff(before, &vaps[0]); diff != "" {
		t.Errorf("New modified its input:\n%s", diff)
	}
	notes := strings.Join(sim.Notes(), "\n")
	for _, want := range []string{
		`"orphan" ignored: ValidatingAdmissionPolicy "missing" does not exist`,
		`"unbound" has no bindings`,
		`"pod-label": matchPolicy Equivalent matches as Exact`,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	// The broken policy denies at runtime with its compile error; pod-label
	// sorts after it, so the denial names broken.
	resp, err := sim.Evaluate(context.Background(), Request{Admission: podCreate("default", "p", map[string]string{"app": "a"})})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || !strings.Contains(resp.Message, "ValidatingAdmissionPolicy 'broken' with binding 'broken' denied request: compilation error: compilation failed") {
		t.Errorf("response = %+v", resp)
	}
	if got := []string{resp.Policies[0].Policy, resp.Policies[1].Policy}; !cmp.Equal(got, []string{"broken", "pod-label"}) {
		t.Errorf("policies = %v", got)
	}
}

func TestWarningRecorder(t *testing.T) {
	r := &warningRecorder{}
	r.AddWarning("", "a")
	r.AddWarning("", "a")
	r.AddWarning("", "")
	if diff := cmp.Diff([]string{"a"}, r.headers); diff != "" {
		t.Fatal(diff)
	}
	long := strings.Repeat("x", 3000)
	r.AddWarning("", long)
	r.AddWarning("", strings.Repeat("y", 2000))
	if len(r.headers) != 3 || r.headers[0] != "a" || len(r.headers[1]) != truncateItemRunes || len(r.headers[2]) != truncateItemRunes {
		t.Fatalf("truncation: %d headers", len(r.headers))
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	vaps, bindings := policies(t, requirePodLabel+"---"+podLabelDeny)
	sim := New(vaps, bindings)
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func(i int) {
			labels := map[string]string{}
			if i%2 == 0 {
				labels["app"] = "x"
			}
			resp, err := sim.Evaluate(context.Background(), Request{Admission: podCreate("default", "p", labels)})
			if err == nil && resp.Allowed != (i%2 == 0) {
				err = fmt.Errorf("request %d: allowed = %v", i, resp.Allowed)
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
