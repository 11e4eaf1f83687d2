// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

func celRule(name string, kinds []string, ops ...kyvernov1.AdmissionOperation) kyvernov1.Rule {
	return kyvernov1.Rule{
		Name: name,
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{
			Resources: kyvernov1.ResourceDescription{Kinds: kinds, Operations: ops},
		}}},
		Validation: &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{Expression: "true"}}}},
	}
}

func TestGroupOf(t *testing.T) {
	ignore := kyvernov1.Ignore
	tests := []struct {
		spec kyvernov1.Spec
		want Group
	}{
		{kyvernov1.Spec{}, Group{admissionregistrationv1.Fail, 10}},
		{kyvernov1.Spec{FailurePolicy: &ignore, WebhookTimeoutSeconds: ptr.To[int32](3)}, Group{admissionregistrationv1.Ignore, 3}},
		{kyvernov1.Spec{WebhookTimeoutSeconds: ptr.To[int32](90)}, Group{admissionregistrationv1.Fail, 30}},
		{kyvernov1.Spec{WebhookTimeoutSeconds: ptr.To[int32](0)}, Group{admissionregistrationv1.Fail, 1}},
	}
	for _, tt := range tests {
		got := GroupOf(&tt.spec)
		if got != tt.want {
			t.Errorf("GroupOf(%+v) = %+v, want %+v", tt.spec, got, tt.want)
		}
		back, err := ParseGroupPath(got.Path())
		if err != nil || back != got {
			t.Errorf("ParseGroupPath(%q) = %+v, %v; want %+v", got.Path(), back, err, got)
		}
	}
	for _, bad := range []string{"/validate", "/validate/fail", "/validate/maybe/10", "/validate/fail/0", "/validate/fail/31", "/validate/fail/x", "/other/fail/10"} {
		if _, err := ParseGroupPath(bad); err == nil {
			t.Errorf("ParseGroupPath(%q) succeeded", bad)
		}
	}
}

func TestDesiredConfiguration(t *testing.T) {
	resolver := kyverno.NewStaticResolver()
	ignore := kyvernov1.Ignore
	rules := []translate.FallbackRule{
		{Policy: "a", Rule: celRule("pods", []string{"Pod"}, kyvernov1.Create, kyvernov1.Update)},
		{Policy: "b", Rule: celRule("deploy", []string{"apps/v1/Deployment"}, kyvernov1.Create, kyvernov1.Update),
			AdditionalRules: []kyvernov1.Rule{celRule("cm", []string{"ConfigMap"}, kyvernov1.Create, kyvernov1.Update)}},
		{Policy: "c", Rule: celRule("svc", []string{"Service"}), Spec: kyvernov1.Spec{FailurePolicy: &ignore, WebhookTimeoutSeconds: ptr.To[int32](5)}},
		{Policy: "d", Rule: celRule("nothing", []string{"NoSuchKind"})},
	}
	vwc, problems := DesiredConfiguration(rules, nil, resolver, ConfigOptions{
		Name: "kyvap-fallback", URL: "https://127.0.0.1:9443", CABundle: []byte("ca"),
		ExcludedNamespaces: []string{"kyvap-system", "kube-system"},
	})
	if len(problems) != 0 {
		t.Fatalf("problems = %v; a kind the cluster does not serve needs no registration", problems)
	}
	if vwc == nil || len(vwc.Webhooks) != 2 {
		t.Fatalf("want 2 webhooks, got %+v", vwc)
	}
	fail, ign := vwc.Webhooks[0], vwc.Webhooks[1]
	if fail.Name != "fail-10s.validate.kyvap.io" || ign.Name != "ignore-5s.validate.kyvap.io" {
		t.Fatalf("webhook names %q, %q", fail.Name, ign.Name)
	}
	if *fail.ClientConfig.URL != "https://127.0.0.1:9443/validate/fail/10" || *ign.TimeoutSeconds != 5 || *ign.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("client config / timeout / failure policy wrong: %s %d %s", *fail.ClientConfig.URL, *ign.TimeoutSeconds, *ign.FailurePolicy)
	}
	all := admissionregistrationv1.AllScopes
	cu := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	want := []admissionregistrationv1.RuleWithOperations{
		{Operations: cu, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "pods", "pods/ephemeralcontainers"}, Scope: &all}},
		{Operations: cu, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}, Scope: &all}},
	}
	if diff := cmp.Diff(want, fail.Rules); diff != "" {
		t.Errorf("Fail webhook rules (-want +got):\n%s", diff)
	}
	if got := ign.Rules[0].Operations; len(got) != 4 {
		t.Errorf("a filter without operations must register all four, got %v", got)
	}
	sel := fail.NamespaceSelector.MatchExpressions[0]
	if sel.Key != "kubernetes.io/metadata.name" || sel.Operator != "NotIn" || !cmp.Equal(sel.Values, []string{"kube-system", "kyvap-system"}) {
		t.Errorf("namespace selector %+v must exclude kube-system and the operator's namespace", sel)
	}
	for _, w := range vwc.Webhooks {
		if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{translate.WebhookLockOutCondition()}, w.MatchConditions); diff != "" {
			t.Errorf("webhook %s: match conditions (-want +got):\n%s", w.Name, diff)
		}
	}
	if *fail.MatchPolicy != admissionregistrationv1.Equivalent || *fail.SideEffects != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("matchPolicy %s sideEffects %s", *fail.MatchPolicy, *fail.SideEffects)
	}

	again, _ := DesiredConfiguration(rules, nil, resolver, ConfigOptions{
		Name: "kyvap-fallback", URL: "https://127.0.0.1:9443", CABundle: []byte("ca"),
		ExcludedNamespaces: []string{"kube-system", "kyvap-system"},
	})
	if diff := cmp.Diff(vwc, again); diff != "" {
		t.Errorf("not deterministic (-first +second):\n%s", diff)
	}
	if none, _ := DesiredConfiguration(nil, nil, resolver, ConfigOptions{Name: "x", URL: "https://h"}); none != nil {
		t.Errorf("no rules must give no configuration, got %+v", none)
	}
}

