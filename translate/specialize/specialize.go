// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/kyvap/kyvap/vap"
	"github.com/kyvap/kyvap/vap/celast"
)

// shapesMu guards shapeCache.
var shapesMu sync.Mutex

// ObjectShape is what is known, before any request, of the objects a
// ValidatingAdmissionPolicy matching these resource rules reads: nil when
// a rule names a resource (or wildcard) that is not a built-in one known
// here, for whose objects nothing is known.
type ObjectShape struct {
	// s is what the types say; object what they and the API server's
	// validation say (AdmittedFacts).
	s, object *shape
	// objectPresent: `object` is never null (CREATE and UPDATE only).
	objectPresent bool
	// operations are the operations the VAP matches: request.operation
	// is one of them.
	operations map[string]bool
}

// ShapeOf returns the shape of the objects of the resources that
// constraints match (its resource rules; exclusions only narrow them).
func ShapeOf(constraints *admissionregistrationv1.MatchResources) *ObjectShape {
	if constraints == nil || len(constraints.ResourceRules) == 0 {
		return nil
	}
	shapesMu.Lock()
	defer shapesMu.Unlock()
	var s, object *shape
	present := true // object is never null: no DELETE matched
	operations := map[string]bool{}
	for _, rule := range constraints.ResourceRules {
		// A DELETE's object is null. A CONNECT's object is the connect
		// options (PodExecOptions, ...), not the resource; but only
		// subresources are connected to (pods/exec, services/proxy, ...),
		// so a CONNECT never matches a built-in resource itself, and
		// pods/ephemeralcontainers is no connecter either: the operation
		// is not refused, "*" is (it would cover any future one).
		for _, op := range rule.Operations {
			operations[string(op)] = true
			switch op {
			case admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Connect:
			case admissionregistrationv1.Delete:
				present = false
			default:
				return nil
			}
		}
		if len(rule.Operations) == 0 {
			return nil
		}
		for _, group := range rule.APIGroups {
			for _, v := range rule.APIVersions {
				for _, res := range rule.Resources {
					name, sub, _ := strings.Cut(res, "/")
					if strings.Contains(group+v+res, "*") {
						return nil
					}
					t, ok := objectType(group, v, name, sub)
					if !ok {
						return nil
					}
					typed := shapeOf(t)
					// pods/ephemeralcontainers carries the whole Pod, validated
					// as one (the rest of its spec as stored).
					validated := admitted(typed, AdmittedFacts(group, name))
					if s == nil {
						s, object = typed, validated
					} else {
						s = merge(s, typed, map[[2]*shape]*shape{})
						object = merge(object, validated, map[[2]*shape]*shape{})
					}
				}
			}
		}
	}
	if s == nil {
		return nil
	}
	return &ObjectShape{s: s, object: object, objectPresent: present, operations: operations}
}

// merge is the shape of a value of shape a or b, keeping the fields of
// both structs (a field of one is never present in the other).
func merge(a, b *shape, seen map[[2]*shape]*shape) *shape {
	if a == b {
		return a
	}
	if a.kinds == 0 {
		return b
	}
	if b.kinds == 0 {
		return a
	}
	if m, ok := seen[[2]*shape{a, b}]; ok {
		return m
	}
	out := &shape{
		kinds:      a.kinds | b.kinds,
		nonEmpty:   (a.kinds&kList == 0 || a.nonEmpty) && (b.kinds&kList == 0 || b.nonEmpty),
		labelValue: (a.kinds&kString == 0 || a.labelValue) && (b.kinds&kString == 0 || b.labelValue),
	}
	seen[[2]*shape{a, b}] = out
	aMaps, bMaps := a.kinds&(kMap|kList) != 0, b.kinds&(kMap|kList) != 0
	switch {
	case aMaps && !bMaps:
		out.fields, out.elem = a.fields, a.elem
	case bMaps && !aMaps:
		out.fields, out.elem = b.fields, b.elem
	case a.fields != nil && b.fields != nil:
		out.fields = map[string]*shape{}
		out.always = map[string]bool{}
		for k := range a.always {
			if b.always[k] {
				out.always[k] = true
			}
		}
		for k, v := range a.fields {
			out.fields[k] = v
		}
		for k, v := range b.fields {
			if w, ok := out.fields[k]; ok {
				out.fields[k] = merge(w, v, seen)
			} else {
				out.fields[k] = v
			}
		}
	case a.fields == nil && b.fields == nil && a.elem != nil && b.elem != nil:
		out.elem = merge(a.elem, b.elem, seen)
	}
	return out
}

