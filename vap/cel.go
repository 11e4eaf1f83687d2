// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	baseversion "k8s.io/component-base/version"
)

// NewestCompatibilityVersion is the newest CEL environment this build knows.
var NewestCompatibilityVersion = version.MustParseGeneric(baseversion.DefaultKubeBinaryVersion)

// KyvernoCELVersion is the CEL environment of the Kyverno release kyvap
// mirrors (v1.19.1): it is built with k8s.io/apiserver v0.36, whose
// environment holds every CEL library introduced up to Kubernetes 1.36
// (Kyverno compiles rules in the stored-expressions environment, which
// has them all). A rule that does not compile there fails every request
// it matches in Kyverno, whatever newer API servers accept.
var KyvernoCELVersion = version.MajorMinor(1, 36)

// CompatibilityVersion parses Options.CompatibilityVersion ("1.37").
func CompatibilityVersion(s string) (*version.Version, error) {
	if s == "" {
		return NewestCompatibilityVersion, nil
	}
	v, err := version.ParseMajorMinor(strings.TrimPrefix(s, "v"))
	if err != nil {
		return nil, fmt.Errorf("compatibility version %q: %w", s, err)
	}
	if v.GreaterThan(NewestCompatibilityVersion) {
		return NewestCompatibilityVersion, nil
	}
	return v, nil
}

// envSets caches the base environment per compatibility version.
var envSets sync.Map // "major.minor" -> *environment.EnvSet

// BaseEnvSet is the API server's base CEL environment at compatibility
// version v (cached: building one is costly).
func BaseEnvSet(v *version.Version) *environment.EnvSet {
	key := v.String()
	if e, ok := envSets.Load(key); ok {
		return e.(*environment.EnvSet)
	}
	e, _ := envSets.LoadOrStore(key, environment.MustBaseEnvSet(version.MajorMinor(v.Major(), v.Minor())))
	return e.(*environment.EnvSet)
}

// sharedCompilers caches, per compatibility version, a compiler for VAPs
// without variables: building one prepares eight CEL environments, and
// only storing variables changes its state.
var sharedCompilers sync.Map // "major.minor" -> *plugincel.CompositedCompiler

// compilerFor returns the apiserver's composited compiler for a VAP; a
// fresh one when the VAP has variables (they are stored in the compiler).
func compilerFor(v *version.Version, hasVariables bool) (*plugincel.CompositedCompiler, error) {
	if hasVariables {
		return plugincel.NewCompositedCompiler(BaseEnvSet(v))
	}
	if c, ok := sharedCompilers.Load(v.String()); ok {
		return c.(*plugincel.CompositedCompiler), nil
	}
	c, err := plugincel.NewCompositedCompiler(BaseEnvSet(v))
	if err != nil {
		return nil, err
	}
	actual, _ := sharedCompilers.LoadOrStore(v.String(), c)
	return actual.(*plugincel.CompositedCompiler), nil
}

// accessor is an expression with the result types the API server requires.
type accessor struct {
	name       string
	expression string
	returns    []*cel.Type
}

func (a accessor) GetExpression() string    { return a.expression }
func (a accessor) ReturnTypes() []*cel.Type { return a.returns }
func (a accessor) GetName() string          { return a.name }

// Problem is one expression that does not compile.
type Problem struct {
	field   string
	message string
}

// CheckExpressions compiles every expression of a VAP spec the way the
// API server does when the VAP is created (NewExpressions environment at
// the compatibility version, with the variables of a VAP), and returns the
// problems of the user expressions and of the generated ones separately.
// generated names the match conditions kyvap added.
//
// Results are remembered (checkMemo) by what they are computed from: a
// policy is translated several times with the same expressions (its plan,
// the background scan's forms, a handover's bridge), and compiling is most
// of a translation's time.
func CheckExpressions(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, v *version.Version, generated map[string]bool) (user, ours []Problem) {
	key := checkKey(spec, v, generated)
	if r, ok := checkMemo.Get(key); ok {
		return slices.Clone(r.user), slices.Clone(r.ours)
	}
	user, ours = checkExpressions(spec, v, generated)
	checkMemo.Put(key, checkResult{user: slices.Clone(user), ours: slices.Clone(ours)})
	return user, ours
}

// checkResult is a remembered CheckExpressions result.
type checkResult struct{ user, ours []Problem }

