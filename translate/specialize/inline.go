// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// inliner is the optimizer pass that evaluates, at compile time, the
// comprehensions over a one-element list literal that the compiler uses
// as bindings (`[x].all(v, B)`, `[x].exists(v, B)`, `[x].map(v, F)[0]`):
//
//   - over an identifier, the comprehension is its body with the variable
//     replaced (exact: a bool body of all or exists is the comprehension's
//     value; an identifier never fails to evaluate);
//   - over the element of a map binding, `[[x].map(v, F)[0]].all(k, G)`,
//     it is composed: `[x].all(v, [F].all(k, G))`;
//   - a comparison of a choice between constants with a constant is the
//     choice between the comparisons, and `c ? false : true` is `!c`;
//   - over `c ? a : b` where a branch is a literal, it is distributed,
//     `c ? [a].all(v, B) : [b].all(v, B)` (exact: the list element is
//     evaluated first, whatever fails fails both), so that the pruner
//     evaluates the literal's branch (a comprehension over a literal is
//     evaluated whole where its body reads nothing else).
//
// A round that makes the expression longer is not taken (Expression).
type inliner struct {
	env *cel.Env
	// shapes are the roots' shapes and the operations (the type folder's),
	// for what the facts say of a binding's element.
	shapes *typeFolder
	// safeElements are the bindings over a path known to evaluate, by ID.
	safeElements map[int64]bool
	changes      int
}

// Optimize implements cel.ASTOptimizer.
func (in *inliner) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	// Which elements are safe, on this AST (the optimizer renumbers
	// expressions between passes).
	in.safeElements = map[int64]bool{}
	if in.shapes != nil {
		budget := shapeBudget
		w := walker{
			roots: in.shapes.roots, operations: in.shapes.operations, typeOf: a.GetType, budget: &budget, taints: map[int64]bool{},
			found: func(ast.Expr, bool) {}, stripped: func(_, _ ast.Expr) {}, sized: func(_, _ ast.Expr, _ bool) {},
			conjoined:   func(_, _, _ ast.Expr) {},
			safeElement: func(id int64) { in.safeElements[id] = true },
		}
		w.walk(a.Expr(), scope{}, facts{})
	}
	in.visit(ctx, a, a.Expr())
	return a
}

// visit rewrites the outermost bindings under e, and does not descend
// into what it rewrote (the next round does).
func (in *inliner) visit(ctx *cel.OptimizerContext, a *ast.AST, e ast.Expr) {
	if in.rewrite(ctx, a, e) {
		in.changes++
		return
	}
	switch e.Kind() {
	case ast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			in.visit(ctx, a, call.Target())
		}
		for _, arg := range call.Args() {
			in.visit(ctx, a, arg)
		}
	case ast.SelectKind:
		in.visit(ctx, a, e.AsSelect().Operand())
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			in.visit(ctx, a, el)
		}
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			in.visit(ctx, a, me.Key())
			in.visit(ctx, a, me.Value())
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		in.visit(ctx, a, c.IterRange())
		in.visit(ctx, a, c.AccuInit())
		in.visit(ctx, a, c.LoopCondition())
		in.visit(ctx, a, c.LoopStep())
		in.visit(ctx, a, c.Result())
	}
}

// binding is a comprehension the inliner evaluates: over [element], its
// variable and body, and the expression it stands for (the
// comprehension, or the index [0] of a map).
type binding struct {
	at      ast.Expr
	comp    ast.Expr
	element ast.Expr
	name    string
	body    ast.Expr
}

