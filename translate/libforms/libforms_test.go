// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package libforms

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	admissioncel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"sigs.k8s.io/randfill"

	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/vap"
)

func userRule(variables map[string]string, validations ...string) *model.Rule {
	r := &model.Rule{}
	for name, e := range variables {
		r.Variables = append(r.Variables, admissionregistrationv1.Variable{Name: name, Expression: e})
	}
	for _, v := range validations {
		r.Validations = append(r.Validations, admissionregistrationv1.Validation{Expression: v})
	}
	r.Libraries = cellib.Used(r.Expressions()...)
	return r
}

func TestRuleWritesServiceAccountFields(t *testing.T) {
	for _, tc := range []struct {
		name       string
		variables  map[string]string
		validation string
		want       []string // variables then the validation
	}{
		{"a field of the call on a path", nil,
			`parseServiceAccount(request.userInfo.username).Namespace == "ci"`,
			[]string{`((request.userInfo.username.startsWith("system:serviceaccount:") && size(request.userInfo.username.split(":", 4)) == 4) ? (request.userInfo.username.split(":", 4)[2]) : "") == "ci"`}},
		{"the prefixed function, on an expression read once", nil,
			`user.parseServiceAccount(object.metadata.annotations["owner"]).Name != ""`,
			[]string{"[object.metadata.annotations[\"owner\"]].map(kyvapUsername, (kyvapUsername.startsWith(\"system:serviceaccount:\") &&\nsize(kyvapUsername.split(\":\", 4)) == 4) ? (kyvapUsername.split(\":\", 4)[3]) : \"\")[0] != \"\""}},
		{"a variable holding the call: a map of the fields", map[string]string{"sa": `parseServiceAccount(request.userInfo.username)`},
			`variables.sa.Name == "builder"`,
			[]string{
				`{'Name': (request.userInfo.username.startsWith('system:serviceaccount:') && size(request.userInfo.username.split(':', 4)) == 4 ? request.userInfo.username.split(':', 4)[3] : ''), 'Namespace': (request.userInfo.username.startsWith('system:serviceaccount:') && size(request.userInfo.username.split(':', 4)) == 4 ? request.userInfo.username.split(':', 4)[2] : '')}`,
				`variables.sa.Name == "builder"`}},
	} {
		checkWritten(t, tc.name, userRule(tc.variables, tc.validation), Options{}, tc.want)
	}
}

// checkWritten checks that Rule writes the rule's variables, then its
// validations, as want, and that no library is left; it returns the
// written rule, nil where Rule refused it.
func checkWritten(t *testing.T, name string, r *model.Rule, opts Options, want []string) *model.Rule {
	t.Helper()
	got, err := Rule(r, opts)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil
	}
	var texts []string
	for _, v := range got.Variables {
		texts = append(texts, v.Expression)
	}
	for _, v := range got.Validations {
		texts = append(texts, v.Expression)
	}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
	if len(got.Libraries) != 0 {
		t.Errorf("%s: still uses %v", name, got.Libraries)
	}
	return got
}

func TestRuleRefusesOtherReads(t *testing.T) {
	for name, tc := range map[string]struct {
		variables  map[string]string
		validation string
		want       string
	}{
		"the result compared as a whole": {nil, `parseServiceAccount(request.userInfo.username) == parseServiceAccount("x")`, "not by its Name or Namespace"},
		"a presence test on a field":     {nil, `has(parseServiceAccount(request.userInfo.username).Name)`, "read as has("},
		"another field":                  {nil, `parseServiceAccount(request.userInfo.username).name == ""`, "not by its Name or Namespace"},
		"a variable read as a whole":     {map[string]string{"sa": `parseServiceAccount(request.userInfo.username)`}, `variables.sa != null`, "variables.sa (a service account) is read as a whole"},
		"a call in a call's argument":    {nil, `parseServiceAccount(parseServiceAccount(request.userInfo.username).Name).Name == ""`, "still uses user"},
		"another library":                {nil, `parseServiceAccount(request.userInfo.username).Name == json.marshal(1)`, "uses json"},
	} {
		r := userRule(tc.variables, tc.validation)
		got, err := Rule(r, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error with %q, got %v", name, tc.want, err)
		}
		if got != r {
			t.Errorf("%s: the rule is not returned as it is", name)
		}
	}
}

