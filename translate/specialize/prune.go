// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/kyvap/kyvap/vap/celast"
)

// pruner is the last pass of a round: it removes what the folds decided
// (`true && x` is x, `false ? a : b` is b, `!true` is false) and evaluates
// the closed comprehensions the inliner leaves over a literal
// (`[null].map(v, F)[0]`). cel-go's constant folding does this and much
// more, but it revisits every macro call on each change, which is
// quadratic on the compiler's larger expressions; this pass changes only
// the nodes that need it.
type pruner struct {
	env     *cel.Env
	changes int
}

// Optimize implements cel.ASTOptimizer.
func (p *pruner) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	p.prune(ctx, a, a.Expr())
	return a
}

// prune simplifies e's children, then e.
func (p *pruner) prune(ctx *cel.OptimizerContext, a *ast.AST, e ast.Expr) {
	switch e.Kind() {
	case ast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			p.prune(ctx, a, call.Target())
		}
		for _, arg := range call.Args() {
			p.prune(ctx, a, arg)
		}
		p.simplify(ctx, e)
		// A comparison of literals (`1 in [0, 3]`, what distributing a
		// comparison over a choice of constants leaves): its value.
		if e.Kind() == ast.CallKind && comparisons[e.AsCall().FunctionName()] && literals(e) {
			p.replaceByValue(ctx, a, e)
		}
	case ast.SelectKind:
		p.prune(ctx, a, e.AsSelect().Operand())
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			p.prune(ctx, a, el)
		}
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			p.prune(ctx, a, me.Key())
			p.prune(ctx, a, me.Value())
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		p.prune(ctx, a, c.IterRange())
		p.prune(ctx, a, c.AccuInit())
		p.prune(ctx, a, c.LoopCondition())
		p.prune(ctx, a, c.LoopStep())
		p.prune(ctx, a, c.Result())
		p.evaluate(ctx, a, e)
	}
	// [lit].map(v, F)[0], closed: evaluated with its comprehension.
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.Index {
		p.evaluate(ctx, a, e)
	}
}

func boolLiteral(e ast.Expr) (bool, bool) {
	if e.Kind() != ast.LiteralKind {
		return false, false
	}
	b, ok := e.AsLiteral().(types.Bool)
	return bool(b), ok
}

// simplify applies the logical identities where an operand is a bool
// literal (exact: CEL's && and || are commutative, an error absorbed by
// the literal that decides).
func (p *pruner) simplify(ctx *cel.OptimizerContext, e ast.Expr) {
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalAnd, operators.LogicalOr:
		decides := call.FunctionName() == operators.LogicalOr // true decides ||, false &&
		for i, arg := range args {
			v, ok := boolLiteral(arg)
			if !ok {
				continue
			}
			p.changes++
			if v == decides {
				ctx.UpdateExpr(e, ctx.NewLiteral(types.Bool(v)))
			} else {
				ctx.UpdateExpr(e, args[1-i])
			}
			return
		}
	case operators.LogicalNot:
		if v, ok := boolLiteral(args[0]); ok {
			p.changes++
			ctx.UpdateExpr(e, ctx.NewLiteral(types.Bool(!v)))
		}
	case operators.Conditional:
		if v, ok := boolLiteral(args[0]); ok {
			p.changes++
			if v {
				ctx.UpdateExpr(e, args[1])
			} else {
				ctx.UpdateExpr(e, args[2])
			}
		}
	}
}

// evaluate replaces a closed expression whose value is a bool, a number
// or a string by that value: a comprehension, or an index into one, over
// literals only (what distributing a binding over a literal leaves).
func (p *pruner) evaluate(ctx *cel.OptimizerContext, a *ast.AST, e ast.Expr) {
	target := e
	if e.Kind() == ast.CallKind {
		target = e.AsCall().Args()[0]
	}
	if target.Kind() != ast.ComprehensionKind || !closed(e) {
		return
	}
	p.replaceByValue(ctx, a, e)
}

// replaceByValue replaces the closed expression e by its value, where it
// evaluates to a bool, a number, a string or null.
func (p *pruner) replaceByValue(ctx *cel.OptimizerContext, a *ast.AST, e ast.Expr) {
	text, err := cel.ExprToString(e, a.SourceInfo())
	if err != nil {
		return
	}
	checked, iss := p.env.Compile(text)
	if iss != nil && iss.Err() != nil {
		return
	}
	prg, err := p.env.Program(checked)
	if err != nil {
		return
	}
	out, _, err := prg.Eval(cel.NoVars())
	if err != nil {
		return
	}
	switch out.(type) {
	case types.Bool, types.Int, types.Uint, types.Double, types.String, types.Null:
		p.changes++
		ctx.UpdateExpr(e, ctx.NewLiteral(out))
	}
}

// literals reports whether e's arguments are constants: literals, or
// lists of literals.
func literals(e ast.Expr) bool {
	call := e.AsCall()
	if call.IsMemberFunction() {
		return false
	}
	for _, arg := range call.Args() {
		if !constant(arg) {
			return false
		}
	}
	return true
}

// closed reports whether e reads no identifier it does not bind.
func closed(e ast.Expr) bool {
	return celast.FreeIdents(e, func(ast.Expr) bool { return false })
}