// Expression rewrites a CEL expression of a ValidatingAdmissionPolicy
// whose `object` and `oldObject` have the given shape (null aside:
// oldObject is null on a CREATE, object on a DELETE), folding the type tests the shape
// decides: `type(x.f) == bool` is true where the schema makes x.f a bool
// and x.f is known to be present, false where it can never be one. The
// result evaluates exactly as the expression on every object the API
// server decodes into those types; it is the expression itself when
// nothing folds or anything fails.
func (o *ObjectShape) Expression(expression string, v *version.Version) string {
	if o == nil || len(expression) > maxSpecialized || !foldable(expression) {
		return expression
	}
	env, err := vap.DynEnv(v)
	if err != nil {
		return expression
	}
	old := o.s
	if old.kinds&kNull == 0 {
		c := *old
		c.kinds |= kNull
		old = &c
	}
	object := o.object
	if !o.objectPresent {
		c := *object
		c.kinds |= kNull
		object = &c
	}
	checked, issues := env.Compile(expression)
	if issues != nil && issues.Err() != nil {
		return expression
	}
	limit := nodes(checked.NativeRep())
	limit += limit/4 + 16
	// A fold can decide a branch whose shape decides another test: fold
	// again until nothing changes. Each round is one optimizer run over
	// the checked AST (one type check), the text written once at the end.
	changed := false
	for range maxRounds {
		folder := func() *typeFolder {
			return &typeFolder{roots: map[string]*shape{"object": object, "oldObject": old}, operations: o.operations}
		}
		next, ok := foldOnce(env, checked, folder(), true)
		if !ok || nodes(next.NativeRep()) > limit {
			// Inlining made it too large: the round without it.
			next, ok = foldOnce(env, checked, folder(), false)
		}
		if !ok {
			break
		}
		checked, changed = next, true
	}
	if !changed {
		return expression
	}
	out, err := cel.AstToString(checked)
	if err != nil {
		return expression
	}
	return out
}

// nodes counts an AST's expressions.
func nodes(a *ast.AST) int {
	n := 0
	ast.PostOrderVisit(a.Expr(), ast.NewExprVisitor(func(ast.Expr) { n++ }))
	return n
}

// foldable reports whether expression has anything the pass may fold:
// a type, presence or null test, a dyn() or string(), the request's
// operation, a comprehension over a list literal.
func foldable(expression string) bool {
	for _, sign := range []string{"type(", "has(", "null", "dyn(", "string(", "request.operation", "]."} {
		if strings.Contains(expression, sign) {
			return true
		}
	}
	return false
}

// maxRounds bounds the folding rounds of one expression.
const maxRounds = 8

// maxSpecialized is the longest expression specialized: cel-go's
// optimizer revisits the whole expression on each change, and the
// compiler's longer forms (a pattern value parsed at run time, a long
// JMESPath chain) took seconds, and the operator's status a minute under
// the race detector. They keep the general form.
const maxSpecialized = 4000

// foldOnce is one round: the type folds, the inlining (when inline),
// the pruning, as one optimizer pass, checked once; false when nothing
// changed or anything failed.
func foldOnce(env *cel.Env, checked *cel.Ast, folder *typeFolder, inline bool) (*cel.Ast, bool) {
	folder.env = env
	round := &round{folder: folder, pruner: &pruner{env: env}}
	if inline {
		round.inliner = &inliner{env: env, shapes: folder}
	}
	optimizer, err := cel.NewStaticOptimizer(round)
	if err != nil {
		return nil, false
	}
	optimized, issues := optimizer.Optimize(env, checked)
	if issues != nil && issues.Err() != nil || round.changes() == 0 {
		return nil, false
	}
	return optimized, true
}

// round runs the passes of one round over the same AST: the inliner
// reads the checked types of the nodes the folder left (a node it made
// has none, and is not inlined).
type round struct {
	folder  *typeFolder
	inliner *inliner
	pruner  *pruner
}

// Optimize implements cel.ASTOptimizer.
func (r *round) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	a = r.folder.Optimize(ctx, a)
	if r.inliner != nil {
		a = r.inliner.Optimize(ctx, a)
	}
	return r.pruner.Optimize(ctx, a)
}

func (r *round) changes() int {
	n := r.folder.folds + r.pruner.changes
	if r.inliner != nil {
		n += r.inliner.changes
	}
	return n
}

// typeFolder is the optimizer pass that replaces decided type tests by
// their value; the pruner then removes the branches they
// decided.
type typeFolder struct {
	roots      map[string]*shape
	operations map[string]bool
	folds      int
	// env evaluates what the emptiness rewrite substitutes (nil: none).
	env *cel.Env
}

// facts are what holds where an expression is evaluated, by the key of
// a path (an identifier, selections and constant indexes): the runtime
// types the value may have, and whether it is present.
type facts map[string]fact

type fact struct {
	kinds   kinds // 0: unconstrained
	present bool
}

func (f facts) with(more facts) facts {
	if len(more) == 0 {
		return f
	}
	out := make(facts, len(f)+len(more))
	for k, v := range f {
		out[k] = v
	}
	for k, v := range more {
		old := out[k]
		if v.kinds != 0 && old.kinds != 0 {
			v.kinds &= old.kinds
		} else if v.kinds == 0 {
			v.kinds = old.kinds
		}
		v.present = v.present || old.present
		out[k] = v
	}
	return out
}

// without drops the facts about paths rooted at a variable a
// comprehension rebinds.
func (f facts) without(vars ...string) facts {
	out := make(facts, len(f))
	for k, v := range f {
		root, _, _ := strings.Cut(k, ".")
		root, _, _ = strings.Cut(root, "[")
		drop := false
		for _, name := range vars {
			if name != "" && root == name {
				drop = true
			}
		}
		if !drop {
			out[k] = v
		}
	}
	return out
}

// scope is the shapes of the variables bound where an expression is.
type scope map[string]*shape

func (s scope) bind(vars map[string]*shape) scope {
	out := make(scope, len(s)+len(vars))
	for k, v := range s {
		out[k] = v
	}
	for k, v := range vars {
		if k != "" {
			out[k] = v
		}
	}
	return out
}

type fold struct {
	expr  ast.Expr
	value bool
}

type strip struct{ call, arg ast.Expr }

