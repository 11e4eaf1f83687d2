// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package conformance runs the verdict corpus in this directory (Kyverno CLI
// test format) four ways and checks they agree: the generated VAPs
// evaluated in-process, the fallback engine in-process, a real
// kube-apiserver enforcing the generated VAPs (with kyvap's webhook for
// what stays on the fallback engine), and the same API server calling
// kyvap's webhook for every rule (generation off).
package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest"
	"github.com/kyvap/kyvap/policytest/vapsim"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

var cp *controlplane.ControlPlane

// replayCluster installs suites on the test control plane with kyvap test
// --cluster's code (see cluster).
var (
	replayCluster *policytest.Cluster
	replayOnce    sync.Once
	// operations counts the requests replayed by TestRealAPIServer.
	operations = map[string]int{}
)

// cluster is replayCluster, made on first use. It also creates a
// ValidatingAdmissionPolicy with paramKind ConfigMap that matches nothing
// and stays for the whole run: kube-apiserver (v1.37.1) stops following a
// paramKind's objects once no VAP uses it, and later VAPs of that kind then
// never see new parameters (docs/translation.md), which the suites' repeated
// installs and removals would otherwise run into. Its namespaces are never
// deleted: the control plane has no namespace controller, so they would
// never finish terminating.
func cluster(t *testing.T) *policytest.Cluster {
	t.Helper()
	replayOnce.Do(func() {
		replayCluster = &policytest.Cluster{Config: cp.Config, Scheme: cp.Scheme}
		if err := keepParamInformer(context.Background()); err != nil {
			t.Fatalf("parameter informer keeper: %v", err)
		}
	})
	return replayCluster
}

// keepParamInformer creates the VAPs and bindings described at cluster,
// for the parameter kinds the suites use: ConfigMaps (ClusterPolicies'
// params, ValidatingPolicies' resource.Get) and Namespaces (a
// ValidatingPolicy's resource.Get of one by name).
func keepParamInformer(ctx context.Context) error {
	for _, kind := range []string{"ConfigMap", "Namespace"} {
		if err := keepParamInformerOf(ctx, kind); err != nil {
			return err
		}
	}
	return nil
}

func keepParamInformerOf(ctx context.Context, kind string) error {
	name := "kyvap-conformance-" + strings.ToLower(kind) + "-params"
	allow := admissionregistrationv1.AllowAction
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: kind},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"kyvap.io"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ParamRef:          &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: &allow},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if err := cp.Client.Create(ctx, vap); err != nil {
		return err
	}
	return cp.Client.Create(ctx, binding)
}

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

func corpus(t *testing.T) []policytest.Suite {
	t.Helper()
	suites, err := policytest.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(suites) < 40 {
		t.Fatalf("only %d test documents found; the corpus has more", len(suites))
	}
	return suites
}

// TestPathsAgree: wherever a rule is a VAP, the VAP path and the fallback
// engine reach the same result for every resource of the corpus. A
// divergence is a bug in the translator or in the engine.
func TestPathsAgree(t *testing.T) {
	compared, fallbackOnly := 0, 0
	for _, s := range corpus(t) {
		report := policytest.Run(context.Background(), &s, policytest.Options{})
		for _, row := range report.Rows {
			switch {
			case row.Status == policytest.StatusSkipped:
				continue
			case row.VAP.Result == policytest.Fallback:
				fallbackOnly++
				continue
			case row.VAP.Result == policytest.NotApplicable:
				continue
			case row.Engine.Result == policytest.NotApplicable:
				// A ValidatingPolicy rule no engine of kyvap evaluates (a
				// library it lacks): the VAP path alone is compared.
				continue
			}
			compared++
			if row.VAP.Result != row.Engine.Result {
				t.Errorf("%s: %s/%s on %s: VAP path %s (%s), engine %s (%s)", s.Path, row.Policy, row.Rule, row.Resource,
					row.VAP.Result, row.VAP.Message, row.Engine.Result, row.Engine.Message)
			}
		}
	}
	t.Logf("%d results compared on both paths, %d on the fallback engine only", compared, fallbackOnly)
	if compared < 100 {
		t.Errorf("only %d results were compared on both paths", compared)
	}
}

// verdict is an admission outcome: allowed or not, the rule messages it must
// carry, and the warnings.
type verdict struct {
	allowed  bool
	denials  []string // any one of them must appear in the denial
	warnings []string
}

