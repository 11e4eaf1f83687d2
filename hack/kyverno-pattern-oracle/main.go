//go:build ignore

// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kyverno-pattern-oracle answers with Kyverno's own pattern
// matcher (pkg/engine/validate MatchPattern, v1.19.1) what a
// validate.pattern makes of resources: the oracle of test/classic's
// differential run. It is built by hack/build-kyverno.sh pattern-oracle in
// a scratch module outside kyvap's (the ignore build tag keeps it out of kyvap's
// own), and never linked into kyvap.
//
// Input (stdin), one JSON document: {"pattern": ..., "resources": [...]}.
// Output (stdout): one line per resource, in order: pass, fail, skip or
// error, as Kyverno's validate handler reports a pattern rule
// (pkg/engine/handlers/validation/validate_resource.go validatePatterns).
//
// Or, for a whole policy, {"policy": a ClusterPolicy, "requests": [...]
// with kind and resource, "exceptions": [PolicyExceptions]}: one line per request, a JSON object from each
// rule Kyverno's engine reports to its status (pass, fail, skip, error).
//
// Or, for a message, {"message": ..., "requests": [...]}: one line per
// request, the message with its variables substituted as a JSON string,
// or error.
//
// Or, for conditions (a deny's or preconditions), {"conditions": ...,
// "context": [variable entries], "requests": [{"operation", "object",
// "oldObject"}...]}: one line per
// request, true, false or error, as Kyverno's variables.EvaluateConditions
// judges them in the JSON context of an admission request (its webhook's
// context: the request as JSON, numbers as float64).
//
// Or, for a PolicyException's conditions, {"exceptionConditions": ...,
// "requests": [...]}: one line per request, true, false or error, as
// Kyverno's conditions.CheckAnyAllConditions judges them when it matches
// exceptions (utils.MatchesException).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	kyvernov2 "github.com/kyverno/kyverno/api/kyverno/v2"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/engine"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	enginecontext "github.com/kyverno/kyverno/pkg/engine/context"
	"github.com/kyverno/kyverno/pkg/engine/context/loaders"
	"github.com/kyverno/kyverno/pkg/engine/factories"
	"github.com/kyverno/kyverno/pkg/engine/jmespath"
	"github.com/kyverno/kyverno/pkg/engine/policycontext"
	"github.com/kyverno/kyverno/pkg/engine/validate"
	"github.com/kyverno/kyverno/pkg/engine/variables"
	"github.com/kyverno/kyverno/pkg/exceptions"
	imageverifycache "github.com/kyverno/kyverno/pkg/image/verification/cache"
	utilsconditions "github.com/kyverno/kyverno/pkg/utils/conditions"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

type input struct {
	Pattern    json.RawMessage   `json:"pattern"`
	Resources  []json.RawMessage `json:"resources"`
	Conditions json.RawMessage   `json:"conditions"`
	// ExceptionConditions are a PolicyException's conditions.
	ExceptionConditions json.RawMessage          `json:"exceptionConditions"`
	Requests            []request                `json:"requests"`
	Message             *string                  `json:"message"`
	Context             []kyvernov1.ContextEntry `json:"context"`
	Policy              *kyvernov1.ClusterPolicy `json:"policy"`
	// Exceptions are PolicyExceptions the engine finds for the policy's
	// rules (as its exception selector does: by policy and rule names).
	Exceptions []*kyvernov2.PolicyException `json:"exceptions"`
}

// exceptionLister lists the input's exceptions, for Kyverno's own
// exception selector (pkg/exceptions).
type exceptionLister []*kyvernov2.PolicyException

func (l exceptionLister) List(labels.Selector) ([]*kyvernov2.PolicyException, error) {
	return l, nil
}

type request struct {
	Kind      metav1.GroupVersionKind     `json:"kind"`
	Resource  metav1.GroupVersionResource `json:"resource"`
	Operation string                      `json:"operation"`
	Name      string                      `json:"name"`
	Namespace string                      `json:"namespace"`
	UserInfo  authenticationv1.UserInfo   `json:"userInfo"`
	Object    json.RawMessage             `json:"object"`
	OldObject json.RawMessage             `json:"oldObject"`
}

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var in input
	if err := json.Unmarshal(data, &in); err != nil {
		fail(err)
	}
	if in.Conditions != nil {
		conditions(in)
		return
	}
	if in.ExceptionConditions != nil {
		exceptionConditions(in)
		return
	}
	if in.Message != nil {
		message(in)
		return
	}
	if in.Policy != nil {
		policy(in)
		return
	}
	// As Kyverno reads a pattern (kyvernov1.FromJSON, apiextensions'
	// conversion with k8s.io/apimachinery's util/json): integers as
	// int64, other numbers as float64.
	var pattern any
	if err := utiljson.Unmarshal(in.Pattern, &pattern); err != nil {
		fail(err)
	}
	for _, raw := range in.Resources {
		// As Kyverno reads a resource (unstructured): integers as int64.
		var resource map[string]any
		if err := utiljson.Unmarshal(raw, &resource); err != nil {
			fail(err)
		}
		fmt.Println(verdict(validate.MatchPattern(logr.Discard(), resource, pattern)))
	}
}