// bindingAt recognises a binding at e.
func bindingAt(a *ast.AST, e ast.Expr) (binding, bool) {
	switch e.Kind() {
	case ast.ComprehensionKind:
		call, ok := a.SourceInfo().GetMacroCall(e.ID())
		if !ok || call.Kind() != ast.CallKind || len(call.AsCall().Args()) != 2 {
			return binding{}, false
		}
		c := e.AsComprehension()
		step := c.LoopStep()
		var body ast.Expr
		switch call.AsCall().FunctionName() {
		case "all", "exists":
			if step.Kind() != ast.CallKind || len(step.AsCall().Args()) != 2 {
				return binding{}, false
			}
			body = step.AsCall().Args()[1]
			// A body that is not a bool fails in the accumulation.
			if t := a.GetType(body.ID()); t == nil || t.Kind() != types.BoolKind {
				return binding{}, false
			}
		default:
			return binding{}, false
		}
		element, ok := oneElement(c.IterRange())
		if !ok || c.HasIterVar2() {
			return binding{}, false
		}
		return binding{at: e, comp: e, element: element, name: c.IterVar(), body: body}, true
	case ast.CallKind:
		// [x].map(v, F)[0]
		call := e.AsCall()
		if call.FunctionName() != operators.Index || len(call.Args()) != 2 {
			return binding{}, false
		}
		comp, index := call.Args()[0], call.Args()[1]
		if index.Kind() != ast.LiteralKind || index.AsLiteral() != types.IntZero || comp.Kind() != ast.ComprehensionKind {
			return binding{}, false
		}
		macro, ok := a.SourceInfo().GetMacroCall(comp.ID())
		if !ok || macro.Kind() != ast.CallKind || macro.AsCall().FunctionName() != "map" || len(macro.AsCall().Args()) != 2 {
			return binding{}, false
		}
		c := comp.AsComprehension()
		step := c.LoopStep()
		if step.Kind() != ast.CallKind || step.AsCall().FunctionName() != operators.Add || len(step.AsCall().Args()) != 2 {
			return binding{}, false
		}
		added := step.AsCall().Args()[1]
		if added.Kind() != ast.ListKind || len(added.AsList().Elements()) != 1 {
			return binding{}, false
		}
		element, ok := oneElement(c.IterRange())
		if !ok || c.HasIterVar2() {
			return binding{}, false
		}
		return binding{at: e, comp: comp, element: element, name: c.IterVar(), body: added.AsList().Elements()[0]}, true
	}
	return binding{}, false
}

// oneElement is the element of a one-element list literal.
func oneElement(e ast.Expr) (ast.Expr, bool) {
	if e.Kind() != ast.ListKind || len(e.AsList().OptionalIndices()) > 0 || len(e.AsList().Elements()) != 1 {
		return nil, false
	}
	return e.AsList().Elements()[0], true
}

// rewrite evaluates the binding at e, where it is one the inliner takes,
// or the operator over a choice of constants.
func (in *inliner) rewrite(ctx *cel.OptimizerContext, a *ast.AST, e ast.Expr) bool {
	if in.distributeOperator(ctx, a, e) || negateChoice(ctx, a, e) {
		return true
	}
	b, ok := bindingAt(a, e)
	if !ok {
		return false
	}
	switch b.element.Kind() {
	case ast.IdentKind:
		if binds(b.body, b.element.AsIdent()) {
			return false // the identifier would be captured
		}
		substitute(ctx, b.body, b.name, b.element)
		ctx.UpdateExpr(b.at, b.body)
		return true
	case ast.SelectKind:
		// A path known to evaluate, read where the body reads the
		// variable: cheaper than the list and the comprehension where it
		// is read once, or a few times when the path is short.
		if !in.safeElements[b.comp.ID()] || !cheaperInlined(occurrences(b.body, b.name), pathLength(b.element)) || capturesAny(b.body, b.element) {
			return false
		}
		path := b.element
		replaceFree(b.body, b.name, func(at ast.Expr) {
			ctx.UpdateExpr(at, ctx.CopyASTAndMetadata(subAST(a, path)))
		})
		ctx.UpdateExpr(b.at, b.body)
		return true
	case ast.CallKind:
		// [[x].map(v, F)[0]].all(k, G) is [x].all(v, [F].all(k, G)) where
		// G does not read v: F is evaluated once, with v bound, either way.
		if inner, ok := bindingAt(a, b.element); ok && b.comp == b.at && inner.comp != inner.at && !reads(b.body, inner.name) {
			return in.compose(ctx, a, b, inner)
		}
		call := b.element.AsCall()
		if call.FunctionName() != operators.Conditional {
			return false
		}
		args := call.Args()
		if args[1].Kind() != ast.LiteralKind && args[2].Kind() != ast.LiteralKind {
			return false
		}
		// c ? B[a] : B[b], each a copy of the binding over one branch.
		branch := func(value ast.Expr) ast.Expr {
			at := ctx.CopyASTAndMetadata(subAST(a, b.at))
			copied, _ := bindingAt(ast.NewAST(at, a.SourceInfo()), at)
			if copied.element == nil {
				copied = locate(at)
			}
			// dyn(): the variable keeps the type it had (a null literal's
			// would not check where the body reads it as a string).
			ctx.UpdateExpr(copied.element, ctx.NewCall("dyn", ctx.CopyASTAndMetadata(subAST(a, value))))
			return at
		}
		cond := ctx.CopyASTAndMetadata(subAST(a, args[0]))
		ctx.UpdateExpr(b.at, ctx.NewCall(operators.Conditional, cond, branch(args[1]), branch(args[2])))
		return true
	}
	return false
}

