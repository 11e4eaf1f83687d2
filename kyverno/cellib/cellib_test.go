// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/go-cmp/cmp"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// allLibraries are the names cellib.Used returns for the
// libraries of this package.
var allLibraries = []string{"gzip", "hash", "json", "math", "random", "time", "transform", "user", "x509", "yaml"}

// newEnvSet extends the API server's base environment with the libraries
// exactly as kyvap's engine does.
func newEnvSet(t *testing.T, libs ...string) *environment.EnvSet {
	t.Helper()
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions:        EnvOptions(libs),
	})
	if err != nil {
		t.Fatalf("Extend(EnvOptions(%q)): %v", libs, err)
	}
	return set
}

// newEnv is the stored-expressions environment of newEnvSet, with object
// declared (dyn) as in an admission policy.
func newEnv(t *testing.T, libs ...string) *cel.Env {
	t.Helper()
	env, err := newEnvSet(t, libs...).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatalf("Env: %v", err)
	}
	if env, err = env.Extend(cel.Variable("object", cel.DynType)); err != nil {
		t.Fatalf("Extend(object): %v", err)
	}
	return env
}

// evaluate compiles, programs and evaluates expr, object bound to obj.
// compileErr is the compilation's error, err the evaluation's.
func evaluate(t *testing.T, env *cel.Env, expr string, obj any) (got any, compileErr, err error) {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err(), nil
	}
	prg, perr := env.Program(ast)
	if perr != nil {
		t.Fatalf("Program(%s): %v", expr, perr)
	}
	out, _, err := prg.Eval(map[string]any{"object": obj})
	if err != nil {
		return nil, nil, err
	}
	return toGo(out), nil, nil
}

// toGo turns a CEL value into plain Go values go-cmp compares: maps with
// string keys (others formatted), lists as []any, scalars as their Go value.
func toGo(v ref.Val) any {
	switch v := v.(type) {
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			key, ok := k.Value().(string)
			if !ok {
				key = k.Type().TypeName() + ":" + k.ConvertToType(types.StringType).(types.String).Value().(string)
			}
			out[key] = toGo(v.Get(k))
		}
		return out
	case traits.Lister:
		out := []any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			out = append(out, toGo(it.Next()))
		}
		return out
	case types.Null:
		return nil
	}
	return v.Value()
}

// evalCase is one expression and what Kyverno v1.19.1 gives for it: a value,
// an evaluation error (its exact message) or a compilation error (a part of
// its message).
type evalCase struct {
	name       string
	expr       string
	object     any
	want       any
	wantErr    string
	wantNoComp string
}

func runCases(t *testing.T, env *cel.Env, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, compileErr, err := evaluate(t, env, tc.expr, tc.object)
			switch {
			case tc.wantNoComp != "":
				if compileErr == nil || !strings.Contains(compileErr.Error(), tc.wantNoComp) {
					t.Fatalf("%s: compile error %v, want one containing %q", tc.expr, compileErr, tc.wantNoComp)
				}
			case compileErr != nil:
				t.Fatalf("%s: %v", tc.expr, compileErr)
			case tc.wantErr != "":
				if err == nil {
					t.Fatalf("%s = %v, want the error %q", tc.expr, got, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("%s: error (-want +got):\n%s", tc.expr, diff)
				}
			case err != nil:
				t.Fatalf("%s: %v", tc.expr, err)
			default:
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", tc.expr, diff)
				}
			}
		})
	}
}

func TestSupported(t *testing.T) {
	for _, lib := range allLibraries {
		if !Supported(lib) {
			t.Errorf("Supported(%q) = false", lib)
		}
	}
	// The libraries that need a cluster, the network or Kyverno's context.
	for _, lib := range []string{"resource", "http", "globalContext", "imagedata", "generator", "exceptions", "", "Hash"} {
		if Supported(lib) {
			t.Errorf("Supported(%q) = true", lib)
		}
	}
}

func TestEnvOptionsNil(t *testing.T) {
	if got := EnvOptions(nil); len(got) != 0 {
		t.Errorf("EnvOptions(nil) has %d options", len(got))
	}
	if got := EnvOptions([]string{"resource", "http"}); len(got) != 0 {
		t.Errorf("EnvOptions(unsupported) has %d options", len(got))
	}
	// The environment is the API server's, with nothing of Kyverno's.
	base, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err := newEnvSet(t).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(declarations(base), declarations(env)); diff != "" {
		t.Errorf("declarations of the environment extended with EnvOptions(nil) (-base +got):\n%s", diff)
	}
	for _, expr := range []string{"sha256('a')", "json.marshal(1)", "yaml.parse('a')", "time.now()", "random()", "mylib_version"} {
		if _, iss := env.Compile(expr); iss.Err() == nil {
			t.Errorf("%s compiles without any library", expr)
		}
	}
}