func (v verdict) String() string {
	if v.allowed {
		return fmt.Sprintf("allowed, warnings %q", v.warnings)
	}
	return fmt.Sprintf("denied with one of %q", v.denials)
}

// predictor computes, in-process, what the API server should answer.
type predictor struct {
	suite    *policytest.Suite
	generate bool
	sim      *vapsim.Simulator
	engine   *engine.Engine
}

func newPredictor(t *testing.T, s *policytest.Suite, generate bool) *predictor {
	t.Helper()
	p := &predictor{suite: s, generate: generate, engine: engine.New()}
	resolver := kyverno.NewStaticResolver(s.CRDs...)
	var vaps []admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for i := range s.Policies {
		plan, err := translate.Translate(clusterpolicy.InputFor(&s.Policies[i], s.Exceptions), resolver, translate.Options{GenerateValidatingAdmissionPolicy: generate, TypedObjects: true})
		if err != nil {
			t.Fatalf("%s: %v", s.Path, err)
		}
		vaps = append(vaps, plan.ValidatingAdmissionPolicies...)
		bindings = append(bindings, plan.Bindings...)
		var fallback []translate.FallbackRule
		for _, r := range plan.Rules {
			if r.Fallback != nil {
				fallback = append(fallback, *r.Fallback)
			}
		}
		p.engine.SetFallbackRules(plan.Policy, fallback)
	}
	p.sim = vapsim.New(vaps, bindings)
	return p
}

func (p *predictor) predict(ctx context.Context, req *admissionv1.AdmissionRequest) (verdict, error) {
	v := verdict{allowed: true}
	resp, err := p.sim.Evaluate(ctx, vapsim.Request{Admission: req, Namespaces: p.suite.Namespaces(), Params: p.suite.Params})
	if err != nil {
		return v, err
	}
	if !resp.Allowed {
		v.allowed = false
		v.denials = append(v.denials, resp.Message)
		for _, pr := range resp.Policies {
			for _, br := range pr.Bindings {
				for _, d := range br.Decisions {
					v.denials = append(v.denials, d.Message)
				}
				if br.ConfigError != "" {
					v.denials = append(v.denials, br.ConfigError)
				}
			}
		}
	}
	v.warnings = append(v.warnings, resp.Warnings...)
	var ns *corev1.Namespace
	for _, n := range p.suite.Namespaces() {
		if n.Name == req.Namespace {
			ns = n.DeepCopy()
		}
	}
	// The webhook resolves the user's roles from the cluster's bindings; so
	// does the prediction.
	var rbs rbacv1.RoleBindingList
	var crbs rbacv1.ClusterRoleBindingList
	if err := cp.Client.List(ctx, &rbs); err != nil {
		return v, err
	}
	if err := cp.Client.List(ctx, &crbs); err != nil {
		return v, err
	}
	roles, clusterRoles := webhook.RolesOf(rbs.Items, crbs.Items, req.UserInfo, req.Namespace)
	outcomes, err := p.engine.Evaluate(ctx, engine.Request{Admission: req, Namespace: ns, Params: engine.StaticParams(p.suite.Params), Roles: roles, ClusterRoles: clusterRoles})
	if err != nil {
		return v, err
	}
	// The API server calls each configured webhook (one per failure policy
	// and timeout) and reports the first denial, so any one rule's denial
	// may be the one seen.
	wr := webhook.Response(outcomes)
	if !wr.Allowed {
		v.allowed = false
		for _, o := range outcomes {
			if o.Blocking && o.Action.IsEnforce() {
				v.denials = append(v.denials, o.Messages...)
			}
		}
	}
	v.warnings = append(v.warnings, wr.Warnings...)
	return v, nil
}

// replayable says whether the API server can be asked the suite's question
// as the suite asks it, and why not.
func replayable(s *policytest.Suite) string {
	switch {
	case len(s.Policies) == 0:
		return "no ClusterPolicy"
	}
	return ""
}

