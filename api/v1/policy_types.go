// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AutogenControllersAnnotation lists the pod controllers Kyverno generates
// rule variants for ("none" switches autogen off).
const AutogenControllersAnnotation = "pod-policies.kyverno.io/autogen-controllers"

// ClusterPolicy is Kyverno's cluster-wide policy (kyverno.io/v1).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
type ClusterPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec         `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// ClusterPolicyList is a list of ClusterPolicies.
//
// +kubebuilder:object:root=true
type ClusterPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicy `json:"items"`
}

// Policy is Kyverno's namespaced policy (kyverno.io/v1).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec         `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// PolicyList is a list of Policies.
//
// +kubebuilder:object:root=true
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}

// AsClusterPolicy is the Policy carried as a ClusterPolicy of TypeMeta
// kind Policy, keeping its namespace: Kyverno evaluates a Policy's rules
// as a ClusterPolicy's, on its own namespace only (clusterpolicy.InputFor
// confines them).
func (p *Policy) AsClusterPolicy() *ClusterPolicy {
	return &ClusterPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kyverno.io/v1", Kind: "Policy"},
		ObjectMeta: *p.ObjectMeta.DeepCopy(),
		Spec:       *p.Spec.DeepCopy(),
		Status:     *p.Status.DeepCopy(),
	}
}

// ValidationFailureAction is what happens when a validate rule fails:
// Enforce denies the request, Audit admits it and reports.
type ValidationFailureAction string

// The failure actions. Kyverno also accepts the lower-case spellings, which
// are deprecated; IsEnforce and IsAudit accept both.
const (
	Enforce ValidationFailureAction = "Enforce"
	Audit   ValidationFailureAction = "Audit"
)

// IsEnforce reports whether the action denies requests ("Enforce" or the
// deprecated "enforce").
func (a ValidationFailureAction) IsEnforce() bool {
	return a == Enforce || a == "enforce"
}

// IsAudit reports whether the action only reports. An empty action is Audit,
// Kyverno's default.
func (a ValidationFailureAction) IsAudit() bool {
	return !a.IsEnforce()
}

// FailurePolicyType says what happens when a policy cannot be evaluated.
type FailurePolicyType string

// The failure policies.
const (
	Fail   FailurePolicyType = "Fail"
	Ignore FailurePolicyType = "Ignore"
)

// AdmissionOperation is an admission operation a resource filter matches.
type AdmissionOperation string

// The admission operations Kyverno filters on.
const (
	Create  AdmissionOperation = "CREATE"
	Update  AdmissionOperation = "UPDATE"
	Delete  AdmissionOperation = "DELETE"
	Connect AdmissionOperation = "CONNECT"
)

// ValidationFailureActionOverride changes the failure action for the
// namespaces it selects.
type ValidationFailureActionOverride struct {
	Action            ValidationFailureAction `json:"action,omitempty"`
	Namespaces        []string                `json:"namespaces,omitempty"`
	NamespaceSelector *metav1.LabelSelector   `json:"namespaceSelector,omitempty"`
}

// Spec is the body of a ClusterPolicy or Policy.
type Spec struct {
	Rules []Rule `json:"rules,omitempty"`
	// ApplyRules is "All" (default) or "One".
	ApplyRules                       *string                           `json:"applyRules,omitempty"`
	FailurePolicy                    *FailurePolicyType                `json:"failurePolicy,omitempty"`
	ValidationFailureAction          ValidationFailureAction           `json:"validationFailureAction,omitempty"`
	ValidationFailureActionOverrides []ValidationFailureActionOverride `json:"validationFailureActionOverrides,omitempty"`
	EmitWarning                      *bool                             `json:"emitWarning,omitempty"`
	// Admission false means the policy is not applied at admission time.
	Admission             *bool  `json:"admission,omitempty"`
	Background            *bool  `json:"background,omitempty"`
	WebhookTimeoutSeconds *int32 `json:"webhookTimeoutSeconds,omitempty"`
	// WebhookConfiguration is kept raw: kyvap does not configure Kyverno's webhooks.
	WebhookConfiguration *apiextensionsv1.JSON `json:"webhookConfiguration,omitempty"`
}

// AdmissionEnabled reports whether the policy applies at admission (the
// default).
func (s *Spec) AdmissionEnabled() bool {
	return s.Admission == nil || *s.Admission
}

// BackgroundEnabled reports whether Kyverno scans the policy in the
// background (spec.background, true unless set to false).
func (s *Spec) BackgroundEnabled() bool {
	return s.Background == nil || *s.Background
}

// Rule is one rule of a policy.
type Rule struct {
	Name string `json:"name"`
	// Context entries (API calls, ConfigMaps, variables) are JMESPath-only.
	Context          []apiextensionsv1.JSON `json:"context,omitempty"`
	MatchResources   MatchResources         `json:"match"`
	ExcludeResources *MatchResources        `json:"exclude,omitempty"`
	// RawAnyAllConditions holds JMESPath preconditions; only their presence matters to kyvap.
	RawAnyAllConditions *apiextensionsv1.JSON                    `json:"preconditions,omitempty"`
	CELPreconditions    []admissionregistrationv1.MatchCondition `json:"celPreconditions,omitempty"`
	Mutation            *apiextensionsv1.JSON                    `json:"mutate,omitempty"`
	Validation          *Validation                              `json:"validate,omitempty"`
	Generation          *apiextensionsv1.JSON                    `json:"generate,omitempty"`
	VerifyImages        []apiextensionsv1.JSON                   `json:"verifyImages,omitempty"`
}

// HasValidate reports whether the rule has a validate sub-rule.
func (r *Rule) HasValidate() bool { return r.Validation != nil }

