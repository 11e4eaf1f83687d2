// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package libforms writes the calls of Kyverno's CEL libraries that have
// an exact form in the API server's own CEL in that form, so that a
// ValidatingPolicy calling them can still be a ValidatingAdmissionPolicy.
// It is a back-end pass: the model keeps the expressions as the user
// wrote them (kyvap's engine evaluates those, with Kyverno's libraries),
// and only the VAP gets the rewritten ones.
//
// The calls it writes:
//
//   - user: parseServiceAccount(x).Name and .Namespace (and
//     user.parseServiceAccount), as splits of x: Kyverno's ServiceAccount
//     has the namespace and the name after "system:serviceaccount:", cut at
//     the first ':' after it, and empty fields for any other string. A
//     variable whose expression is the call is written as a map of the
//     two fields.
//   - resource: Get("v1", "namespaces", "", ns) of the request's
//     namespace (request.namespace, or object.metadata.namespace where
//     the object carries it), as namespaceObject, where every resource
//     the rule matches is namespaced, and the result is read only through
//     what namespaceObject shares with Kyverno's read of the Namespace
//     (namespaceRead).
//   - resource: Get of one named object of a kind the cluster serves
//     (constants, in a constant namespace or the request's), as the VAP's
//     parameter (params, paramKind, paramRef with parameterNotFoundAction
//     Allow), where every validation is proven true with the object
//     missing, as Kyverno's Get then gives null (params.go).
//
// A call read any other way (the ServiceAccount compared or passed as a
// whole, a presence test on a field) is left, and the rule keeps the
// library: it stays on kyvap's webhook, with the reason.
package libforms

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
	"github.com/kyvap/kyvap/vap/celast"
)

// Libraries are the Kyverno libraries whose calls this package can write
// in the API server's CEL (some of their calls: see the package doc).
var Libraries = map[string]bool{"user": true, "resource": true}

// Options say what the rule's requests are, for the forms that depend on
// it.
type Options struct {
	// NamespacedOnly: every resource the rule matches is namespaced, and
	// none is a Namespace (request.namespace names an existing namespace:
	// the API server refuses a request in a missing one).
	NamespacedOnly bool
	// ObjectInNamespace: NamespacedOnly, the rule matches CREATE and
	// UPDATE only and no subresource, so object.metadata.namespace is the
	// request's namespace (the API server sets and checks it before
	// validating admission).
	ObjectInNamespace bool
	// Kinds are the kinds the cluster serves, by apiVersion and plural
	// resource ("v1/configmaps", "apps/v1/deployments"): a resource.Get
	// of one named object of such a kind can be the VAP's parameter.
	Kinds map[string]ServedKind
	// PolicyNamespace is a NamespacedValidatingPolicy's namespace, where
	// its three-argument resource.Get reads.
	PolicyNamespace string
}

// ServedKind is one served resource's kind and scope.
type ServedKind struct {
	Kind       string
	Namespaced bool
}

// serviceAccountPrefix starts every service account's username.
const serviceAccountPrefix = "system:serviceaccount:"

// serviceAccountFields are the fields of Kyverno's user.ServiceAccount,
// by the index of their part in the username split at ':' (at most 4
// parts: "system", "serviceaccount", the namespace, the name with any
// further ':').
var serviceAccountFields = map[string]int{"Namespace": 2, "Name": 3}

// parseServiceAccount are the names of Kyverno's function.
var parseServiceAccount = map[string]bool{"parseServiceAccount": true, "user.parseServiceAccount": true}

// Writable reports whether every one of libs is a library this package
// writes (some of whose calls it writes).
func Writable(libs []string) bool {
	for _, lib := range libs {
		if !Libraries[lib] {
			return false
		}
	}
	return true
}