type conjunction struct{ choice, cond, then ast.Expr }

// whenEmpty is x's value where the path (an identifier or a path from
// one) is the empty string: x is evaluated with its root bound to a value
// holding "" at the path. False where x reads anything else than the
// path (the value would not be x's), or fails to evaluate.
func (t *typeFolder) whenEmpty(a *ast.AST, x, path ast.Expr) (ref.Val, bool) {
	if t.env == nil {
		return nil, false
	}
	key, ok := pathKey(path)
	if !ok {
		return nil, false
	}
	parts := strings.Split(key, ".")
	root := parts[0]
	if !readsOnly(x, root, key) {
		return nil, false
	}
	var value any = ""
	for i := len(parts) - 1; i > 0; i-- {
		value = map[string]any{parts[i]: value}
	}
	text, err := cel.ExprToString(x, a.SourceInfo())
	if err != nil {
		return nil, false
	}
	env := t.env
	if _, declared := t.roots[root]; !declared {
		// A comprehension's variable: declared for this evaluation.
		if env, err = env.Extend(cel.Variable(root, cel.DynType)); err != nil {
			return nil, false
		}
	}
	checked, iss := env.Compile(text)
	if iss != nil && iss.Err() != nil {
		return nil, false
	}
	prg, err := env.Program(checked)
	if err != nil {
		return nil, false
	}
	out, _, err := prg.Eval(map[string]any{root: value})
	if err != nil {
		return nil, false
	}
	return out, true
}

// readsOnly reports whether the only free identifier x reads is root,
// and only as the path key (no other field of it, and it is not
// rebound inside x).
func readsOnly(x ast.Expr, root, key string) bool {
	var visit func(e ast.Expr, bound celast.Scope) bool
	visit = func(e ast.Expr, bound celast.Scope) bool {
		if k, isPath := pathKey(e); isPath && k == key && !bound[root] {
			return true
		}
		switch e.Kind() {
		case ast.IdentKind:
			return bound[e.AsIdent()]
		case ast.LiteralKind, ast.SelectKind, ast.CallKind, ast.ListKind, ast.MapKind, ast.ComprehensionKind:
		default:
			return false
		}
		ok := true
		celast.EachChild(e, func(child ast.Expr, binds []string) {
			ok = ok && visit(child, bound.With(binds))
		})
		return ok
	}
	return visit(x, celast.Scope{})
}

type sizeTest struct {
	comprehension, rng ast.Expr
	nonEmpty           bool
}

// Optimize implements cel.ASTOptimizer.
func (t *typeFolder) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	var folds []fold
	var strips []strip
	var sizes []sizeTest
	var conjunctions []conjunction
	budget := shapeBudget
	w := walker{
		roots: t.roots, operations: t.operations, budget: &budget, taints: map[int64]bool{},
		typeOf:   a.GetType,
		found:    func(e ast.Expr, v bool) { folds = append(folds, fold{e, v}) },
		stripped: func(call, arg ast.Expr) { strips = append(strips, strip{call, arg}) },
		sized: func(comprehension, rng ast.Expr, nonEmpty bool) {
			sizes = append(sizes, sizeTest{comprehension, rng, nonEmpty})
		},
		conjoined: func(choice, cond, then ast.Expr) {
			conjunctions = append(conjunctions, conjunction{choice, cond, then})
		},
		whenEmpty:   func(x, path ast.Expr) (ref.Val, bool) { return t.whenEmpty(a, x, path) },
		safeElement: func(int64) {},
	}
	w.walk(a.Expr(), scope{}, facts{})
	for _, f := range folds {
		ctx.UpdateExpr(f.expr, ctx.NewLiteral(types.Bool(f.value)))
	}
	for _, s := range strips {
		ctx.UpdateExpr(s.call, s.arg)
	}
	for _, s := range sizes {
		op := operators.Equals
		if s.nonEmpty {
			op = operators.Greater
		}
		ctx.UpdateExpr(s.comprehension, ctx.NewCall(op, ctx.NewCall("size", s.rng), ctx.NewLiteral(types.Int(0))))
	}
	for _, c := range conjunctions {
		ctx.UpdateExpr(c.choice, ctx.NewCall(operators.LogicalAnd, c.cond, c.then))
	}
	t.folds += len(folds) + len(strips) + len(sizes) + len(conjunctions)
	return a
}

type walker struct {
	roots      map[string]*shape
	operations map[string]bool
	// typeOf is the checked type of an expression, by ID.
	typeOf func(id int64) *types.Type
	found  func(ast.Expr, bool)
	// stripped reports a call that is the identity on its argument (a
	// dyn() that changes no type where the API server checks the
	// expression, a string() of a string), to be replaced by it.
	stripped func(call, arg ast.Expr)
	// sized reports an exists() (nonEmpty) or all() of a literal
	// predicate over a list or a map, to be replaced by a test of the
	// range's size.
	sized func(comprehension, rng ast.Expr, nonEmpty bool)
	// conjoined reports `!c ? false : y` of a total c and a bool y, to be
	// replaced by `c && y`.
	conjoined func(choice, cond, then ast.Expr)
	// whenEmpty is x's value where path is "" (see typeFolder.whenEmpty).
	whenEmpty func(x, path ast.Expr) (ref.Val, bool)
	// safeElement reports a comprehension over [p] where p is a path
	// known to evaluate.
	safeElement func(id int64)
	// budget bounds the shapes computed in one pass: nested
	// comprehensions make their number grow with the nesting's depth.
	// Past it every shape is unknown, which folds nothing (sound).
	budget *int
	// taints memoizes tainted by expression ID.
	taints map[int64]bool
}

