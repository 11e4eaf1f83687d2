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
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/cmd/kyvap/clitest"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
	"github.com/kyvap/kyvap/webhook/engine"
	"github.com/kyvap/kyvap/webhook/vapsim"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

func corpus(t *testing.T) []clitest.Suite {
	t.Helper()
	suites, err := clitest.Load(".")
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
		report := clitest.Run(context.Background(), &s, clitest.Options{})
		for _, row := range report.Rows {
			switch {
			case row.Status == clitest.StatusSkipped:
				continue
			case row.VAP.Result == clitest.Fallback:
				fallbackOnly++
				continue
			case row.VAP.Result == clitest.NotApplicable:
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
	suite    *clitest.Suite
	generate bool
	sim      *vapsim.Simulator
	engine   *engine.Engine
}

func newPredictor(t *testing.T, s *clitest.Suite, generate bool) *predictor {
	t.Helper()
	p := &predictor{suite: s, generate: generate, engine: engine.New()}
	resolver := translate.NewStaticResolver(s.CRDs...)
	var vaps []admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for i := range s.Policies {
		plan, err := translate.Translate(translate.Input{Policy: &s.Policies[i], Exceptions: s.Exceptions}, resolver, translate.Options{GenerateValidatingAdmissionPolicy: generate})
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
func replayable(s *clitest.Suite) string {
	switch {
	case len(s.CRDs) > 0:
		return "the test needs custom resource definitions"
	case len(s.Policies) == 0:
		return "no ClusterPolicy"
	}
	return ""
}

// TestRealAPIServer replays the corpus against kube-apiserver: every
// resource of every replayable test is created (dry run) with the suite's
// policies enforced, once as generated VAPs (plus the webhook for what
// stays on the fallback engine) and once by kyvap's webhook alone, and the
// API server's answer must be the one predicted in-process.
func TestRealAPIServer(t *testing.T) {
	ctx := context.Background()
	user := currentUser(t)
	ensureNamespace(t, "kyvap-system", nil)
	suites := corpus(t)
	for _, generate := range []bool{true, false} {
		name := "vap"
		if !generate {
			name = "webhook"
		}
		t.Run(name, func(t *testing.T) {
			port := freePort(t)
			op, err := cp.StartOperatorWithWebhook(translate.Options{GenerateValidatingAdmissionPolicy: generate}, ctrl.Options{},
				webhook.Options{Host: "127.0.0.1", Port: port, Namespace: "kyvap-system", URL: fmt.Sprintf("https://127.0.0.1:%d", port)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := op.Stop(); err != nil {
					t.Errorf("operator: %v", err)
				}
				_ = cp.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}})
			}()
			replayed, skipped := 0, map[string]int{}
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
			t.Logf("%d requests replayed; not replayed: %v", replayed, skipped)
			if replayed < 50 && !testing.Short() && len(suites) > 40 && !t.Failed() && flagRun() == "" {
				t.Errorf("only %d requests replayed", replayed)
			}
		})
	}
}

// replaySuite installs the suite's objects, checks every CREATE request,
// and removes the policies again.
func replaySuite(t *testing.T, s *clitest.Suite, generate bool, user authenticationv1.UserInfo) (replayed int, notes []string) {
	t.Helper()
	ctx := context.Background()
	labelled := map[string]bool{}
	for _, ns := range s.Namespaces() {
		ensureNamespace(t, ns.Name, ns.Labels)
		labelled[ns.Name] = true
	}
	for _, r := range s.Resources {
		if ns := r.Object.GetNamespace(); ns != "" && !labelled[ns] {
			ensureNamespace(t, ns, nil) // no labels, whatever an earlier suite set
			labelled[ns] = true
		}
	}
	resourceKeys := map[string]bool{}
	for _, r := range s.Resources {
		resourceKeys[r.Key()] = true
	}
	for i := range s.Params {
		p := s.Params[i].DeepCopy()
		key := strings.Join([]string{p.GetAPIVersion(), p.GetKind(), p.GetNamespace(), p.GetName()}, "/")
		if resourceKeys[key] {
			continue // evaluated below, not a parameter
		}
		upsert(t, p)
	}
	var created []client.Object
	for i := range s.Exceptions {
		ex := s.Exceptions[i].DeepCopy()
		ensureNamespace(t, ex.Namespace, nil)
		created = append(created, ex)
	}
	for i := range s.Policies {
		created = append(created, s.Policies[i].DeepCopy())
	}
	for _, obj := range created {
		obj.SetResourceVersion("")
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("%s: creating %T %s: %v", s.Path, obj, obj.GetName(), err)
		}
	}
	defer func() {
		for _, obj := range created {
			if err := cp.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("%s: deleting %T %s: %v", s.Path, obj, obj.GetName(), err)
			}
		}
		waitForCleanup(t, s)
	}()
	for i := range s.Policies {
		if _, _, err := controlplane.WaitForPolicyStatus(ctx, cp.Client, s.Policies[i].Name, time.Minute); err != nil {
			t.Fatalf("%s: %v", s.Path, err)
		}
	}

	cfg := rest.CopyConfig(cp.Config)
	if s.UserInfo != nil {
		user = impersonate(t, s, cfg)
	}
	p := newPredictor(t, s, generate)
	type check struct {
		resource *clitest.Resource
		want     verdict
		req      *admissionv1.AdmissionRequest
	}
	var denied, allowed []check
	kyvernoDenies := enforcedFailures(t, s, generate)
	for i := range s.Resources {
		r := &s.Resources[i]
		req, _, err := s.AdmissionRequest(s.Policies[0].Name, r, "")
		if err != nil || req.Operation != admissionv1.Create {
			notes = append(notes, "not a CREATE request")
			continue
		}
		req.UserInfo = user
		want, err := p.predict(ctx, req)
		if err != nil {
			t.Errorf("%s: predicting %s: %v", s.Path, r.Key(), err)
			continue
		}
		c := check{resource: r, want: want, req: req}
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
		got, err := waitForVerdict(ctx, cfg, &c.resource.Object, c.want)
		switch {
		case errors.Is(err, errNotAdmissible):
			notes = append(notes, "the API server refuses the object itself (not a valid "+c.resource.Object.GetKind()+")")
		case err != nil:
			t.Errorf("%s: %s: API server %s, predicted %s", s.Path, c.resource.Key(), got, c.want)
			replayed++
		default:
			replayed++
			if why, ok := kyvernoDenies[c.resource.Key()]; ok && got.allowed {
				// The API server gave the predicted answer; it must also be
				// Kyverno's.
				t.Errorf("%s: %s: Kyverno denies it (%s), the API server admitted it", s.Path, c.resource.Key(), why)
			}
		}
	}
	return replayed, notes
}

