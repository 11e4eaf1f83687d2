// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest/vapsim"
	"github.com/kyvap/kyvap/translate"
)

// Floors of TestKyvernoChainsawValidate: rows evaluated, and chainsaw
// tests all of whose rows are.
const (
	minChainsawRows  = 250
	minChainsawTests = 120
)

// chainsawTest is the part of a chainsaw Test this harness reads.
type chainsawTest struct {
	Spec struct {
		Steps []struct {
			Name string `json:"name"`
			Use  *struct {
				Template string `json:"template"`
				With     struct {
					Bindings []struct {
						Name  string `json:"name"`
						Value any    `json:"value"`
					} `json:"bindings"`
				} `json:"with"`
			} `json:"use"`
			Try []map[string]json.RawMessage `json:"try"`
		} `json:"steps"`
	} `json:"spec"`
}

// chainsawApply is an apply (or create) operation of a step.
type chainsawApply struct {
	File   string `json:"file"`
	Expect []struct {
		Check map[string]any `json:"check"`
	} `json:"expect"`
}

// chainsawRow is one object a chainsaw test applies, with what Kyverno
// did with it in Kyverno's CI (admitted or denied).
type chainsawRow struct {
	// objects are the file's; the test expects an error (denied) when
	// one of them is denied (kubectl applies the others).
	objects []map[string]any
	denied  bool
	// policies is how many of the test's policies exist when the object
	// is applied (in the order the test creates them).
	policies int
}

// chainsawDirs are the directories of Kyverno's chainsaw tests replayed:
// validate policies, and PolicyExceptions (podSecurity controls among
// them).
var chainsawDirs = []string{"validate", "exceptions"}