// Rule returns a copy of rule whose expressions call no library this
// package writes, where it can write every call; otherwise rule itself
// and why not. A rule that uses another library is returned as it is,
// with the reason.
func Rule(rule *model.Rule, opts Options) (*model.Rule, error) {
	var others []string
	for _, lib := range rule.Libraries {
		if !Libraries[lib] {
			others = append(others, lib)
		}
	}
	if len(others) > 0 {
		return rule, fmt.Errorf("uses %s, which has no form in the API server's CEL", strings.Join(others, ", "))
	}
	env, err := libraryEnv(rule.Libraries)
	if err != nil {
		return rule, err
	}
	out := rule.DeepCopy()
	w := &writer{env: env, opts: opts, accounts: map[string]bool{}, namespaces: map[string]bool{}, params: map[string]bool{}}
	// Variables that are one call: parseServiceAccount's a map of its
	// fields, read only by field; the namespace's namespaceObject, read
	// only where the two agree.
	written := map[string]bool{}
	for i, v := range out.Variables {
		call, arg, ok := w.topCall(v.Expression)
		switch {
		case !ok:
		case parseServiceAccount[call]:
			w.accounts[v.Name], written[v.Name] = true, true
			out.Variables[i].Expression = "{" + quote("Name") + ": " + serviceAccountFieldForm(arg, "Name") + ", " + quote("Namespace") + ": " + serviceAccountFieldForm(arg, "Namespace") + "}"
		case call == namespaceGetForm:
			w.namespaces[v.Name], written[v.Name] = true, true
			out.Variables[i].Expression = namespaceObject
		case call == paramGetForm:
			w.root = true
			form, err := w.expression(v.Expression)
			w.root = false
			if err != nil {
				return rule, fmt.Errorf("variables[%s]: %w", v.Name, err)
			}
			w.params[v.Name], written[v.Name] = true, true
			out.Variables[i].Expression = form
		}
	}
	rewrite := func(where, expression string) (string, error) {
		if expression == "" {
			return "", nil
		}
		written, err := w.expression(expression)
		if err != nil {
			return "", fmt.Errorf("%s: %w", where, err)
		}
		return written, nil
	}
	for i := range out.MatchConditions {
		if out.MatchConditions[i].Expression, err = rewrite("matchConditions["+out.MatchConditions[i].Name+"]", out.MatchConditions[i].Expression); err != nil {
			return rule, err
		}
	}
	for i := range out.Variables {
		if written[out.Variables[i].Name] {
			continue
		}
		if out.Variables[i].Expression, err = rewrite("variables["+out.Variables[i].Name+"]", out.Variables[i].Expression); err != nil {
			return rule, err
		}
	}
	for i := range out.Validations {
		at := fmt.Sprintf("validations[%d]", i)
		if out.Validations[i].Expression, err = rewrite(at, out.Validations[i].Expression); err != nil {
			return rule, err
		}
		if out.Validations[i].MessageExpression, err = rewrite(at+".messageExpression", out.Validations[i].MessageExpression); err != nil {
			return rule, err
		}
	}
	for i := range out.AuditAnnotations {
		if out.AuditAnnotations[i].ValueExpression, err = rewrite("auditAnnotations["+out.AuditAnnotations[i].Key+"]", out.AuditAnnotations[i].ValueExpression); err != nil {
			return rule, err
		}
	}
	for i := range out.Exceptions {
		for j := range out.Exceptions[i].MatchConditions {
			mc := &out.Exceptions[i].MatchConditions[j]
			if mc.Expression, err = rewrite("PolicyException "+out.Exceptions[i].Key()+" matchConditions["+mc.Name+"]", mc.Expression); err != nil {
				return rule, err
			}
		}
	}
	out.Libraries = cellib.Used(out.Expressions()...)
	if len(out.Libraries) > 0 {
		return rule, fmt.Errorf("still uses %s after the rewrite", strings.Join(out.Libraries, ", "))
	}
	if w.param != nil {
		if err := withParam(out, w.param); err != nil {
			return rule, err
		}
	}
	return out, nil
}

// libraryEnv is the API server's environment (variables dyn) with the
// libraries declared, in which the expressions as written compile.
func libraryEnv(libs []string) (*cel.Env, error) {
	base, err := vap.DynEnv(nil)
	if err != nil {
		return nil, err
	}
	return base.Extend(cellib.EnvOptions(libs)...)
}

// namespaceGetForm is what topCall names a call of resource.Get that
// reads the request's namespace (where the options make it one).
const namespaceGetForm = "resource.Get(v1, namespaces, '', the request's namespace)"

// namespaceObject is the VAP's variable holding the request's namespace.
const namespaceObject = "namespaceObject"

// topCall names the call that expression is, where it is one call of
// parseServiceAccount (with its argument's text) or a read of the
// request's namespace (namespaceGetForm).
func (w *writer) topCall(expression string) (name, arg string, ok bool) {
	parsed, iss := w.env.Parse(expression)
	if iss != nil && iss.Err() != nil {
		return "", "", false
	}
	e := parsed.NativeRep().Expr()
	if e.Kind() != ast.CallKind {
		return "", "", false
	}
	name = callName(e)
	switch {
	case parseServiceAccount[name] && len(e.AsCall().Args()) == 1:
		arg, err := cel.ExprToString(e.AsCall().Args()[0], parsed.NativeRep().SourceInfo())
		return name, arg, err == nil
	case resourceGet[name] && w.readsRequestNamespace(e):
		return namespaceGetForm, "", true
	case resourceGet[name]:
		return paramGetForm, "", true
	}
	return "", "", false
}