// TestRealAPIServer replays the corpus against kube-apiserver: every
// request of every suite (each resource, with the operations its results
// ask for) is sent (dry run) with the suite's policies enforced, once as
// generated VAPs (plus the webhook for what stays on the fallback engine)
// and once by kyvap's webhook alone, and the API server's answer must be
// the one predicted in-process.
func TestRealAPIServer(t *testing.T) {
	user := currentUser(t)
	cp.EnsureNamespace(t, controlplane.OperatorNamespace, nil)
	suites := corpus(t)
	cluster(t)
	for _, generate := range []bool{true, false} {
		name := "vap"
		if !generate {
			name = "webhook"
		}
		t.Run(name, func(t *testing.T) {
			cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: generate, TypedObjects: true}, controlplane.FreePort(t))
			replayed, skipped := 0, map[string]int{}
			for k := range operations {
				delete(operations, k)
			}
			for i := range suites {
				s := &suites[i]
				if why := replayable(s); why != "" {
					skipped[why]++
					continue
				}
				t.Run(strings.TrimSuffix(s.Path, "/kyverno-test.yaml"), func(t *testing.T) {
					n, notes := replaySuite(t, s, generate, user)
					replayed += n
					for _, note := range notes {
						skipped[note]++
					}
				})
			}
			t.Logf("%d requests replayed (%v); not replayed: %v", replayed, operations, skipped)
			if flagRun() == "" && (replayed < 150 || operations["UPDATE"] == 0 || operations["DELETE"] == 0) {
				t.Errorf("only %d requests replayed (%v)", replayed, operations)
			}
		})
	}
}

// replaySuite installs the suite's objects with kyvap test --cluster's
// code (namespaces, parameters, exceptions, CRDs, the user's bindings, the
// old objects of UPDATE and DELETE requests, then the policies), sends
// every resource's request and removes everything again.
func replaySuite(t *testing.T, s *policytest.Suite, generate bool, user authenticationv1.UserInfo) (replayed int, notes []string) {
	t.Helper()
	ctx := context.Background()
	in, err := cluster(t).Install(ctx, s)
	defer func() {
		if err := in.Remove(); err != nil {
			t.Errorf("%s: cleaning up: %v", s.Path, err)
		}
		waitForCleanup(t, s)
	}()
	if err != nil {
		t.Fatalf("%s: %v", s.Path, err)
	}
	var creates, others []check
	stored := map[string]bool{}
	for _, ro := range requestsOf(s) {
		r := ro.resource
		req, _, err := s.AdmissionRequest(s.Policies[0].Name, r, ro.operation)
		if err != nil {
			t.Errorf("%s: %s: %v", s.Path, r.Key(), err)
			continue
		}
		if req.SubResource != "" {
			notes = append(notes, "a subresource request")
			continue
		}
		obj, old, err := policytest.RequestObjects(req)
		if err != nil {
			t.Errorf("%s: %s: %v", s.Path, r.Key(), err)
			continue
		}
		if req.Operation == admissionv1.Create {
			creates = append(creates, check{resource: r, req: req, obj: obj})
			continue
		}
		if stored[r.Key()] {
			notes = append(notes, "a second non-CREATE request for one stored object")
			continue
		}
		stored[r.Key()] = true
		if req.Operation == admissionv1.Delete {
			obj = old
		}
		others = append(others, check{resource: r, req: req, obj: obj, old: old})
	}
	// CREATE requests first; then the old objects of the others are stored
	// (before the policies exist, which might deny them) and the policies
	// are added again.
	for phase, pending := range [][]check{creates, others} {
		if len(pending) == 0 {
			continue
		}
		if phase == 1 {
			for _, c := range pending {
				if err := in.StoreOldObject(ctx, c.old); err != nil {
					t.Fatalf("%s: storing the old object of %s: %v", s.Path, c.resource.Key(), err)
				}
			}
		}
		if err := in.AddPolicies(ctx, s.Policies, policytest.PolicyStatusTimeout); err != nil {
			t.Fatalf("%s: %v", s.Path, err)
		}
		n, phaseNotes := checkAll(t, s, generate, user, pending)
		replayed += n
		notes = append(notes, phaseNotes...)
		if err := in.RemovePolicies(ctx); err != nil {
			t.Fatalf("%s: %v", s.Path, err)
		}
		waitForCleanup(t, s)
	}
	return replayed, notes
}

// check is one request of a suite and the verdict predicted for it.
type check struct {
	resource *policytest.Resource
	want     verdict
	req      *admissionv1.AdmissionRequest
	// obj is what is sent; old is the stored object of UPDATE and DELETE.
	obj, old *unstructured.Unstructured
}

