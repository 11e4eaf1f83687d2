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

	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
	"github.com/kyvap/kyvap/vap/celast"
)

// Libraries are the Kyverno libraries whose calls this package can write
// in the API server's CEL (some of their calls: see the package doc).
var Libraries = map[string]bool{"user": true}

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
func Rule(rule *model.Rule) (*model.Rule, error) {
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
	// Variables that are one call of parseServiceAccount: a map of its
	// fields, read only by field.
	accounts := map[string]bool{}
	for i, v := range out.Variables {
		arg, ok := parseCall(env, v.Expression)
		if !ok {
			continue
		}
		accounts[v.Name] = true
		out.Variables[i].Expression = "{" + quote("Name") + ": " + serviceAccountField(arg, "Name") + ", " + quote("Namespace") + ": " + serviceAccountField(arg, "Namespace") + "}"
	}
	rewrite := func(where, expression string) (string, error) {
		if expression == "" {
			return "", nil
		}
		written, err := Expression(env, expression, accounts)
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
		if accounts[out.Variables[i].Name] {
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

// parseCall returns the argument's text where expression is one call of
// parseServiceAccount.
func parseCall(env *cel.Env, expression string) (string, bool) {
	parsed, iss := env.Parse(expression)
	if iss != nil && iss.Err() != nil {
		return "", false
	}
	e := parsed.NativeRep().Expr()
	if e.Kind() != ast.CallKind || !parseServiceAccount[callName(e)] || len(e.AsCall().Args()) != 1 {
		return "", false
	}
	arg, err := cel.ExprToString(e.AsCall().Args()[0], parsed.NativeRep().SourceInfo())
	return arg, err == nil
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

// serviceAccountField is the CEL, in the API server's functions, of
// parseServiceAccount(arg).field. The argument is read once, in a
// one-element binding unless it is a path; split keeps the bytes as they
// are, as Go's strings do (substring counts code points).
func serviceAccountField(arg, field string) string {
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

// Expression rewrites the calls in expression; accounts are the
// variables that hold a service account (written as maps), which the
// expression may read only by field.
func Expression(env *cel.Env, expression string, accounts map[string]bool) (string, error) {
	parsed, iss := env.Parse(expression)
	if iss != nil && iss.Err() != nil {
		return "", iss.Err()
	}
	if len(cellib.Used(expression)) == 0 && !readsAny(parsed.NativeRep().Expr(), accounts) {
		return expression, nil
	}
	w := &writer{env: env, accounts: accounts}
	optimizer, err := cel.NewStaticOptimizer(w)
	if err != nil {
		return "", err
	}
	optimized, iss := optimizer.Optimize(env, parsed)
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

// writer is the optimizer pass that replaces each field of a call (and
// each field read of a variable holding one, which stays a field read of
// its map), and refuses any other read.
type writer struct {
	env      *cel.Env
	accounts map[string]bool
	err      error
}

// Optimize implements cel.ASTOptimizer.
func (w *writer) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	var replace []ast.Expr
	var visit func(e ast.Expr, parentReadsField bool)
	visit = func(e ast.Expr, parentReadsField bool) {
		if w.err != nil {
			return
		}
		switch e.Kind() {
		case ast.SelectKind:
			sel := e.AsSelect()
			operand := sel.Operand()
			_, isField := serviceAccountFields[sel.FieldName()]
			if operand.Kind() == ast.CallKind && parseServiceAccount[callName(operand)] {
				if !isField || sel.IsTestOnly() || len(operand.AsCall().Args()) != 1 {
					w.err = fmt.Errorf("%s's result is read as %s, not by its Name or Namespace", callName(operand), describe(e, a))
					return
				}
				replace = append(replace, e)
				return
			}
			if name, ok := variableName(e); ok && w.accounts[name] && !parentReadsField {
				w.err = fmt.Errorf("variables.%s (a service account) is read as a whole, not by its Name or Namespace", name)
				return
			}
			visit(operand, isField && !sel.IsTestOnly())
		case ast.CallKind:
			if parseServiceAccount[callName(e)] {
				w.err = fmt.Errorf("%s's result is read as a whole, not by its Name or Namespace", callName(e))
				return
			}
			fallthrough
		default:
			celast.EachChild(e, func(child ast.Expr, _ []string) { visit(child, false) })
		}
	}
	visit(a.Expr(), false)
	if w.err != nil {
		return a
	}
	// A call inside another's argument is not written (the outer call's
	// form copies the argument as it is): Rule finds it left and refuses.
	for _, sel := range replace {
		call := sel.AsSelect().Operand()
		arg, err := cel.ExprToString(call.AsCall().Args()[0], a.SourceInfo())
		if err != nil {
			w.err = err
			return a
		}
		parsed, iss := w.env.Parse(serviceAccountField(arg, sel.AsSelect().FieldName()))
		if iss != nil && iss.Err() != nil {
			w.err = iss.Err()
			return a
		}
		ctx.UpdateExpr(sel, ctx.CopyASTAndMetadata(parsed.NativeRep()))
	}
	return a
}

// describe is e as text, for a message.
func describe(e ast.Expr, a *ast.AST) string {
	text, err := cel.ExprToString(e, a.SourceInfo())
	if err != nil {
		return "another way"
	}
	return text
}