// TestKyvernoChainsawValidate replays the conformance tests of Kyverno's
// module for validate policies and PolicyExceptions
// (test/conformance/chainsaw/validate and exceptions: each
// applies ClusterPolicies and Policies, then objects that a real cluster
// with Kyverno admits or denies) through kyvap's compiled rules: each
// applied object is an admission request (a CREATE, or an UPDATE of the
// object applied before), denied where some Enforce rule fails or errs.
// Kyverno's expectation is the test's own. A test whose policies kyvap
// does not compile entirely is counted as refused, with the reason; every
// evaluated row must agree.
func TestKyvernoChainsawValidate(t *testing.T) {
	root := filepath.Join(kyvernoModule(t), "test", "conformance", "chainsaw")
	var files []string
	for _, dir := range chainsawDirs {
		var found []string
		if err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "chainsaw-test.yaml" {
				found = append(found, path)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		sort.Strings(found)
		for i, path := range found {
			// make test replays every other PolicyException test (their
			// podSecurity policies are the slowest to translate), make
			// differential all of them.
			if dir == "exceptions" && !fullDifferential && i%2 == 1 {
				continue
			}
			files = append(files, path)
		}
	}
	sort.Strings(files)
	evaluated, agreed, testsEvaluated, vapRows := 0, 0, 0, 0
	refused := map[string]int{}
	for _, file := range files {
		name, _ := filepath.Rel(root, filepath.Dir(file))
		policies, rows, why := loadChainsaw(file)
		if why != "" {
			refused[why]++
			if os.Getenv("KYVAP_CORPUS_REASONS") != "" {
				t.Logf("%s: %s", name, why)
			}
			continue
		}
		// The test's CRDs are served too.
		var crds []apiextensionsv1.CustomResourceDefinition
		for _, row := range rows {
			for _, o := range row.objects {
				if o["kind"] == "CustomResourceDefinition" {
					if crd, ok := decodeAs[apiextensionsv1.CustomResourceDefinition](o); ok {
						crds = append(crds, crd)
					}
				}
			}
		}
		resolver := kyverno.NewStaticResolver(crds...)
		// Every policy must compile.
		if _, why := chainsawEngine(policies, nil, resolver); why != "" {
			refused[why]++
			if os.Getenv("KYVAP_CORPUS_REASONS") != "" {
				t.Logf("%s: %s", name, why)
			}
			continue
		}
		testsEvaluated++
		state := map[string]map[string]any{}
		// The engines with the policies and exceptions created so far.
		engines := map[string]*chainsawPaths{}
		var applied []kyvernov2.PolicyException
		for _, row := range rows {
			denied := false
			var violations []string
			var admitted []map[string]any
			for _, o := range row.objects {
				if o["kind"] == "PolicyException" {
					if ex, ok := decodeAs[kyvernov2.PolicyException](o); ok {
						applied = append(applied, ex)
					}
					continue
				}
				if row.policies == 0 {
					admitted = append(admitted, o) // no policy yet
					continue
				}
				key := fmt.Sprint(row.policies, "/", len(applied))
				if engines[key] == nil {
					eng, why := chainsawEngine(policies[:row.policies], applied, resolver)
					if why != "" {
						t.Errorf("%s: %s", name, why)
						continue
					}
					vaps, webhook, hasVAPs, why := chainsawVAPs(policies[:row.policies], applied, resolver)
					if why != "" {
						t.Errorf("%s: %s", name, why)
						continue
					}
					engines[key] = &chainsawPaths{engine: eng, vaps: vaps, webhook: webhook, hasVAPs: hasVAPs}
				}
				paths := engines[key]
				req, ns, err := chainsawRequest(o, state, resolver)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				byEngine := func(e *engine.Engine) (bool, []string) {
					outcomes, err := e.Evaluate(context.Background(), engine.Request{Admission: req, Namespace: ns, Params: chainsawParams(state)})
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return false, nil
					}
					denied := false
					var why []string
					for _, out := range outcomes {
						if out.Blocking && out.Action.IsEnforce() {
							denied = true
							why = append(why, req.Kind.Kind+"/"+req.Name+": "+out.Policy+"/"+out.Rule+": "+string(out.Result)+": "+out.Message)
						}
					}
					return denied, why
				}
				objectDenied, why := byEngine(paths.engine)
				violations = append(violations, why...)
				// The production path: the VAPs, then kyvap's webhook with
				// the rules left to it.
				vapDenied, whyWebhook := byEngine(paths.webhook)
				if paths.hasVAPs {
					var namespaces []corev1.Namespace
					if ns != nil {
						namespaces = append(namespaces, *ns)
					}
					var params []unstructured.Unstructured
					for _, k := range sortedKeys(state) {
						params = append(params, unstructured.Unstructured{Object: state[k]})
					}
					resp, err := paths.vaps.Evaluate(context.Background(), vapsim.Request{Admission: req, Namespaces: namespaces, Params: params})
					if err != nil {
						t.Errorf("%s: %v", name, err)
						continue
					}
					if !resp.Allowed {
						vapDenied = true
						whyWebhook = append(whyWebhook, "VAP: "+resp.Message)
					}
					vapRows++
				}
				if vapDenied != objectDenied {
					t.Errorf("%s: %s/%s: the engine says denied=%t %v, the VAPs with kyvap's webhook denied=%t %v", name, req.Kind.Kind, req.Name, objectDenied, why, vapDenied, whyWebhook)
				}
				denied = denied || objectDenied
				if !objectDenied {
					admitted = append(admitted, o)
				}
			}
			for _, o := range admitted {
				state[stateKey(o)] = o
			}
			if row.policies == 0 {
				continue
			}
			evaluated++
			if denied != row.denied {
				t.Errorf("%s: %d objects: Kyverno's test says denied=%t, kyvap's rules denied=%t %v", name, len(row.objects), row.denied, denied, violations)
				continue
			}
			agreed++
		}
	}
	t.Logf("Kyverno's chainsaw tests (%s): %d; %d evaluated (%d files applied, %d agree; %d objects judged by VAPs too, both paths agreeing); refused by reason %v", strings.Join(chainsawDirs, ", "), len(files), testsEvaluated, evaluated, agreed, vapRows, refused)
	if evaluated < minChainsawRows || testsEvaluated < minChainsawTests {
		t.Errorf("%d rows of %d tests evaluated, fewer than the floors %d and %d", evaluated, testsEvaluated, minChainsawRows, minChainsawTests)
	}
}

