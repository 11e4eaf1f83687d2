// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/translate"
)

// staticLookup answers from fixed data.
type staticLookup struct {
	engine.StaticParams
	namespaces map[string]*corev1.Namespace
}

func (l staticLookup) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	return l.namespaces[name], nil
}

func (l staticLookup) Roles(context.Context, authenticationv1.UserInfo, string) ([]string, []string, error) {
	return nil, []string{"cluster-admin"}, nil
}

func (l staticLookup) Authorizer() authorizer.UnconditionalAuthorizer { return nil }

func (l staticLookup) KindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	if gvr.Resource == "pods" {
		return schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, nil
	}
	return schema.GroupVersionKind{}, fmt.Errorf("unknown resource %s", gvr)
}

func newHandler(t testing.TB, spec kyvernov1.Spec, rules ...kyvernov1.Rule) *Handler {
	t.Helper()
	eng := engine.New()
	var frs []translate.FallbackRule
	for _, r := range rules {
		frs = append(frs, translate.FallbackRule{Policy: "p", Rule: r, Spec: spec})
	}
	eng.SetFallbackRules("p", frs)
	return &Handler{Engine: eng, Lookup: staticLookup{namespaces: map[string]*corev1.Namespace{
		"team": {ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"env": "prod"}}},
	}}}
}

func configMapRequest(op admissionv1.Operation, name string, data map[string]string) admission.Request {
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "team"}, "data": data}
	raw, _ := json.Marshal(cm)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: op, Name: name, Namespace: "team",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Object:   runtime.RawExtension{Raw: raw},
		UserInfo: authenticationv1.UserInfo{Username: "alice"},
	}}
}

func cmRule(expression, message string) kyvernov1.Rule {
	r := celRule("cm", []string{"ConfigMap"})
	r.Validation.CEL.Expressions = []admissionregistrationv1.Validation{{Expression: expression, Message: message}}
	return r
}

func TestHandlerVerdicts(t *testing.T) {
	ignore := kyvernov1.Ignore
	reason := metav1.StatusReasonForbidden
	tests := []struct {
		name        string
		spec        kyvernov1.Spec
		rule        kyvernov1.Rule
		req         admission.Request
		allowed     bool
		code        int32
		message     string
		warning     string
		annotations map[string]string
	}{
		{name: "enforce pass", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: cmRule("object.metadata.name != 'bad'", "bad name"), req: configMapRequest(admissionv1.Create, "good", nil), allowed: true},
		{name: "enforce fail", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: cmRule("object.metadata.name != 'bad'", "bad name"), req: configMapRequest(admissionv1.Create, "bad", nil),
			code: http.StatusUnprocessableEntity, message: "ClusterPolicy 'p' rule 'cm' denied request: bad name"},
		{name: "audit fail warns", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Audit},
			rule: cmRule("object.metadata.name != 'bad'", "bad name"), req: configMapRequest(admissionv1.Create, "bad", nil),
			allowed: true, warning: "Validation failed for ClusterPolicy 'p' rule 'cm': bad name"},
		{name: "namespaceObject", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: cmRule("namespaceObject.metadata.labels.env != 'prod'", "not in prod"), req: configMapRequest(admissionv1.Create, "x", nil),
			code: http.StatusUnprocessableEntity, message: "not in prod"},
		{name: "runtime error under Fail denies", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: cmRule("object.data.missing == 'x'", "never"), req: configMapRequest(admissionv1.Create, "x", map[string]string{"a": "b"}),
			code: http.StatusUnprocessableEntity, message: "no such key"},
		{name: "runtime error under Ignore admits", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce, FailurePolicy: &ignore},
			rule: cmRule("object.data.missing == 'x'", "never"), req: configMapRequest(admissionv1.Create, "x", map[string]string{"a": "b"}), allowed: true},
		{name: "reason sets the code", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: func() kyvernov1.Rule {
				r := cmRule("false", "forbidden")
				r.Validation.CEL.Expressions[0].Reason = &reason
				return r
			}(), req: configMapRequest(admissionv1.Create, "x", nil), code: http.StatusForbidden, message: "forbidden"},
		{name: "messageExpression", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: func() kyvernov1.Rule {
				r := cmRule("false", "static")
				r.Validation.CEL.Expressions[0].MessageExpression = "'name ' + object.metadata.name"
				return r
			}(), req: configMapRequest(admissionv1.Create, "dyn", nil), code: http.StatusUnprocessableEntity, message: "name dyn"},
		{name: "audit annotations", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: func() kyvernov1.Rule {
				r := cmRule("true", "")
				r.Validation.CEL.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "who", ValueExpression: "request.userInfo.username"}}
				return r
			}(), req: configMapRequest(admissionv1.Create, "x", nil), allowed: true, annotations: map[string]string{"p.cm.who": "alice"}},
		{name: "not matched", spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce},
			rule: func() kyvernov1.Rule {
				r := cmRule("false", "never")
				r.MatchResources.Any[0].Resources.Kinds = []string{"Secret"}
				return r
			}(), req: configMapRequest(admissionv1.Create, "x", nil), allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandler(t, tt.spec, tt.rule)
			resp := h.Handle(context.Background(), tt.req)
			if resp.Allowed != tt.allowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tt.allowed, resp.Result)
			}
			if !tt.allowed {
				if resp.Result.Code != tt.code || !strings.Contains(resp.Result.Message, tt.message) {
					t.Errorf("result = %d %q, want %d containing %q", resp.Result.Code, resp.Result.Message, tt.code, tt.message)
				}
			}
			if tt.warning != "" && (len(resp.Warnings) != 1 || resp.Warnings[0] != tt.warning) {
				t.Errorf("warnings = %q, want [%q]", resp.Warnings, tt.warning)
			}
			if tt.warning == "" && len(resp.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", resp.Warnings)
			}
			for k, v := range tt.annotations {
				if resp.AuditAnnotations[k] != v {
					t.Errorf("audit annotation %s = %q, want %q (all: %v)", k, resp.AuditAnnotations[k], v, resp.AuditAnnotations)
				}
			}
		})
	}
}

