// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func paramObject(kind, namespace, name string, lbls map[string]string) unstructured.Unstructured {
	var u unstructured.Unstructured
	u.SetAPIVersion("example.com/v1")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

// scopeError is ParamObjects whose scope lookup fails.
type scopeError struct{}

func (scopeError) Scope(schema.GroupVersionKind) (bool, bool, error) {
	return false, false, errors.New("no matches for kind")
}
func (scopeError) Get(context.Context, schema.GroupVersionKind, string, string) (runtime.Object, error) {
	return nil, nil
}
func (scopeError) List(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]runtime.Object, error) {
	return nil, nil
}

func TestResolveParams(t *testing.T) {
	blue := map[string]string{"color": "blue"}
	params := StaticParams{
		paramObject("Setting", "team-a", "b", blue),
		paramObject("Setting", "team-a", "a", blue),
		paramObject("Setting", "team-a", "c", nil),
		paramObject("Setting", "team-b", "a", blue),
		paramObject("Global", "", "g2", blue),
		paramObject("Global", "", "g1", blue),
	}
	kind := func(k string) *admissionregistrationv1.ParamKind {
		return &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: k}
	}
	selector := &metav1.LabelSelector{MatchLabels: blue}
	tests := []struct {
		name      string
		objs      ParamObjects
		kind      *admissionregistrationv1.ParamKind
		ref       *admissionregistrationv1.ParamRef
		namespace string
		want      []string // namespace/name
		wantErr   string
	}{
		{name: "no paramRef", kind: kind("Setting"), wantErr: "paramKind example.com/v1 Setting is set but the rule has no paramRef"},
		{name: "bad apiVersion", kind: &admissionregistrationv1.ParamKind{APIVersion: "a/b/c", Kind: "X"}, ref: &admissionregistrationv1.ParamRef{Name: "a"}, wantErr: `paramKind apiVersion "a/b/c": unexpected GroupVersion string: a/b/c`},
		{name: "scope error", objs: scopeError{}, kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{Name: "a"}, wantErr: "paramKind example.com/v1, Kind=Setting: no matches for kind"},
		{name: "name in the request's namespace", kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{Name: "a"}, namespace: "team-b", want: []string{"team-b/a"}},
		{name: "name in paramRef.namespace", kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{Name: "a", Namespace: "team-a"}, namespace: "team-b", want: []string{"team-a/a"}},
		{name: "name not found", kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{Name: "zz"}, namespace: "team-a"},
		{name: "namespaced kind, cluster-scoped request", kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{Name: "a"}, wantErr: "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"},
		{name: "selector, sorted by name", kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{Selector: selector}, namespace: "team-a", want: []string{"team-a/a", "team-a/b"}},
		{name: "neither name nor selector", kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{}, namespace: "team-a", wantErr: "paramRef has neither name nor selector"},
		{name: "bad selector", kind: kind("Setting"), ref: &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Has"}}}}, namespace: "team-a", wantErr: `paramRef selector: "Has" is not a valid label selector operator`},
		{name: "cluster-scoped kind", kind: kind("Global"), ref: &admissionregistrationv1.ParamRef{Selector: selector}, namespace: "team-a", want: []string{"/g1", "/g2"}},
		{name: "cluster-scoped kind with a namespace", kind: kind("Global"), ref: &admissionregistrationv1.ParamRef{Name: "g1", Namespace: "team-a"}, wantErr: ErrClusterScopedParamNamespace.Error()},
		{name: "unknown scope: a namespace is no error", kind: kind("Nothing"), ref: &admissionregistrationv1.ParamRef{Name: "x", Namespace: "team-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := tt.objs
			if objs == nil {
				objs = staticObjects(params)
			}
			got, err := ResolveParams(context.Background(), objs, tt.kind, tt.ref, tt.namespace)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Fatalf("error = %q, want %q", gotErr, tt.wantErr)
			}
			var names []string
			for _, o := range got {
				n := namespacedName(o)
				names = append(names, n.Namespace+"/"+n.Name)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}
