// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// The suites of this file walk each policy kind through the changes of
// failure action and scope a rollout makes (Kyverno's library applies a
// policy as Audit, patches it to Enforce, waits for Ready and expects a
// refusal), and check the API server's verdict after each one.

const badMessage = "names starting with bad are not allowed"

// badNameExpression refuses every object whose name starts with "bad".
const badNameExpression = "!object.metadata.name.startsWith('bad')"

// verdict is what the API server must answer for an object after a change.
type verdict int

const (
	denied   verdict = iota // refused with badMessage
	warned                  // admitted with a warning carrying badMessage
	admitted                // admitted without that warning
)

func (v verdict) String() string {
	return [...]string{"denied", "warned", "admitted"}[v]
}

// expectation is one object and the verdict it must get.
type expectation struct {
	obj  client.Object
	want verdict
}

func configMapNamed(namespace, name string) client.Object {
	return controlplane.ConfigMap(namespace, name, nil)
}

func secretNamed(namespace, name string) client.Object {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// verdictOf asks the API server once (a dry-run create) and classifies its
// answer; the error says what it answered otherwise.
func verdictOf(ctx context.Context, obj client.Object) (verdict, error) {
	warnings, err := cp.DryRunCreate(ctx, obj)
	if err != nil {
		if strings.Contains(err.Error(), badMessage) {
			return denied, nil
		}
		return denied, fmt.Errorf("refused for another reason: %w", err)
	}
	for _, w := range warnings {
		if strings.Contains(w, badMessage) {
			return warned, nil
		}
	}
	return admitted, nil
}

// checkNow asks for each verdict once: after Ready, the API server must
// give the policy's current verdicts at once (no retry).
func checkNow(t *testing.T, step string, expectations ...expectation) {
	t.Helper()
	for _, e := range expectations {
		got, err := verdictOf(context.Background(), e.obj)
		if err != nil || got != e.want {
			t.Errorf("%s: %T %s/%s was %s (%v), want %s", step, e.obj, e.obj.GetNamespace(), e.obj.GetName(), got, err, e.want)
		}
	}
}

// edit applies change to the stored object, retrying on conflicts.
func edit(t *testing.T, obj client.Object, change func(client.Object)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return cp.Client.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatalf("editing %s: %v", obj.GetName(), err)
	}
}

// waitReady waits until kyvap reported the policy's current generation
// enforced by its VAPs and Ready (Kyverno's condition on kyverno.io
// policies, conditionStatus.ready on policies.kyverno.io ones).
func waitReady(t *testing.T, policy client.Object) {
	t.Helper()
	current := policy.DeepCopyObject().(client.Object)
	err := controlplane.Eventually(context.Background(), controlplane.StatusTimeout, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
			return false, err
		}
		var conditions []metav1.Condition
		ready := false
		switch p := current.(type) {
		case *kyvernov1.ClusterPolicy:
			conditions = p.Status.Conditions
		case *kyvernov1.Policy:
			conditions = p.Status.Conditions
		default:
			st := vpolStatus(current)
			conditions = st.ConditionStatus.Conditions
			ready = st.ConditionStatus.Ready != nil && *st.ConditionStatus.Ready
		}
		c := meta.FindStatusCondition(conditions, controllers.ConditionType)
		if c == nil || c.ObservedGeneration != current.GetGeneration() || c.Reason != controllers.ReasonAllRulesTranslated {
			return false, fmt.Errorf("kyvap's condition %+v at generation %d", c, current.GetGeneration())
		}
		if r := meta.FindStatusCondition(conditions, "Ready"); r != nil {
			ready = r.Status == metav1.ConditionTrue && r.ObservedGeneration == current.GetGeneration()
		}
		return ready, fmt.Errorf("not Ready at generation %d", current.GetGeneration())
	})
	if err != nil {
		t.Fatalf("%s never became Ready: %v", policy.GetName(), err)
	}
}