// checkMemoSize bounds the remembered results (a key, and the problems,
// usually none).
const checkMemoSize = 8192

var checkMemo = &Memo[[sha256.Size]byte, checkResult]{Limit: checkMemoSize}

// expressionMemo remembers, by expressionKey, whether an expression of a
// spec without variables compiles (nil) or its error.
var expressionMemo = &Memo[[sha256.Size]byte, *string]{Limit: checkMemoSize}

// expressionKey is the SHA-256 of what compiling an expression of a spec
// without variables reads: the version, whether there are params, what the
// expression is (a condition, a message) and its text.
func expressionKey(v *version.Version, hasParams bool, kind, expression string) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range []string{v.String(), strconv.FormatBool(hasParams), kind, expression} {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// checkKey is the SHA-256 of everything CheckExpressions reads: the
// version, whether there are params, and every expression with its place
// (and, for a match condition, its name and whether kyvap generated it).
func checkKey(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, v *version.Version, generated map[string]bool) [sha256.Size]byte {
	h := sha256.New()
	field := func(parts ...string) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s", len(p), p)
		}
	}
	field(v.String(), strconv.FormatBool(spec.ParamKind != nil))
	for _, variable := range spec.Variables {
		field("variable", variable.Name, variable.Expression)
	}
	for _, mc := range spec.MatchConditions {
		field("matchCondition", mc.Name, mc.Expression, strconv.FormatBool(generated[mc.Name]))
	}
	for _, val := range spec.Validations {
		field("validation", val.Expression, val.MessageExpression)
	}
	for _, aa := range spec.AuditAnnotations {
		field("auditAnnotation", aa.ValueExpression)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

func checkExpressions(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, v *version.Version, generated map[string]bool) (user, ours []Problem) {
	compiler, err := compilerFor(v, len(spec.Variables) > 0)
	if err != nil {
		return []Problem{{field: "spec", message: err.Error()}}, nil
	}
	hasParams := spec.ParamKind != nil
	withAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	withoutAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
	mode := environment.NewExpressions
	report := func(list *[]Problem, field string, res plugincel.CompilationResult) {
		if res.Error != nil {
			*list = append(*list, Problem{field: field, message: res.Error.Detail})
		}
	}
	// Without variables an expression compiles alike in any spec: its
	// result is remembered by the expression (expressionMemo), as most
	// of a policy's expressions recur in its other translations (another
	// configuration's match conditions, its VAP and engine forms).
	remembered := func(kind, expression string, compile func() plugincel.CompilationResult) plugincel.CompilationResult {
		if len(spec.Variables) > 0 {
			return compile()
		}
		key := expressionKey(v, hasParams, kind, expression)
		if detail, ok := expressionMemo.Get(key); ok {
			if detail == nil {
				return plugincel.CompilationResult{}
			}
			return plugincel.CompilationResult{Error: &apiservercel.Error{Detail: *detail}}
		}
		res := compile()
		var detail *string
		if res.Error != nil {
			detail = &res.Error.Detail
		}
		expressionMemo.Put(key, detail)
		return res
	}
	// condition compiles a bool expression; a long && / || chain in
	// pieces (see celsplit.go), which proves it compiles in linear time.
	compile := func(expression string) plugincel.CompilationResult {
		return compiler.CompileCELExpression(accessor{expression: expression, returns: []*cel.Type{cel.BoolType}}, withAuthz, mode)
	}
	condition := func(expression string) plugincel.CompilationResult {
		if compilesAsChain(compiler, expression, withAuthz, mode, v) {
			return plugincel.CompilationResult{}
		}
		// A guarded validation, `g ? (e) : true`, is a bool when g may be
		// one and e is one: then e need not be checked inside the guard.
		if inner, ok := unguarded(expression); ok && len(expression) >= chainThreshold &&
			compile(guarded("true")).Error == nil && compilesAsChain(compiler, inner, withAuthz, mode, v) {
			return plugincel.CompilationResult{}
		}
		return compile(expression)
	}
	for i, variable := range spec.Variables {
		expression := variable.Expression
		if compilesAsChain(compiler, expression, withAuthz, mode, v) {
			// A chain is a bool: the variable is stored with that type
			// for the expressions that read it (this compiler only checks).
			expression = "true"
		}
		res := compiler.CompileAndStoreVariable(accessor{name: variable.Name, expression: expression, returns: []*cel.Type{cel.AnyType}}, withAuthz, mode)
		report(&user, fmt.Sprintf("variables[%d]", i), res)
	}
	for i, mc := range spec.MatchConditions {
		res := remembered("condition", mc.Expression, func() plugincel.CompilationResult { return condition(mc.Expression) })
		if generated[mc.Name] {
			report(&ours, fmt.Sprintf("matchConditions[%d]", i), res)
		} else {
			report(&user, fmt.Sprintf("matchConditions[%d]", i), res)
		}
	}
	for i, val := range spec.Validations {
		res := remembered("condition", val.Expression, func() plugincel.CompilationResult { return condition(val.Expression) })
		report(&user, fmt.Sprintf("validations[%d].expression", i), res)
		if val.MessageExpression != "" {
			res := remembered("message", val.MessageExpression, func() plugincel.CompilationResult {
				return compiler.CompileCELExpression(accessor{expression: val.MessageExpression, returns: []*cel.Type{cel.StringType}}, withoutAuthz, mode)
			})
			report(&user, fmt.Sprintf("validations[%d].messageExpression", i), res)
		}
	}
	for i, aa := range spec.AuditAnnotations {
		res := compiler.CompileCELExpression(accessor{expression: aa.ValueExpression, returns: []*cel.Type{cel.StringType, cel.NullType}}, withAuthz, mode)
		report(&user, fmt.Sprintf("auditAnnotations[%d].valueExpression", i), res)
	}
	return user, ours
}

// ProblemsMessage joins problems into one line.
func ProblemsMessage(problems []Problem) string {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.field + ": " + strings.Join(strings.Fields(p.message), " ")
	}
	return strings.Join(parts, "; ")
}