// shapeBudget is the shapes one pass computes at most.
const shapeBudget = 4000

// typedVariables are the variables of a VAP's environment that the API
// server declares with a type (kyvap's check environment declares every
// variable dyn): an expression reading one may have a type there that it
// does not have here.
var typedVariables = map[string]bool{"request": true, "namespaceObject": true, "authorizer": true, "variables": true}

// tainted reports whether e reads a typed variable, directly or through
// a comprehension variable bound to one. An expression that does not has
// the same type in the API server's environment as in kyvap's: the other
// variables (object, oldObject, params) are dyn in both.
func (w walker) tainted(e ast.Expr, sc scope) bool {
	// A node's taint depends only on the comprehensions around it, the
	// same wherever the pass meets it: computed once.
	if w.taints != nil {
		if t, ok := w.taints[e.ID()]; ok {
			return t
		}
	}
	t := taintedIn(e, sc)
	if w.taints != nil {
		w.taints[e.ID()] = t
	}
	return t
}

// taintedIn is tainted: an identifier e reads and does not bind is a
// typed variable, or a variable of the scope bound to a value read from
// one.
func taintedIn(e ast.Expr, sc scope) bool {
	return !celast.FreeIdents(e, func(id ast.Expr) bool {
		if s, ok := sc[id.AsIdent()]; ok {
			return s != nil && !s.tainted
		}
		return !typedVariables[id.AsIdent()]
	})
}

// isDyn reports whether e's type is dyn wherever it is checked: here,
// and in the API server's environment (e reads no typed variable).
func (w walker) isDyn(e ast.Expr, sc scope) bool {
	t := w.typeOf(e.ID())
	return t != nil && t.Kind() == types.DynKind && !w.tainted(e, sc)
}

// decideOperation is the value of `request.operation == 'OP'` (or !=)
// where the VAP's operations decide it.
func (w walker) decideOperation(e ast.Expr) (bool, bool) {
	call := e.AsCall()
	name := call.FunctionName()
	if name != operators.Equals && name != operators.NotEquals || len(call.Args()) != 2 || len(w.operations) == 0 {
		return false, false
	}
	l, r := call.Args()[0], call.Args()[1]
	if key, ok := pathKey(l); !ok || key != "request.operation" || r.Kind() != ast.LiteralKind {
		return false, false
	}
	op, ok := r.AsLiteral().(types.String)
	if !ok {
		return false, false
	}
	var is bool
	switch {
	case !w.operations[string(op)]:
		is = false
	case len(w.operations) == 1:
		is = true
	default:
		return false, false
	}
	return is != (name == operators.NotEquals), true
}

// walk visits e, evaluated where fs hold, and reports each type test it
// decides.
func (w walker) walk(e ast.Expr, sc scope, fs facts) {
	switch e.Kind() {
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case operators.LogicalAnd:
			w.walk(args[0], sc, fs.with(w.whenTrue(args[1], sc, fs)))
			w.walk(args[1], sc, fs.with(w.whenTrue(args[0], sc, fs)))
			return
		case operators.LogicalOr:
			w.walk(args[0], sc, fs.with(w.whenFalse(args[1], sc, fs)))
			w.walk(args[1], sc, fs.with(w.whenFalse(args[0], sc, fs)))
			return
		case operators.Conditional:
			// `c ? v : v` of a bool literal v is v where c evaluates.
			if l, ok := boolLiteral(args[1]); ok {
				if r, ok := boolLiteral(args[2]); ok && l == r && w.totalBool(args[0], sc, fs) {
					w.found(e, l)
					return
				}
			}
			if w.emptinessDecided(e, sc, fs) {
				return
			}
			if not, ok := negation(args[0]); ok {
				if v, isBool := boolLiteral(args[1]); isBool && !v && w.totalBool(args[0], sc, fs) && w.isBool(args[2]) {
					w.conjoined(e, not, args[2])
				}
			}
			w.walk(args[0], sc, fs)
			w.walk(args[1], sc, fs.with(w.whenTrue(args[0], sc, fs)))
			w.walk(args[2], sc, fs.with(w.whenFalse(args[0], sc, fs)))
			return
		case operators.Equals, operators.NotEquals:
			if v, ok := w.decide(e, sc, fs); ok {
				w.found(e, v)
				return
			}
			if v, ok := w.decideOperation(e); ok {
				w.found(e, v)
				return
			}
		case "dyn":
			if len(args) == 1 && !call.IsMemberFunction() && w.isDyn(args[0], sc) {
				w.stripped(e, args[0])
			}
		case "contains":
			// A label value contains no string with another character.
			if call.IsMemberFunction() && len(args) == 1 && args[0].Kind() == ast.LiteralKind {
				if lit, ok := args[0].AsLiteral().(types.String); ok && strings.IndexFunc(string(lit), func(r rune) bool { return !IsLabelValueCharacter(r) }) >= 0 &&
					w.safe(call.Target(), sc, fs) {
					if t := w.shapeOf(call.Target(), sc, fs); t.kinds == kString && t.labelValue {
						w.found(e, false)
						return
					}
				}
			}
		case "string":
			// string() of a string is the string; the call's type, string,
			// becomes the argument's, dyn, which every overload accepts.
			if len(args) == 1 && !call.IsMemberFunction() && w.isDyn(args[0], sc) && w.shapeOf(args[0], sc, fs).kinds == kString {
				w.stripped(e, args[0])
			}
		}
		if call.IsMemberFunction() {
			w.walk(call.Target(), sc, fs)
		}
		for _, arg := range args {
			w.walk(arg, sc, fs)
		}
	case ast.SelectKind:
		// A presence test that the facts or the type decide.
		if e.AsSelect().IsTestOnly() && w.present(e, sc, fs) {
			w.found(e, true)
			return
		}
		w.walk(e.AsSelect().Operand(), sc, fs)
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.walk(el, sc, fs)
		}
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			me := entry.AsMapEntry()
			w.walk(me.Key(), sc, fs)
			w.walk(me.Value(), sc, fs)
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		if q, ok := quantifier(c); ok && w.quantifierDecided(e, q, sc, fs) {
			return
		}
		if el, ok := oneElement(c.IterRange()); ok && el.Kind() == ast.SelectKind && w.safe(el, sc, fs) {
			w.safeElement(e.ID())
		}
		w.walk(c.IterRange(), sc, fs)
		w.walk(c.AccuInit(), sc, fs)
		inner := w.bindComprehension(c, sc, fs)
		innerFacts := fs.without(c.IterVar(), c.IterVar2(), c.AccuVar())
		w.walk(c.LoopCondition(), inner, innerFacts)
		w.walk(c.LoopStep(), inner, innerFacts)
		w.walk(c.Result(), sc.bind(map[string]*shape{c.AccuVar(): inner[c.AccuVar()]}), fs.without(c.AccuVar()))
	}
}