// transition is one change of a policy and the verdicts after it.
type transition struct {
	name   string
	change func(client.Object)
	expect []expectation
}

// walk applies the transitions in turn, checking the verdicts once the
// policy is Ready after each.
func walk(t *testing.T, policy client.Object, steps []transition) {
	t.Helper()
	for _, step := range steps {
		if step.change != nil {
			edit(t, policy, step.change)
		}
		waitReady(t, policy)
		checkNow(t, step.name, step.expect...)
	}
}

func kyvernoSpec(obj client.Object) *kyvernov1.Spec {
	switch p := obj.(type) {
	case *kyvernov1.ClusterPolicy:
		return &p.Spec
	case *kyvernov1.Policy:
		return &p.Spec
	}
	panic(fmt.Sprintf("not a kyverno.io policy: %T", obj))
}

// badNamesRule is a CEL rule refusing ConfigMaps and Secrets named bad* in
// the namespaces (none: every namespace).
func badNamesRule(namespaces ...string) kyvernov1.Rule {
	rule := controlplane.CELRule("no-bad-names", "ConfigMap", badNameExpression, badMessage)
	rule.MatchResources.Any[0].Resources.Kinds = []string{"ConfigMap", "Secret"}
	rule.MatchResources.Any[0].Resources.Namespaces = namespaces
	return rule
}

func setAction(action kyvernov1.ValidationFailureAction) func(client.Object) {
	return func(obj client.Object) { kyvernoSpec(obj).ValidationFailureAction = action }
}

// TestKyvernoPolicyActionTransitions walks a ClusterPolicy and a Policy
// through Audit → Enforce → Audit, an override added and removed,
// emitWarning on and off, and a match list shrunk.
func TestKyvernoPolicyActionTransitions(t *testing.T) {
	cp.StartOperator(t, generateOn)
	const nsA, nsB = "transitions-a", "transitions-b"
	cp.Namespace(t, nsA, nil)
	cp.Namespace(t, nsB, nil)

	t.Run("ClusterPolicy", func(t *testing.T) {
		policy := controlplane.ClusterPolicy("transitions", kyvernov1.Audit, badNamesRule(nsA, nsB))
		cp.Create(t, policy)
		walkKyvernoPolicy(t, policy, nsA, nsB, func(obj client.Object, override bool) {
			spec := kyvernoSpec(obj)
			spec.ValidationFailureActionOverrides = nil
			if override {
				spec.ValidationFailureActionOverrides = []kyvernov1.ValidationFailureActionOverride{{Action: kyvernov1.Enforce, Namespaces: []string{nsB}}}
			}
		})
	})
	t.Run("Policy", func(t *testing.T) {
		policy := &kyvernov1.Policy{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "transitions"},
			Spec:       kyvernov1.Spec{ValidationFailureAction: kyvernov1.Audit, Background: ptr.To(false), Rules: []kyvernov1.Rule{badNamesRule()}},
		}
		cp.Create(t, policy)
		// A namespaced policy's override can only name its own namespace.
		walkKyvernoPolicy(t, policy, nsA, nsA, func(obj client.Object, override bool) {
			spec := kyvernoSpec(obj)
			spec.ValidationFailureActionOverrides = nil
			if override {
				spec.ValidationFailureActionOverrides = []kyvernov1.ValidationFailureActionOverride{{
					Action: kyvernov1.Enforce, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsA}},
				}}
			}
		})
	})
}