func declarations(env *cel.Env) []string {
	var out []string
	for name := range env.Functions() {
		out = append(out, "function "+name)
	}
	for _, v := range env.Variables() {
		out = append(out, "variable "+v.Name())
	}
	sort.Strings(out)
	return out
}

// TestEnvOptionsTogether compiles an expression using every library in one
// environment, and each library's functions in environments of two.
func TestEnvOptionsTogether(t *testing.T) {
	env := newEnv(t, allLibraries...)
	expr := `[sha256('a'), hash.md5('a'), string(math.round(1.25, 1)),
		string(listObjToMap([{'k': 'a'}], [{'v': 'b'}], 'k', 'v')['a']),
		parseServiceAccount('system:serviceaccount:ns:sa').Name,
		json.marshal(json.unmarshal('[1]')), string(yaml.parse('a: x').a),
		string(x509.decode(object.pem).IsCA),
		gzip.decompress(gzip.compress('z')), time.toCron(timestamp('2024-01-02T03:04:05Z')),
		random('q'), mylib_version]`
	got, compileErr, err := evaluate(t, env, expr, map[string]any{"pem": readFile(t, "x509-ca.pem")})
	if compileErr != nil || err != nil {
		t.Fatalf("%s: %v %v", expr, compileErr, err)
	}
	want := []any{
		"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb", "0cc175b9c0f1b6a831c399e269772661", "1.3",
		"b", "sa", "[1]", "x", "true", "z", "4 3 2 1 2", "q", "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// Every pair, in both orders: each library's declarations survive
	// the other's.
	probes := map[string]string{
		"hash": "sha1('a')", "math": "math.round(1.0, 0)", "transform": "listObjToMap([], [], 'a', 'b')",
		"user": "parseServiceAccount('a')", "json": "json.unmarshal('1')", "yaml": "yaml.parse('1')",
		"x509": "x509.decode('')", "gzip": "gzip.compress('')", "time": "time.now()", "random": "random()",
	}
	for _, a := range allLibraries {
		for _, b := range allLibraries {
			if a == b {
				continue
			}
			env := newEnv(t, a, b)
			for _, lib := range []string{a, b} {
				if _, iss := env.Compile(probes[lib]); iss.Err() != nil {
					t.Errorf("libraries %s, %s: %s: %v", a, b, probes[lib], iss.Err())
				}
			}
			for lib, probe := range probes {
				if lib == a || lib == b {
					continue
				}
				if _, iss := env.Compile(probe); iss.Err() == nil {
					t.Errorf("libraries %s, %s: %s compiles", a, b, probe)
				}
			}
		}
	}
}

func TestEnvOptionsDeterministic(t *testing.T) {
	// Duplicates and order do not matter: Kyverno's registration order.
	a := EnvOptions([]string{"yaml", "hash", "json", "hash", "nope"})
	b := EnvOptions([]string{"json", "yaml", "hash"})
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("EnvOptions: %d and %d options, want 3", len(a), len(b))
	}
	env := newEnv(t, "hash", "hash", "json")
	if _, iss := env.Compile("sha1(json.marshal(1))"); iss.Err() != nil {
		t.Error(iss.Err())
	}
}

// TestEnvOptionsNewExpressions: the options work in the other environment of
// the set, the one for new expressions (EnvSet.Extend applies them to both).
func TestEnvOptionsNewExpressions(t *testing.T) {
	env, err := newEnvSet(t, allLibraries...).Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	got, compileErr, err := evaluate(t, env, "parseServiceAccount('system:serviceaccount:a:b').Namespace + json.marshal(yaml.parse('[1]'))", nil)
	if compileErr != nil || err != nil {
		t.Fatal(compileErr, err)
	}
	if diff := cmp.Diff("a[1]", got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestEnvOptionsThenDeclTypes extends the libraries' environment the way the
// API server's admission compiler does next (its variables declared through
// a DeclType provider): user.ServiceAccount, a native type, must survive.
func TestEnvOptionsThenDeclTypes(t *testing.T) {
	declType := apiservercel.NewObjectType("kyvernolib.test.Variables", map[string]*apiservercel.DeclField{})
	set, err := newEnvSet(t, allLibraries...).Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions:        []cel.EnvOption{cel.Variable("variables", declType.CelType())},
		DeclTypes:         []*apiservercel.DeclType{declType},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	got, compileErr, err := evaluate(t, env, "user.parseServiceAccount('system:serviceaccount:a:b').Name + sha1('')", nil)
	if compileErr != nil || err != nil {
		t.Fatal(compileErr, err)
	}
	if diff := cmp.Diff("bda39a3ee5e6b4b0d3255bfef95601890afd80709", got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
