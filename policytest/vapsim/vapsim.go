// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package vapsim evaluates ValidatingAdmissionPolicies and their bindings
// against an admission request in-process, the way kube-apiserver's
// ValidatingAdmissionPolicy admission plugin does.
//
// The evaluation is the API server's own code: validating.NewDispatcher
// (the plugin's dispatcher: failure policies, validation actions, warnings,
// audit annotations, the denial status), generic.NewPolicyMatcher over
// matching.NewMatcher (match constraints, binding matchResources, namespace
// and object selectors), generic.CollectParams (paramRef resolution) and,
// through engine/celeval, the plugin's CEL compiler and validator. vapsim
// only supplies what the API server gets from the cluster: the policy source
// (policies grouped with their bindings, the parameter informers), the
// namespace lister, the warning recorder and the audit annotation sink. Two
// small pieces mirror unexported API server code whose packages would need
// a module this one does not require: the response warning recorder
// (deduplication, truncation) and the error-to-status conversion. The
// API server's defaulting of the objects (k8s.io/kubernetes) is mirrored too.
//
// Differences from a real cluster, all documented on the identifiers:
//   - matchPolicy Equivalent matches as Exact: the simulator knows no
//     equivalent resources and cannot convert objects between versions.
//   - The API server orders policies and bindings by map iteration, so when
//     several deny, which one the denial names is not deterministic there;
//     the simulator walks policies and bindings by name.
//   - Policies and bindings are defaulted as the API server stores them but
//     not validated: an object the API server would reject (say a CEL
//     syntax error, or a paramRef without parameterNotFoundAction) is
//     evaluated as far as the admission plugin gets with it.
//   - Parameter objects are used in the version the caller supplies; the
//     API server's informer would serve the paramKind's version.
//   - The cluster state is what the Request carries; a namespace the
//     request needs but the caller did not supply is assumed (see
//     Request.Namespaces).
package vapsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kyvap/kyvap/engine/celeval"
	"github.com/kyvap/kyvap/vap"
)

// Simulator holds compiled policies with their bindings. It is immutable
// after New and safe for concurrent use.
type Simulator struct {
	hooks []*hook
	notes []string
}

// hook is one policy with its bindings, as the API server's policy source
// hands it to the dispatcher.
type hook struct {
	policy   *admissionregistrationv1.ValidatingAdmissionPolicy
	bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	program  *celeval.Program
	paramGVK *schema.GroupVersionKind
}