// walkKyvernoPolicy walks a kyverno.io policy created as Audit, matching
// ConfigMaps and Secrets in nsA (and nsB for a ClusterPolicy); override
// adds or removes an override to Enforce in overridden.
func walkKyvernoPolicy(t *testing.T, policy client.Object, nsA, overridden string, override func(client.Object, bool)) {
	badA, goodA, badSecretA := configMapNamed(nsA, "bad-1"), configMapNamed(nsA, "good-1"), secretNamed(nsA, "bad-2")
	badOverridden := configMapNamed(overridden, "bad-3")
	var overrideElsewhere []expectation
	if overridden != nsA {
		overrideElsewhere = []expectation{{badA, warned}}
	}
	var generatedBefore map[string]string
	walk(t, policy, []transition{
		{name: "created as Audit", expect: []expectation{{badA, warned}, {badSecretA, warned}, {goodA, admitted}}},
		{name: "Audit → Enforce", change: setAction(kyvernov1.Enforce), expect: []expectation{{badA, denied}, {badSecretA, denied}, {goodA, admitted}}},
		{name: "Enforce → Audit", change: setAction(kyvernov1.Audit), expect: []expectation{{badA, warned}, {badSecretA, warned}}},
		{name: "override to Enforce added", change: func(obj client.Object) { override(obj, true) }, expect: append([]expectation{{badOverridden, denied}}, overrideElsewhere...)},
		{name: "override removed", change: func(obj client.Object) { override(obj, false) }, expect: []expectation{{badOverridden, warned}, {badA, warned}}},
	})
	// emitWarning changes no generated object (Kyverno's own VAP generator
	// ignores it too: pkg/admissionpolicy/builder.go), hence no verdict.
	generatedBefore = generatedVersions(t, policy)
	walk(t, policy, []transition{
		{name: "emitWarning on", change: func(obj client.Object) { kyvernoSpec(obj).EmitWarning = ptr.To(true) }, expect: []expectation{{badA, warned}}},
		{name: "emitWarning off", change: func(obj client.Object) { kyvernoSpec(obj).EmitWarning = ptr.To(false) }, expect: []expectation{{badA, warned}}},
	})
	if after := generatedVersions(t, policy); fmt.Sprint(after) != fmt.Sprint(generatedBefore) {
		t.Errorf("emitWarning rewrote generated objects: %v, then %v", generatedBefore, after)
	}
	walk(t, policy, []transition{
		{name: "Enforce again", change: setAction(kyvernov1.Enforce), expect: []expectation{{badA, denied}, {badSecretA, denied}}},
		{name: "match list shrunk to ConfigMaps", change: func(obj client.Object) {
			kyvernoSpec(obj).Rules[0].MatchResources.Any[0].Resources.Kinds = []string{"ConfigMap"}
		}, expect: []expectation{{badA, denied}, {badSecretA, admitted}, {goodA, admitted}}},
		{name: "match list grown back", change: func(obj client.Object) {
			kyvernoSpec(obj).Rules[0].MatchResources.Any[0].Resources.Kinds = []string{"ConfigMap", "Secret"}
		}, expect: []expectation{{badSecretA, denied}}},
	})
}

// generatedVersions maps the objects generated for a policy to their
// resourceVersions.
func generatedVersions(t *testing.T, policy client.Object) map[string]string {
	t.Helper()
	kind := model.KindClusterPolicy
	if _, ok := policy.(*kyvernov1.Policy); ok {
		kind = model.KindPolicy
	}
	ctx := context.Background()
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := cp.Client.List(ctx, &vaps); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.List(ctx, &bindings); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	mine := func(obj client.Object) bool {
		a := obj.GetAnnotations()
		k := a[translate.AnnotationPolicyKind]
		return a[translate.AnnotationPolicy] == policy.GetName() && a[translate.AnnotationPolicyNamespace] == policy.GetNamespace() &&
			(k == string(kind) || (k == "" && kind == model.KindClusterPolicy))
	}
	for i := range vaps.Items {
		if mine(&vaps.Items[i]) {
			out["VAP/"+vaps.Items[i].Name] = vaps.Items[i].ResourceVersion
		}
	}
	for i := range bindings.Items {
		if mine(&bindings.Items[i]) {
			out["Binding/"+bindings.Items[i].Name] = bindings.Items[i].ResourceVersion
		}
	}
	if len(out) == 0 {
		t.Fatalf("no generated object found for %s", policy.GetName())
	}
	return out
}

