// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package celeval compiles and evaluates the CEL of a ValidatingAdmissionPolicy
// spec exactly as the API server's ValidatingAdmissionPolicy plugin does: the
// same environment (newest compatibility version, strict cost), the same
// composition of variables, match conditions, validations, message
// expressions and audit annotations (k8s.io/apiserver's compiler, matcher and
// evaluators), and the same decision rules (a copy of the plugin's validator,
// checked against it by test, so the manager does not link the plugin).
//
// Both of kyvap's enforcement paths use it: the fallback engine compiles the
// CEL part of a Kyverno rule into a spec, and the in-process VAP simulator
// compiles the generated VAPs. Same code, same verdicts.
package celeval

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
)

var (
	envOnce sync.Once
	envSet  *environment.EnvSet
	// kyvernoEnvSets caches the environments of Environment values.
	kyvernoEnvSets sync.Map // "major.minor" -> *environment.EnvSet
)

// baseEnv is the API server's runtime environment for admission policies:
// the default compatibility version with strict cost, built once because it
// is expensive and immutable.
func baseEnv() *environment.EnvSet {
	envOnce.Do(func() {
		envSet = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	})
	return envSet
}

// Environment selects the CEL environment a program is compiled in.
type Environment struct {
	// Version, when set, compiles with exactly the libraries introduced up
	// to that compatibility version (the NewExpressions environment at it):
	// what a Kyverno built with k8s.io/apiserver of that minor version has
	// in its (stored-expressions) environment. Nil is the API server's
	// runtime environment for stored VAPs (every library this build knows).
	Version *version.Version
	// Extensions are added to the environment (Kyverno's CEL libraries);
	// ExtensionsKey names them, for the cache of environments: two
	// Environments with the same key must have the same Extensions.
	Extensions    []cel.EnvOption
	ExtensionsKey string
	// Uncached environments are built for the program alone and not kept:
	// for extensions whose key varies with data (the `exceptions` values
	// of a rule), which a long-running process would otherwise accumulate.
	Uncached bool
}

// sharedCompilers are the compilers of programs without variables, by
// environment key: a compiler extends its environment with the program's
// variables (plugincel.NewCompositedCompiler), about a third of a compiled
// rule's memory, so programs that store none share one.
var sharedCompilers sync.Map // environment key -> *plugincel.CompositedCompiler

// sharedCompiler is compiler for a program that stores no variable: one per
// environment, built once (an Uncached environment is never shared).
func (e Environment) sharedCompiler() (*plugincel.CompositedCompiler, environment.Type, error) {
	if e.Uncached || (len(e.Extensions) > 0 && e.ExtensionsKey == "") {
		return e.compiler()
	}
	mode := environment.NewExpressions
	key := "|" + e.ExtensionsKey
	if e.Version == nil {
		mode = environment.StoredExpressions
	} else {
		key = e.Version.String() + key
	}
	if c, ok := sharedCompilers.Load(key); ok {
		return c.(*plugincel.CompositedCompiler), mode, nil
	}
	c, mode, err := e.compiler()
	if err != nil {
		return nil, mode, err
	}
	shared, _ := sharedCompilers.LoadOrStore(key, c)
	return shared.(*plugincel.CompositedCompiler), mode, nil
}

func (e Environment) compiler() (*plugincel.CompositedCompiler, environment.Type, error) {
	mode := environment.NewExpressions
	key := ""
	if e.Version == nil {
		mode = environment.StoredExpressions
	} else {
		key = e.Version.String()
	}
	if e.Version == nil && len(e.Extensions) == 0 {
		c, err := plugincel.NewCompositedCompiler(baseEnv())
		return c, mode, err
	}
	key += "|" + e.ExtensionsKey
	set, ok := kyvernoEnvSets.Load(key)
	if !ok || e.Uncached {
		base := baseEnv()
		compat := environment.DefaultCompatibilityVersion()
		if e.Version != nil {
			compat = version.MajorMinor(e.Version.Major(), e.Version.Minor())
			base = environment.MustBaseEnvSet(compat)
		}
		if len(e.Extensions) > 0 {
			extended, err := base.Extend(environment.VersionedOptions{IntroducedVersion: compat, EnvOptions: e.Extensions})
			if err != nil {
				return nil, mode, fmt.Errorf("extending the CEL environment with %s: %w", e.ExtensionsKey, err)
			}
			base = extended
		}
		if e.Uncached {
			set = base
		} else {
			set, _ = kyvernoEnvSets.LoadOrStore(key, base)
		}
	}
	c, err := plugincel.NewCompositedCompiler(set.(*environment.EnvSet))
	return c, mode, err
}

// Program is the compiled CEL of one ValidatingAdmissionPolicy spec. It is
// immutable and safe for concurrent use.
type Program struct {
	validator *validator
	// compileError is a failure to set up the environment: every evaluation
	// then errors, following the failure policy, as in the API server.
	compileError error
	hasParams    bool
}

// Compile compiles the CEL of spec the way the API server compiles a
// ValidatingAdmissionPolicy named name. An expression that does not compile
// is not a Compile error: as in the API server, it surfaces when evaluated,
// as an error decision that follows the spec's failurePolicy (translate
// type-checks expressions before anything is generated).
func Compile(name string, spec *admissionregistrationv1.ValidatingAdmissionPolicySpec) *Program {
	return CompileIn(Environment{}, name, spec)
}