// bindingCost is what a one-element binding costs beyond reading its
// element and its variable, in CEL's runtime cost: the list literal
// (10) and the comprehension's loop over it, as measured (cel-go
// v0.29).
const bindingCost = 14

// cheaperInlined reports whether reading a path of length p (its
// identifier and selections, one unit of cost each) n times costs no
// more than binding it once and reading the variable n times.
func cheaperInlined(n, p int) bool {
	return n == 1 || n*p <= p+bindingCost+n
}

// pathLength is the number of nodes of a path: its identifier and its
// selections.
func pathLength(e ast.Expr) int {
	n := 1
	for e.Kind() == ast.SelectKind {
		n++
		e = e.AsSelect().Operand()
	}
	return n
}

// locate finds the list element of a copied binding (whose checked
// types the copy does not carry).
func locate(at ast.Expr) binding {
	comp := at
	if at.Kind() == ast.CallKind {
		comp = at.AsCall().Args()[0]
	}
	element, _ := oneElement(comp.AsComprehension().IterRange())
	return binding{at: at, comp: comp, element: element}
}

// binds reports whether e binds name in a comprehension.
func binds(e ast.Expr, name string) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if x.Kind() == ast.ComprehensionKind {
			c := x.AsComprehension()
			found = found || c.IterVar() == name || c.IterVar2() == name || c.AccuVar() == name
		}
	}))
	return found
}

// substitute replaces, in e, the identifier name where it is free by
// the identifier value.
func substitute(ctx *cel.OptimizerContext, e ast.Expr, name string, value ast.Expr) {
	replaceFree(e, name, func(at ast.Expr) { ctx.UpdateExpr(at, ctx.NewIdent(value.AsIdent())) })
}

// compose rewrites the binding b over the map binding inner as the
// binding over inner's element of b over inner's body. The new
// comprehensions are written as text, parsed, and spliced in: cel-go's
// optimizer has no constructor for a comprehension.
func (in *inliner) compose(ctx *cel.OptimizerContext, a *ast.AST, b, inner binding) bool {
	macro, ok := a.SourceInfo().GetMacroCall(b.at.ID())
	if !ok || in.env == nil {
		return false
	}
	name := macro.AsCall().FunctionName()
	x, err1 := cel.ExprToString(inner.element, a.SourceInfo())
	f, err2 := cel.ExprToString(inner.body, a.SourceInfo())
	g, err3 := cel.ExprToString(b.body, a.SourceInfo())
	if err1 != nil || err2 != nil || err3 != nil {
		return false
	}
	text := "[" + x + "]." + name + "(" + inner.name + ", [" + f + "]." + name + "(" + b.name + ", " + g + "))"
	parsed, iss := in.env.Parse(text)
	if iss != nil && iss.Err() != nil {
		return false
	}
	ctx.UpdateExpr(b.at, ctx.CopyASTAndMetadata(parsed.NativeRep()))
	return true
}

// reads reports whether the identifier name occurs in e.
func reads(e ast.Expr, name string) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		found = found || x.Kind() == ast.IdentKind && x.AsIdent() == name
	}))
	return found
}

// occurrences counts the free occurrences of the identifier name in e.
func occurrences(e ast.Expr, name string) int {
	n := 0
	replaceFree(e, name, func(ast.Expr) { n++ })
	return n
}

// capturesAny reports whether e binds an identifier that path reads.
func capturesAny(e, path ast.Expr) bool {
	captured := false
	ast.PreOrderVisit(path, ast.NewExprVisitor(func(x ast.Expr) {
		captured = captured || x.Kind() == ast.IdentKind && binds(e, x.AsIdent())
	}))
	return captured
}