// badNamesVPolSpec matches ConfigMaps and Secrets (in the namespaces, none:
// every namespace) with the actions; background scans off, so that kyvap
// enforces the whole policy.
func badNamesVPolSpec(actions []admissionregistrationv1.ValidationAction, namespaces ...string) policiesv1.ValidatingPolicySpec {
	spec := policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "secrets"}},
				},
			}},
		},
		Validations:             []admissionregistrationv1.Validation{{Expression: badNameExpression, Message: badMessage}},
		ValidationAction:        actions,
		EvaluationConfiguration: &policiesv1.EvaluationConfiguration{Background: &policiesv1.BackgroundConfiguration{Enabled: ptr.To(false)}},
	}
	if len(namespaces) > 0 {
		spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces,
		}}}
	}
	return spec
}

func vpolSpec(obj client.Object) *policiesv1.ValidatingPolicySpec {
	switch p := obj.(type) {
	case *policiesv1.ValidatingPolicy:
		return &p.Spec
	case *policiesv1.NamespacedValidatingPolicy:
		return &p.Spec
	}
	panic(fmt.Sprintf("not a policies.kyverno.io policy: %T", obj))
}

func setActions(actions ...admissionregistrationv1.ValidationAction) func(client.Object) {
	return func(obj client.Object) { vpolSpec(obj).ValidationAction = actions }
}

// TestValidatingPolicyActionTransitions walks a ValidatingPolicy and a
// NamespacedValidatingPolicy through changes of validationActions and a
// match list shrunk.
func TestValidatingPolicyActionTransitions(t *testing.T) {
	cp.StartOperator(t, generateOn)
	const ns = "vpol-transitions"
	cp.Namespace(t, ns, nil)
	auditWarn := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit, admissionregistrationv1.Warn}
	for _, policy := range []client.Object{
		&policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "transitions"}, Spec: badNamesVPolSpec(auditWarn, ns)},
		&policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "transitions"}, Spec: badNamesVPolSpec(auditWarn)},
	} {
		t.Run(fmt.Sprintf("%T", policy)[len("*v1."):], func(t *testing.T) {
			cp.Create(t, policy)
			bad, good, badSecret := configMapNamed(ns, "bad-1"), configMapNamed(ns, "good-1"), secretNamed(ns, "bad-2")
			walk(t, policy, []transition{
				{name: "created with [Audit, Warn]", expect: []expectation{{bad, warned}, {badSecret, warned}, {good, admitted}}},
				{name: "[Deny]", change: setActions(admissionregistrationv1.Deny), expect: []expectation{{bad, denied}, {badSecret, denied}, {good, admitted}}},
				{name: "[Audit, Warn] again", change: setActions(auditWarn...), expect: []expectation{{bad, warned}}},
				{name: "[Audit]", change: setActions(admissionregistrationv1.Audit), expect: []expectation{{bad, admitted}}},
				{name: "[Deny, Audit]", change: setActions(admissionregistrationv1.Deny, admissionregistrationv1.Audit), expect: []expectation{{bad, denied}}},
				{name: "match list shrunk to ConfigMaps", change: func(obj client.Object) {
					vpolSpec(obj).MatchConstraints.ResourceRules[0].Rule.Resources = []string{"configmaps"}
				}, expect: []expectation{{bad, denied}, {badSecret, admitted}}},
				{name: "[Warn]", change: setActions(admissionregistrationv1.Warn), expect: []expectation{{bad, warned}, {badSecret, admitted}}},
			})
		})
	}
}