// conditions judges the requests as Kyverno's deny handler does
// (internal.CheckDenyPreconditions): the conditions as the policy's JSON
// reads them, evaluated in an admission request's context.
func conditions(in input) {
	var wrapper kyvernov1.ConditionsWrapper
	if err := json.Unmarshal(in.Conditions, &wrapper); err != nil {
		fail(err)
	}
	jp := jmespath.New(config.NewDefaultConfiguration(false))
	for _, r := range in.Requests {
		ctx := enginecontext.NewContext(jp)
		req := r.admission()
		if err := ctx.AddRequest(req); err != nil {
			fail(err)
		}
		// The rule's context variables, loaded as Kyverno's context
		// loader adds them: deferred, each loaded by the first query
		// naming it.
		for _, entry := range in.Context {
			loader, err := enginecontext.NewDeferredLoader(entry.Name, loaders.NewVariableLoader(logr.Discard(), entry, ctx, jp), logr.Discard())
			if err != nil {
				fail(err)
			}
			if err := ctx.AddDeferredLoader(loader); err != nil {
				fail(err)
			}
		}
		fmt.Println(recovering(func() (bool, error) {
			ok, _, err := variables.EvaluateConditions(logr.Discard(), ctx, wrapper.Conditions)
			return ok, err
		}))
	}
}

// recovering is the verdict of judge: true, false, error, or panic where
// Kyverno's code panics (In and NotIn on a list key holding an element
// that is no string).
func recovering(judge func() (bool, error)) (verdict string) {
	defer func() {
		if recover() != nil {
			verdict = "panic"
		}
	}()
	ok, err := judge()
	if err != nil {
		return "error"
	}
	return fmt.Sprint(ok)
}

// exceptionConditions judges the requests as Kyverno judges a
// PolicyException's conditions, in an admission request's context.
func exceptionConditions(in input) {
	var block kyvernov2.AnyAllConditions
	if err := json.Unmarshal(in.ExceptionConditions, &block); err != nil {
		fail(err)
	}
	jp := jmespath.New(config.NewDefaultConfiguration(false))
	for _, r := range in.Requests {
		ctx := enginecontext.NewContext(jp)
		if err := ctx.AddRequest(r.admission()); err != nil {
			fail(err)
		}
		fmt.Println(recovering(func() (bool, error) {
			return utilsconditions.CheckAnyAllConditions(logr.Discard(), ctx, block)
		}))
	}
}

// message substitutes the variables of a message as Kyverno does for a
// rule's message (variables.SubstituteAll): one line per request, the
// message as a JSON string, or error.
func message(in input) {
	jp := jmespath.New(config.NewDefaultConfiguration(false))
	for _, r := range in.Requests {
		ctx := enginecontext.NewContext(jp)
		req := admissionv1.AdmissionRequest{
			Operation: admissionv1.Operation(r.Operation),
			Object:    runtime.RawExtension{Raw: r.Object},
			OldObject: runtime.RawExtension{Raw: r.OldObject},
		}
		if err := ctx.AddRequest(req); err != nil {
			fail(err)
		}
		out, err := variables.SubstituteAll(logr.Discard(), ctx, *in.Message)
		s, ok := out.(string)
		if err != nil || !ok {
			fmt.Println("error")
			continue
		}
		data, _ := json.Marshal(s)
		fmt.Println(string(data))
	}
}

// policy runs Kyverno's engine (its admission path: the policy context of
// an admission request, the engine's Validate) on each request, with
// resource filters off: one line per request, a JSON object from each
// rule reported to its status.
func policy(in input) {
	cfg := config.NewDefaultConfiguration(true)
	jp := jmespath.New(cfg)
	isCluster := false
	var selector engineapi.PolicyExceptionSelector
	if len(in.Exceptions) > 0 {
		selector = exceptions.New(exceptionLister(in.Exceptions))
	}
	eng := engine.NewEngine(cfg, jp, nil, nil, imageverifycache.DisabledImageVerifyCache(), factories.DefaultContextLoaderFactory(nil), selector, &isCluster)
	for _, r := range in.Requests {
		req := r.admission()
		gvk := schema.GroupVersionKind{Group: r.Kind.Group, Version: r.Kind.Version, Kind: r.Kind.Kind}
		pc, err := policycontext.NewPolicyContextFromAdmissionRequest(jp, req, kyvernov2.RequestInfo{AdmissionUserInfo: r.UserInfo}, gvk, cfg)
		if err != nil {
			fail(err)
		}
		resp := eng.Validate(context.Background(), pc.WithPolicy(in.Policy))
		out := map[string]string{}
		for i := range resp.PolicyResponse.Rules {
			rr := &resp.PolicyResponse.Rules[i]
			out[rr.Name()] = string(rr.Status())
		}
		data, _ := json.Marshal(out)
		fmt.Println(string(data))
	}
}

func verdict(err error) string {
	if err == nil {
		return "pass"
	}
	pe, ok := err.(*validate.PatternError)
	switch {
	case !ok:
		return "error"
	case pe.Skip:
		return "skip"
	case pe.Path == "":
		return "error"
	}
	return "fail"
}

// admission is the admission request of a case.
func (r request) admission() admissionv1.AdmissionRequest {
	return admissionv1.AdmissionRequest{
		Kind:      r.Kind,
		Resource:  r.Resource,
		Operation: admissionv1.Operation(r.Operation),
		Name:      r.Name,
		Namespace: r.Namespace,
		UserInfo:  r.UserInfo,
		Object:    runtime.RawExtension{Raw: r.Object},
		OldObject: runtime.RawExtension{Raw: r.OldObject},
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kyverno-pattern-oracle:", err)
	os.Exit(2)
}