func TestHandlerServesOnlyItsGroup(t *testing.T) {
	ignore := kyvernov1.Ignore
	h := newHandler(t, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce, FailurePolicy: &ignore}, cmRule("false", "denied"))
	req := configMapRequest(admissionv1.Create, "x", nil)
	failCtx := context.WithValue(context.Background(), pathKey{}, Group{admissionregistrationv1.Fail, 10}.Path())
	if resp := h.Handle(failCtx, req); !resp.Allowed {
		t.Errorf("the Fail webhook evaluated an Ignore policy: %+v", resp.Result)
	}
	ignoreCtx := context.WithValue(context.Background(), pathKey{}, Group{admissionregistrationv1.Ignore, 10}.Path())
	if resp := h.Handle(ignoreCtx, req); resp.Allowed {
		t.Error("the Ignore webhook did not evaluate its policy")
	}
	badCtx := context.WithValue(context.Background(), pathKey{}, "/validate/nope")
	if resp := h.Handle(badCtx, req); resp.Allowed || resp.Result.Code != http.StatusNotFound {
		t.Errorf("an unknown path must be refused with 404, got %+v", resp.Result)
	}
}

func TestAuditAnnotationKey(t *testing.T) {
	if got := AuditAnnotationKey("p", "r", "k"); got != "p.r.k" {
		t.Errorf("got %q", got)
	}
	long := AuditAnnotationKey(strings.Repeat("a", 60), "rule with spaces", "key")
	if len(long) > 63 || strings.ContainsAny(long, " ") {
		t.Errorf("key %q is not a qualified name", long)
	}
	if AuditAnnotationKey(strings.Repeat("a", 60), "r1", "k") == AuditAnnotationKey(strings.Repeat("a", 60), "r2", "k") {
		t.Error("long keys of different rules collide")
	}
}

// FuzzHandler: whatever body arrives, the handler answers with a well-formed
// response and never panics.
func FuzzHandler(f *testing.F) {
	good, _ := json.Marshal(configMapRequest(admissionv1.Create, "bad", map[string]string{"a": "b"}).AdmissionRequest)
	f.Add(good)
	f.Add([]byte(`{"uid":"1","kind":{"kind":"Pod","version":"v1"},"operation":"DELETE","oldObject":{"metadata":{"name":3}}}`))
	f.Add([]byte(`{"uid":"1","kind":{"kind":"ConfigMap","version":"v1"},"namespace":"team","object":"not an object"}`))
	f.Add([]byte(`null`))
	h := newHandler(f, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce}, cmRule("object.metadata.name != 'bad'", "bad name"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req admissionv1.AdmissionRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return
		}
		resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: req})
		if !resp.Allowed && resp.Result == nil {
			t.Fatalf("a denial without a status: %+v", resp)
		}
		if _, err := json.Marshal(resp.AdmissionResponse); err != nil {
			t.Fatalf("response does not serialise: %v", err)
		}
	})
}

func TestHandlerFailureFollowsTheGroup(t *testing.T) {
	h := newHandler(t, kyvernov1.Spec{ValidationFailureAction: kyvernov1.Enforce}, cmRule("false", "denied"))
	req := configMapRequest(admissionv1.Create, "x", nil)
	req.Object.Raw = []byte(`{"not json`)
	failCtx := context.WithValue(context.Background(), pathKey{}, Group{admissionregistrationv1.Fail, 10}.Path())
	if resp := h.Handle(failCtx, req); resp.Allowed {
		t.Error("an unreadable request on a Fail webhook must be refused")
	}
	ignoreCtx := context.WithValue(context.Background(), pathKey{}, Group{admissionregistrationv1.Ignore, 10}.Path())
	if resp := h.Handle(ignoreCtx, req); !resp.Allowed || len(resp.Warnings) != 1 {
		t.Errorf("an unreadable request on an Ignore webhook must be admitted with a warning, got %+v", resp)
	}
}