// loadChainsaw reads a chainsaw test: the policies its steps create and
// the objects it applies, in order, or why the harness does not replay it.
func loadChainsaw(file string) ([]*kyvernov1.ClusterPolicy, []chainsawRow, string) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, "unreadable"
	}
	var test chainsawTest
	if err := yaml.Unmarshal(data, &test); err != nil {
		return nil, nil, "not a chainsaw Test"
	}
	dir := filepath.Dir(file)
	var policies []*kyvernov1.ClusterPolicy
	var rows []chainsawRow
	for _, step := range test.Spec.Steps {
		if step.Use != nil {
			if !strings.HasSuffix(step.Use.Template, "create-policy.yaml") {
				continue
			}
			for _, b := range step.Use.With.Bindings {
				if b.Name != "file" {
					continue
				}
				docs, err := readObjects(filepath.Join(dir, fmt.Sprint(b.Value)))
				if err != nil {
					return nil, nil, "a policy file that does not load"
				}
				for _, d := range docs {
					switch d["kind"] {
					case "ClusterPolicy", "Policy":
					default:
						return nil, nil, "a policy of another kind"
					}
					p, err := decodePolicy(d)
					if err != nil {
						return nil, nil, "a policy that does not decode"
					}
					policies = append(policies, p)
				}
			}
			continue
		}
		for _, op := range step.Try {
			raw, ok := op["apply"]
			if !ok {
				raw, ok = op["create"]
			}
			if script, isScript := op["script"]; isScript {
				// kubectl apply -f FILE, with its check on the error.
				var sc struct {
					Content string         `json:"content"`
					Check   map[string]any `json:"check"`
				}
				if json.Unmarshal(script, &sc) == nil {
					if m := kubectlApply.FindStringSubmatch(strings.TrimSpace(sc.Content)); m != nil {
						converted := map[string]any{"file": m[2]}
						if sc.Check != nil {
							converted["expect"] = []any{map[string]any{"check": sc.Check}}
						}
						raw, _ = json.Marshal(converted)
						ok = true
					}
				}
			}
			if !ok {
				if _, other := op["update"]; other {
					return nil, nil, "an update step"
				}
				if _, other := op["patch"]; other {
					return nil, nil, "a patch step"
				}
				// assert, error, delete of test data, sleep; a script
				// (kubectl scale, exec...) checks what the harness does
				// not replay, and leaves the objects applied as they are.
				continue
			}
			var apply chainsawApply
			if err := json.Unmarshal(raw, &apply); err != nil || apply.File == "" {
				return nil, nil, "an apply without a file"
			}
			// Denied where the test expects an error, or a message on
			// the error output (only a denial writes one); the message
			// itself is not compared.
			denied, explicit := false, false
			for _, e := range apply.Expect {
				for k, v := range e.Check {
					switch {
					case strings.HasPrefix(k, "($error != "):
						denied, explicit = v == true, true
					case strings.HasPrefix(k, "(contains($error") || strings.HasPrefix(k, "(contains($stderr"):
						if v == true && !explicit {
							denied = true
						}
					default:
						return nil, nil, "an expectation on something else than the error"
					}
				}
			}
			docs, err := readObjects(filepath.Join(dir, apply.File))
			if err != nil {
				return nil, nil, "an object file that does not load"
			}
			var objects []map[string]any
			for _, d := range docs {
				if d["kind"] == "ClusterPolicy" || d["kind"] == "Policy" {
					if denied {
						continue // Kyverno refused the policy
					}
					p, err := decodePolicy(d)
					if err != nil {
						return nil, nil, "a policy that does not decode"
					}
					policies = append(policies, p)
					continue
				}
				objects = append(objects, d)
			}
			if len(objects) > 0 {
				rows = append(rows, chainsawRow{objects: objects, denied: denied, policies: len(policies)})
			}
		}
	}
	switch {
	case len(policies) == 0:
		return nil, nil, "no policy"
	case len(rows) == 0:
		return nil, nil, "nothing applied"
	}
	return policies, rows, ""
}

// decodePolicy reads a ClusterPolicy or a Policy (carried as one).
func decodePolicy(d map[string]any) (*kyvernov1.ClusterPolicy, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	var p kyvernov1.ClusterPolicy
	return &p, json.Unmarshal(raw, &p)
}

// readObjects reads the YAML documents of a file.
func readObjects(path string) ([]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if obj != nil {
			out = append(out, roundTrip(obj).(map[string]any))
		}
	}
}

// chainsawPaths are kyvap's two paths for the policies created so far:
// the engine with every rule compiled, and the production setup, the VAPs
// the API server evaluates beside the engine with the rules that stay with
// kyvap's webhook.
type chainsawPaths struct {
	engine  *engine.Engine
	vaps    *vapsim.Simulator
	webhook *engine.Engine
	hasVAPs bool
}

// chainsawVAPs is the VAP path of the policies.
func chainsawVAPs(policies []*kyvernov1.ClusterPolicy, exceptions []kyvernov2.PolicyException, resolver kyverno.KindResolver) (*vapsim.Simulator, *engine.Engine, bool, string) {
	webhook := engine.New()
	var vaps []admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, p := range policies {
		in := clusterpolicy.InputFor(p, exceptions)
		plan, err := translate.Translate(in, resolver, translate.Options{GenerateValidatingAdmissionPolicy: true})
		if err != nil {
			return nil, nil, false, "translate: " + err.Error()
		}
		vaps = append(vaps, plan.ValidatingAdmissionPolicies...)
		bindings = append(bindings, plan.Bindings...)
		var rules []translate.FallbackRule
		for _, rr := range plan.Rules {
			if rr.Fallback != nil {
				rules = append(rules, *rr.Fallback)
			}
		}
		webhook.SetFallbackRules(clusterpolicy.PolicyKey(in.Namespace, p.Name), rules)
	}
	return vapsim.New(vaps, bindings), webhook, len(vaps) > 0, ""
}