// binding is the hook's binding named name, nil if none.
func (h *hook) binding(name string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	for _, b := range h.bindings {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// New defaults (as the API server stores them) and compiles the policies
// and groups the bindings with them, as the API server's policy source does:
// a binding naming a missing policy is ignored, a policy without bindings is
// never evaluated, and a policy whose paramKind apiVersion does not parse is
// dropped. Each such case, duplicate names (the later object is ignored),
// the compile errors celeval.Program.CompileError reports and matchPolicy
// Equivalent are reported by Notes; expression compile errors surface at
// evaluation, as error decisions under the failurePolicy, as in the API
// server. The
// arguments are not modified.
func New(vaps []admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding) *Simulator {
	s := &Simulator{}
	byName := map[string]*hook{}
	dropped := map[string]bool{}
	for i := range vaps {
		p := vaps[i].DeepCopy()
		if _, dup := byName[p.Name]; dup || dropped[p.Name] {
			s.note("duplicate ValidatingAdmissionPolicy %q ignored", p.Name)
			continue
		}
		vap.DefaultPolicy(p)
		h := &hook{policy: p}
		if pk := p.Spec.ParamKind; pk != nil {
			gv, err := schema.ParseGroupVersion(pk.APIVersion)
			if err != nil {
				s.note("ValidatingAdmissionPolicy %q dropped, as by the API server: failed to parse paramKind APIVersion: %v", p.Name, err)
				dropped[p.Name] = true
				continue
			}
			gvk := gv.WithKind(pk.Kind)
			h.paramGVK = &gvk
		}
		byName[p.Name] = h
	}
	seen := map[string]bool{}
	for i := range bindings {
		b := bindings[i].DeepCopy()
		if seen[b.Name] {
			s.note("duplicate ValidatingAdmissionPolicyBinding %q ignored", b.Name)
			continue
		}
		seen[b.Name] = true
		if dropped[b.Spec.PolicyName] {
			continue
		}
		h := byName[b.Spec.PolicyName]
		if h == nil {
			s.note("ValidatingAdmissionPolicyBinding %q ignored: ValidatingAdmissionPolicy %q does not exist", b.Name, b.Spec.PolicyName)
			continue
		}
		vap.DefaultBinding(b)
		h.bindings = append(h.bindings, b)
	}
	for _, h := range byName {
		if len(h.bindings) == 0 {
			s.note("ValidatingAdmissionPolicy %q has no bindings and is never evaluated", h.policy.Name)
			continue
		}
		sort.Slice(h.bindings, func(i, j int) bool { return h.bindings[i].Name < h.bindings[j].Name })
		h.program = celeval.Compile(h.policy.Name, &h.policy.Spec)
		if err := h.program.CompileError(); err != nil {
			s.note("ValidatingAdmissionPolicy %q: %v", h.policy.Name, err)
		}
		if usesEquivalent(h) {
			s.note("ValidatingAdmissionPolicy %q: matchPolicy Equivalent matches as Exact (the simulator knows no equivalent resources)", h.policy.Name)
		}
		s.hooks = append(s.hooks, h)
	}
	sort.Slice(s.hooks, func(i, j int) bool { return s.hooks[i].policy.Name < s.hooks[j].policy.Name })
	sort.Strings(s.notes)
	return s
}

// usesEquivalent reports whether the policy or one of its bindings matches
// with matchPolicy Equivalent (the API server's default).
func usesEquivalent(h *hook) bool {
	isEquivalent := func(m *admissionregistrationv1.MatchResources) bool {
		return m != nil && m.MatchPolicy != nil && *m.MatchPolicy == admissionregistrationv1.Equivalent
	}
	if isEquivalent(h.policy.Spec.MatchConstraints) {
		return true
	}
	for _, b := range h.bindings {
		if isEquivalent(b.Spec.MatchResources) {
			return true
		}
	}
	return false
}

func (s *Simulator) note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// Notes are what New noticed about the policies and bindings that a cluster
// would handle differently or that make them (partly) inert, sorted.
func (s *Simulator) Notes() []string { return append([]string(nil), s.notes...) }

// Request is one admission request with the cluster state the API server
// would consult for it.
type Request struct {
	// Admission is the request as an AdmissionReview carries it. For
	// UPDATE, DELETE and CONNECT of a Namespace without request.namespace,
	// the namespace is set to the name, as the API server does.
	Admission *admissionv1.AdmissionRequest
	// Namespaces are the known namespaces, for namespaceSelector matching
	// and the namespaceObject variable. The API server's
	// kubernetes.io/metadata.name label is added when missing. The
	// request's namespace, when not among them, is assumed to exist with
	// only that label (from oldObject for a Namespace DELETE), and a note
	// says so.
	Namespaces []corev1.Namespace
	// Params are the available parameter objects, of any kinds; each
	// policy sees those whose apiVersion and kind equal its paramKind.
	Params []unstructured.Unstructured
	// RESTMapper resolves paramKinds to their resource and scope, as the
	// API server's RESTMapper does; a kind it cannot map is the policy's
	// configuration error. Nil: the scope is inferred from the supplied
	// parameter objects (namespace-scoped when there are none).
	RESTMapper meta.RESTMapper
	// Authorizer answers the policies' authorizer checks; nil: every check
	// says no opinion.
	Authorizer authorizer.Authorizer
}

// Response is the outcome of one request.
type Response struct {
	// Allowed is false when the plugin rejected the request.
	Allowed bool
	// Message is the rejection as the API server returns it, e.g.
	// `pods "p" is forbidden: ValidatingAdmissionPolicy 'v' with binding
	// 'b' denied request: msg` (the first denied decision); empty when
	// allowed.
	Message string
	// Reason is the status reason of the rejection (the validation's reason,
	// Invalid by default).
	Reason metav1.StatusReason
	// Code is the HTTP status code of the rejection; 0 when allowed.
	Code int32
	// Status is the full status the API server returns; nil when allowed.
	Status *metav1.Status
	// Warnings are the response warnings, deduplicated and truncated as
	// the API server's warning recorder does.
	Warnings []string
	// AuditAnnotations are the audit annotations the plugin added:
	// `<policy>/<key>` for auditAnnotations and
	// validation.policy.admission.k8s.io/validation_failure for Audit.
	AuditAnnotations map[string]string
	// Policies has one entry per policy that matched the request (or whose
	// match failed with a configuration error), sorted by name.
	Policies []PolicyResult
	// Notes are simulator remarks about assumptions made for this request
	// (not part of the API server's response).
	Notes []string
}

// PolicyResult is what happened for one matching policy.
type PolicyResult struct {
	Policy string
	// Labels are the policy's labels (kyvap puts kyvap.io/policy and
	// kyvap.io/rule there).
	Labels map[string]string
	// ConfigError is a policy configuration error ("failed to configure
	// policy: ..."), as in the denial message; it denies the request unless
	// the failurePolicy is Ignore. The bindings are not evaluated.
	ConfigError string
	// Bindings are the policy's bindings, sorted by name.
	Bindings []BindingResult
}

// BindingResult is what happened for one binding of a matching policy.
type BindingResult struct {
	Binding string
	Actions []admissionregistrationv1.ValidationAction
	// Matched: the binding's matchResources matched the request.
	Matched bool
	// Evaluated: the policy's validations ran for at least one parameter
	// (false when the binding did not match, when match conditions excluded
	// the request, or when no parameter was found and the binding allows
	// that).
	Evaluated bool
	// Params are the parameter objects (namespace/name) the binding was
	// evaluated with; nil when the policy takes no parameters.
	Params []string
	// Decisions are the validations that did not admit: denials and
	// errors, including errors that the Ignore failure policy turned into
	// admissions (Action admit, Evaluation error) and audit annotation
	// errors. Admitting validations are dropped.
	Decisions []validating.PolicyDecision
	// ConfigError is a binding configuration error ("failed to configure
	// binding: ..."), e.g. a missing parameter with parameterNotFoundAction
	// Deny; it denies the request unless the policy's failurePolicy is
	// Ignore.
	ConfigError string
}

// admissionConfigResources are never evaluated by API-based policies
// (generic.Plugin's admissionResources).
var admissionConfigResources = map[schema.GroupResource]bool{
	{Group: admissionregistrationv1.GroupName, Resource: "validatingadmissionpolicies"}:       true,
	{Group: admissionregistrationv1.GroupName, Resource: "validatingadmissionpolicybindings"}: true,
	{Group: admissionregistrationv1.GroupName, Resource: "mutatingadmissionpolicies"}:         true,
	{Group: admissionregistrationv1.GroupName, Resource: "mutatingadmissionpolicybindings"}:   true,
}

// excludedResources are the non-persisted resources kube-apiserver excludes
// from all admission policies (k8s.io/kubernetes/pkg/kubeapiserver/admission/exclusion).
var excludedResources = map[schema.GroupResource]bool{
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       true,
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             true,
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   true,
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      true,
}

// objectInterfaces serve the dispatcher's version conversion, which never
// converts: with Exact matching the matched kind is the request's kind.
// Their empty equivalent-resource registry makes Equivalent match as Exact.
var objectInterfaces = admission.NewObjectInterfacesFromScheme(runtime.NewScheme())

// Evaluate runs the request through the policies. The error is for input
// the simulator cannot turn into an admission request (no request,
// undecodable objects, invalid parameter or namespace objects); everything
// the API server would answer is in the Response.
func (s *Simulator) Evaluate(ctx context.Context, req Request) (Response, error) {
	if req.Admission == nil {
		return Response{}, errors.New("vapsim: request has no admission request")
	}
	var notes []string
	adm := req.Admission.DeepCopy()
	if isNamespaceResource(adm) && adm.Operation != admissionv1.Create && adm.Namespace == "" && adm.Name != "" {
		adm.Namespace = adm.Name
	}
	versioned, err := celeval.Attributes(adm)
	if err != nil {
		return Response{}, fmt.Errorf("vapsim: %w", err)
	}
	gr := versioned.GetResource().GroupResource()
	if excludedResources[gr] || admissionConfigResources[gr] {
		notes = append(notes, fmt.Sprintf("%s are exempt from ValidatingAdmissionPolicies", gr))
		return Response{Allowed: true, AuditAnnotations: map[string]string{}, Notes: notes}, nil
	}
	namespaces, err := namespaceLister(req.Namespaces, adm, &notes)
	if err != nil {
		return Response{}, fmt.Errorf("vapsim: %w", err)
	}
	sources, err := paramSources(s.hooks, req, &notes)
	if err != nil {
		return Response{}, fmt.Errorf("vapsim: %w", err)
	}

	rec := &recorder{hooks: map[string]*requestHook{}}
	hooks := make([]validating.PolicyHook, 0, len(s.hooks))
	for _, h := range s.hooks {
		rh := &requestHook{hook: h}
		ph := validating.PolicyHook{
			Policy:    h.policy,
			Bindings:  h.bindings,
			Evaluator: &recordingEvaluator{program: h.program, rec: rec},
		}
		if h.paramGVK != nil {
			src := sources[*h.paramGVK]
			rh.params = src
			if src.err != nil {
				ph.ConfigurationError = src.err
			} else {
				ph.ParamInformer, ph.ParamScope = src.informer, src.scope
			}
		}
		rec.hooks[h.policy.Name] = rh
		hooks = append(hooks, ph)
	}

	var authz authorizer.UnconditionalAuthorizer = noOpinion{}
	if req.Authorizer != nil {
		authz = req.Authorizer
	}
	matcher := &recordingMatcher{
		PolicyMatcher: generic.NewPolicyMatcher(matching.NewMatcher(namespaces, namespaceClient{})),
		rec:           rec,
	}
	attrs := &annotatedAttributes{Attributes: versioned.Attributes, annotations: map[string]string{}}
	warnings := &warningRecorder{}
	dispatchErr := validating.NewDispatcher(authz, matcher).Dispatch(warning.WithWarningRecorder(ctx, warnings), attrs, objectInterfaces, hooks)

	resp := Response{
		Allowed:          dispatchErr == nil,
		Warnings:         warnings.headers,
		AuditAnnotations: attrs.annotations,
		Notes:            notes,
	}
	if dispatchErr != nil {
		status := errorToStatus(dispatchErr)
		resp.Status = &status
		resp.Message, resp.Reason, resp.Code = status.Message, status.Reason, status.Code
	}
	sort.SliceStable(rec.policies, func(i, j int) bool { return rec.policies[i].Policy < rec.policies[j].Policy })
	for _, p := range rec.policies {
		resp.Policies = append(resp.Policies, p.result())
	}
	return resp, nil
}

// isNamespaceResource reports whether the request is for a Namespace (or a
// subresource of one).
func isNamespaceResource(adm *admissionv1.AdmissionRequest) bool {
	return adm.Resource.Group == "" && adm.Resource.Resource == "namespaces"
}

// namespaceLister is the namespace matcher's lister over the known
// namespaces, plus the request's namespace when it is not among them.
func namespaceLister(known []corev1.Namespace, adm *admissionv1.AdmissionRequest, notes *[]string) (listersv1.NamespaceLister, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range known {
		ns := known[i].DeepCopy()
		if ns.Name == "" {
			return nil, errors.New("namespace without a name")
		}
		if ns.Labels[corev1.LabelMetadataName] == "" {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
		}
		if err := indexer.Add(ns); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	name := adm.Namespace
	if name == "" {
		return listersv1.NewNamespaceLister(indexer), nil
	}
	if _, exists, err := indexer.GetByKey(name); err != nil || exists {
		return listersv1.NewNamespaceLister(indexer), err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if old := oldNamespace(adm); old != nil && old.Name == name {
		ns = old
		*notes = append(*notes, fmt.Sprintf("namespace %q not among the known namespaces; taken from the request's oldObject", name))
	} else {
		*notes = append(*notes, fmt.Sprintf("namespace %q not among the known namespaces; assumed to exist with only the %s label", name, corev1.LabelMetadataName))
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	if ns.Labels[corev1.LabelMetadataName] == "" {
		ns.Labels[corev1.LabelMetadataName] = name
	}
	if err := indexer.Add(ns); err != nil {
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	return listersv1.NewNamespaceLister(indexer), nil
}

// oldNamespace is the oldObject of a request for a Namespace, nil if there
// is none or it does not decode.
func oldNamespace(adm *admissionv1.AdmissionRequest) *corev1.Namespace {
	if !isNamespaceResource(adm) || adm.SubResource != "" {
		return nil
	}
	data := adm.OldObject.Raw
	if len(data) == 0 && adm.OldObject.Object != nil {
		var err error
		if data, err = json.Marshal(adm.OldObject.Object); err != nil {
			return nil
		}
	}
	if len(data) == 0 {
		return nil
	}
	var ns corev1.Namespace
	if err := json.Unmarshal(data, &ns); err != nil {
		return nil
	}
	return &ns
}

// errorToStatus is the status the API server answers an admission error
// with (responsewriters.ErrorToAPIStatus, not importable here without a new
// module dependency).
func errorToStatus(err error) metav1.Status {
	apiStatus, ok := err.(apierrors.APIStatus)
	if !ok {
		return metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure,
			Code:     http.StatusInternalServerError,
			Reason:   metav1.StatusReasonUnknown,
			Message:  err.Error(),
		}
	}
	status := apiStatus.Status()
	if status.Status == "" {
		status.Status = metav1.StatusFailure
	}
	if status.Code == 0 {
		if status.Status == metav1.StatusSuccess {
			status.Code = http.StatusOK
		} else {
			status.Code = http.StatusInternalServerError
		}
	}
	status.Kind, status.APIVersion = "Status", "v1"
	return status
}

// Warning limits of the API server's warning recorder
// (k8s.io/apiserver/pkg/endpoints/filters/warning.go).
const (
	truncateAtTotalRunes = 4 * 1024
	truncateItemRunes    = 256
)

// warningRecorder mirrors the API server's response warning recorder
// (filters.WithWarningRecorder, whose package needs a module this one does
// not require): it deduplicates warnings and, once their total exceeds 4096
// runes, truncates each to 256 runes. headers are the texts the client
// receives.
type warningRecorder struct {
	recorded   map[string]bool
	ordered    []recordedWarning
	headers    []string
	written    int
	truncating bool
}

type recordedWarning struct {
	agent string
	text  string
}

// AddWarning implements warning.Recorder.
func (r *warningRecorder) AddWarning(agent, text string) {
	if text == "" {
		return
	}
	if r.written >= truncateAtTotalRunes && r.truncating {
		return
	}
	if r.recorded == nil {
		r.recorded = map[string]bool{}
	}
	if r.recorded[text] {
		return
	}
	r.recorded[text] = true
	r.ordered = append(r.ordered, recordedWarning{agent: agent, text: text})

	runes := utf8.RuneCountInString(text)
	if r.truncating && runes > truncateItemRunes {
		text, runes = string([]rune(text)[:truncateItemRunes]), truncateItemRunes
	}
	if _, err := utilnet.NewWarningHeader(299, agent, text); err != nil {
		return
	}
	if r.written+runes <= truncateAtTotalRunes || r.truncating {
		r.written += runes
		r.headers = append(r.headers, text)
		return
	}
	r.truncating = true
	r.written = 0
	r.headers = nil
	for _, w := range r.ordered {
		t, n := w.text, utf8.RuneCountInString(w.text)
		if n > truncateItemRunes {
			t, n = string([]rune(t)[:truncateItemRunes]), truncateItemRunes
		}
		if _, err := utilnet.NewWarningHeader(299, w.agent, t); err == nil {
			r.written += n
			r.headers = append(r.headers, t)
		}
	}
}
