// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"encoding/json"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The schema of Kyverno's CLI test files (cli.kyverno.io/v1alpha1), modelled
// on Kyverno v1.19.1 (cmd/cli/kubectl-kyverno/apis/v1alpha1). Every field of
// Kyverno's schema is declared, so that strict decoding rejects exactly what
// Kyverno's CLI rejects (it decodes test, values and user-info files with
// UnmarshalStrict); fields kyvap cannot evaluate are reported, not ignored.

// APIVersion is the apiVersion of Kyverno CLI test, values and user-info files.
const APIVersion = "cli.kyverno.io/v1alpha1"

// DefaultFileName is the file name Kyverno's CLI looks for (its --file-name
// default).
const DefaultFileName = "kyverno-test.yaml"

// Test is one document of a test file (kind Test).
type Test struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Name is Kyverno's deprecated spelling of metadata.name; Kyverno's CLI
	// refuses test files that set it.
	Name string `json:"name,omitempty"`
	// Policies, Resources, ParamResources, PolicyExceptions, Variables and
	// UserInfo are file paths relative to the test file's directory.
	Policies         []string `json:"policies,omitempty"`
	Resources        []string `json:"resources,omitempty"`
	ParamResources   []string `json:"paramResources,omitempty"`
	PolicyExceptions []string `json:"exceptions,omitempty"`
	Variables        string   `json:"variables,omitempty"`
	UserInfo         string   `json:"userinfo,omitempty"`
	// Values are inline values; when set, Variables is not read (as in Kyverno).
	Values  *ValuesSpec  `json:"values,omitempty"`
	Results []TestResult `json:"results,omitempty"`
	// ClusterResources are ClusterResource files; kyvap reads the CRDs they
	// name (for kind resolution) and their resources (as parameters).
	ClusterResources []string `json:"clusterResources,omitempty"`

	// Fields kyvap does not evaluate: they are not admission requests for
	// Kyverno ClusterPolicies (payloads, mutate-existing targets) or feed
	// JMESPath/HTTP features that CEL validate rules do not use.
	JSONPayload          string            `json:"jsonPayload,omitempty"`
	JSONPayloads         []string          `json:"jsonPayloads,omitempty"`
	HTTPPayloads         []string          `json:"httpPayloads,omitempty"`
	EnvoyPayloads        []string          `json:"envoyPayloads,omitempty"`
	TargetResources      []string          `json:"targetResources,omitempty"`
	Context              string            `json:"context,omitempty"`
	APICallResponses     []json.RawMessage `json:"apiCallResponses,omitempty"`
	GlobalContextEntries []json.RawMessage `json:"globalContextEntries,omitempty"`
}

// TestResult is one expected result of a Test.
type TestResult struct {
	// Policy is the policy name ("namespace/name" for a namespaced Policy).
	Policy string `json:"policy"`
	// Rule is the rule name; empty checks every rule of the policy.
	// "autogen-<rule>" and "autogen-cronjob-<rule>" name pod-controller
	// variants; a plain rule name also matches its variants (as in Kyverno).
	Rule                        string `json:"rule,omitempty"`
	IsValidatingAdmissionPolicy bool   `json:"isValidatingAdmissionPolicy,omitempty"`
	IsMutatingAdmissionPolicy   bool   `json:"isMutatingAdmissionPolicy,omitempty"`
	IsValidatingPolicy          bool   `json:"isValidatingPolicy,omitempty"`
	IsDeletingPolicy            bool   `json:"isDeletingPolicy,omitempty"`
	IsImageValidatingPolicy     bool   `json:"isImageValidatingPolicy,omitempty"`
	IsGeneratingPolicy          bool   `json:"isGeneratingPolicy,omitempty"`
	IsMutatingPolicy            bool   `json:"isMutatingPolicy,omitempty"`
	// Result is pass, fail, skip, warn or error.
	Result string `json:"result"`
	// Kind is informative: Kyverno's CLI selects resources by name only.
	Kind string `json:"kind"`
	// Operation is CREATE, UPDATE or DELETE; empty uses the values file's
	// request.operation, else CREATE.
	Operation              string             `json:"operation,omitempty"`
	PatchedResources       string             `json:"patchedResources,omitempty"`
	GeneratedResource      string             `json:"generatedResource,omitempty"`
	CloneSourceResource    string             `json:"cloneSourceResource,omitempty"`
	FailOnMissingResources bool               `json:"failOnMissingResources,omitempty"`
	Resources              []string           `json:"resources,omitempty"`
	ResourceSpecs          []TestResourceSpec `json:"resourceSpecs,omitempty"`
	GeneratedResources     []string           `json:"generatedResources,omitempty"`
}