// chainsawEngine is kyvap's engine with the policies' rules compiled, or
// why not every rule is.
func chainsawEngine(policies []*kyvernov1.ClusterPolicy, exceptions []kyvernov2.PolicyException, resolver kyverno.KindResolver) (*engine.Engine, string) {
	e := engine.New()
	for _, p := range policies {
		for _, r := range p.Spec.Rules {
			if r.Validation == nil {
				return nil, "a rule that does not validate"
			}
		}
		in := clusterpolicy.InputFor(p, exceptions)
		plan, err := translate.Translate(in, resolver, translate.Options{})
		if err != nil {
			return nil, "translate: " + err.Error()
		}
		var rules []translate.FallbackRule
		for _, rr := range plan.Rules {
			switch {
			case rr.Fallback == nil:
				return nil, string(rr.Reason)
			case rr.Fallback.NotEnforced != "":
				return nil, string(rr.Fallback.Reason)
			}
			rules = append(rules, *rr.Fallback)
		}
		e.SetFallbackRules(clusterpolicy.PolicyKey(in.Namespace, p.Name), rules)
	}
	return e, ""
}

// kubectlApply is a script that applies a file.
var kubectlApply = regexp.MustCompile(`^kubectl (apply|create) -f (\S+)$`)

// chainsawNamespace is where chainsaw puts an object without a namespace.
const chainsawNamespace = "chainsaw-test"

func sortedKeys(m map[string]map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func stateKey(o map[string]any) string {
	meta, _ := o["metadata"].(map[string]any)
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return apiVersion + "/" + kind + "/" + namespace + "/" + name
}

// chainsawParams are the parameters a rule reads: the objects applied so
// far.
type chainsawParams map[string]map[string]any

// Params implements engine.ParamSource.
func (s chainsawParams) Params(_ context.Context, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, namespace string) ([]runtime.Object, error) {
	if ref.Namespace != "" {
		namespace = ref.Namespace
	}
	var selector labels.Selector
	if ref.Selector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(ref.Selector); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []runtime.Object
	for _, k := range keys {
		u := &unstructured.Unstructured{Object: s[k]}
		switch {
		case u.GetAPIVersion() != kind.APIVersion || u.GetKind() != kind.Kind:
		case u.GetNamespace() != "" && u.GetNamespace() != namespace:
		case ref.Name != "" && u.GetName() != ref.Name:
		case selector != nil && !selector.Matches(labels.Set(u.GetLabels())):
		default:
			out = append(out, u.DeepCopy())
		}
	}
	return out, nil
}

// chainsawRequest is the admission request of applying the object: a
// CREATE, or an UPDATE of the object applied before; by chainsaw's user,
// a cluster admin.
func chainsawRequest(o map[string]any, state map[string]map[string]any, resolver kyverno.KindResolver) (*admissionv1.AdmissionRequest, *corev1.Namespace, error) {
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	resources, err := resolver.Resolve(apiVersion + "/" + kind)
	if err != nil || len(resources) == 0 {
		return nil, nil, fmt.Errorf("kind %s/%s is not served", apiVersion, kind)
	}
	res := resources[0]
	meta, _ := o["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		o["metadata"] = meta
	}
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if res.Namespaced && namespace == "" {
		namespace = chainsawNamespace
		meta["namespace"] = namespace
	}
	raw := rawExtension
	req := &admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind},
		Resource:  metav1.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Resource},
		Operation: admissionv1.Create,
		Name:      name,
		Namespace: namespace,
		UserInfo:  authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"kubeadm:cluster-admins", "system:authenticated"}},
		Object:    raw(o),
	}
	if old, ok := state[stateKey(o)]; ok {
		req.Operation, req.OldObject = admissionv1.Update, raw(old)
	}
	var ns *corev1.Namespace
	if res.Namespaced {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{"kubernetes.io/metadata.name": namespace}}}
		if applied, ok := state["v1/Namespace//"+namespace]; ok {
			data, _ := json.Marshal(applied)
			_ = json.Unmarshal(data, ns)
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels["kubernetes.io/metadata.name"] = namespace
		}
	}
	return req, ns, nil
}

// decodeAs decodes an object of a test file into T.
func decodeAs[T any](o map[string]any) (T, bool) {
	var out T
	data, err := json.Marshal(o)
	return out, err == nil && json.Unmarshal(data, &out) == nil
}