// checkAll predicts each request in-process and compares the API server's
// answer with the prediction (the suite's policies are in place).
func checkAll(t *testing.T, s *policytest.Suite, generate bool, user authenticationv1.UserInfo, pending []check) (replayed int, notes []string) {
	t.Helper()
	ctx := context.Background()
	cfg := cluster(t).UserConfig(s)
	if s.UserInfo != nil {
		// The user the API server reports for the impersonation.
		info := s.UserInfo.AdmissionUserInfo
		user = authenticationv1.UserInfo{Username: info.Username, Groups: append(append([]string{}, info.Groups...), policytest.ImpersonationGroup, "system:authenticated")}
	}
	p := newPredictor(t, s, generate)
	var denied, allowed []check
	kyvernoDenies := enforcedFailures(t, s, generate)
	for _, c := range pending {
		c.req.UserInfo = user
		want, err := p.predict(ctx, c.req)
		if err != nil {
			t.Errorf("%s: predicting %s: %v", s.Path, c.resource.Key(), err)
			continue
		}
		c.want = want
		if want.allowed {
			allowed = append(allowed, c)
		} else {
			denied = append(denied, c)
		}
	}
	t.Logf("%s: %d denials and %d admissions predicted", s.Path, len(denied), len(allowed))
	// Denials first: once they are seen, enforcement is in place, and an
	// admission is meaningful.
	for _, c := range append(denied, allowed...) {
		got, err := waitForVerdict(ctx, cfg, c.req, c.obj, c.want)
		switch {
		case errors.Is(err, errNotAdmissible):
			notes = append(notes, "the API server refuses the object itself (not a valid "+c.resource.Object.GetKind()+")")
		case err != nil:
			t.Errorf("%s: %s (%s): API server %s, predicted %s", s.Path, c.resource.Key(), c.req.Operation, got, c.want)
			replayed++
		default:
			replayed++
			operations[string(c.req.Operation)]++
			if why, ok := kyvernoDenies[c.resource.Key()]; ok && got.allowed && c.req.Operation == admissionv1.Create {
				// The API server gave the predicted answer; it must also be
				// Kyverno's.
				t.Errorf("%s: %s: Kyverno denies it (%s), the API server admitted it", s.Path, c.resource.Key(), why)
			}
		}
	}
	return replayed, notes
}

// resourceOperation is one request of a suite: a resource and the
// operation a result asks for ("" for the values' or CREATE).
type resourceOperation struct {
	resource  *policytest.Resource
	operation string
}

// requestsOf lists every resource with the default operation, plus the
// other operations the results ask for, each once.
func requestsOf(s *policytest.Suite) []resourceOperation {
	var out []resourceOperation
	seen := map[string]bool{}
	add := func(r *policytest.Resource, op string) {
		if key := r.Key() + "|" + op; !seen[key] {
			seen[key] = true
			out = append(out, resourceOperation{r, op})
		}
	}
	for i := range s.Resources {
		add(&s.Resources[i], "")
	}
	for i, res := range s.Test.Results {
		if res.Operation == "" {
			continue
		}
		selected, _ := s.SelectResources(i)
		for _, r := range selected {
			add(r, res.Operation)
		}
	}
	return out
}