// callName is a call's function name as written: user.parseServiceAccount
// parses as a member call on the identifier user.
func callName(e ast.Expr) string {
	call := e.AsCall()
	if call.IsMemberFunction() {
		if t := call.Target(); t.Kind() == ast.IdentKind {
			return t.AsIdent() + "." + call.FunctionName()
		}
		return ""
	}
	return call.FunctionName()
}

// serviceAccountFieldForm is the CEL, in the API server's functions, of
// parseServiceAccount(arg).field. The argument is read once, in a
// one-element binding unless it is a path; split keeps the bytes as they
// are, as Go's strings do (substring counts code points).
func serviceAccountFieldForm(arg, field string) string {
	part := serviceAccountFields[field]
	form := func(x string) string {
		return fmt.Sprintf("(%s.startsWith(%s) && size(%s.split(':', 4)) == 4 ? %s.split(':', 4)[%d] : '')", x, quote(serviceAccountPrefix), x, x, part)
	}
	if isPath(arg) {
		return form(arg)
	}
	return "[" + arg + "].map(kyvapUsername, " + form("kyvapUsername") + ")[0]"
}

// isPath reports whether text is an identifier followed by field
// selections.
func isPath(text string) bool {
	for i, part := range strings.Split(text, ".") {
		if part == "" {
			return false
		}
		for j, r := range part {
			letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			if !letter && (j == 0 || r < '0' || r > '9') {
				return false
			}
		}
		if i == 0 && part == "kyvapUsername" {
			return false
		}
	}
	return true
}

func quote(s string) string { return "'" + s + "'" }

// expression rewrites the calls in expression, and checks the reads of
// the variables Rule wrote.
func (w *writer) expression(expression string) (string, error) {
	parsed, iss := w.env.Parse(expression)
	if iss != nil && iss.Err() != nil {
		return "", iss.Err()
	}
	if len(cellib.Used(expression)) == 0 && !readsAny(parsed.NativeRep().Expr(), w.accounts) && !readsAny(parsed.NativeRep().Expr(), w.namespaces) && !readsAny(parsed.NativeRep().Expr(), w.params) {
		return expression, nil
	}
	w.err = nil
	optimizer, err := cel.NewStaticOptimizer(w)
	if err != nil {
		return "", err
	}
	optimized, iss := optimizer.Optimize(w.env, parsed)
	if w.err != nil {
		return "", w.err
	}
	if iss != nil && iss.Err() != nil {
		return "", iss.Err()
	}
	return cel.AstToString(optimized)
}

// readsAny reports whether e reads variables.<name> for one of names.
func readsAny(e ast.Expr, names map[string]bool) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if name, ok := variableName(x); ok && names[name] {
			found = true
		}
	}))
	return found
}

// variableName is name where e is variables.name.
func variableName(e ast.Expr) (string, bool) {
	if e.Kind() != ast.SelectKind || e.AsSelect().IsTestOnly() {
		return "", false
	}
	operand := e.AsSelect().Operand()
	if operand.Kind() != ast.IdentKind || operand.AsIdent() != "variables" {
		return "", false
	}
	return e.AsSelect().FieldName(), true
}

// writer is the optimizer pass that writes each call that has a form
// (and checks each read of a variable Rule wrote), and refuses any other
// call or read.
type writer struct {
	env  *cel.Env
	opts Options
	// accounts hold a service account (a map of its fields), namespaces
	// the request's namespace (namespaceObject), by variable name.
	accounts, namespaces map[string]bool
	// params are the variables holding the parameter, param the one
	// object the rule reads with resource.Get as its parameter.
	params map[string]bool
	param  *paramGet
	// root: the expression is a variable's that is one call, written as
	// a whole.
	root bool
	err  error
}

// resourceGet are the names of the resource library's Get.
var resourceGet = map[string]bool{"resource.Get": true, "resource.get": true}

