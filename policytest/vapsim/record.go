// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vapsim

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kyvap/kyvap/engine/celeval"
)

// The API server's dispatcher (validating.NewDispatcher) does all the work;
// the types here only observe it, to report per policy and per binding what
// happened. The dispatcher walks hooks and bindings sequentially on one
// goroutine: DefinitionMatches for a policy, then for each of its bindings
// BindingMatches, CollectParams and one Validate per parameter object. The
// recorder follows that walk.

// recorder collects the per-policy and per-binding results of one Evaluate.
type recorder struct {
	hooks    map[string]*requestHook
	policies []*policyRecord
	policy   *policyRecord
	hook     *requestHook
	binding  *BindingResult
}

// policyRecord is a PolicyResult under construction.
type policyRecord struct {
	PolicyResult
	bindings []*BindingResult
}

// result is the finished PolicyResult.
func (p *policyRecord) result() PolicyResult {
	r := p.PolicyResult
	if r.Labels != nil {
		labels := make(map[string]string, len(r.Labels))
		for k, v := range r.Labels {
			labels[k] = v
		}
		r.Labels = labels
	}
	for _, b := range p.bindings {
		r.Bindings = append(r.Bindings, *b)
	}
	return r
}

// requestHook is a hook with the request's parameter source.
type requestHook struct {
	*hook
	params *paramSource
}

// recordingMatcher is generic.PolicyMatcher (the API server's) that records
// which policies and bindings matched.
type recordingMatcher struct {
	generic.PolicyMatcher
	rec *recorder
}

// DefinitionMatches implements generic.PolicyMatcher.
func (m *recordingMatcher) DefinitionMatches(a admission.Attributes, o admission.ObjectInterfaces, definition generic.PolicyAccessor) (bool, schema.GroupVersionResource, schema.GroupVersionKind, error) {
	matches, gvr, gvk, err := m.PolicyMatcher.DefinitionMatches(a, o, definition)
	r := m.rec
	r.policy, r.hook, r.binding = nil, nil, nil
	h := r.hooks[definition.GetName()]
	if h == nil || (!matches && err == nil) {
		return matches, gvr, gvk, err
	}
	r.hook = h
	r.policy = &policyRecord{PolicyResult: PolicyResult{Policy: h.policy.Name, Labels: h.policy.Labels}}
	r.policies = append(r.policies, r.policy)
	switch {
	case err != nil:
		r.policy.ConfigError = "failed to configure policy: " + err.Error()
	case h.params != nil && h.params.err != nil:
		r.policy.ConfigError = "failed to configure policy: " + h.params.err.Error()
	}
	return matches, gvr, gvk, err
}

// BindingMatches implements generic.PolicyMatcher.
func (m *recordingMatcher) BindingMatches(a admission.Attributes, o admission.ObjectInterfaces, binding generic.BindingAccessor) (bool, error) {
	matches, err := m.PolicyMatcher.BindingMatches(a, o, binding)
	r := m.rec
	r.binding = nil
	if r.policy == nil || r.hook == nil {
		return matches, err
	}
	b := r.hook.binding(binding.GetName())
	if b == nil {
		return matches, err
	}
	br := &BindingResult{Binding: b.Name, Actions: b.Spec.ValidationActions}
	r.policy.bindings = append(r.policy.bindings, br)
	if err != nil {
		br.ConfigError = "failed to configure binding: " + err.Error()
		return matches, err
	}
	if !matches {
		return matches, err
	}
	br.Matched = true
	r.binding = br
	// The dispatcher calls generic.CollectParams next with exactly these
	// arguments; it is a pure function of the informer, so calling it here
	// too yields the same parameters or configuration error.
	var (
		paramKind *admissionregistrationv1.ParamKind
		params    []runtime.Object
		perr      error
	)
	paramKind = r.hook.policy.Spec.ParamKind
	if r.hook.params != nil {
		params, perr = generic.CollectParams(paramKind, r.hook.params.informer, r.hook.params.scope, b.Spec.ParamRef, a.GetNamespace(), nil, nil)
	} else {
		params, perr = generic.CollectParams(paramKind, nil, nil, b.Spec.ParamRef, a.GetNamespace(), nil, nil)
	}
	if perr != nil {
		br.ConfigError = "failed to configure binding: " + perr.Error()
		return matches, err
	}
	if paramKind != nil && b.Spec.ParamRef != nil {
		br.Params = []string{}
		for _, p := range params {
			if acc, aerr := meta.Accessor(p); aerr == nil {
				br.Params = append(br.Params, paramKey(acc))
			}
		}
	}
	return matches, err
}

