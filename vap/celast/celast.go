// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package celast walks cel-go's expression trees knowing what a
// comprehension binds, for the passes that rewrite CEL (translate's
// specialize and libforms): which identifiers an expression reads that
// it does not bind itself.
package celast

import (
	"maps"

	"github.com/google/cel-go/common/ast"
)

// EachChild calls visit on each child of e, in the order CEL evaluates
// them, with the names the child sees bound by e: a comprehension's loop
// condition and step see its iteration variables and its accumulator,
// its result the accumulator; every other child sees none (nil).
func EachChild(e ast.Expr, visit func(child ast.Expr, binds []string)) {
	switch e.Kind() {
	case ast.SelectKind:
		visit(e.AsSelect().Operand(), nil)
	case ast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			visit(call.Target(), nil)
		}
		for _, arg := range call.Args() {
			visit(arg, nil)
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			visit(el, nil)
		}
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			visit(me.Key(), nil)
			visit(me.Value(), nil)
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			visit(f.AsStructField().Value(), nil)
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		visit(c.IterRange(), nil)
		visit(c.AccuInit(), nil)
		loop := []string{c.AccuVar(), c.IterVar()}
		if c.HasIterVar2() {
			loop = append(loop, c.IterVar2())
		}
		visit(c.LoopCondition(), loop)
		visit(c.LoopStep(), loop)
		visit(c.Result(), []string{c.AccuVar()})
	}
}

// Scope is a set of bound names.
type Scope map[string]bool

// With is s with the names added (s itself when there are none).
func (s Scope) With(names []string) Scope {
	if len(names) == 0 {
		return s
	}
	out := maps.Clone(s)
	if out == nil {
		out = Scope{}
	}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// FreeIdents calls found on each identifier e reads that e does not bind
// (a comprehension's variables are bound inside it); found returns false
// to stop the walk. It reports whether the walk went to its end.
func FreeIdents(e ast.Expr, found func(ident ast.Expr) bool) bool {
	return freeIdents(e, Scope{}, found)
}

func freeIdents(e ast.Expr, bound Scope, found func(ast.Expr) bool) bool {
	if e.Kind() == ast.IdentKind {
		if bound[e.AsIdent()] {
			return true
		}
		return found(e)
	}
	ok := true
	EachChild(e, func(child ast.Expr, binds []string) {
		ok = ok && freeIdents(child, bound.With(binds), found)
	})
	return ok
}