// Optimize implements cel.ASTOptimizer.
func (w *writer) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	var userFields, namespaceReads, paramReads []ast.Expr
	// up are e's ancestors, the parent last.
	var visit func(e ast.Expr, up []ast.Expr)
	visit = func(e ast.Expr, up []ast.Expr) {
		if w.err != nil {
			return
		}
		if name, ok := variableName(e); ok {
			switch {
			case w.accounts[name]:
				if _, ok := serviceAccountField(up); !ok {
					w.err = fmt.Errorf("variables.%s (a service account) is read as a whole, not by its Name or Namespace", name)
				}
				return
			case w.namespaces[name]:
				w.err = namespaceRead("variables."+name, up)
				return
			case w.params[name]:
				w.err = paramRead("variables."+name, up)
				return
			}
		}
		if e.Kind() == ast.CallKind {
			name := callName(e)
			switch {
			case parseServiceAccount[name]:
				if _, ok := serviceAccountField(up); !ok || len(e.AsCall().Args()) != 1 {
					w.err = fmt.Errorf("%s's result is read as %s, not by its Name or Namespace", name, describe(parentOr(e, up), a))
					return
				}
				userFields = append(userFields, up[len(up)-1])
				return
			case resourceGet[name] && w.readsRequestNamespace(e):
				if w.err = namespaceRead(name+"(v1, namespaces, ...)", up); w.err == nil {
					namespaceReads = append(namespaceReads, e)
				}
				return
			case resourceGet[name]:
				g, err := w.paramCall(e, a)
				if err == nil {
					err = w.useParam(g)
				}
				if err == nil && (!w.root || len(up) > 0) {
					err = paramRead(name+"(...)", up)
				}
				if w.err = err; err == nil {
					paramReads = append(paramReads, e)
				}
				return
			case strings.HasPrefix(name, "resource."):
				w.err = fmt.Errorf("%s has no form in the API server's CEL", describe(e, a))
				return
			}
		}
		celast.EachChild(e, func(child ast.Expr, _ []string) { visit(child, append(up[:len(up):len(up)], e)) })
	}
	visit(a.Expr(), nil)
	if w.err != nil {
		return a
	}
	// A call inside another's argument is not written (the outer call's
	// form copies the argument as it is): Rule finds it left and refuses.
	for _, sel := range userFields {
		call := sel.AsSelect().Operand()
		arg, err := cel.ExprToString(call.AsCall().Args()[0], a.SourceInfo())
		if err != nil {
			w.err = err
			return a
		}
		parsed, iss := w.env.Parse(serviceAccountFieldForm(arg, sel.AsSelect().FieldName()))
		if iss != nil && iss.Err() != nil {
			w.err = iss.Err()
			return a
		}
		ctx.UpdateExpr(sel, ctx.CopyASTAndMetadata(parsed.NativeRep()))
	}
	for _, call := range namespaceReads {
		ctx.UpdateExpr(call, ctx.NewIdent(namespaceObject))
	}
	for _, call := range paramReads {
		ctx.UpdateExpr(call, ctx.NewIdent("params"))
	}
	return a
}

// parentOr is e's parent, or e at the root.
func parentOr(e ast.Expr, up []ast.Expr) ast.Expr {
	if len(up) == 0 {
		return e
	}
	return up[len(up)-1]
}

// serviceAccountField is the field of a service account the parent (last
// of up) reads: a selection, not a presence test, of Name or Namespace.
func serviceAccountField(up []ast.Expr) (string, bool) {
	if len(up) == 0 {
		return "", false
	}
	p := up[len(up)-1]
	if p.Kind() != ast.SelectKind || p.AsSelect().IsTestOnly() {
		return "", false
	}
	_, ok := serviceAccountFields[p.AsSelect().FieldName()]
	return p.AsSelect().FieldName(), ok
}

// readsRequestNamespace reports whether call is resource.Get("v1",
// "namespaces", "", ns) of the request's namespace, as the options make
// it one: request.namespace where every resource is namespaced,
// object.metadata.namespace where the object carries it too.
func (w *writer) readsRequestNamespace(call ast.Expr) bool {
	args := call.AsCall().Args()
	if len(args) != 4 || !stringLiteral(args[0], "v1") || !stringLiteral(args[1], "namespaces") || !stringLiteral(args[2], "") {
		return false
	}
	switch key, _ := pathOf(args[3]); key {
	case "request.namespace":
		return w.opts.NamespacedOnly
	case "object.metadata.namespace":
		return w.opts.ObjectInNamespace
	}
	return false
}

func stringLiteral(e ast.Expr, want string) bool {
	if e.Kind() != ast.LiteralKind {
		return false
	}
	s, ok := e.AsLiteral().Value().(string)
	return ok && s == want
}