// TestResourceSpec selects a resource by group, version, namespace and name.
type TestResourceSpec struct {
	Group       string `json:"group,omitempty"`
	Version     string `json:"version,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Name        string `json:"name,omitempty"`
}

// Values is a values file (kind Values).
type Values struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	ValuesSpec        `json:",inline"`
}

// ValuesSpec holds the values of a test.
type ValuesSpec struct {
	// GlobalValues are variables for every policy and resource; kyvap reads
	// request.operation, request.object and request.oldObject.
	GlobalValues map[string]any `json:"globalValues,omitempty"`
	// Policies are values per policy, rule and resource.
	Policies []ValuesPolicy `json:"policies,omitempty"`
	// NamespaceSelectors give namespaces their labels.
	NamespaceSelectors []NamespaceSelector `json:"namespaceSelector,omitempty"`
	// Namespaces are whole Namespace objects; they win over NamespaceSelectors.
	Namespaces []corev1.Namespace `json:"namespaces,omitempty"`
	// Subresources map subresource kinds to their parent resources.
	Subresources []Subresource `json:"subresources,omitempty"`
}

// ValuesPolicy holds the values for one policy.
type ValuesPolicy struct {
	Name      string           `json:"name"`
	Resources []ValuesResource `json:"resources,omitempty"`
	Rules     []ValuesRule     `json:"rules,omitempty"`
}

// ValuesResource holds the values for one resource (by name).
type ValuesResource struct {
	Name   string         `json:"name"`
	Values map[string]any `json:"values,omitempty"`
}

// ValuesRule holds the values for one rule.
type ValuesRule struct {
	Name          string           `json:"name"`
	Values        map[string]any   `json:"values,omitempty"`
	ForeachValues map[string][]any `json:"foreachValues,omitempty"`
}

// NamespaceSelector gives a namespace its labels.
type NamespaceSelector struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// Subresource maps a subresource (e.g. pods/exec, kind PodExecOptions) to
// its parent resource (pods, kind Pod).
type Subresource struct {
	Subresource    metav1.APIResource `json:"subresource"`
	ParentResource metav1.APIResource `json:"parentResource"`
}

// UserInfo is a user-info file (kind UserInfo): who sends the requests.
type UserInfo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	RequestInfo       `json:",inline"`
}

// RequestInfo is the requesting user and the RBAC roles bound to them.
type RequestInfo struct {
	// Roles are "namespace:name" entries.
	Roles             []string                  `json:"roles,omitempty"`
	ClusterRoles      []string                  `json:"clusterRoles,omitempty"`
	AdmissionUserInfo authenticationv1.UserInfo `json:"userInfo"`
	DryRun            bool                      `json:"synchronize,omitempty"`
}

// clusterResource is a ClusterResource file (kind ClusterResource).
// contextFile is a test's `context:` file (Kyverno's CLI
// apis/v1alpha1 Context): the objects Kyverno's resource library reads.
type contextFile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Resources []json.RawMessage `json:"resources,omitempty"`
		// Images feed the image-data library, which kyvap does not evaluate.
		Images []json.RawMessage `json:"images,omitempty"`
	} `json:"spec"`
}

type clusterResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		CRDs      []string          `json:"crds,omitempty"`
		Resources []json.RawMessage `json:"resources,omitempty"`
	} `json:"spec"`
}