func TestDesiredConfigurationLeavesOutUnsupportedRules(t *testing.T) {
	r := celRule("ctx", []string{"Pod"})
	r.Context = append(r.Context, apiextensionsJSON(`{"name":"x","variable":{"value":1}}`))
	policy := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{r}}}
	plan, err := translate.Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), translate.Options{})
	if err != nil || plan.Rules[0].Fallback == nil {
		t.Fatalf("Translate: %v, %+v; want a fallback rule", err, plan.Rules)
	}
	vwc, problems := DesiredConfiguration([]translate.FallbackRule{*plan.Rules[0].Fallback}, nil, kyverno.NewStaticResolver(), ConfigOptions{Name: "x", URL: "https://h"})
	if vwc != nil || len(problems) != 1 || !strings.Contains(problems[0].Error(), "context entries") {
		t.Fatalf("got %+v, %v; want no configuration and a context-entries problem", vwc, problems)
	}
}

// TestDesiredConfigurationOwner: the configuration is owned by the
// operator's namespace when one is given (safe uninstall), and by nothing
// otherwise.
func TestDesiredConfigurationForceFailurePolicyIgnore(t *testing.T) {
	rules := []translate.FallbackRule{{Policy: "a", Rule: celRule("pods", []string{"Pod"}, kyvernov1.Create)}}
	opts := ConfigOptions{Name: "kyvap-fallback", URL: "https://127.0.0.1:9443", CABundle: []byte("ca")}
	vwc, _ := DesiredConfiguration(rules, nil, kyverno.NewStaticResolver(), opts)
	if len(vwc.Webhooks) != 1 || *vwc.Webhooks[0].FailurePolicy != admissionregistrationv1.Fail {
		t.Fatalf("without the option: %+v, want one webhook with failurePolicy Fail", vwc.Webhooks)
	}
	opts.ForceFailurePolicyIgnore = true
	forced, _ := DesiredConfiguration(rules, nil, kyverno.NewStaticResolver(), opts)
	if len(forced.Webhooks) != 1 || *forced.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore {
		t.Fatalf("forced: %+v, want one webhook with failurePolicy Ignore", forced.Webhooks)
	}
	// The path still carries the policy's failurePolicy: evaluation errors
	// deny as the policy asks.
	if got, want := *forced.Webhooks[0].ClientConfig.URL, *vwc.Webhooks[0].ClientConfig.URL; got != want {
		t.Fatalf("URL %s, want %s", got, want)
	}
}

func TestDesiredConfigurationOwner(t *testing.T) {
	rules := []translate.FallbackRule{{Policy: "a", Rule: celRule("pods", []string{"Pod"}, kyvernov1.Create)}}
	owner := &metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "kyvap-system", UID: "uid-1"}
	opts := ConfigOptions{Name: "kyvap-fallback", URL: "https://127.0.0.1:9443", CABundle: []byte("ca"), Owner: owner}
	vwc, _ := DesiredConfiguration(rules, nil, kyverno.NewStaticResolver(), opts)
	if len(vwc.OwnerReferences) != 1 || vwc.OwnerReferences[0] != *owner {
		t.Fatalf("owner references %v, want [%v]", vwc.OwnerReferences, *owner)
	}
	opts.Owner = nil
	if vwc, _ := DesiredConfiguration(rules, nil, kyverno.NewStaticResolver(), opts); len(vwc.OwnerReferences) != 0 {
		t.Fatalf("owner references %v without an owner", vwc.OwnerReferences)
	}
}
