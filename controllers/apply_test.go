// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/vap"
)

func generatedVAP() *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "kyvap-p-r",
			Labels:          map[string]string{translate.LabelManagedBy: translate.ManagedByValue},
			Annotations:     map[string]string{translate.AnnotationPolicy: "p"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "p", UID: "uid-p", Controller: ptr.To(true)}},
		},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
		},
	}
}

// stored is what the API server keeps: the object defaulted, plus extras
// other tools may add (labels, annotations).
func stored(desired *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
	s := desired.DeepCopy()
	vap.DefaultPolicy(s)
	s.Labels["other-tool"] = "x"
	s.Annotations["other-tool"] = "y"
	return s
}

func TestUpToDate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*admissionregistrationv1.ValidatingAdmissionPolicy)
		want bool
	}{
		{name: "defaulted copy with foreign labels", edit: func(*admissionregistrationv1.ValidatingAdmissionPolicy) {}, want: true},
		{name: "expression edited", edit: func(v *admissionregistrationv1.ValidatingAdmissionPolicy) { v.Spec.Validations[0].Expression = "false" }, want: false},
		{name: "field added", edit: func(v *admissionregistrationv1.ValidatingAdmissionPolicy) {
			v.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "k", ValueExpression: "'v'"}}
		}, want: false},
		{name: "failure policy changed", edit: func(v *admissionregistrationv1.ValidatingAdmissionPolicy) {
			v.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}, want: false},
		{name: "our label removed", edit: func(v *admissionregistrationv1.ValidatingAdmissionPolicy) { delete(v.Labels, translate.LabelManagedBy) }, want: false},
		{name: "our annotation changed", edit: func(v *admissionregistrationv1.ValidatingAdmissionPolicy) {
			v.Annotations[translate.AnnotationPolicy] = "q"
		}, want: false},
		{name: "owner reference removed", edit: func(v *admissionregistrationv1.ValidatingAdmissionPolicy) { v.OwnerReferences = nil }, want: false},
		{name: "owner reference added", edit: func(v *admissionregistrationv1.ValidatingAdmissionPolicy) {
			v.OwnerReferences = append(v.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "uid-x"})
		}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := generatedVAP()
			existing := stored(desired)
			tt.edit(existing)
			if got := upToDate(desired, existing); got != tt.want {
				t.Errorf("upToDate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsOwnedBy(t *testing.T) {
	policy := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID("uid-p")}}
	ours := generatedVAP()
	if !isOwnedBy(ours, policy) {
		t.Error("a generated VAP is not recognised as ours")
	}
	noOwner := generatedVAP()
	noOwner.OwnerReferences = nil
	if !isOwnedBy(noOwner, policy) {
		t.Error("a generated VAP stripped of its owner reference is not recognised by its labels")
	}
	noLabels := generatedVAP()
	noLabels.Labels = nil
	if !isOwnedBy(noLabels, policy) {
		t.Error("a generated VAP stripped of its labels is not recognised by its owner reference")
	}
	foreign := generatedVAP()
	foreign.OwnerReferences, foreign.Labels = nil, map[string]string{"owner": "someone"}
	if isOwnedBy(foreign, policy) {
		t.Error("a foreign VAP is taken for ours")
	}
	otherPolicy := generatedVAP()
	otherPolicy.OwnerReferences[0].UID = "uid-q"
	otherPolicy.Annotations[translate.AnnotationPolicy] = "q"
	if isOwnedBy(otherPolicy, policy) {
		t.Error("another policy's VAP is taken for this policy's")
	}
	vpol := generatedVAP()
	vpol.OwnerReferences = []metav1.OwnerReference{{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy", Name: "p", UID: "uid-vpol", Controller: ptr.To(true)}}
	vpol.Annotations[translate.AnnotationPolicyKind] = "ValidatingPolicy"
	if isOwnedBy(vpol, policy) {
		t.Error("the VAP of a ValidatingPolicy with the same name is taken for the ClusterPolicy's")
	}
}

func TestModelOwnerOwns(t *testing.T) {
	vap := func(kind, namespace string) *admissionregistrationv1.ValidatingAdmissionPolicy {
		v := generatedVAP()
		v.OwnerReferences = nil
		v.Annotations[translate.AnnotationPolicyKind] = kind
		if namespace != "" {
			v.Annotations[translate.AnnotationPolicyNamespace] = namespace
		}
		return v
	}
	nvpol := modelOwner{source: model.Source{Kind: model.KindNamespacedValidatingPolicy, Namespace: "a", Name: "p"}}
	vpol := modelOwner{source: model.Source{Kind: model.KindValidatingPolicy, Name: "p", UID: "uid-vpol"}}
	tests := []struct {
		name  string
		owner modelOwner
		obj   *admissionregistrationv1.ValidatingAdmissionPolicy
		want  bool
	}{
		{"namespaced, by annotations", nvpol, vap("NamespacedValidatingPolicy", "a"), true},
		{"namespaced, another namespace", nvpol, vap("NamespacedValidatingPolicy", "b"), false},
		{"namespaced, another kind", nvpol, vap("ValidatingPolicy", ""), false},
		{"a ClusterPolicy's object", vpol, generatedVAP(), false},
		{"cluster-scoped, by annotations", vpol, vap("ValidatingPolicy", ""), true},
		{"cluster-scoped, the namespaced one's", vpol, vap("NamespacedValidatingPolicy", "a"), false},
	}
	for _, tt := range tests {
		if got := tt.owner.owns(tt.obj); got != tt.want {
			t.Errorf("%s: owns = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestStampHashIsStable(t *testing.T) {
	a, b := generatedVAP(), generatedVAP()
	stampHash(a, a.Spec)
	stampHash(b, b.Spec)
	if a.Annotations[AnnotationAppliedHash] == "" || a.Annotations[AnnotationAppliedHash] != b.Annotations[AnnotationAppliedHash] {
		t.Errorf("hashes %q and %q of equal objects differ", a.Annotations[AnnotationAppliedHash], b.Annotations[AnnotationAppliedHash])
	}
	c := generatedVAP()
	c.Spec.Validations[0].Expression = "false"
	stampHash(c, c.Spec)
	if c.Annotations[AnnotationAppliedHash] == a.Annotations[AnnotationAppliedHash] {
		t.Error("a different spec has the same hash")
	}
}

// TestBindingWaitsForItsVAP: when a VAP's write fails, its binding is not
// written either, so that the stored pair stays consistent (a binding's
// paramRef or actions never meet a VAP they were not written for).
func TestBindingWaitsForItsVAP(t *testing.T) {
	vap := generatedVAP()
	vap.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: kindVAP}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: kindBinding},
		ObjectMeta: metav1.ObjectMeta{Name: vap.Name + "-0"},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name},
	}
	var written []string
	outcomes := applyAll(events.NewFakeRecorder(10), &kyvernov1.ClusterPolicy{}, []client.Object{vap, binding}, func(obj client.Object) objectOutcome {
		written = append(written, obj.GetName())
		return objectOutcome{Kind: kindOf(obj), Name: obj.GetName(), Action: actionFailed, Previous: true, Err: errors.New("refused")}
	})
	if len(written) != 1 || written[0] != vap.Name {
		t.Errorf("written %v, want only the VAP %s", written, vap.Name)
	}
	if len(outcomes) != 2 || outcomes[1].Action != actionFailed || !outcomes[1].Previous || !strings.Contains(outcomes[1].Err.Error(), "was not written because its ValidatingAdmissionPolicy") {
		t.Errorf("binding outcome %+v, want failed, previous version kept, saying why", outcomes[len(outcomes)-1])
	}
}