// replaceFree calls replace on each free occurrence of the identifier
// name in e.
func replaceFree(e ast.Expr, name string, replace func(ast.Expr)) {
	switch e.Kind() {
	case ast.IdentKind:
		if e.AsIdent() == name {
			replace(e)
		}
	case ast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			replaceFree(call.Target(), name, replace)
		}
		for _, arg := range call.Args() {
			replaceFree(arg, name, replace)
		}
	case ast.SelectKind:
		replaceFree(e.AsSelect().Operand(), name, replace)
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			replaceFree(el, name, replace)
		}
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			replaceFree(me.Key(), name, replace)
			replaceFree(me.Value(), name, replace)
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		replaceFree(c.IterRange(), name, replace)
		replaceFree(c.AccuInit(), name, replace)
		if c.IterVar() == name || c.IterVar2() == name || c.AccuVar() == name {
			return // rebound inside
		}
		replaceFree(c.LoopCondition(), name, replace)
		replaceFree(c.LoopStep(), name, replace)
		replaceFree(c.Result(), name, replace)
	}
}

// comparisons are the operators distributeOperator takes.
var comparisons = map[string]bool{
	operators.Equals: true, operators.NotEquals: true, operators.In: true,
	operators.Less: true, operators.LessEquals: true, operators.Greater: true, operators.GreaterEquals: true,
}

// constant reports whether e is a literal or a list literal of literals.
func constant(e ast.Expr) bool {
	switch e.Kind() {
	case ast.LiteralKind:
		return true
	case ast.ListKind:
		if len(e.AsList().OptionalIndices()) > 0 {
			return false
		}
		for _, el := range e.AsList().Elements() {
			if el.Kind() != ast.LiteralKind {
				return false
			}
		}
		return true
	}
	return false
}

// distributeOperator rewrites a comparison of a choice between two
// constants with a constant, `(c ? 1 : 0) in [0, 3]`, as the choice
// between the comparisons, `c ? (1 in [0, 3]) : (0 in [0, 3])`, which
// the pruner decides (exact: the choice is evaluated first either
// way, and what fails fails both).
func (in *inliner) distributeOperator(ctx *cel.OptimizerContext, a *ast.AST, e ast.Expr) bool {
	if e.Kind() != ast.CallKind {
		return false
	}
	call := e.AsCall()
	if !comparisons[call.FunctionName()] || len(call.Args()) != 2 {
		return false
	}
	choice, other, left := call.Args()[0], call.Args()[1], true
	if !isConstantChoice(choice) {
		choice, other, left = other, choice, false
	}
	if !isConstantChoice(choice) || !constant(other) {
		return false
	}
	args := choice.AsCall().Args()
	branch := func(value ast.Expr) ast.Expr {
		v := ctx.CopyASTAndMetadata(subAST(a, value))
		o := ctx.CopyASTAndMetadata(subAST(a, other))
		if left {
			return ctx.NewCall(call.FunctionName(), v, o)
		}
		return ctx.NewCall(call.FunctionName(), o, v)
	}
	cond := ctx.CopyASTAndMetadata(subAST(a, args[0]))
	ctx.UpdateExpr(e, ctx.NewCall(operators.Conditional, cond, branch(args[1]), branch(args[2])))
	return true
}

// isConstantChoice reports whether e is `c ? k1 : k2` of two constants.
func isConstantChoice(e ast.Expr) bool {
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != operators.Conditional {
		return false
	}
	args := e.AsCall().Args()
	return constant(args[1]) && constant(args[2])
}

// negateChoice rewrites `c ? false : true` as `!c`, and `c ? true :
// false` as `c`, where c is a bool (exact: the same value, the same
// failure).
func negateChoice(ctx *cel.OptimizerContext, a *ast.AST, e ast.Expr) bool {
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != operators.Conditional {
		return false
	}
	args := e.AsCall().Args()
	if t := a.GetType(args[0].ID()); t == nil || t.Kind() != types.BoolKind {
		return false
	}
	if args[1].Kind() != ast.LiteralKind || args[2].Kind() != ast.LiteralKind {
		return false
	}
	l, r := args[1].AsLiteral(), args[2].AsLiteral()
	switch {
	case l == types.False && r == types.True:
		ctx.UpdateExpr(e, ctx.NewCall(operators.LogicalNot, args[0]))
	case l == types.True && r == types.False:
		ctx.UpdateExpr(e, args[0])
	default:
		return false
	}
	return true
}

// subAST is the AST of e alone, with the macro calls inside it: copying
// it (CopyASTAndMetadata) then costs e's size, not the whole
// expression's source information.
func subAST(a *ast.AST, e ast.Expr) *ast.AST {
	info := ast.NewSourceInfo(nil)
	calls := a.SourceInfo().MacroCalls()
	ast.PostOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if call, ok := calls[x.ID()]; ok {
			info.SetMacroCall(x.ID(), call)
		}
	}))
	return ast.NewAST(e, info)
}
