// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vap

import (
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

func TestMemoIsBounded(t *testing.T) {
	m := &Memo[int, int]{Limit: 3}
	for i := range 10 {
		m.Put(i, i*i)
		if m.Len() > 3 {
			t.Fatalf("%d entries, limit 3", m.Len())
		}
		if v, ok := m.Get(i); !ok || v != i*i {
			t.Fatalf("Get(%d) = %d, %t just after Put", i, v, ok)
		}
	}
	if _, ok := m.Get(0); ok {
		t.Error("an entry survived the memo filling up")
	}
}

// CheckExpressions' memo answers as a fresh check, and its key changes
// with everything the check reads.
func TestCheckExpressionsMemo(t *testing.T) {
	spec := func() *admissionregistrationv1.ValidatingAdmissionPolicySpec {
		return &admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "ours", Expression: "object.x"}},
			Validations:     []admissionregistrationv1.Validation{{Expression: "true", MessageExpression: "'m'"}},
		}
	}
	generated := map[string]bool{"ours": true}
	wantUser, wantOurs := checkExpressions(spec(), NewestCompatibilityVersion, generated)
	if len(wantOurs) != 1 || len(wantUser) != 0 {
		t.Fatalf("user %v, ours %v: want one problem of ours", wantUser, wantOurs)
	}
	for range 2 {
		user, ours := CheckExpressions(spec(), NewestCompatibilityVersion, generated)
		if !reflect.DeepEqual(user, wantUser) || !reflect.DeepEqual(ours, wantOurs) {
			t.Errorf("memo: user %v, ours %v; want %v, %v", user, ours, wantUser, wantOurs)
		}
	}
	// The condition is the user's when kyvap did not generate it.
	if user, ours := CheckExpressions(spec(), NewestCompatibilityVersion, nil); len(user) != 1 || len(ours) != 0 {
		t.Errorf("not generated: user %v, ours %v; want one problem of the user's", user, ours)
	}
	base := checkKey(spec(), NewestCompatibilityVersion, generated)
	changes := map[string]func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) (*version.Version, map[string]bool){
		"version": func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) (*version.Version, map[string]bool) {
			return KyvernoCELVersion, generated
		},
		"generated": func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) (*version.Version, map[string]bool) {
			return NewestCompatibilityVersion, nil
		},
		"condition name": func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) (*version.Version, map[string]bool) {
			s.MatchConditions[0].Name = "other"
			return NewestCompatibilityVersion, generated
		},
		"message expression": func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) (*version.Version, map[string]bool) {
			s.Validations[0].MessageExpression = "'n'"
			return NewestCompatibilityVersion, generated
		},
		"params": func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) (*version.Version, map[string]bool) {
			s.ParamKind = &admissionregistrationv1.ParamKind{}
			return NewestCompatibilityVersion, generated
		},
		"variable": func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) (*version.Version, map[string]bool) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "v", Expression: "1"}}
			return NewestCompatibilityVersion, generated
		},
	}
	for name, change := range changes {
		s := spec()
		v, g := change(s)
		if checkKey(s, v, g) == base {
			t.Errorf("changing the %s leaves the key unchanged", name)
		}
	}
}

// An expression's remembered compilation is reported at its place in
// another spec, and by what it is there (a condition, a message).
func TestCheckExpressionsRemembersExpressions(t *testing.T) {
	bad := "object.metadata.name +"
	first := &admissionregistrationv1.ValidatingAdmissionPolicySpec{Validations: []admissionregistrationv1.Validation{{Expression: bad}}}
	if user, _ := CheckExpressions(first, NewestCompatibilityVersion, nil); len(user) != 1 {
		t.Fatalf("problems %v, want one", user)
	}
	second := &admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "true"}, {Name: "b", Expression: bad}},
		Validations:     []admissionregistrationv1.Validation{{Expression: "true", MessageExpression: "'fine'"}},
	}
	user, _ := CheckExpressions(second, NewestCompatibilityVersion, nil)
	if len(user) != 1 || user[0].field != "matchConditions[1]" {
		t.Errorf("problems %+v, want one at matchConditions[1]", user)
	}
	// "true" compiles as a condition but is no string message.
	third := &admissionregistrationv1.ValidatingAdmissionPolicySpec{Validations: []admissionregistrationv1.Validation{{Expression: "true", MessageExpression: "true"}}}
	if user, _ := CheckExpressions(third, NewestCompatibilityVersion, nil); len(user) != 1 || user[0].field != "validations[0].messageExpression" {
		t.Errorf("problems %+v, want one at validations[0].messageExpression", user)
	}
}