// CompatibilityVersionOfServer is the CEL compatibility version an API
// server of the given version (its /version gitVersion, e.g. "v1.37.1")
// compiles new ValidatingAdmissionPolicy expressions at: one minor below its
// own (environment.DefaultCompatibilityVersion is the effective version's
// MinCompatibilityVersion), so that a rollback to the previous minor still
// understands what was stored. An API server started with
// --emulated-version reports its binary version here; set
// Options.CompatibilityVersion by hand then.
func CompatibilityVersionOfServer(gitVersion string) (string, error) {
	v, err := version.ParseGeneric(gitVersion)
	if err != nil {
		return "", fmt.Errorf("server version %q: %w", gitVersion, err)
	}
	if v.Major() != 1 || v.Minor() == 0 {
		return "", fmt.Errorf("server version %q: not a Kubernetes 1.x version", gitVersion)
	}
	return fmt.Sprintf("%d.%d", v.Major(), v.Minor()-1), nil
}

// SpecExpressions lists every CEL expression of a VAP spec: match
// conditions, variables, validations (and their message expressions),
// audit annotations.
func SpecExpressions(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec) []string {
	var out []string
	for _, mc := range spec.MatchConditions {
		out = append(out, mc.Expression)
	}
	for _, v := range spec.Variables {
		out = append(out, v.Expression)
	}
	for _, v := range spec.Validations {
		out = append(out, v.Expression, v.MessageExpression)
	}
	for _, a := range spec.AuditAnnotations {
		out = append(out, a.ValueExpression)
	}
	return out
}

var dynEnvs sync.Map // version -> *cel.Env

// DynEnv is the API server's environment for a ValidatingAdmissionPolicy's
// expressions at compatibility version v (nil: the newest), with every
// variable of a VAP declared dyn and macro calls tracked (for the
// rewriting passes, which read what a value is from elsewhere and write
// the result back as text).
func DynEnv(v *version.Version) (*cel.Env, error) {
	if v == nil {
		v = NewestCompatibilityVersion
	}
	if e, ok := dynEnvs.Load(v.String()); ok {
		return e.(*cel.Env), nil
	}
	base, err := BaseEnvSet(v).Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	var decls []cel.EnvOption
	for _, name := range []string{"object", "oldObject", "request", "params", "namespaceObject", "authorizer", "variables"} {
		decls = append(decls, cel.Variable(name, cel.DynType))
	}
	decls = append(decls, cel.EnableMacroCallTracking())
	env, err := base.Extend(decls...)
	if err != nil {
		return nil, err
	}
	actual, _ := dynEnvs.LoadOrStore(v.String(), env)
	return actual.(*cel.Env), nil
}