// enforcedFailures are the resources (by key) the suite expects a rule to
// fail on CREATE under Enforce, among the rules kyvap enforces: Kyverno
// denies them, so the API server must too.
func enforcedFailures(t *testing.T, s *policytest.Suite, generate bool) map[string]string {
	t.Helper()
	enforced := map[string]bool{} // policy/rule kyvap enforces
	enforceOnly := map[string]bool{}
	for i := range s.Policies {
		p := &s.Policies[i]
		plan, err := translate.Translate(clusterpolicy.InputFor(p, s.Exceptions), kyverno.NewStaticResolver(s.CRDs...), translate.Options{GenerateValidatingAdmissionPolicy: generate, TypedObjects: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, rr := range plan.Rules {
			switch {
			case rr.Verdict == translate.VerdictNotHandled || rr.Verdict == translate.VerdictInvalid:
			case rr.Fallback != nil && rr.Fallback.NotEnforced != "":
			default:
				enforced[p.Name+"/"+rr.Rule] = true
			}
		}
		for _, r := range p.Spec.Rules {
			if s.UserInfo == nil && filtersOnUser(&r) {
				// Without a user, Kyverno's CLI ignores user filters; the
				// replay always has one.
				continue
			}
			action := p.Spec.ValidationFailureAction
			if r.Validation != nil && r.Validation.FailureAction != nil {
				action = *r.Validation.FailureAction
			}
			overrides := len(p.Spec.ValidationFailureActionOverrides) > 0 || (r.Validation != nil && len(r.Validation.FailureActionOverrides) > 0)
			enforceOnly[p.Name+"/"+r.Name] = action.IsEnforce() && !overrides
		}
	}
	out := map[string]string{}
	for i, res := range s.Test.Results {
		if res.Result != "fail" || (res.Operation != "" && res.Operation != "CREATE") || res.Rule == "" {
			continue
		}
		rule := strings.TrimPrefix(strings.TrimPrefix(res.Rule, "autogen-cronjob-"), "autogen-")
		key := res.Policy + "/" + rule
		if !enforced[key] || !enforceOnly[key] {
			continue
		}
		selected, _ := s.SelectResources(i)
		for _, r := range selected {
			out[r.Key()] = fmt.Sprintf("%s fails", key)
		}
	}
	return out
}

// filtersOnUser reports whether the rule's match filters on the user.
func filtersOnUser(r *kyvernov1.Rule) bool {
	m := &r.MatchResources
	for _, f := range append(append(kyvernov1.ResourceFilters{{UserInfo: m.UserInfo}}, m.Any...), m.All...) {
		if !f.UserInfo.IsEmpty() {
			return true
		}
	}
	return false
}

var errNotAdmissible = errors.New("the API server refuses the object before admission")

// waitForVerdict sends the request (a dry-run create, update or delete)
// until the API server's answer matches want (VAPs and webhook
// configurations take effect asynchronously), and returns the last answer.
// An object the API server refuses on its own (invalid, already stored)
// gives errNotAdmissible.
func waitForVerdict(ctx context.Context, cfg *rest.Config, req *admissionv1.AdmissionRequest, obj *unstructured.Unstructured, want verdict) (verdict, error) {
	var got verdict
	notAdmissible := false
	err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		answer := replayCluster.Ask(ctx, cfg, req, obj)
		if answer.NotAdmissible != nil {
			notAdmissible = true
			return true, nil
		}
		got = verdict{allowed: answer.Allowed, warnings: answer.Warnings}
		if !answer.Allowed {
			got.denials = []string{answer.Denial}
		}
		return matches(got, want), fmt.Errorf("got %s", got)
	})
	if notAdmissible {
		return got, errNotAdmissible
	}
	return got, err
}

func matches(got, want verdict) bool {
	if got.allowed != want.allowed {
		return false
	}
	if !got.allowed {
		found := false
		for _, d := range want.denials {
			if d != "" && strings.Contains(got.denials[0], d) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	for _, w := range want.warnings {
		found := false
		for _, g := range got.warnings {
			if strings.Contains(g, w) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// waitForCleanup waits until the suite's VAPs are gone and no webhook rule
// remains, so the next suite starts from a clean cluster.
func waitForCleanup(t *testing.T, s *policytest.Suite) {
	t.Helper()
	names := map[string]bool{}
	for _, p := range s.Policies {
		names[p.Name] = true
	}
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		if err := cp.Client.List(ctx, &vaps, client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}); err != nil {
			return false, err
		}
		var left []string
		for _, v := range vaps.Items {
			if names[v.Labels[translate.LabelPolicy]] {
				left = append(left, v.Name)
			}
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, vwc)
		if err == nil {
			left = append(left, "webhook configuration")
		} else if !apierrors.IsNotFound(err) {
			return false, err
		}
		sort.Strings(left)
		return len(left) == 0, fmt.Errorf("still there: %v", left)
	})
	if err != nil {
		t.Fatalf("%s: cleaning up: %v", s.Path, err)
	}
}

func currentUser(t *testing.T) authenticationv1.UserInfo {
	t.Helper()
	review := &authenticationv1.SelfSubjectReview{}
	if err := cp.Client.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.UserInfo
}

// flagRun is the -run pattern: a partial run replays fewer requests.
func flagRun() string {
	if f := flag.Lookup("test.run"); f != nil {
		return f.Value.String()
	}
	return ""
}

// TestClusterReplay replays every suite of the corpus with kyvap test
// --cluster's code against the real API server enforcing what the
// operator generated (VAPs, and the webhook for the rest): the API
// server's answers must be Kyverno's expected results, for every request
// the API server can be sent (CREATE, UPDATE and DELETE, custom
// resources, impersonated users).
// TestClusterReplayReusesNamespaces replays a suite that creates namespaces
// twice in a row: the first replay deletes them, and the second needs them
// gone (the control plane runs the namespace controller, as a cluster does;
// without it the second replay would find them terminating forever).
func TestClusterReplayReusesNamespaces(t *testing.T) {
	ctx := context.Background()
	cp.EnsureNamespace(t, controlplane.OperatorNamespace, nil)
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: true, TypedObjects: true}, controlplane.FreePort(t))
	replay := cluster(t)
	var suite *policytest.Suite
	for _, s := range corpus(t) {
		if strings.HasPrefix(s.Path, "namespaces/") {
			suite = &s
		}
	}
	if suite == nil {
		t.Fatal("suite namespaces not found")
	}
	for round := 1; round <= 2; round++ {
		report := policytest.RunCluster(ctx, suite, replay, policytest.Options{})
		if report.Summary.Failed > 0 || report.Summary.Passed == 0 {
			for _, row := range report.Rows {
				if row.Status == policytest.StatusFail {
					t.Errorf("round %d: %s/%s on %s: %s", round, row.Policy, row.Rule, row.Resource, row.Reason)
				}
			}
			t.Fatalf("round %d: %s", round, report.Summary)
		}
	}
}