// bindComprehension is the scope of a comprehension's loop: its
// iteration variables by its range's shape, its accumulator by its
// initial value and step.
func (w walker) bindComprehension(c ast.ComprehensionExpr, sc scope, fs facts) scope {
	rng := w.shapeOf(c.IterRange(), sc, fs)
	taint := w.tainted(c.IterRange(), sc)
	// A comprehension over null fails: its variables are bound only when
	// the range is a list or a map.
	if rng.kinds&kNull != 0 && rng.kinds != kNull {
		c := *rng
		c.kinds &^= kNull
		rng = &c
	}
	vars := map[string]*shape{}
	switch {
	case c.HasIterVar2():
		vars[c.IterVar()], vars[c.IterVar2()] = anyShape, anyShape
		if rng.kinds == kList {
			vars[c.IterVar()] = &shape{kinds: kInt}
			vars[c.IterVar2()] = rng.elem.orAny()
		}
	case rng.kinds == kList:
		vars[c.IterVar()] = rng.elem.orAny()
	case rng.kinds == kMap && rng.fields == nil:
		vars[c.IterVar()] = &shape{kinds: kString}
	default:
		vars[c.IterVar()] = anyShape
	}
	if taint {
		for _, name := range []string{c.IterVar(), c.IterVar2()} {
			if name != "" {
				vars[name] = taintedCopy(vars[name])
			}
		}
	}
	accu := w.shapeOf(c.AccuInit(), sc, fs)
	for range 2 {
		vars[c.AccuVar()] = accu
		step := w.shapeOf(c.LoopStep(), sc.bind(vars), fs.without(c.IterVar(), c.IterVar2(), c.AccuVar()))
		accu = merge(accu, step, map[[2]*shape]*shape{})
	}
	if w.tainted(c.AccuInit(), sc) || w.tainted(c.LoopStep(), sc.bind(vars)) {
		accu = taintedCopy(accu)
	}
	vars[c.AccuVar()] = accu
	return sc.bind(vars)
}

func taintedCopy(s *shape) *shape {
	c := *s.orAny()
	c.tainted = true
	return &c
}

// typeNames are the type identifiers a type test compares with, by the
// runtime type they name.
var typeNames = map[string]kinds{
	"null_type": kNull, "bool": kBool, "int": kInt, "uint": kUint, "double": kDouble,
	"string": kString, "bytes": kBytes, "list": kList, "map": kMap,
}

// typeTest recognises `type(x) == T` and `type(x) != T`: x, the kinds T
// names, and whether the test is a negation.
func typeTest(e ast.Expr) (x ast.Expr, k kinds, negated, ok bool) {
	if e.Kind() != ast.CallKind {
		return nil, 0, false, false
	}
	call := e.AsCall()
	name := call.FunctionName()
	if name != operators.Equals && name != operators.NotEquals || len(call.Args()) != 2 {
		return nil, 0, false, false
	}
	l, r := call.Args()[0], call.Args()[1]
	// x == null is a type test too: null is the only value of null_type,
	// and equality with null never fails.
	if r.Kind() == ast.LiteralKind && r.AsLiteral() == types.NullValue {
		return l, kNull, name == operators.NotEquals, true
	}
	if l.Kind() != ast.CallKind || l.AsCall().FunctionName() != "type" || len(l.AsCall().Args()) != 1 || l.AsCall().IsMemberFunction() {
		return nil, 0, false, false
	}
	if r.Kind() != ast.IdentKind {
		return nil, 0, false, false
	}
	k, ok = typeNames[r.AsIdent()]
	if !ok {
		return nil, 0, false, false
	}
	return l.AsCall().Args()[0], k, name == operators.NotEquals, true
}