// HasValidateCEL reports whether the rule is a CEL validate rule.
func (r *Rule) HasValidateCEL() bool { return r.Validation != nil && r.Validation.CEL != nil }

// MatchResources selects the requests a rule applies to (or, under exclude,
// does not apply to). Any and All are the current spelling; the inline
// UserInfo and Resources are the legacy one.
type MatchResources struct {
	Any ResourceFilters `json:"any,omitempty"`
	All ResourceFilters `json:"all,omitempty"`
	// UserInfo and Resources are the legacy spelling of a single filter.
	UserInfo  `json:",inline"`
	Resources ResourceDescription `json:"resources,omitempty"`
}

// ResourceFilters is a list of resource filters.
type ResourceFilters []ResourceFilter

// ResourceFilter is one entry of match/exclude any or all.
type ResourceFilter struct {
	UserInfo  `json:",inline"`
	Resources ResourceDescription `json:"resources,omitempty"`
}

// UserInfo filters by who sends the request.
type UserInfo struct {
	Roles        []string         `json:"roles,omitempty"`
	ClusterRoles []string         `json:"clusterRoles,omitempty"`
	Subjects     []rbacv1.Subject `json:"subjects,omitempty"`
}

// IsEmpty reports whether the filter names no roles, cluster roles or subjects.
func (u UserInfo) IsEmpty() bool {
	return len(u.Roles) == 0 && len(u.ClusterRoles) == 0 && len(u.Subjects) == 0
}

// ResourceDescription filters by what the request is about.
type ResourceDescription struct {
	Kinds             []string              `json:"kinds,omitempty"`
	Name              string                `json:"name,omitempty"`
	Names             []string              `json:"names,omitempty"`
	Namespaces        []string              `json:"namespaces,omitempty"`
	Annotations       map[string]string     `json:"annotations,omitempty"`
	Selector          *metav1.LabelSelector `json:"selector,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	Operations        []AdmissionOperation  `json:"operations,omitempty"`
}

// IsEmpty reports whether the description sets no filter at all.
func (r ResourceDescription) IsEmpty() bool {
	return len(r.Kinds) == 0 && r.Name == "" && len(r.Names) == 0 && len(r.Namespaces) == 0 &&
		len(r.Annotations) == 0 && r.Selector == nil && r.NamespaceSelector == nil && len(r.Operations) == 0
}

// Validation is a validate sub-rule. Only the CEL and podSecurity forms are
// typed; the JMESPath forms are kept raw.
type Validation struct {
	FailureAction           *ValidationFailureAction          `json:"failureAction,omitempty"`
	FailureActionOverrides  []ValidationFailureActionOverride `json:"failureActionOverrides,omitempty"`
	AllowExistingViolations *bool                             `json:"allowExistingViolations,omitempty"`
	Message                 string                            `json:"message,omitempty"`
	Manifests               *apiextensionsv1.JSON             `json:"manifests,omitempty"`
	ForEachValidation       []apiextensionsv1.JSON            `json:"foreach,omitempty"`
	RawPattern              *apiextensionsv1.JSON             `json:"pattern,omitempty"`
	RawAnyPattern           *apiextensionsv1.JSON             `json:"anyPattern,omitempty"`
	Deny                    *apiextensionsv1.JSON             `json:"deny,omitempty"`
	PodSecurity             *PodSecurity                      `json:"podSecurity,omitempty"`
	CEL                     *CEL                              `json:"cel,omitempty"`
	Assert                  *apiextensionsv1.JSON             `json:"assert,omitempty"`
}

// PodSecurity applies a Pod Security Standards profile.
type PodSecurity struct {
	Level   string                `json:"level,omitempty"`
	Version string                `json:"version,omitempty"`
	Exclude []PodSecurityStandard `json:"exclude,omitempty"`
}

// PodSecurityStandard excludes one control of a Pod Security profile.
type PodSecurityStandard struct {
	ControlName     string   `json:"controlName"`
	Images          []string `json:"images,omitempty"`
	RestrictedField string   `json:"restrictedField,omitempty"`
	Values          []string `json:"values,omitempty"`
}

// CEL is a CEL validate sub-rule, the part kyvap turns into a
// ValidatingAdmissionPolicy.
type CEL struct {
	// Generate false opts the rule out of VAP generation.
	Generate         *bool                                     `json:"generate,omitempty"`
	Expressions      []admissionregistrationv1.Validation      `json:"expressions,omitempty"`
	ParamKind        *admissionregistrationv1.ParamKind        `json:"paramKind,omitempty"`
	ParamRef         *admissionregistrationv1.ParamRef         `json:"paramRef,omitempty"`
	AuditAnnotations []admissionregistrationv1.AuditAnnotation `json:"auditAnnotations,omitempty"`
	Variables        []admissionregistrationv1.Variable        `json:"variables,omitempty"`
}

// PolicyStatus is the status of a policy. kyvap writes ValidatingAdmissionPolicy
// and its own condition; the other fields belong to Kyverno.
type PolicyStatus struct {
	Ready                     *bool                           `json:"ready,omitempty"`
	Conditions                []metav1.Condition              `json:"conditions,omitempty"`
	Autogen                   *apiextensionsv1.JSON           `json:"autogen,omitempty"`
	RuleCount                 *apiextensionsv1.JSON           `json:"rulecount,omitempty"`
	ValidatingAdmissionPolicy ValidatingAdmissionPolicyStatus `json:"validatingadmissionpolicy"`
}

// ValidatingAdmissionPolicyStatus is Kyverno's report of VAP generation.
type ValidatingAdmissionPolicyStatus struct {
	// Generated is true only when every CEL rule is enforced by generated VAPs.
	Generated bool `json:"generated"`
	// Message says, per rule, where it is enforced and why; empty on full success.
	Message string `json:"message"`
}