// recordingEvaluator is the compiled policy (celeval.Program, the API
// server's validator) as a validating.Validator that records its results
// for the binding being evaluated.
type recordingEvaluator struct {
	program *celeval.Program
	rec     *recorder
}

// Validate implements validating.Validator.
func (e *recordingEvaluator) Validate(ctx context.Context, matchedResource schema.GroupVersionResource, versionedAttr *admission.VersionedAttributes, versionedParams runtime.Object, namespace *corev1.Namespace, _ int64, authz authorizer.UnconditionalAuthorizer) validating.ValidateResult {
	// celeval.Program.Validate passes the API server's runtime budget
	// (celconfig.RuntimeCELCostBudget), the value the dispatcher passes here.
	result := toValidateResult(e.program.Validate(ctx, celeval.Input{
		Attributes:      versionedAttr,
		MatchedResource: matchedResource,
		Params:          versionedParams,
		Namespace:       namespace,
		Authorizer:      authz,
	}))
	if br := e.rec.binding; br != nil {
		if len(result.Decisions) > 0 || len(result.AuditAnnotations) > 0 {
			br.Evaluated = true
		}
		for _, d := range result.Decisions {
			if d.Evaluation != validating.EvalAdmit {
				br.Decisions = append(br.Decisions, d)
			}
		}
		for _, a := range result.AuditAnnotations {
			if a.Action == validating.AuditAnnotationActionError {
				// The dispatcher turns these into denials.
				br.Decisions = append(br.Decisions, validating.PolicyDecision{
					Action:     validating.ActionDeny,
					Evaluation: validating.EvalError,
					Message:    a.Error,
					Elapsed:    a.Elapsed,
				})
			}
		}
	}
	return result
}

// CompileError implements validating.Validator.
func (e *recordingEvaluator) CompileError() error { return e.program.CompileError() }

// annotatedAttributes records the audit annotations the dispatcher adds,
// keeping the attributes record's own checks (key format, no overwrite).
type annotatedAttributes struct {
	admission.Attributes
	annotations map[string]string
}

// AddAnnotation implements admission.Attributes.
func (a *annotatedAttributes) AddAnnotation(key, value string) error {
	if err := a.Attributes.AddAnnotation(key, value); err != nil {
		return err
	}
	a.annotations[key] = value
	return nil
}

// AddAnnotationWithLevel implements admission.Attributes. Every level the
// API server accepts is at least Metadata, so the annotation is audited.
func (a *annotatedAttributes) AddAnnotationWithLevel(key, value string, level auditinternal.Level) error {
	if err := a.Attributes.AddAnnotationWithLevel(key, value, level); err != nil {
		return err
	}
	a.annotations[key] = value
	return nil
}

// noOpinion is the authorizer of a request without one: every check says
// "no opinion", i.e. not allowed.
type noOpinion struct{}

func (noOpinion) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "no authorizer configured", nil
}

// namespaceClient is the client the namespace matcher falls back to when its
// lister misses: it knows no namespaces. Only CoreV1().Namespaces().Get is
// ever called by the matcher; the embedded nil interfaces are never used.
type namespaceClient struct{ kubernetes.Interface }

func (namespaceClient) CoreV1() corev1client.CoreV1Interface { return namespaceCore{} }

type namespaceCore struct{ corev1client.CoreV1Interface }

func (namespaceCore) Namespaces() corev1client.NamespaceInterface { return namespaceGetter{} }

type namespaceGetter struct {
	corev1client.NamespaceInterface
}

func (namespaceGetter) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
}

// toValidateResult converts celeval's result into the API server's types,
// which the dispatcher consumes; the vocabularies are the same.
func toValidateResult(r celeval.Result) validating.ValidateResult {
	out := validating.ValidateResult{}
	for _, d := range r.Decisions {
		out.Decisions = append(out.Decisions, validating.PolicyDecision{
			Action: validating.PolicyDecisionAction(d.Action), Evaluation: validating.PolicyDecisionEvaluation(d.Evaluation),
			Message: d.Message, Reason: d.Reason, Elapsed: d.Elapsed,
		})
	}
	for _, a := range r.AuditAnnotations {
		out.AuditAnnotations = append(out.AuditAnnotations, validating.PolicyAuditAnnotation{
			Key: a.Key, Value: a.Value, Elapsed: a.Elapsed, Action: validating.PolicyAuditAnnotationAction(a.Action), Error: a.Error,
		})
	}
	return out
}