// decide is the value of a type test where it is decided: its operand
// is evaluated without error, and the kinds it may have all are, or none
// is, the tested one.
func (w walker) decide(e ast.Expr, sc scope, fs facts) (bool, bool) {
	x, k, negated, ok := typeTest(e)
	if !ok || !w.safe(x, sc, fs) {
		return false, false
	}
	s := w.shapeOf(x, sc, fs)
	var is bool
	switch {
	case s.kinds&^k == 0 && s.kinds != 0:
		is = true
	case s.kinds&k == 0:
		is = false
	default:
		return false, false
	}
	return is != negated, true
}

// quantifierMacro is an all() or exists() macro's comprehension, read
// back: which one, and its predicate.
type quantifierMacro struct {
	exists bool
	// value is the predicate's, a bool literal.
	value bool
}

// quantifier recognizes the comprehension of `r.all(x, p)` and
// `r.exists(x, p)` of a bool literal p as cel-go's macros expand them:
// the accumulator starts at true (all) or false (exists), and each step
// is `accu && p` (all) or `accu || p` (exists), or what the pruner
// leaves of it; the result is the accumulator.
func quantifier(c ast.ComprehensionExpr) (quantifierMacro, bool) {
	init, ok := boolLiteral(c.AccuInit())
	if !ok || c.HasIterVar2() || c.Result().Kind() != ast.IdentKind || c.Result().AsIdent() != c.AccuVar() {
		return quantifierMacro{}, false
	}
	// The macros' loop condition, which only stops the loop early.
	if cond := c.LoopCondition(); cond.Kind() != ast.CallKind || cond.AsCall().FunctionName() != operators.NotStrictlyFalse {
		if _, ok := boolLiteral(cond); !ok {
			return quantifierMacro{}, false
		}
	}
	step := c.LoopStep()
	switch step.Kind() {
	case ast.IdentKind:
		// `accu || false` (exists) or `accu && true` (all), pruned.
		if step.AsIdent() != c.AccuVar() {
			return quantifierMacro{}, false
		}
		return quantifierMacro{exists: !init, value: init}, true
	case ast.LiteralKind:
		// `accu || true` (exists) or `accu && false` (all), pruned.
		v, ok := boolLiteral(step)
		if !ok || v == init {
			return quantifierMacro{}, false
		}
		return quantifierMacro{exists: !init, value: v}, true
	case ast.CallKind:
	default:
		return quantifierMacro{}, false
	}
	want := operators.LogicalAnd
	if !init {
		want = operators.LogicalOr
	}
	call := step.AsCall()
	if call.FunctionName() != want || len(call.Args()) != 2 {
		return quantifierMacro{}, false
	}
	if accu := call.Args()[0]; accu.Kind() != ast.IdentKind || accu.AsIdent() != c.AccuVar() {
		return quantifierMacro{}, false
	}
	v, ok := boolLiteral(call.Args()[1])
	if !ok {
		return quantifierMacro{}, false
	}
	return quantifierMacro{exists: !init, value: v}, true
}

// quantifierDecided reports an all() or exists() whose predicate is a
// bool literal over a range known to evaluate to a list or a map:
// `r.exists(x, false)` is false, `r.all(x, true)` true; `r.exists(x,
// true)` is `size(r) > 0`, `r.all(x, false)` is `size(r) == 0` (one call
// in place of a pass over the range).
func (w walker) quantifierDecided(e ast.Expr, q quantifierMacro, sc scope, fs facts) bool {
	c := e.AsComprehension()
	v := q.value
	if !w.safe(c.IterRange(), sc, fs) {
		return false
	}
	rng := w.shapeOf(c.IterRange(), sc, fs)
	if rng.kinds == 0 || rng.kinds&^(kList|kMap) != 0 {
		return false
	}
	if v != q.exists || rng.kinds == kList && rng.nonEmpty {
		// A non-empty list: `exists(x, true)` is true, `all(x, false)`
		// false.
		w.found(e, v)
		return true
	}
	if v != q.exists {
		w.found(e, v)
		return true
	}
	w.sized(e, c.IterRange(), q.exists)
	w.walk(c.IterRange(), sc, fs)
	return true
}

// total reports whether e is evaluated without error where fs hold: a
// safe expression, a literal, the logical operators and equality of
// total operands, a choice of total operands, and startsWith, endsWith
// and contains on a known string with a string literal.
func (w walker) total(e ast.Expr, sc scope, fs facts) bool {
	switch e.Kind() {
	case ast.LiteralKind:
		return true
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case operators.LogicalNot, operators.LogicalAnd, operators.LogicalOr, operators.Conditional, operators.Equals, operators.NotEquals:
			// The logical operators and a choice's condition take a bool,
			// or fail.
			logical := call.FunctionName() != operators.Equals && call.FunctionName() != operators.NotEquals
			for i, arg := range args {
				takesBool := logical && (call.FunctionName() != operators.Conditional || i == 0)
				if takesBool && !w.totalBool(arg, sc, fs) || !takesBool && !w.total(arg, sc, fs) {
					return false
				}
			}
			return true
		case "startsWith", "endsWith", "contains":
			if !call.IsMemberFunction() || len(args) != 1 || args[0].Kind() != ast.LiteralKind {
				return false
			}
			if _, isString := args[0].AsLiteral().(types.String); !isString {
				return false
			}
			return w.safe(call.Target(), sc, fs) && w.shapeOf(call.Target(), sc, fs).kinds == kString
		}
	case ast.SelectKind:
		// has(x.f) of a map x.
		if sel := e.AsSelect(); sel.IsTestOnly() {
			return w.safe(sel.Operand(), sc, fs) && w.shapeOf(sel.Operand(), sc, fs).kinds == kMap
		}
	}
	return w.safe(e, sc, fs)
}

