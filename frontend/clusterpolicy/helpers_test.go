// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

// TestBindingPiecesPartition checks, on a grid of namespaces, that the
// binding pieces give every namespace exactly the action Kyverno's
// first-match override evaluation gives it.
func TestBindingPiecesPartition(t *testing.T) {
	enforce, audit := kyvernov1.Enforce, kyvernov1.Audit
	spec := &kyvernov1.Spec{
		ValidationFailureAction: audit,
		ValidationFailureActionOverrides: []kyvernov1.ValidationFailureActionOverride{
			{Action: enforce, Namespaces: []string{"prod", "payments"}},
			{Action: audit, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sandbox": "true"}}},
			{Action: enforce, NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpExists}, {Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"staging"}}}}},
		},
	}
	rule := &kyvernov1.Rule{Validation: &kyvernov1.Validation{}}
	pieces, fl := bindingPieces(actionSteps(spec, rule), false)
	if fl != nil {
		t.Fatal(fl.Message)
	}
	kyverno := func(ns string, l map[string]string) kyvernov1.ValidationFailureAction {
		for _, o := range spec.ValidationFailureActionOverrides {
			if o.Namespaces != nil {
				found := false
				for _, n := range o.Namespaces {
					found = found || n == ns
				}
				if !found {
					continue
				}
			}
			if o.NamespaceSelector != nil {
				s, _ := metav1.LabelSelectorAsSelector(o.NamespaceSelector)
				if !s.Matches(labels.Set(l)) {
					continue
				}
			}
			return o.Action
		}
		return spec.ValidationFailureAction
	}
	for _, ns := range []string{"prod", "payments", "dev", "other"} {
		for _, l := range []map[string]string{{}, {"sandbox": "true"}, {"tier": "1", "env": "staging"}, {"tier": "1", "env": "staging", "sandbox": "true"}, {"env": "staging"}, {"tier": "x"}} {
			all := map[string]string{namespaceNameLabel: ns}
			for k, v := range l {
				all[k] = v
			}
			var got []string
			for _, p := range pieces {
				s, err := metav1.LabelSelectorAsSelector(p.scope.NamespaceSelector)
				if err != nil {
					t.Fatal(err)
				}
				if s.Matches(labels.Set(all)) {
					got = append(got, actionSuffix(p.action))
				}
			}
			want := []string{actionSuffix(kyverno(ns, l))}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("namespace %s labels %v (-want +got):\n%s", ns, l, diff)
			}
		}
	}
}

func TestParamRefFor(t *testing.T) {
	kind := &kyvernov1.CEL{}
	if ref, fl := paramRefFor(kind); ref != nil || fl != nil {
		t.Fatal("no paramKind: no paramRef")
	}
	c := &kyvernov1.CEL{}
	c.ParamKind = &admissionParamKind
	c.ParamRef = &admissionParamRefByName
	ref, fl := paramRefFor(c)
	if fl != nil || ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != "Deny" {
		t.Fatalf("a missing named parameter is an error in Kyverno: want Deny, got %+v %v", ref, fl)
	}
	if c.ParamRef.ParameterNotFoundAction != nil {
		t.Fatal("input mutated")
	}
}

var (
	admissionParamKind      = admissionregistrationv1ParamKind()
	admissionParamRefByName = admissionregistrationv1ParamRef()
)

func TestMergeRules(t *testing.T) {
	namespaced := admissionregistrationv1.NamespacedScope
	rule := func(group string, ops []admissionregistrationv1.OperationType, scope *admissionregistrationv1.ScopeType, resources ...string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources, Scope: scope,
		}}
	}
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	tests := []struct {
		name string
		in   []admissionregistrationv1.RuleWithOperations
		want []admissionregistrationv1.RuleWithOperations
	}{
		{name: "none", in: nil, want: []admissionregistrationv1.RuleWithOperations{}},
		{
			name: "same group, version, operations and scope: resources merged, sorted, deduplicated",
			in:   []admissionregistrationv1.RuleWithOperations{rule("apps", create, nil, "statefulsets", "deployments"), rule("apps", create, nil, "deployments", "daemonsets")},
			want: []admissionregistrationv1.RuleWithOperations{rule("apps", create, nil, "daemonsets", "deployments", "statefulsets")},
		},
		{
			name: "other operations, scope or group stay apart, ordered by group, version, operations, scope",
			in: []admissionregistrationv1.RuleWithOperations{
				rule("apps", createUpdate, nil, "deployments"), rule("apps", create, &namespaced, "deployments"),
				rule("", create, nil, "pods"), rule("apps", create, nil, "deployments"),
			},
			want: []admissionregistrationv1.RuleWithOperations{
				rule("", create, nil, "pods"), rule("apps", create, nil, "deployments"),
				rule("apps", create, &namespaced, "deployments"), rule("apps", createUpdate, nil, "deployments"),
			},
		},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, MergeRules(tt.in)); diff != "" {
			t.Errorf("%s: MergeRules (-want +got):\n%s", tt.name, diff)
		}
	}
}

func admissionregistrationv1ParamKind() admissionregistrationv1.ParamKind {
	return admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
}

func admissionregistrationv1ParamRef() admissionregistrationv1.ParamRef {
	return admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default"}
}
