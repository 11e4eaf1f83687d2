// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package libforms

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
	"github.com/kyvap/kyvap/vap/celast"
)

// paramGet is one named object that resource.Get reads, which the VAP
// reads as its parameter: paramKind from the apiVersion and the kind the
// cluster serves for the resource, paramRef from the namespace and name.
type paramGet struct {
	APIVersion, Resource string
	Kind                 ServedKind
	// Namespace is the object's namespace where it is a constant
	// (paramRef.namespace); FromRequest: the request's namespace
	// (paramRef.namespace unset, which the API server reads as the
	// request's namespace for a namespaced paramKind).
	Namespace   string
	FromRequest bool
	Name        string
}

func (g *paramGet) String() string {
	ns := quote(g.Namespace)
	if g.FromRequest {
		ns = "the request's namespace"
	}
	return fmt.Sprintf("resource.Get(%s, %s, %s, %s)", quote(g.APIVersion), quote(g.Resource), ns, quote(g.Name))
}

// paramGetForm is what topCall names a call of resource.Get of one named
// object (which paramCall checks).
const paramGetForm = "resource.Get(one named object)"

// paramCall reads call, a resource.Get that is not the request's
// namespace, as one named object: constants for the apiVersion, the
// resource and the name; a constant or the request's namespace for the
// namespace; a kind the cluster serves in a scope that agrees with the
// namespace.
func (w *writer) paramCall(call ast.Expr, a *ast.AST) (*paramGet, error) {
	args := call.AsCall().Args()
	// A ValidatingPolicy's Get(apiVersion, resource, namespace, name), a
	// NamespacedValidatingPolicy's Get(apiVersion, resource, name) in its
	// own namespace; the forms that take a GroupVersionResource value
	// (toGVR) have no constants to read.
	inPolicyNamespace := len(args) == 3 && w.opts.PolicyNamespace != ""
	if len(args) != 4 && !inPolicyNamespace {
		return nil, fmt.Errorf("%s names its resource by a GroupVersionResource value, not by constants", describe(call, a))
	}
	if _, ok := literalString(args[0]); !ok {
		return nil, fmt.Errorf("%s names its resource by a GroupVersionResource value, not by constants", describe(call, a))
	}
	apiVersion, ok1 := literalString(args[0])
	resource, ok2 := literalString(args[1])
	name, ok3 := literalString(args[len(args)-1])
	if !ok1 || !ok2 || !ok3 || name == "" {
		return nil, fmt.Errorf("%s does not name one object by constants (apiVersion, resource and name), as a VAP's parameter is named (paramKind, paramRef.name)", describe(call, a))
	}
	kind, ok := w.opts.Kinds[apiVersion+"/"+resource]
	if !ok {
		return nil, fmt.Errorf("%s reads %s %s, which the cluster does not serve as a kind (a VAP's paramKind)", describe(call, a), apiVersion, resource)
	}
	g := &paramGet{APIVersion: apiVersion, Resource: resource, Kind: kind, Name: name}
	if inPolicyNamespace {
		g.Namespace = w.opts.PolicyNamespace
	} else if ns, ok := literalString(args[2]); ok {
		g.Namespace = ns
	} else {
		switch key, _ := pathOf(args[2]); {
		case key == "request.namespace" && w.opts.NamespacedOnly, key == "object.metadata.namespace" && w.opts.ObjectInNamespace:
			g.FromRequest = true
		default:
			return nil, fmt.Errorf("%s reads a namespace that is neither a constant nor the request's (a VAP's paramRef.namespace, or the request's namespace where it is unset)", describe(call, a))
		}
	}
	switch {
	case kind.Namespaced && !g.FromRequest && g.Namespace == "":
		return nil, fmt.Errorf("%s reads the namespaced %s with no namespace", describe(call, a), kind.Kind)
	case !kind.Namespaced && (g.FromRequest || g.Namespace != ""):
		return nil, fmt.Errorf("%s reads the cluster-scoped %s in a namespace", describe(call, a), kind.Kind)
	}
	return g, nil
}

func literalString(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}

// useParam records g as the rule's parameter: a VAP has one.
func (w *writer) useParam(g *paramGet) error {
	if w.param != nil && w.param.String() != g.String() {
		return fmt.Errorf("reads two objects, %s and %s: a VAP has one parameter", w.param, g)
	}
	w.param = g
	return nil
}