// negation is x where e is `!x`.
func negation(e ast.Expr) (ast.Expr, bool) {
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != operators.LogicalNot {
		return nil, false
	}
	return e.AsCall().Args()[0], true
}

// isBool reports whether e's checked type is bool (its value is a bool
// wherever it evaluates).
func (w walker) isBool(e ast.Expr) bool {
	t := w.typeOf(e.ID())
	return t != nil && t.Kind() == types.BoolKind
}

// emptinessDecided reports `size(p) == 0 ? k : x`, of a path p known to
// evaluate to a string and a bool literal k, where x is k when p is "":
// the choice is x (p is "" exactly where its size is 0). This is the
// default of a JMESPath `p || ”` compared with constants. It reports
// the choice as the identity on x.
func (w walker) emptinessDecided(e ast.Expr, sc scope, fs facts) bool {
	args := e.AsCall().Args()
	cond, k, x := args[0], args[1], args[2]
	want, ok := boolLiteral(k)
	if !ok || cond.Kind() != ast.CallKind || cond.AsCall().FunctionName() != operators.Equals {
		return false
	}
	eq := cond.AsCall().Args()
	size, zero := eq[0], eq[1]
	if zero.Kind() != ast.LiteralKind {
		return false
	}
	if z, isInt := zero.AsLiteral().(types.Int); !isInt || z != 0 {
		return false
	}
	if size.Kind() != ast.CallKind || size.AsCall().FunctionName() != "size" || size.AsCall().IsMemberFunction() || len(size.AsCall().Args()) != 1 {
		return false
	}
	path := size.AsCall().Args()[0]
	if !w.safe(path, sc, fs) || w.shapeOf(path, sc, fs).kinds != kString || w.whenEmpty == nil {
		return false
	}
	v, ok := w.whenEmpty(x, path)
	if !ok || v != types.Bool(want) {
		return false
	}
	w.stripped(e, x)
	w.walk(x, sc, fs)
	return true
}

// totalBool reports whether e is total and a bool.
func (w walker) totalBool(e ast.Expr, sc scope, fs facts) bool {
	return w.total(e, sc, fs) && w.shapeOf(e, sc, fs).kinds == kBool
}

// safe reports whether e is evaluated without error where fs hold: a
// bound variable, dyn() of a safe expression, or a selection known
// present from a safe map.
func (w walker) safe(e ast.Expr, sc scope, fs facts) bool {
	switch e.Kind() {
	case ast.IdentKind:
		_, bound := sc[e.AsIdent()]
		_, root := w.roots[e.AsIdent()]
		return bound || root
	case ast.CallKind:
		call := e.AsCall()
		if call.FunctionName() == "dyn" && len(call.Args()) == 1 && !call.IsMemberFunction() {
			return w.safe(call.Args()[0], sc, fs)
		}
	case ast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() {
			return false
		}
		return w.present(e, sc, fs)
	}
	return false
}

// present reports whether the selection (or presence test) e = x.f is
// known to find its field: x is safe and a map, and f is known present
// there (a guard took it) or present in every object of x's type.
func (w walker) present(e ast.Expr, sc scope, fs facts) bool {
	sel := e.AsSelect()
	operand := sel.Operand()
	if !w.safe(operand, sc, fs) {
		return false
	}
	if key, ok := pathKey(e); ok && fs[key].present {
		return true
	}
	s := w.shapeOf(operand, sc, fs)
	return s.kinds == kMap && s.always[sel.FieldName()]
}

// whenTrue are the facts that hold where e is not false: the type tests
// and presence tests among its conjuncts that cannot fail to evaluate.
func (w walker) whenTrue(e ast.Expr, sc scope, fs facts) facts {
	out := facts{}
	w.collect(e, sc, fs, true, out)
	return out
}

// whenFalse are the facts that hold where e is not true.
func (w walker) whenFalse(e ast.Expr, sc scope, fs facts) facts {
	out := facts{}
	w.collect(e, sc, fs, false, out)
	return out
}

func (w walker) collect(e ast.Expr, sc scope, fs facts, truth bool, out facts) {
	if e.Kind() == ast.CallKind {
		call := e.AsCall()
		switch call.FunctionName() {
		case operators.LogicalAnd:
			if truth {
				// A conjunction that is not false has every conjunct that
				// cannot fail true.
				for _, arg := range call.Args() {
					w.collect(arg, sc, fs.with(out), true, out)
				}
			}
			return
		case operators.LogicalOr:
			if !truth {
				for _, arg := range call.Args() {
					w.collect(arg, sc, fs.with(out), false, out)
				}
			}
			return
		case operators.LogicalNot:
			w.collect(call.Args()[0], sc, fs, !truth, out)
			return
		}
		x, k, negated, ok := typeTest(e)
		if !ok || !w.safe(x, sc, fs) {
			return
		}
		key, ok := pathKey(x)
		if !ok {
			return
		}
		if truth != negated {
			out[key] = fact{kinds: k, present: out[key].present}
		} else {
			out[key] = fact{kinds: kAny &^ k, present: out[key].present}
		}
		return
	}
	// has(x.f): cannot fail where x is safe and can only be a map.
	if e.Kind() == ast.SelectKind && e.AsSelect().IsTestOnly() && truth {
		operand := e.AsSelect().Operand()
		if !w.safe(operand, sc, fs) || w.shapeOf(operand, sc, fs).kinds != kMap {
			return
		}
		key, ok := pathKey(e)
		if !ok {
			return
		}
		f := out[key]
		f.present = true
		out[key] = f
	}
}