// TestLibraryStyleAuditThenEnforce is Kyverno's library end-to-end
// sequence, run against kyvap alone: apply the policy as Audit, patch
// spec.validationFailureAction to Enforce (kubectl patch --type merge),
// assert Ready, then expect a bad resource to be refused at once.
func TestLibraryStyleAuditThenEnforce(t *testing.T) {
	cp.StartOperator(t, generateOn)
	const ns = "library-style"
	cp.Namespace(t, ns, nil)
	policy := controlplane.ClusterPolicy("disallow-latest-tag-style", kyvernov1.Audit,
		controlplane.CELRule("validate-image-tag", "Pod", "object.spec.containers.all(c, !c.image.endsWith(':latest'))", latestMessage))
	policy.Spec.Rules[0].MatchResources.Any[0].Resources.Namespaces = []string{ns}
	cp.Create(t, policy)
	waitReady(t, policy)

	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"validationFailureAction":"Enforce"}}`))
	if err := cp.Client.Patch(context.Background(), &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy.Name}}, patch); err != nil {
		t.Fatal(err)
	}
	waitReady(t, policy)
	_, err := cp.DryRunCreate(context.Background(), pod(ns, "latest", "nginx:latest"))
	if err == nil || !strings.Contains(err.Error(), latestMessage) {
		t.Fatalf("after Ready at Enforce, a Pod with nginx:latest got %v, want refused with %q", err, latestMessage)
	}
	cp.MustAdmit(t, pod(ns, "pinned", "nginx:1.27"))
}

// TestUpgradeFromObjectsAnEarlierReleaseWrote: the previous release
// created its objects (an Update entry in managedFields), then applied them
// server-side (an Apply entry), and a user edited them with kubectl edit
// (another Update entry). A new manager converges from there, whatever the
// sets and lists must lose: the binding's actions shrink from [Audit, Warn]
// to [Deny], the validation the user added goes.
func TestUpgradeFromObjectsAnEarlierReleaseWrote(t *testing.T) {
	ctx := context.Background()
	const ns = "upgrade-actions"
	cp.Namespace(t, ns, nil)
	policy := controlplane.ClusterPolicy("upgrade-actions", kyvernov1.Audit, badNamesRule(ns))
	cp.Create(t, policy) // no operator runs yet
	plan, err := translate.Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), generateOn)
	if err != nil || len(plan.ValidatingAdmissionPolicies) != 1 || len(plan.Bindings) != 1 {
		t.Fatalf("planning: %v, %d VAPs, %d bindings", err, len(plan.ValidatingAdmissionPolicies), len(plan.Bindings))
	}
	vap, binding := plan.ValidatingAdmissionPolicies[0].DeepCopy(), plan.Bindings[0].DeepCopy()
	// 1. created, as the previous release created a missing object;
	for _, obj := range []client.Object{vap.DeepCopy(), binding.DeepCopy()} {
		if err := cp.Client.Create(ctx, obj, client.FieldOwner(controllers.FieldManager)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), obj) })
	}
	// 2. applied server-side, as it applied every later change;
	for _, obj := range []client.Object{vap.DeepCopy(), binding.DeepCopy()} {
		serverSideApply(t, obj)
	}
	// 3. edited by a user: another validation, and a label on the binding.
	userEdit := func(obj client.Object, change func(client.Object)) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			change(obj)
			return cp.Client.Update(ctx, obj, client.FieldOwner("kubectl-edit"))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	userEdit(vap.DeepCopy(), func(obj client.Object) {
		v := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		v.Spec.Validations = append(v.Spec.Validations, admissionregistrationv1.Validation{Expression: "object.metadata.name != 'user-blocked'", Message: "blocked by a user's edit"})
	})
	userEdit(binding.DeepCopy(), func(obj client.Object) {
		obj.GetLabels()["team"] = "platform" // another tool's label, which stays
	})
	cp.WaitForWarning(t, configMapNamed(ns, "user-blocked"), "blocked by a user's edit") // the policy is at Audit

	// The policy moves to Enforce while no manager runs; the new one starts.
	edit(t, policy, setAction(kyvernov1.Enforce))
	cp.StartOperator(t, generateOn)
	waitReady(t, policy)
	checkNow(t, "converged at Enforce", expectation{configMapNamed(ns, "bad-1"), denied}, expectation{configMapNamed(ns, "user-blocked"), admitted})

	got := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(binding), got); err != nil {
		t.Fatal(err)
	}
	if want := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}; !slices.Equal(got.Spec.ValidationActions, want) {
		t.Errorf("binding actions = %v, want %v", got.Spec.ValidationActions, want)
	}
	if got.Labels["team"] != "platform" {
		t.Errorf("the label another tool added is gone: %v", got.Labels)
	}
	gotVAP := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(vap), gotVAP); err != nil {
		t.Fatal(err)
	}
	if len(gotVAP.Spec.Validations) != len(vap.Spec.Validations) {
		t.Errorf("VAP validations = %+v, want the plan's %d", gotVAP.Spec.Validations, len(vap.Spec.Validations))
	}

	// And back: the set grows again.
	edit(t, policy, setAction(kyvernov1.Audit))
	waitReady(t, policy)
	checkNow(t, "back to Audit", expectation{configMapNamed(ns, "bad-1"), warned})
}

// serverSideApply applies obj as kyvap's field manager, as releases before
// the update-based writer did.
func serverSideApply(t *testing.T, obj client.Object) {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	gvk, err := cp.Client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := cp.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(controllers.FieldManager), client.ForceOwnership); err != nil {
		t.Fatalf("applying %s: %v", obj.GetName(), err)
	}
}

// TestWebhookConfigurationShrinksAfterAUserEdit: kyvap's webhook
// configuration follows a rule whose match list shrinks, after a user's
// kubectl edit added a resource to it (an Update by another field manager).
func TestWebhookConfigurationShrinksAfterAUserEdit(t *testing.T) {
	ctx := context.Background()
	const ns = "webhook-shrink"
	cp.Namespace(t, ns, nil)
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t))
	policy := controlplane.ClusterPolicy("webhook-shrink", kyvernov1.Enforce, badNamesRule(ns))
	cp.Create(t, policy)
	waitForRegistered := func(want string) {
		t.Helper()
		err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			vwc, err := cp.WebhookConfiguration(ctx)
			if err != nil {
				return false, err
			}
			got := registeredResources(vwc)
			slices.Sort(got)
			return strings.Join(got, ",") == want, fmt.Errorf("registered for %v", got)
		})
		if err != nil {
			t.Fatalf("the webhook configuration never registered exactly %s: %v", want, err)
		}
	}
	waitForRegistered("configmaps,secrets")
	cp.WaitForDenial(t, secretNamed(ns, "bad-secret"), badMessage)

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vwc, err := cp.WebhookConfiguration(ctx)
		if err != nil || vwc == nil {
			return fmt.Errorf("webhook configuration %v: %w", vwc, err)
		}
		vwc.Webhooks[0].Rules[0].Resources = append(vwc.Webhooks[0].Rules[0].Resources, "pods")
		return cp.Client.Update(ctx, vwc, client.FieldOwner("kubectl-edit"))
	})
	if err != nil {
		t.Fatal(err)
	}
	edit(t, policy, func(obj client.Object) {
		kyvernoSpec(obj).Rules[0].MatchResources.Any[0].Resources.Kinds = []string{"ConfigMap"}
	})
	waitForRegistered("configmaps")
	cp.WaitForDenial(t, configMapNamed(ns, "bad-cm"), badMessage)
	cp.MustAdmit(t, secretNamed(ns, "bad-secret"))
}

// TestRefusedChangeKeepsThePreviousPairEnforcing runs kyvap with exactly
// the shipped RBAC. A change the API server refuses (the rule gains a
// paramKind kyvap may not read, and goes to Audit) leaves the stored VAP
// and binding as they were, as a pair: the rule stays enforced at Enforce,
// the binding does not get a paramRef its VAP lacks, and the status says
// that the previous version keeps enforcing the rule. Once the grant
// exists, the change takes effect.
func TestRefusedChangeKeepsThePreviousPairEnforcing(t *testing.T) {
	ctx := context.Background()
	const ns = "refused-change"
	cp.Namespace(t, ns, nil)
	cp.Create(t, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"}})
	cfg := cp.ManagerUserConfig(t, "kyvap-refused-change")
	cp.StartWebhookOperatorAs(t, cfg, generateOn, controlplane.FreePort(t))
	policy := controlplane.ClusterPolicy("refused-change", kyvernov1.Enforce, badNamesRule(ns))
	cp.Create(t, policy)
	walk(t, policy, []transition{{name: "created as Enforce", expect: []expectation{{configMapNamed(ns, "bad-1"), denied}}}})

	edit(t, policy, func(obj client.Object) {
		spec := kyvernoSpec(obj)
		spec.ValidationFailureAction = kyvernov1.Audit
		spec.Rules[0].Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ResourceQuota"}
		spec.Rules[0].Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Name: "quota", Namespace: ns}
		spec.Rules[0].Validation.CEL.Expressions[0].Expression = "params != null && " + badNameExpression
	})
	got := cp.WaitForStatus(t, policy, controllers.ReasonApplyFailed)
	if msg := got.Status.ValidatingAdmissionPolicy.Message; !strings.Contains(msg, "previous version keeps enforcing the rule") || !strings.Contains(msg, "ResourceQuota") {
		t.Errorf("status message %q does not say that the previous version enforces the rule, nor what is missing", msg)
	}
	checkNow(t, "change refused", expectation{configMapNamed(ns, "bad-1"), denied})
	_, bindings, err := cp.GeneratedFor(ctx, got)
	if err != nil || len(bindings) != 1 {
		t.Fatalf("bindings %d, %v", len(bindings), err)
	}
	if b := bindings[0].Spec; b.ParamRef != nil || !slices.Equal(b.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v was changed although its VAP could not be", b)
	}

	cp.Create(t, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kyvap-params-resourcequotas", Labels: map[string]string{webhook.ParamsReaderLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"get", "list", "watch"}}},
	})
	walk(t, policy, []transition{{name: "granted", expect: []expectation{{configMapNamed(ns, "bad-1"), warned}, {configMapNamed(ns, "good-1"), admitted}}}})
}

// TestEveryListAUserGrowsIsRestored: a user's kubectl edit (an Update by
// another field manager) adds an entry to every list and map kyvap writes
// in a VAP and its bindings; kyvap restores each spec exactly as it was.
func TestEveryListAUserGrowsIsRestored(t *testing.T) {
	ctx := context.Background()
	cp.StartOperator(t, generateOn)
	const ns = "every-list"
	cp.Namespace(t, ns, map[string]string{"env": "prod"})
	rule := badNamesRule(ns)
	rule.CELPreconditions = []admissionregistrationv1.MatchCondition{{Name: "not-exempt", Expression: "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}}
	rule.Validation.CEL.Variables = []admissionregistrationv1.Variable{{Name: "name", Expression: "object.metadata.name"}}
	rule.Validation.CEL.Expressions[0].Expression = "!variables.name.startsWith('bad')"
	policy := controlplane.ClusterPolicy("every-list", kyvernov1.Audit, rule)
	policy.Spec.ValidationFailureActionOverrides = []kyvernov1.ValidationFailureActionOverride{{
		Action: kyvernov1.Enforce, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
	}}
	cp.Create(t, policy)
	walk(t, policy, []transition{{name: "created", expect: []expectation{{configMapNamed(ns, "bad-1"), denied}}}})
	current := &kyvernov1.ClusterPolicy{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(policy), current); err != nil {
		t.Fatal(err)
	}
	vaps, bindings, err := cp.GeneratedFor(ctx, current)
	if err != nil || len(vaps) == 0 || len(bindings) < 2 {
		t.Fatalf("generated %d VAPs, %d bindings (%v), want overrides to split the bindings", len(vaps), len(bindings), err)
	}
	userEdit := func(obj client.Object, grow func(client.Object)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			grow(obj)
			return cp.Client.Update(ctx, obj, client.FieldOwner("kubectl-edit"))
		})
		if err != nil {
			t.Fatalf("editing %s: %v", obj.GetName(), err)
		}
	}
	extraRule := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	extraExpression := metav1.LabelSelectorRequirement{Key: "added-by", Operator: metav1.LabelSelectorOpDoesNotExist}
	for i := range vaps {
		want := vaps[i].Spec
		vap := vaps[i].DeepCopy()
		userEdit(vap, func(obj client.Object) {
			s := &obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec
			s.Validations = append(s.Validations, admissionregistrationv1.Validation{Expression: "true"})
			s.Variables = append(s.Variables, admissionregistrationv1.Variable{Name: "extra", Expression: "1"})
			s.MatchConditions = append(s.MatchConditions, admissionregistrationv1.MatchCondition{Name: "extra", Expression: "true"})
			s.AuditAnnotations = append(s.AuditAnnotations, admissionregistrationv1.AuditAnnotation{Key: "extra", ValueExpression: "'x'"})
			s.MatchConstraints.ResourceRules = append(s.MatchConstraints.ResourceRules, extraRule)
			s.MatchConstraints.ExcludeResourceRules = append(s.MatchConstraints.ExcludeResourceRules, extraRule)
			if s.MatchConstraints.NamespaceSelector == nil {
				s.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
			}
			s.MatchConstraints.NamespaceSelector.MatchExpressions = append(s.MatchConstraints.NamespaceSelector.MatchExpressions, extraExpression)
			if s.MatchConstraints.ObjectSelector == nil {
				s.MatchConstraints.ObjectSelector = &metav1.LabelSelector{}
			}
			s.MatchConstraints.ObjectSelector.MatchLabels = map[string]string{"added-by": "user"}
		})
		waitForSpec(t, vap, func(obj client.Object) any { return obj.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec }, want)
	}
	for i := range bindings {
		want := bindings[i].Spec
		binding := bindings[i].DeepCopy()
		userEdit(binding, func(obj client.Object) {
			s := &obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec
			if slices.Contains(s.ValidationActions, admissionregistrationv1.Deny) {
				s.ValidationActions = append(s.ValidationActions, admissionregistrationv1.Audit)
			} else {
				s.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
			}
			if s.MatchResources == nil {
				s.MatchResources = &admissionregistrationv1.MatchResources{}
			}
			s.MatchResources.ResourceRules = append(s.MatchResources.ResourceRules, extraRule)
			if s.MatchResources.NamespaceSelector == nil {
				s.MatchResources.NamespaceSelector = &metav1.LabelSelector{}
			}
			s.MatchResources.NamespaceSelector.MatchExpressions = append(s.MatchResources.NamespaceSelector.MatchExpressions, extraExpression)
		})
		waitForSpec(t, binding, func(obj client.Object) any {
			return obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec
		}, want)
	}
	walk(t, policy, []transition{{name: "restored", expect: []expectation{{configMapNamed(ns, "bad-1"), denied}, {configMapNamed(ns, "good-1"), admitted}}}})
}

// waitForSpec waits until the stored object's spec (as spec reads it) is
// want again.
func waitForSpec(t *testing.T, obj client.Object, spec func(client.Object) any, want any) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		got := spec(obj)
		return equality.Semantic.DeepEqual(got, want), fmt.Errorf("spec %+v", got)
	})
	if err != nil {
		t.Fatalf("%s was not restored to %+v: %v", obj.GetName(), want, err)
	}
}