// CompileIn is Compile in the given CEL environment.
func CompileIn(env Environment, name string, spec *admissionregistrationv1.ValidatingAdmissionPolicySpec) *Program {
	hasParams := spec.ParamKind != nil
	withAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	withoutAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
	failurePolicy := admissionregistrationv1.Fail
	if spec.FailurePolicy != nil {
		failurePolicy = *spec.FailurePolicy
	}
	v := &validator{failurePolicy: failurePolicy}
	compile := env.compiler
	if len(spec.Variables) == 0 {
		compile = env.sharedCompiler
	}
	compiler, mode, err := compile()
	if err != nil {
		return &Program{validator: v, compileError: err, hasParams: hasParams}
	}
	variables := make([]plugincel.NamedExpressionAccessor, len(spec.Variables))
	for i, x := range spec.Variables {
		variables[i] = &variable{Name: x.Name, Expression: x.Expression}
	}
	compiler.CompileAndStoreVariables(variables, withAuthz, mode)

	if len(spec.MatchConditions) > 0 {
		conditions := make([]plugincel.ExpressionAccessor, len(spec.MatchConditions))
		for i := range spec.MatchConditions {
			conditions[i] = (*matchconditions.MatchCondition)(&spec.MatchConditions[i])
		}
		v.matcher = matchconditions.NewMatcher(compiler.CompileCondition(conditions, withAuthz, mode), spec.FailurePolicy, "policy", "validate", name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	for i, x := range spec.Validations {
		validations[i] = &validationCondition{Expression: x.Expression, Message: x.Message, Reason: x.Reason}
		if x.MessageExpression != "" {
			messages[i] = &messageCondition{MessageExpression: x.MessageExpression}
		}
	}
	annotations := make([]plugincel.ExpressionAccessor, len(spec.AuditAnnotations))
	for i, a := range spec.AuditAnnotations {
		annotations[i] = &auditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	v.validations = compiler.CompileCondition(validations, withAuthz, mode)
	v.messages = compiler.CompileCondition(messages, withoutAuthz, mode)
	v.annotations = compiler.CompileCondition(annotations, withAuthz, mode)
	return &Program{validator: v, hasParams: hasParams}
}

// CompileError is a failure to set up the CEL environment, if any.
func (p *Program) CompileError() error { return p.compileError }

// HasParams reports whether the spec declares a paramKind.
func (p *Program) HasParams() bool { return p.hasParams }

// Input is one evaluation: a request, the resource it matched as, and the
// optional bindings the API server would provide.
type Input struct {
	Attributes      *admission.VersionedAttributes
	MatchedResource schema.GroupVersionResource
	// Params is the parameter object (nil when the spec has no paramKind, or
	// when the binding allows a missing parameter).
	Params runtime.Object
	// Namespace is the request's namespace object (nil for cluster-scoped
	// requests and for Namespace objects themselves, as in the API server).
	Namespace *corev1.Namespace
	// Authorizer answers `authorizer` checks; nil denies every check.
	Authorizer authorizer.UnconditionalAuthorizer
}

// Validate evaluates the program with the API server's runtime cost budget.
// An empty result means the match conditions excluded the request. The
// evaluation stops when ctx ends (see Result.Interrupted).
func (p *Program) Validate(ctx context.Context, in Input) Result {
	authz := in.Authorizer
	if authz == nil {
		authz = denyAll{}
	}
	if p.compileError != nil {
		return p.validator.failure(p.compileError.Error())
	}
	return markInterrupted(ctx, p.validator.validate(ctx, in, authz))
}

// authorizerLike is what the CEL `authorizer` variable needs.
type authorizerLike = authorizer.UnconditionalAuthorizer

// denyAll answers every authorization check with "no opinion", which is
// what an authorizer that knows nothing about the user says.
type denyAll struct{}

func (denyAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "no authorizer configured", nil
}

// Attributes builds the admission attributes the API server would hand to a
// policy for an AdmissionReview request. Objects stay unstructured, as they
// arrive; their kind is the request's kind.
func Attributes(req *admissionv1.AdmissionRequest) (*admission.VersionedAttributes, error) {
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	object, err := decodeObject(req.Object, gvk)
	if err != nil {
		return nil, fmt.Errorf("request object: %w", err)
	}
	oldObject, err := decodeObject(req.OldObject, gvk)
	if err != nil {
		return nil, fmt.Errorf("request oldObject: %w", err)
	}
	options, err := decodeObject(req.Options, schema.GroupVersionKind{})
	if err != nil {
		return nil, fmt.Errorf("request options: %w", err)
	}
	extra := map[string][]string{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = v
	}
	userInfo := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra}
	dryRun := req.DryRun != nil && *req.DryRun
	attrs := admission.NewAttributesRecord(
		object, oldObject, gvk, req.Namespace, req.Name,
		schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource},
		req.SubResource, admission.Operation(req.Operation), options, dryRun, userInfo,
	)
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk}
	if object != nil {
		versioned.VersionedObject = admission.NewLazyObject(object)
	}
	if oldObject != nil {
		versioned.VersionedOldObject = admission.NewLazyObject(oldObject)
	}
	return versioned, nil
}

// decodeObject decodes a raw object into unstructured; an empty extension is
// nil, as the API server passes no object for it.
func decodeObject(raw runtime.RawExtension, gvk schema.GroupVersionKind) (runtime.Object, error) {
	data := raw.Raw
	if len(data) == 0 && raw.Object != nil {
		var err error
		if data, err = json.Marshal(raw.Object); err != nil {
			return nil, err
		}
	}
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	var content map[string]any
	if err := json.Unmarshal(data, &content); err != nil {
		return nil, err
	}
	if content == nil {
		return nil, nil
	}
	obj := &unstructured.Unstructured{Object: content}
	if !gvk.Empty() {
		obj.SetGroupVersionKind(gvk)
	}
	return obj, nil
}