// pathKey is the key of a path expression: an identifier followed by
// field selections (a presence test names its field's path), dyn()
// being transparent.
func pathKey(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent(), true
	case ast.SelectKind:
		sel := e.AsSelect()
		base, ok := pathKey(sel.Operand())
		return base + "." + sel.FieldName(), ok
	case ast.CallKind:
		call := e.AsCall()
		if call.FunctionName() == "dyn" && len(call.Args()) == 1 && !call.IsMemberFunction() {
			return pathKey(call.Args()[0])
		}
	}
	return "", false
}

// shapeOf is what is known of e's value where fs hold.
func (w walker) shapeOf(e ast.Expr, sc scope, fs facts) *shape {
	s := w.rawShape(e, sc, fs)
	if key, ok := pathKey(e); ok {
		if f, ok := fs[key]; ok && f.kinds != 0 && s.kinds&^f.kinds != 0 {
			c := *s
			c.kinds &= f.kinds
			s = &c
		}
	}
	return s
}

func (w walker) rawShape(e ast.Expr, sc scope, fs facts) *shape {
	if w.budget != nil {
		if *w.budget <= 0 {
			return anyShape
		}
		*w.budget--
	}
	switch e.Kind() {
	case ast.IdentKind:
		if s, ok := sc[e.AsIdent()]; ok {
			return s.orAny()
		}
		if s, ok := w.roots[e.AsIdent()]; ok {
			return s
		}
	case ast.LiteralKind:
		switch e.AsLiteral().(type) {
		case types.Null:
			return &shape{kinds: kNull}
		case types.Bool:
			return &shape{kinds: kBool}
		case types.Int:
			return &shape{kinds: kInt}
		case types.Uint:
			return &shape{kinds: kUint}
		case types.Double:
			return &shape{kinds: kDouble}
		case types.String:
			return &shape{kinds: kString}
		case types.Bytes:
			return &shape{kinds: kBytes}
		}
	case ast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() {
			return &shape{kinds: kBool}
		}
		return member(w.shapeOf(sel.Operand(), sc, fs), sel.FieldName())
	case ast.ListKind:
		elem := &shape{}
		for _, el := range e.AsList().Elements() {
			elem = merge(elem, w.shapeOf(el, sc, fs), map[[2]*shape]*shape{})
		}
		if len(e.AsList().OptionalIndices()) > 0 {
			return &shape{kinds: kList}
		}
		return &shape{kinds: kList, elem: elem}
	case ast.MapKind:
		return &shape{kinds: kMap}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		inner := w.bindComprehension(c, sc, fs)
		return w.shapeOf(c.Result(), sc.bind(map[string]*shape{c.AccuVar(): inner[c.AccuVar()]}), fs.without(c.AccuVar()))
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case "dyn":
			if len(args) == 1 && !call.IsMemberFunction() {
				return w.shapeOf(args[0], sc, fs)
			}
		case operators.Conditional:
			return merge(w.shapeOf(args[1], sc, fs.with(w.whenTrue(args[0], sc, fs))), w.shapeOf(args[2], sc, fs.with(w.whenFalse(args[0], sc, fs))), map[[2]*shape]*shape{})
		case operators.Index:
			base := w.shapeOf(args[0], sc, fs)
			if base.kinds == kList && args[1].Kind() == ast.LiteralKind {
				if _, isInt := args[1].AsLiteral().(types.Int); isInt {
					return base.elem.orAny()
				}
			}
			if base.kinds == kMap && args[1].Kind() == ast.LiteralKind {
				if key, isString := args[1].AsLiteral().(types.String); isString {
					return member(base, string(key))
				}
			}
		case operators.Add:
			l, r := w.shapeOf(args[0], sc, fs), w.shapeOf(args[1], sc, fs)
			if l.kinds == kList && r.kinds == kList {
				return &shape{kinds: kList, elem: merge(l.elem.orEmpty(), r.elem.orEmpty(), map[[2]*shape]*shape{})}
			}
			if l.kinds == kString && r.kinds == kString {
				return &shape{kinds: kString}
			}
		case operators.LogicalAnd, operators.LogicalOr, operators.LogicalNot, operators.Equals, operators.NotEquals,
			operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals, operators.In,
			"startsWith", "endsWith", "contains", "matches":
			return &shape{kinds: kBool}
		}
	}
	return anyShape
}

// orEmpty is an unknown element shape read as "no element known": a list
// literal's elements are all listed.
func (s *shape) orEmpty() *shape {
	if s == nil {
		return anyShape
	}
	return s
}

// member is the shape of a field or key of a map of shape s, where it is
// present.
func member(s *shape, name string) *shape {
	if s.kinds&kMap == 0 {
		return anyShape
	}
	if s.fields != nil {
		if f, ok := s.fields[name]; ok {
			return f
		}
		return anyShape
	}
	if s.elem != nil && s.kinds&^kNull == kMap {
		return s.elem
	}
	return anyShape
}