// paramRead checks how the parameter (what, read at the end of up's
// chain) is read: compared with null, or through a field other than
// apiVersion and kind, or one of the metadata fields both reads share.
// Kyverno's Get reads the object from the API, the API server's params
// from its informer: they agree on the object's content.
func paramRead(what string, up []ast.Expr) error {
	return objectRead(what, up, func(f string) bool { return f != "apiVersion" && f != "kind" && f != "metadata" },
		"it is read through its fields and metadata's name, labels, annotations, uid and the like; not as a whole, nor its apiVersion, kind or managedFields")
}

// withParam finishes out, whose calls of resource.Get were written as
// params: it sets the parameter and checks that the VAP's binding can
// allow a missing parameter (parameterNotFoundAction Allow, under which
// the API server admits without evaluating the policy) with Kyverno's
// verdicts. Kyverno's Get gives null for a missing object and evaluates
// the rule, so every validation must be true with the parameter null,
// whatever the request; and nothing the API server evaluates before or
// beside the validations (match conditions, audit annotations, the
// exceptions' conditions) may read the parameter.
func withParam(out *model.Rule, g *paramGet) error {
	if out.ParamKind != nil {
		return fmt.Errorf("reads %s beside the rule's own parameters", g)
	}
	readsParams := func(expression string) bool {
		env, err := vap.DynEnv(nil)
		if err != nil || expression == "" {
			return false
		}
		parsed, iss := env.Parse(expression)
		if iss != nil && iss.Err() != nil {
			return true
		}
		return !celast.FreeIdents(parsed.NativeRep().Expr(), func(id ast.Expr) bool { return id.AsIdent() != "params" })
	}
	for _, mc := range out.MatchConditions {
		if readsParams(mc.Expression) {
			return fmt.Errorf("matchConditions[%s] reads %s: the API server evaluates no condition where the parameter is missing", mc.Name, g)
		}
	}
	for _, aa := range out.AuditAnnotations {
		if readsParams(aa.ValueExpression) {
			return fmt.Errorf("auditAnnotations[%s] reads %s", aa.Key, g)
		}
	}
	for _, ex := range out.Exceptions {
		for _, mc := range ex.MatchConditions {
			if readsParams(mc.Expression) {
				return fmt.Errorf("PolicyException %s reads %s", ex.Key(), g)
			}
		}
	}
	if err := holdsWithoutParam(out); err != nil {
		return fmt.Errorf("with %s missing, %w: Kyverno evaluates the rule with null, and the VAP's binding could only allow or deny every request", g, err)
	}
	ns := g.Namespace
	if g.FromRequest {
		ns = ""
	}
	allow := admissionregistrationv1.AllowAction
	out.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: g.APIVersion, Kind: g.Kind.Kind}
	out.ParamRef = &admissionregistrationv1.ParamRef{Name: g.Name, Namespace: ns, ParameterNotFoundAction: &allow}
	return nil
}

// holdsWithoutParam proves that every validation of rule is true where
// params is null, for every request: it evaluates each with params null
// and everything else unknown (cel-go's partial evaluation), the
// variables in order, and requires true. Unknowns stay unknown through
// every operator but the logical ones, which CEL defines to absorb them
// (true || unknown is true), so true is true for every value of the
// unknowns.
func holdsWithoutParam(rule *model.Rule) error {
	env, err := vap.DynEnv(nil)
	if err != nil {
		return err
	}
	unknown := []*cel.AttributePatternType{}
	for _, name := range []string{"object", "oldObject", "request", "namespaceObject", "authorizer"} {
		unknown = append(unknown, cel.AttributePattern(name))
	}
	known := map[string]any{}
	eval := func(expression string) (ref.Val, error) {
		checked, iss := env.Compile(expression)
		if iss != nil && iss.Err() != nil {
			return nil, iss.Err()
		}
		prg, err := env.Program(checked, cel.EvalOptions(cel.OptPartialEval))
		if err != nil {
			return nil, err
		}
		vars, err := cel.PartialVars(map[string]any{"params": types.NullValue, "variables": known}, unknown...)
		if err != nil {
			return nil, err
		}
		val, _, err := prg.Eval(vars)
		if err != nil {
			return types.NewErr("%v", err), nil
		}
		return val, nil
	}
	for _, v := range rule.Variables {
		val, err := eval(v.Expression)
		if err != nil {
			return fmt.Errorf("variables[%s]: %w", v.Name, err)
		}
		if types.IsUnknownOrError(val) {
			unknown = append(unknown, cel.AttributePattern("variables").QualString(v.Name))
			continue
		}
		known[v.Name] = val
	}
	for i, v := range rule.Validations {
		val, err := eval(v.Expression)
		if err != nil {
			return fmt.Errorf("validations[%d]: %w", i, err)
		}
		if val != types.True {
			return fmt.Errorf("validations[%d] is not true for every request", i)
		}
	}
	return nil
}