func TestClusterReplay(t *testing.T) {
	if policytest.DefaultStatusCondition != controllers.ConditionType {
		t.Fatalf("policytest.DefaultStatusCondition %q is not controllers.ConditionType %q", policytest.DefaultStatusCondition, controllers.ConditionType)
	}
	ctx := context.Background()
	cp.EnsureNamespace(t, controlplane.OperatorNamespace, nil)
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: true, TypedObjects: true}, controlplane.FreePort(t))
	replay := cluster(t)
	var total, vpolTotal policytest.Summary
	operations := map[string]int{}
	vpolDenied, vpolOutside := 0, 0
	for _, s := range corpus(t) {
		name := strings.TrimSuffix(s.Path, "/kyverno-test.yaml")
		t.Run(name, func(t *testing.T) {
			report := policytest.RunCluster(ctx, &s, replay, policytest.Options{})
			total.Add(report.Summary)
			if len(s.ValidatingPolicies) > 0 {
				vpolTotal.Add(report.Summary)
			}
			for _, row := range report.Rows {
				switch row.Status {
				case policytest.StatusFail:
					t.Errorf("%s/%s on %s (%s): %s", row.Policy, row.Rule, row.Resource, row.Operation, row.Reason)
				case policytest.StatusPass:
					operations[row.Operation]++
					if len(s.ValidatingPolicies) > 0 && row.Cluster != nil {
						if strings.HasPrefix(row.Reason, "admitted: outside the NamespacedValidatingPolicy's namespace") {
							vpolOutside++
						} else if row.Cluster.Result == policytest.Fail {
							vpolDenied++
						}
					}
				case policytest.StatusSkipped:
					if strings.HasPrefix(row.Reason, policytest.ForeignDenial) {
						// Only the suite's own policy is installed here.
						t.Errorf("%s/%s on %s: %s", row.Policy, row.Rule, row.Resource, row.Reason)
					}
				}
			}
			for _, w := range report.Warnings {
				if strings.HasPrefix(w, "cleaning up") {
					t.Errorf("%s", w)
				}
			}
		})
	}
	t.Logf("API server agreed with Kyverno's expected results: %s; by operation %v", total, operations)
	t.Logf("of which ValidatingPolicy suites: %s (%d named by the API server, %d NamespacedValidatingPolicy resources in other namespaces admitted)", vpolTotal, vpolDenied, vpolOutside)
	if run := flagRun(); run == "" || strings.Contains(run, "vpol") {
		// The vpol suites are replayed on the real server: denials and
		// warnings naming the policies' VAPs, and an nvpol that does not
		// leak into another namespace.
		if vpolDenied < 10 || (vpolOutside == 0 && (run == "" || strings.Contains(run, "nvpol"))) {
			t.Errorf("ValidatingPolicy rows: %d denied or warned, %d outside the namespace admitted", vpolDenied, vpolOutside)
		}
	}
	if flagRun() == "" && (total.Passed < 150 || operations["UPDATE"] == 0 || operations["DELETE"] == 0) {
		t.Errorf("only %d rows replayed (%v)", total.Passed, operations)
	}
}