// pathOf is the text of an identifier followed by selections.
func pathOf(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent(), true
	case ast.SelectKind:
		if e.AsSelect().IsTestOnly() {
			return "", false
		}
		base, ok := pathOf(e.AsSelect().Operand())
		return base + "." + e.AsSelect().FieldName(), ok
	}
	return "", false
}

// namespaceMetadata are the fields of metadata the API server's
// namespaceObject keeps (CreateNamespaceObject in
// k8s.io/apiserver/pkg/admission/plugin/cel): Kyverno's read of the
// Namespace has these with the same values, and also apiVersion, kind,
// managedFields and ownerReferences, which namespaceObject lacks.
var namespaceMetadata = map[string]bool{
	"name": true, "generateName": true, "namespace": true, "uid": true, "resourceVersion": true, "generation": true,
	"creationTimestamp": true, "deletionTimestamp": true, "deletionGracePeriodSeconds": true,
	"labels": true, "annotations": true, "finalizers": true,
}

// namespaceRead checks how the request's namespace (what, read at the
// end of up's chain) is read: compared with null, or through spec,
// status, or one of the metadata fields namespaceObject keeps; anything
// else reads what the two do not share.
func namespaceRead(what string, up []ast.Expr) error {
	return objectRead(what, up, func(f string) bool { return f == "spec" || f == "status" },
		"it keeps spec, status and metadata's name, labels, annotations, uid and the like; not apiVersion, kind or managedFields")
}

// objectRead checks how an object read two ways (what, read at the end
// of up's chain) is read: compared with null, through a top-level field
// that top allows, or through metadata's fields the two reads share
// (namespaceMetadata); kept says what the reads share, for the error.
func objectRead(what string, up []ast.Expr, top func(string) bool, kept string) error {
	field := func(e ast.Expr) (string, bool) {
		switch {
		case e.Kind() == ast.SelectKind:
			return e.AsSelect().FieldName(), true
		case e.Kind() == ast.CallKind && (e.AsCall().FunctionName() == "_?._" || e.AsCall().FunctionName() == "_[_]") && len(e.AsCall().Args()) == 2:
			if lit := e.AsCall().Args()[1]; lit.Kind() == ast.LiteralKind {
				s, ok := lit.AsLiteral().Value().(string)
				return s, ok
			}
		}
		return "", false
	}
	at := func(i int) ast.Expr { // the i-th ancestor, 1 the parent
		if len(up) < i {
			return nil
		}
		return up[len(up)-i]
	}
	p := at(1)
	switch {
	case p == nil:
	case p.Kind() == ast.CallKind && p.AsCall().FunctionName() == "type" && len(p.AsCall().Args()) == 1:
		if g := at(2); g != nil && comparedWithNull(g, p, true) {
			return nil
		}
	case comparedWithNull(p, nil, false):
		return nil
	default:
		f, ok := field(p)
		presence := p.Kind() == ast.SelectKind && p.AsSelect().IsTestOnly()
		switch {
		case ok && top(f):
			return nil
		case ok && f == "metadata" && !presence:
			if g := at(2); g != nil {
				if m, ok := field(g); ok && namespaceMetadata[m] {
					return nil
				}
			}
		case ok && f == "metadata":
			return nil // has(x.metadata)
		}
	}
	return fmt.Errorf("%s is read as a whole or by a field the API server's form lacks (%s)", what, kept)
}

// comparedWithNull reports whether e is `x == null` or `x != null` (with
// typeOf, `type(x) == type(null)`), x the other argument than side.
func comparedWithNull(e, side ast.Expr, typeOf bool) bool {
	if e.Kind() != ast.CallKind {
		return false
	}
	call := e.AsCall()
	if call.FunctionName() != "_==_" && call.FunctionName() != "_!=_" {
		return false
	}
	for _, other := range call.Args() {
		if other == side {
			continue
		}
		if !typeOf && other.Kind() == ast.LiteralKind && other.AsLiteral() == types.NullValue {
			return true
		}
		if typeOf && other.Kind() == ast.CallKind && other.AsCall().FunctionName() == "type" && len(other.AsCall().Args()) == 1 {
			arg := other.AsCall().Args()[0]
			if arg.Kind() == ast.LiteralKind && arg.AsLiteral() == types.NullValue {
				return true
			}
		}
	}
	return false
}

// describe is e as text, for a message.
func describe(e ast.Expr, a *ast.AST) string {
	text, err := cel.ExprToString(e, a.SourceInfo())
	if err != nil {
		return "another way"
	}
	return text
}