// enforcedFailures are the resources (by key) the suite expects a rule to
// fail on CREATE under Enforce, among the rules kyvap enforces: Kyverno
// denies them, so the API server must too.
func enforcedFailures(t *testing.T, s *clitest.Suite, generate bool) map[string]string {
	t.Helper()
	enforced := map[string]bool{} // policy/rule kyvap enforces
	enforceOnly := map[string]bool{}
	for i := range s.Policies {
		p := &s.Policies[i]
		plan, err := translate.Translate(translate.Input{Policy: p, Exceptions: s.Exceptions}, translate.NewStaticResolver(s.CRDs...), translate.Options{GenerateValidatingAdmissionPolicy: generate})
		if err != nil {
			t.Fatal(err)
		}
		for _, rr := range plan.Rules {
			switch {
			case rr.Verdict == translate.VerdictNotHandled || rr.Verdict == translate.VerdictInvalid:
			case rr.Fallback != nil && engine.Unsupported(rr.Fallback) != nil:
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

// waitForVerdict creates obj (dry run) until the API server's answer
// matches want (VAPs and webhook configurations take effect
// asynchronously), and returns the last answer. An object the API server
// refuses on its own (invalid, already stored) gives errNotAdmissible.
func waitForVerdict(ctx context.Context, base *rest.Config, obj *unstructured.Unstructured, want verdict) (verdict, error) {
	var got verdict
	notAdmissible := false
	err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var warnings []string
		cfg := rest.CopyConfig(base)
		cfg.WarningHandlerWithContext = collector{&warnings}
		c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
		if err != nil {
			return false, err
		}
		err = c.Create(ctx, obj.DeepCopy(), client.DryRunAll)
		got = verdict{allowed: err == nil, warnings: warnings}
		if err != nil {
			msg := err.Error()
			admission := strings.Contains(msg, "denied request") || strings.Contains(msg, "denied the request")
			if !admission && (apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err)) {
				notAdmissible = true
				return true, nil
			}
			got.denials = []string{msg}
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

type collector struct{ into *[]string }

func (w collector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	*w.into = append(*w.into, text)
}

// waitForCleanup waits until the suite's VAPs are gone and no webhook rule
// remains, so the next suite starts from a clean cluster.
func waitForCleanup(t *testing.T, s *clitest.Suite) {
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

func ensureNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	want := map[string]string{corev1.LabelMetadataName: name}
	for k, v := range labels {
		want[k] = v
	}
	// Retried: the API server may still enforce, for a moment, a policy of
	// the previous suite that matches Namespaces.
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		ns := &corev1.Namespace{}
		err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, ns)
		if apierrors.IsNotFound(err) {
			return false, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		}
		if err != nil {
			return false, err
		}
		// Suites reuse namespace names with their own labels.
		if fmt.Sprint(ns.Labels) == fmt.Sprint(want) {
			return true, nil
		}
		ns.Labels = want
		return false, cp.Client.Update(ctx, ns)
	})
	if err != nil {
		t.Fatalf("namespace %s with labels %v: %v", name, labels, err)
	}
}

func upsert(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if ns := obj.GetNamespace(); ns != "" {
		ensureNamespace(t, ns, nil)
	}
	// Retried: the API server may still enforce, for a moment, a policy of
	// the previous suite.
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		want := obj.DeepCopy()
		want.SetResourceVersion("")
		err := cp.Client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			current := &unstructured.Unstructured{}
			current.SetGroupVersionKind(obj.GroupVersionKind())
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
				return false, err
			}
			want.SetResourceVersion(current.GetResourceVersion())
			err = cp.Client.Update(ctx, want)
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("parameter %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// flagRun is the -run pattern: a partial run replays fewer requests.
func flagRun() string {
	if f := flag.Lookup("test.run"); f != nil {
		return f.Value.String()
	}
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// conformanceGroup is the group impersonated users get to be allowed to
// create the suite's objects at all.
const conformanceGroup = "kyvap:conformance"

// impersonate makes cfg send requests as the suite's user, and binds the
// suite's roles and cluster roles to that user in the cluster, so that the
// webhook finds them as Kyverno would. It returns the user the API server
// will report (impersonated users are also system:authenticated).
func impersonate(t *testing.T, s *clitest.Suite, cfg *rest.Config) authenticationv1.UserInfo {
	t.Helper()
	ctx := context.Background()
	info := s.UserInfo.AdmissionUserInfo
	user := authenticationv1.UserInfo{Username: info.Username, Groups: append(append([]string{}, info.Groups...), conformanceGroup, "system:authenticated")}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user.Username, Groups: user.Groups[:len(user.Groups)-1]}
	subject := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: info.Username}
	if ns, name, ok := strings.Cut(strings.TrimPrefix(info.Username, "system:serviceaccount:"), ":"); ok && strings.HasPrefix(info.Username, "system:serviceaccount:") {
		subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}
	var objs []client.Object
	objs = append(objs, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kyvap-conformance-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: conformanceGroup}},
	})
	for i, role := range s.UserInfo.Roles {
		ns, name, ok := strings.Cut(role, ":")
		if !ok {
			t.Fatalf("%s: role %q is not namespace:name", s.Path, role)
		}
		ensureNamespace(t, ns, nil)
		objs = append(objs, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("kyvap-conformance-%d", i)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{subject},
		})
	}
	for i, role := range s.UserInfo.ClusterRoles {
		objs = append(objs, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kyvap-conformance-%d", i)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		})
	}
	for _, obj := range objs {
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("%s: binding %s: %v", s.Path, obj.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, obj := range objs {
			if err := cp.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting binding %s: %v", obj.GetName(), err)
			}
		}
	})
	return user
}