// TestServiceAccountFormsAgreeWithTheLibrary evaluates each field of
// parseServiceAccount as kyvap's engine does (Kyverno's function, in
// kyverno/cellib, itself checked against Kyverno by the conformance
// suites) and as written for the API server, on usernames around the
// prefix and the colons, and on random ones.
func TestServiceAccountFormsAgreeWithTheLibrary(t *testing.T) {
	withLibrary, err := libraryEnv([]string{"user"})
	if err != nil {
		t.Fatal(err)
	}
	apiServer, err := vap.DynEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{
		"", "alice", "system:serviceaccount:", "system:serviceaccount:ci", "system:serviceaccount:ci:", "system:serviceaccount::",
		"system:serviceaccount::x", "system:serviceaccount:ci:builder", "system:serviceaccount:ci:builder:v2", "system:serviceaccount:a:b:c:d",
		"system:serviceaccounts:ci:x", "System:serviceaccount:ci:x", "system:serviceaccount", "xsystem:serviceaccount:ci:x",
		"system:serviceaccount:system:serviceaccount:a:b", "system:serviceaccount:ç:ñ", "system:serviceaccount:\xff:\xfe", "::::",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"system", ":", "serviceaccount", "a", "", "é", "\xff", "ci"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		if rng.IntN(2) == 0 {
			names = append(names, "system:serviceaccount:"+b.String())
		} else {
			names = append(names, b.String())
		}
	}
	compared := 0
	for _, arg := range []string{"request.userInfo.username", `object.metadata.annotations["owner"]`} {
		for _, field := range []string{"Name", "Namespace"} {
			original := "parseServiceAccount(" + arg + ")." + field
			w := &writer{env: withLibrary}
			written, err := w.expression(original)
			if err != nil {
				t.Fatal(err)
			}
			want, got := program(t, withLibrary, original), program(t, apiServer, written)
			for _, name := range names {
				vars := map[string]any{
					"request": map[string]any{"userInfo": map[string]any{"username": name}},
					"object":  map[string]any{"metadata": map[string]any{"annotations": map[string]any{"owner": name}}},
				}
				w, _, werr := want.Eval(vars)
				g, _, gerr := got.Eval(vars)
				if (werr != nil) != (gerr != nil) || werr == nil && w.Equal(g) != types.True {
					t.Errorf("%s on %q: Kyverno's function gives %v (%v), the API server's form %v (%v)", original, name, w, werr, g, gerr)
				}
				compared++
			}
			// A value that is no string fails both ways.
			vars := map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": 1}}, "object": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"owner": 1}}}}
			if _, _, err := want.Eval(vars); err == nil {
				t.Errorf("%s: Kyverno's function takes a number", original)
			}
			if _, _, err := got.Eval(vars); err == nil {
				t.Errorf("%s: the API server's form takes a number", original)
			}
		}
	}
	t.Logf("%d evaluations agree", compared)
}

func program(t *testing.T, env *cel.Env, expression string) cel.Program {
	t.Helper()
	checked, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		t.Fatalf("%s: %v", expression, iss.Err())
	}
	p, err := env.Program(checked)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRuleWritesTheRequestsNamespace(t *testing.T) {
	inNamespace := Options{NamespacedOnly: true, ObjectInNamespace: true}
	for _, tc := range []struct {
		name       string
		opts       Options
		variables  map[string]string
		validation string
		want       []string // variables then the validation
	}{
		{"a variable read through null tests and metadata", inNamespace,
			map[string]string{"ns": `resource.get('v1', 'namespaces', '', object.metadata.namespace)`},
			`type(variables.ns) != type(null) && variables.ns.metadata.?labels.?state.orValue('') != 'frozen'`,
			[]string{`namespaceObject`, `type(variables.ns) != type(null) && variables.ns.metadata.?labels.?state.orValue("") != "frozen"`}},
		{"a call on request.namespace, read by field", Options{NamespacedOnly: true}, nil,
			`resource.Get('v1', 'namespaces', '', request.namespace).metadata.name == 'x' && has(resource.Get('v1', 'namespaces', '', request.namespace).spec)`,
			[]string{`namespaceObject.metadata.name == "x" && has(namespaceObject.spec)`}},
		{"labels by index, and a null comparison", inNamespace,
			map[string]string{"ns": `resource.Get('v1', 'namespaces', '', object.metadata.namespace)`},
			`variables.ns != null && variables.ns.metadata["labels"]["team"] == "a" && has(variables.ns.metadata.annotations)`,
			[]string{`namespaceObject`, `variables.ns != null && variables.ns.metadata["labels"]["team"] == "a" && has(variables.ns.metadata.annotations)`}},
	} {
		checkWritten(t, tc.name, userRule(tc.variables, tc.validation), tc.opts, tc.want)
	}
}