// TestClusterReplay replays every suite of the corpus with kyvap test
// --cluster's code against the real API server enforcing what the
// operator generated (VAPs, and the webhook for the rest): the API
// server's answers must be Kyverno's expected results, for every request
// the API server can be sent (CREATE, UPDATE and DELETE, custom
// resources, impersonated users).
func TestClusterReplay(t *testing.T) {
	if clitest.DefaultStatusCondition != controllers.ConditionType {
		t.Fatalf("clitest.DefaultStatusCondition %q is not controllers.ConditionType %q", clitest.DefaultStatusCondition, controllers.ConditionType)
	}
	ctx := context.Background()
	ensureNamespace(t, "kyvap-system", nil)
	port := freePort(t)
	op, err := cp.StartOperatorWithWebhook(translate.Options{GenerateValidatingAdmissionPolicy: true}, ctrl.Options{},
		webhook.Options{Host: "127.0.0.1", Port: port, Namespace: "kyvap-system", URL: fmt.Sprintf("https://127.0.0.1:%d", port)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := op.Stop(); err != nil {
			t.Errorf("operator: %v", err)
		}
		_ = cp.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}})
	}()
	cluster := &clitest.Cluster{Config: cp.Config, Scheme: cp.Scheme}
	// The test control plane has no namespace controller: deleted
	// namespaces never terminate, so the replay's are left to the end.
	defer func() {
		if err := cluster.Close(); err != nil {
			t.Error(err)
		}
	}()
	var total clitest.Summary
	operations := map[string]int{}
	for _, s := range corpus(t) {
		t.Run(strings.TrimSuffix(s.Path, "/kyverno-test.yaml"), func(t *testing.T) {
			report := clitest.RunCluster(ctx, &s, cluster, clitest.Options{})
			total.Add(report.Summary)
			for _, row := range report.Rows {
				switch row.Status {
				case clitest.StatusFail:
					t.Errorf("%s/%s on %s (%s): %s", row.Policy, row.Rule, row.Resource, row.Operation, row.Reason)
				case clitest.StatusPass:
					operations[row.Operation]++
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
	if flagRun() == "" && (total.Passed < 150 || operations["UPDATE"] == 0 || operations["DELETE"] == 0) {
		t.Errorf("only %d rows replayed (%v)", total.Passed, operations)
	}
}