func TestRuleRefusesOtherNamespaceReads(t *testing.T) {
	inNamespace := Options{NamespacedOnly: true, ObjectInNamespace: true}
	ns := map[string]string{"ns": `resource.Get('v1', 'namespaces', '', object.metadata.namespace)`}
	for name, tc := range map[string]struct {
		opts       Options
		variables  map[string]string
		validation string
		want       string
	}{
		"a cluster-scoped resource matched":      {Options{}, ns, `variables.ns != null`, "does not name one object by constants"},
		"object.metadata.namespace on a DELETE":  {Options{NamespacedOnly: true}, ns, `variables.ns != null`, "does not name one object by constants"},
		"the kind, which namespaceObject lacks":  {inNamespace, ns, `variables.ns.kind == "Namespace"`, "lacks"},
		"metadata as a whole":                    {inNamespace, ns, `size(variables.ns.metadata) > 0`, "lacks"},
		"managedFields":                          {inNamespace, ns, `has(variables.ns.metadata.managedFields)`, "lacks"},
		"the namespace passed whole":             {inNamespace, ns, `[variables.ns].size() == 1`, "lacks"},
		"another namespace, false where missing": {paramOptions, nil, `resource.Get('v1', 'namespaces', '', 'kube-system') != null`, "is not true for every request"},
		"another resource, not served":           {inNamespace, nil, `resource.Get('v1', 'secrets', object.metadata.namespace, 'x') != null`, "does not serve"},
		"a list":                                 {inNamespace, nil, `size(resource.List('v1', 'configmaps', object.metadata.namespace).items) < 3`, "has no form"},
	} {
		r := userRule(tc.variables, tc.validation)
		got, err := Rule(r, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error with %q, got %v", name, tc.want, err)
		}
		if got != r {
			t.Errorf("%s: the rule is not returned as it is", name)
		}
	}
}

// TestNamespaceMetadataIsWhatTheAPIServerKeeps checks namespaceMetadata
// against the API server's own namespaceObject
// (k8s.io/apiserver/pkg/admission/plugin/cel CreateNamespaceObject): on
// a Namespace with every field set, converted as the API server and
// Kyverno's read see it (unstructured), the fields namespaceRead allows
// have the same values both ways, and every other metadata field, and
// apiVersion and kind, are absent from namespaceObject.
func TestNamespaceMetadataIsWhatTheAPIServerKeeps(t *testing.T) {
	full := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
	randfill.NewWithSeed(7).NilChance(0).NumElements(1, 2).Fill(&full.ObjectMeta)
	for i := range full.ManagedFields {
		full.ManagedFields[i].FieldsV1 = metav1.NewFieldsV1(`{"f:metadata":{}}`)
	}
	full.Spec.Finalizers = []corev1.FinalizerName{"kubernetes"}
	full.Status.Phase = corev1.NamespaceActive
	kyverno, err := runtime.DefaultUnstructuredConverter.ToUnstructured(full)
	if err != nil {
		t.Fatal(err)
	}
	apiServer, err := runtime.DefaultUnstructuredConverter.ToUnstructured(admissioncel.CreateNamespaceObject(full))
	if err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{"apiVersion", "kind"} {
		if _, ok := apiServer[top]; ok {
			t.Errorf("namespaceObject has %s: namespaceRead may allow it", top)
		}
	}
	for _, f := range []string{"spec", "status"} {
		if diff := cmp.Diff(kyverno[f], apiServer[f]); diff != "" {
			t.Errorf("%s differs (-Kyverno's read +namespaceObject):\n%s", f, diff)
		}
	}
	km, am := kyverno["metadata"].(map[string]any), apiServer["metadata"].(map[string]any)
	for field, value := range km {
		got, kept := am[field]
		switch {
		case namespaceMetadata[field] && !kept:
			t.Errorf("metadata.%s is allowed but namespaceObject lacks it", field)
		case namespaceMetadata[field] && !cmp.Equal(value, got):
			t.Errorf("metadata.%s: Kyverno's read has %v, namespaceObject %v", field, value, got)
		case !namespaceMetadata[field] && kept:
			t.Errorf("metadata.%s is kept by namespaceObject: allow it in namespaceRead", field)
		}
	}
	if len(km) <= len(namespaceMetadata) {
		t.Errorf("the filled Namespace has only %d metadata fields: the check sees no field namespaceObject drops", len(km))
	}
}
