// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
)

// The rows are written as Kyverno YAML, decoded the way the operator decodes
// policies, so JSON subtleties (an explicit `roles: []`) are exercised too.

func parseRule(t testing.TB, y string) *kyvernov1.Rule {
	t.Helper()
	var r kyvernov1.Rule
	if err := yaml.UnmarshalStrict([]byte("name: r\n"+y), &r); err != nil {
		t.Fatalf("rule %q: %v", y, err)
	}
	return &r
}

func parseException(t testing.TB, y string) *kyvernov2.PolicyException {
	t.Helper()
	var ex kyvernov2.PolicyException
	if err := yaml.UnmarshalStrict([]byte("metadata: {name: ex, namespace: kyverno}\nspec: "+y), &ex); err != nil {
		t.Fatalf("exception %q: %v", y, err)
	}
	return &ex
}

func parseSpec(t testing.TB, y string) *kyvernov1.Spec {
	t.Helper()
	var s kyvernov1.Spec
	if err := yaml.UnmarshalStrict([]byte(y), &s); err != nil {
		t.Fatalf("spec %q: %v", y, err)
	}
	return &s
}

var (
	podGVKv1   = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	deployGVK  = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	nsGVK      = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	crGVK      = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	alice      = authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev", "system:authenticated"}}
	deployerSA = authenticationv1.UserInfo{Username: "system:serviceaccount:ci:deployer", Groups: []string{"system:serviceaccounts"}}
)

type reqOpt func(*Request)

// newReq is a CREATE of Pod default/nginx (labels app=nginx, annotation
// team=a) by alice, in a namespace labelled env=prod.
func newReq(opts ...reqOpt) *Request {
	r := &Request{
		Operation: "CREATE",
		Kind:      podGVKv1,
		Resource:  schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "default",
		Name:      "nginx",
		Object: map[string]any{
			"apiVersion": "v1",
			"kind":       "Pod",
			"metadata": map[string]any{
				"name":        "nginx",
				"namespace":   "default",
				"labels":      map[string]any{"app": "nginx"},
				"annotations": map[string]any{"team": "a"},
			},
		},
		UserInfo:        alice,
		NamespaceLabels: map[string]string{"env": "prod", "kubernetes.io/metadata.name": "default"},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func op(o string) reqOpt { return func(r *Request) { r.Operation = o } }

func kind(gvk schema.GroupVersionKind, sub string) reqOpt {
	return func(r *Request) { r.Kind, r.SubResource = gvk, sub }
}

func inNS(ns string, lbls map[string]string) reqOpt {
	return func(r *Request) { r.Namespace, r.NamespaceLabels = ns, lbls }
}

func meta(field string, v any) reqOpt {
	return func(r *Request) {
		m := r.Object["metadata"].(map[string]any)
		if v == nil {
			delete(m, field)
		} else {
			m[field] = v
		}
	}
}

func user(u authenticationv1.UserInfo) reqOpt { return func(r *Request) { r.UserInfo = u } }

func roles(rs ...string) reqOpt { return func(r *Request) { r.Roles = rs } }

func clusterRoles(rs ...string) reqOpt { return func(r *Request) { r.ClusterRoles = rs } }

// asDelete turns the request into a DELETE: the object moves to OldObject.
func asDelete(r *Request) { r.Operation, r.OldObject, r.Object = "DELETE", r.Object, nil }

// noUser empties the request's user information entirely.
func noUser(r *Request) { r.UserInfo, r.Roles, r.ClusterRoles = authenticationv1.UserInfo{}, nil, nil }

// namespaceObj makes the request about Namespace name itself.
func namespaceObj(name, reqNamespace string, lbls map[string]any) reqOpt {
	return func(r *Request) {
		r.Kind, r.SubResource = nsGVK, ""
		r.Resource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
		r.Namespace, r.Name = reqNamespace, name
		r.Object = map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name, "labels": lbls}}
		r.NamespaceLabels = nil
		if reqNamespace != "" {
			r.NamespaceLabels = map[string]string{}
			for k, v := range lbls {
				r.NamespaceLabels[k] = v.(string)
			}
		}
	}
}

// clusterRole makes the request about a cluster-scoped ClusterRole.
func clusterRole(r *Request) {
	r.Kind, r.SubResource, r.Namespace, r.Name, r.NamespaceLabels = crGVK, "", "", "view", nil
	r.Object = map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "view"}}
}

// podExec is a CONNECT to pods/exec: the object is PodExecOptions.
func podExec(r *Request) {
	r.Operation, r.Kind, r.SubResource = "CONNECT", podGVKv1, "exec"
	r.Object = map[string]any{"apiVersion": "v1", "kind": "PodExecOptions", "command": []any{"sh"}}
}

func TestRule(t *testing.T) {
	tests := []struct {
		name    string
		rule    string
		req     *Request
		want    bool
		wantErr error
	}{
		// kinds
		{name: "kind", rule: `match: {any: [{resources: {kinds: [Pod]}}]}`, req: newReq(), want: true},
		{name: "other kind", rule: `match: {any: [{resources: {kinds: [Deployment]}}]}`, req: newReq(), want: false},
		{name: "kind list is an OR", rule: `match: {any: [{resources: {kinds: [Deployment, Pod]}}]}`, req: newReq(), want: true},
		{name: "version/kind", rule: `match: {any: [{resources: {kinds: [v1/Pod]}}]}`, req: newReq(), want: true},
		{name: "other version/kind", rule: `match: {any: [{resources: {kinds: [v2/Pod]}}]}`, req: newReq(), want: false},
		{name: "group/version/kind", rule: `match: {any: [{resources: {kinds: [apps/v1/Deployment]}}]}`, req: newReq(kind(deployGVK, "")), want: true},
		{name: "group/*/kind", rule: `match: {any: [{resources: {kinds: [apps/*/Deployment]}}]}`, req: newReq(kind(deployGVK, "")), want: true},
		{name: "other group", rule: `match: {any: [{resources: {kinds: [extensions/v1/Deployment]}}]}`, req: newReq(kind(deployGVK, "")), want: false},
		{name: "wildcard kind", rule: `match: {any: [{resources: {kinds: ["Po?"]}}]}`, req: newReq(), want: true},
		{name: "star matches any kind", rule: `match: {any: [{resources: {kinds: ["*"]}}]}`, req: newReq(kind(deployGVK, "")), want: true},
		{name: "star is no subresource", rule: `match: {any: [{resources: {kinds: ["*"]}}]}`, req: newReq(kind(podGVKv1, "status")), want: false},
		{name: "*/* is any subresource", rule: `match: {any: [{resources: {kinds: ["*/*"]}}]}`, req: newReq(kind(deployGVK, "scale")), want: true},
		{name: "*/scale", rule: `match: {any: [{resources: {kinds: ["*/scale"]}}]}`, req: newReq(kind(deployGVK, "scale")), want: true},
		{name: "kind does not match its subresource", rule: `match: {any: [{resources: {kinds: [Pod]}}]}`, req: newReq(podExec), want: false},
		{name: "Pod/exec", rule: `match: {any: [{resources: {kinds: [Pod/exec]}}]}`, req: newReq(podExec), want: true},
		{name: "Pod.exec", rule: `match: {any: [{resources: {kinds: [Pod.exec]}}]}`, req: newReq(podExec), want: true},
		{name: "v1/Pod/exec", rule: `match: {any: [{resources: {kinds: [v1/Pod/exec]}}]}`, req: newReq(podExec), want: true},
		{name: "Pod/exec is not the pod", rule: `match: {any: [{resources: {kinds: [Pod/exec]}}]}`, req: newReq(), want: false},
		{name: "Pod/*", rule: `match: {any: [{resources: {kinds: [Pod/*]}}]}`, req: newReq(kind(podGVKv1, "status")), want: true},
		{name: "group/version/kind/sub", rule: `match: {any: [{resources: {kinds: [apps/v1/Deployment/scale]}}]}`, req: newReq(kind(deployGVK, "scale")), want: true},
		{name: "Pod matches ephemeralcontainers", rule: `match: {any: [{resources: {kinds: [Pod]}}]}`, req: newReq(kind(podGVKv1, "ephemeralcontainers")), want: true},
		{name: "Pod/ephemeralcontainers", rule: `match: {any: [{resources: {kinds: [Pod/ephemeralcontainers]}}]}`, req: newReq(kind(podGVKv1, "ephemeralcontainers")), want: true},
		{name: "any Pod spelling matches ephemeralcontainers", rule: `match: {any: [{resources: {kinds: [Pod/exec]}}]}`, req: newReq(kind(podGVKv1, "ephemeralcontainers")), want: true},
		{name: "v10 is not a version", rule: `match: {any: [{resources: {kinds: [v10/Pod]}}]}`, req: newReq(), want: false},
		{name: "kind from the object when the request has none", rule: `match: {any: [{resources: {kinds: [v1/Pod]}}]}`, req: newReq(kind(schema.GroupVersionKind{}, "")), want: true},
		{name: "too many segments", rule: `match: {any: [{resources: {kinds: [a/b/c/d/e]}}]}`, req: newReq(), want: false, wantErr: ErrInvalid},
		{name: "empty version", rule: `match: {any: [{resources: {kinds: [apps//Deployment]}}]}`, req: newReq(kind(deployGVK, "")), want: false, wantErr: ErrInvalid},
		{name: "broken kind in a later filter is still reported", rule: `match: {any: [{resources: {kinds: [Pod]}}, {resources: {kinds: [""]}}]}`, req: newReq(), want: true, wantErr: ErrInvalid},

		// names
		{name: "name", rule: `match: {any: [{resources: {kinds: [Pod], name: nginx}}]}`, req: newReq(), want: true},
		{name: "name wildcard", rule: `match: {any: [{resources: {kinds: [Pod], name: "ngi*"}}]}`, req: newReq(), want: true},
		{name: "other name", rule: `match: {any: [{resources: {kinds: [Pod], name: web}}]}`, req: newReq(), want: false},
		{name: "names", rule: `match: {any: [{resources: {names: [web, "ngin?"]}}]}`, req: newReq(), want: true},
		{name: "other names", rule: `match: {any: [{resources: {names: [web, db]}}]}`, req: newReq(), want: false},
		{name: "name and names both apply", rule: `match: {any: [{resources: {name: nginx, names: [web]}}]}`, req: newReq(), want: false},
		{name: "generateName stands in for the name", rule: `match: {any: [{resources: {names: ["web-*"]}}]}`, req: newReq(meta("name", nil), meta("generateName", "web-")), want: true},
		{name: "CONNECT objects have no name", rule: `match: {any: [{resources: {kinds: [Pod/exec], names: [nginx]}}]}`, req: newReq(podExec), want: false},
		{name: "DELETE matches the old object", rule: `match: {any: [{resources: {kinds: [Pod], names: [nginx], selector: {matchLabels: {app: nginx}}}}]}`, req: newReq(asDelete), want: true},
		{name: "no object at all", rule: `match: {any: [{resources: {kinds: [Pod]}}]}`, req: newReq(func(r *Request) { r.Object = nil }), want: false},

		// namespaces
		{name: "namespace", rule: `match: {any: [{resources: {namespaces: [default]}}]}`, req: newReq(), want: true},
		{name: "namespace wildcard", rule: `match: {any: [{resources: {namespaces: ["def?ult"]}}]}`, req: newReq(), want: true},
		{name: "other namespace", rule: `match: {any: [{resources: {namespaces: ["kube-*"]}}]}`, req: newReq(), want: false},
		{name: "namespace comes from the request", rule: `match: {any: [{resources: {namespaces: [default]}}]}`, req: newReq(meta("namespace", nil)), want: true},
		{name: "a Namespace is in itself", rule: `match: {any: [{resources: {kinds: [Namespace], namespaces: [prod]}}]}`, req: newReq(namespaceObj("prod", "prod", nil)), want: true},
		{name: "a created Namespace is in itself", rule: `match: {any: [{resources: {kinds: [Namespace], namespaces: [prod]}}]}`, req: newReq(namespaceObj("prod", "", nil)), want: true},
		{name: "cluster-scoped matches star", rule: `match: {any: [{resources: {namespaces: ["*"]}}]}`, req: newReq(clusterRole), want: true},
		{name: "cluster-scoped has no namespace", rule: `match: {any: [{resources: {namespaces: [default]}}]}`, req: newReq(clusterRole), want: false},

		// annotations
		{name: "annotation", rule: `match: {any: [{resources: {annotations: {team: a}}}]}`, req: newReq(), want: true},
		{name: "annotation value differs", rule: `match: {any: [{resources: {annotations: {team: b}}}]}`, req: newReq(), want: false},
		{name: "annotation wildcards", rule: `match: {any: [{resources: {annotations: {"te*": "?"}}}]}`, req: newReq(), want: true},
		{name: "annotation missing", rule: `match: {any: [{resources: {annotations: {owner: "*"}}}]}`, req: newReq(), want: false},
		{name: "no annotations", rule: `match: {any: [{resources: {annotations: {team: "*"}}}]}`, req: newReq(meta("annotations", nil)), want: false},

		// selector
		{name: "matchLabels", rule: `match: {any: [{resources: {selector: {matchLabels: {app: nginx}}}}]}`, req: newReq(), want: true},
		{name: "matchLabels differ", rule: `match: {any: [{resources: {selector: {matchLabels: {app: web}}}}]}`, req: newReq(), want: false},
		{name: "matchLabels wildcard value", rule: `match: {any: [{resources: {selector: {matchLabels: {app: "ngi*"}}}}]}`, req: newReq(), want: true},
		{name: "matchLabels wildcard key", rule: `match: {any: [{resources: {selector: {matchLabels: {"ap?": nginx}}}}]}`, req: newReq(), want: true},
		{name: "matchLabels wildcard unmatched", rule: `match: {any: [{resources: {selector: {matchLabels: {app: "web*"}}}}]}`, req: newReq(), want: false},
		{name: "matchExpressions In", rule: `match: {any: [{resources: {selector: {matchExpressions: [{key: app, operator: In, values: [web, nginx]}]}}}]}`, req: newReq(), want: true},
		{name: "matchExpressions NotIn", rule: `match: {any: [{resources: {selector: {matchExpressions: [{key: app, operator: NotIn, values: [nginx]}]}}}]}`, req: newReq(), want: false},
		{name: "matchExpressions DoesNotExist", rule: `match: {any: [{resources: {selector: {matchExpressions: [{key: tier, operator: DoesNotExist}]}}}]}`, req: newReq(), want: true},
		{name: "empty selector selects everything", rule: `match: {any: [{resources: {kinds: [Pod], selector: {}}}]}`, req: newReq(meta("labels", nil)), want: true},
		{name: "bad operator", rule: `match: {any: [{resources: {selector: {matchExpressions: [{key: app, operator: Has}]}}}]}`, req: newReq(), want: false, wantErr: ErrInvalid},
		{name: "bad label key", rule: `match: {any: [{resources: {selector: {matchLabels: {"-app": x}}}}]}`, req: newReq(), want: false, wantErr: ErrInvalid},
		{name: "unmatched wildcard becomes an invalid value", rule: `match: {any: [{resources: {selector: {matchLabels: {app: "*-"}}}}]}`, req: newReq(), want: false, wantErr: ErrInvalid},
		{name: "bad selector in exclude excludes nothing", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{resources: {selector: {matchLabels: {"-app": x}}}}]}`, req: newReq(), want: true, wantErr: ErrInvalid},

		// namespaceSelector
		{name: "namespaceSelector", rule: `match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: prod}}}}]}`, req: newReq(), want: true},
		{name: "namespaceSelector differs", rule: `match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: prod}}}}]}`, req: newReq(inNS("default", map[string]string{"env": "dev"})), want: false},
		{name: "namespaceSelector wildcard", rule: `match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: "pr*"}}}}]}`, req: newReq(), want: true},
		{name: "namespaceSelector never matches a Namespace", rule: `match: {any: [{resources: {kinds: [Namespace], namespaceSelector: {matchLabels: {env: prod}}}}]}`, req: newReq(namespaceObj("prod", "prod", map[string]any{"env": "prod"})), want: false},
		{name: "namespaceSelector never excludes a Namespace", rule: `match: {any: [{resources: {kinds: [Namespace]}}]}
exclude: {any: [{resources: {namespaceSelector: {}}}]}`, req: newReq(namespaceObj("prod", "prod", map[string]any{"env": "prod"})), want: true},
		{name: "cluster-scoped: empty namespace labels, empty selector", rule: `match: {any: [{resources: {kinds: [ClusterRole], namespaceSelector: {}}}]}`, req: newReq(clusterRole), want: true},
		{name: "cluster-scoped: empty namespace labels, matchLabels", rule: `match: {any: [{resources: {kinds: [ClusterRole], namespaceSelector: {matchLabels: {env: prod}}}}]}`, req: newReq(clusterRole), want: false},
		{name: "cluster-scoped: empty namespace labels, DoesNotExist", rule: `match: {any: [{resources: {kinds: [ClusterRole], namespaceSelector: {matchExpressions: [{key: env, operator: DoesNotExist}]}}}]}`, req: newReq(clusterRole), want: true},

		// operations
		{name: "operation", rule: `match: {any: [{resources: {kinds: [Pod], operations: [CREATE]}}]}`, req: newReq(), want: true},
		{name: "other operation", rule: `match: {any: [{resources: {kinds: [Pod], operations: [UPDATE, DELETE]}}]}`, req: newReq(), want: false},
		{name: "operations default to all: DELETE", rule: `match: {any: [{resources: {kinds: [Pod]}}]}`, req: newReq(asDelete), want: true},
		{name: "operations default to all: CONNECT", rule: `match: {any: [{resources: {kinds: [Pod/exec]}}]}`, req: newReq(podExec), want: true},
		{name: "UPDATE operation", rule: `match: {any: [{resources: {kinds: [Pod], operations: [UPDATE]}}]}`, req: newReq(op("UPDATE")), want: true},
		{name: "UPDATE matches the new object only", rule: `match: {any: [{resources: {kinds: [Pod], names: [old]}}]}`, req: newReq(op("UPDATE"), func(r *Request) {
			r.OldObject = map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "old"}}
		}), want: false},
		{name: "DELETE operation", rule: `match: {any: [{resources: {kinds: [Pod], operations: [DELETE]}}]}`, req: newReq(asDelete), want: true},
		{name: "an operation mismatch hides a broken selector", rule: `match: {any: [{resources: {operations: [UPDATE], selector: {matchLabels: {"-x": y}}}}]}`, req: newReq(), want: false},

		// subjects, roles, cluster roles
		{name: "user", rule: `match: {any: [{resources: {kinds: [Pod]}, subjects: [{kind: User, name: alice}]}]}`, req: newReq(), want: true},
		{name: "other user", rule: `match: {any: [{resources: {kinds: [Pod]}, subjects: [{kind: User, name: bob}]}]}`, req: newReq(), want: false},
		{name: "user wildcard", rule: `match: {any: [{subjects: [{kind: User, name: "ali*"}]}]}`, req: newReq(), want: true},
		{name: "group", rule: `match: {any: [{subjects: [{kind: Group, name: dev}]}]}`, req: newReq(), want: true},
		{name: "group wildcard", rule: `match: {any: [{subjects: [{kind: Group, name: "system:*"}]}]}`, req: newReq(), want: true},
		{name: "group not held", rule: `match: {any: [{subjects: [{kind: Group, name: ops}]}]}`, req: newReq(), want: false},
		{name: "service account", rule: `match: {any: [{subjects: [{kind: ServiceAccount, namespace: ci, name: deployer}]}]}`, req: newReq(user(deployerSA)), want: true},
		{name: "service account wildcard", rule: `match: {any: [{subjects: [{kind: ServiceAccount, namespace: ci, name: "*"}]}]}`, req: newReq(user(deployerSA)), want: true},
		{name: "service account in another namespace", rule: `match: {any: [{subjects: [{kind: ServiceAccount, namespace: prod, name: deployer}]}]}`, req: newReq(user(deployerSA)), want: false},
		{name: "unknown subject kind", rule: `match: {any: [{subjects: [{kind: Robot, name: alice}]}]}`, req: newReq(), want: false},
		{name: "role", rule: `match: {any: [{roles: ["default:editor"]}]}`, req: newReq(roles("default:editor")), want: true},
		{name: "roles have no wildcards", rule: `match: {any: [{roles: ["default:*"]}]}`, req: newReq(roles("default:editor")), want: false},
		{name: "cluster role", rule: `match: {any: [{clusterRoles: [admin]}]}`, req: newReq(clusterRoles("admin", "view")), want: true},
		{name: "other cluster role", rule: `match: {any: [{clusterRoles: [cluster-admin]}]}`, req: newReq(clusterRoles("admin", "view")), want: false},
		{name: "user attributes all apply", rule: `match: {any: [{clusterRoles: [admin], subjects: [{kind: User, name: bob}]}]}`, req: newReq(clusterRoles("admin")), want: false},
		{name: "no user: match ignores user filters", rule: `match: {any: [{resources: {kinds: [Pod]}, subjects: [{kind: User, name: bob}]}]}`, req: newReq(noUser), want: true},
		{name: "no user: a user-only match is empty", rule: `match: {any: [{subjects: [{kind: User, name: bob}]}]}`, req: newReq(noUser), want: false},
		{name: "no user: exclude keeps user filters", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{subjects: [{kind: User, name: bob}]}]}`, req: newReq(noUser), want: true},
		{name: "no user: a star subject matches the empty username", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{subjects: [{kind: User, name: "*"}]}]}`, req: newReq(noUser), want: false},
		{name: "explicit empty roles make a filter that matches all", rule: `match: {any: [{roles: []}]}`, req: newReq(clusterRole), want: true},

		// any / all / legacy / empty
		{name: "any: one suffices", rule: `match: {any: [{resources: {kinds: [Deployment]}}, {resources: {kinds: [Pod]}}]}`, req: newReq(), want: true},
		{name: "any: none", rule: `match: {any: [{resources: {kinds: [Deployment]}}, {resources: {names: [web]}}]}`, req: newReq(), want: false},
		{name: "all: each", rule: `match: {all: [{resources: {kinds: [Pod]}}, {resources: {namespaces: [default]}}]}`, req: newReq(), want: true},
		{name: "all: one fails", rule: `match: {all: [{resources: {kinds: [Pod]}}, {resources: {namespaces: [kube-system]}}]}`, req: newReq(), want: false},
		{name: "legacy resources", rule: `match: {resources: {kinds: [Pod], namespaces: [default]}}`, req: newReq(), want: true},
		{name: "legacy resources mismatch", rule: `match: {resources: {kinds: [Deployment]}}`, req: newReq(), want: false},
		{name: "legacy subjects", rule: `match: {resources: {kinds: [Pod]}, subjects: [{kind: User, name: alice}]}`, req: newReq(), want: true},
		{name: "legacy clusterRoles", rule: `match: {clusterRoles: [admin]}`, req: newReq(), want: false},
		{name: "any wins over legacy", rule: `match: {any: [{resources: {kinds: [Pod]}}], resources: {kinds: [Deployment]}}`, req: newReq(), want: true},
		{name: "any wins over all", rule: `match: {any: [{resources: {kinds: [Pod]}}], all: [{resources: {kinds: [Deployment]}}]}`, req: newReq(), want: true},
		{name: "empty match", rule: `match: {}`, req: newReq(), want: false},
		{name: "empty filter", rule: `match: {any: [{}]}`, req: newReq(), want: false},
		{name: "empty filter beside another", rule: `match: {any: [{}, {resources: {kinds: [Pod]}}]}`, req: newReq(), want: true},
		{name: "empty filter under all", rule: `match: {all: [{resources: {kinds: [Pod]}}, {}]}`, req: newReq(), want: false},

		// exclude
		{name: "exclude by name", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{resources: {names: [nginx]}}]}`, req: newReq(), want: false},
		{name: "exclude any: one excludes", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{resources: {names: [web]}}, {resources: {namespaces: [default]}}]}`, req: newReq(), want: false},
		{name: "exclude any: none excludes", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{resources: {names: [web]}}, {resources: {namespaces: [kube-system]}}]}`, req: newReq(), want: true},
		{name: "exclude all: not all", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {all: [{resources: {names: [nginx]}}, {resources: {namespaces: [kube-system]}}]}`, req: newReq(), want: true},
		{name: "exclude all: all", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {all: [{resources: {names: [nginx]}}, {resources: {namespaces: [default]}}]}`, req: newReq(), want: false},
		{name: "exclude all with an empty filter", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {all: [{resources: {names: [nginx]}}, {}]}`, req: newReq(), want: true},
		{name: "legacy exclude", rule: `match: {resources: {kinds: [Pod]}}
exclude: {resources: {namespaces: [default]}}`, req: newReq(), want: false},
		{name: "legacy exclude by cluster role", rule: `match: {resources: {kinds: [Pod]}}
exclude: {clusterRoles: [cluster-admin]}`, req: newReq(clusterRoles("cluster-admin")), want: false},
		{name: "empty exclude", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {}`, req: newReq(), want: true},
		{name: "empty exclude filter", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{}]}`, req: newReq(), want: true},
		{name: "exclude by user", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{subjects: [{kind: Group, name: dev}]}]}`, req: newReq(), want: false},
		{name: "exclude by operation, other operation", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{resources: {operations: [DELETE]}}]}`, req: newReq(), want: true},
		{name: "exclude by operation", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{resources: {operations: [DELETE]}}]}`, req: newReq(asDelete), want: false},
		{name: "explicit empty roles in exclude exclude everything", rule: `match: {any: [{resources: {kinds: [Pod]}}]}
exclude: {any: [{roles: []}]}`, req: newReq(), want: false},
		{name: "exclude does not rescue a non-match", rule: `match: {any: [{resources: {kinds: [Deployment]}}]}
exclude: {any: [{resources: {names: [web]}}]}`, req: newReq(), want: false},
	}
	names := map[string]bool{}
	for _, tt := range tests {
		if names[tt.name] {
			t.Fatalf("duplicate row %q", tt.name)
		}
		names[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			got, err := Rule(parseRule(t, tt.rule), tt.req)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("Rule() = %v, want %v", got, tt.want)
			}
		})
	}
}

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("unexpected error: %v", err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("error = %v, want %v", err, want)
	}
}

func TestRuleNil(t *testing.T) {
	if _, err := Rule(nil, newReq()); err == nil {
		t.Error("nil rule: no error")
	}
	if _, err := Rule(&kyvernov1.Rule{}, nil); err == nil {
		t.Error("nil request: no error")
	}
	if _, err := Exception(nil, "p", "r", newReq()); err == nil {
		t.Error("nil exception: no error")
	}
	if got := FailureAction(nil, nil, nil); got != "Audit" {
		t.Errorf("FailureAction(nil) = %q", got)
	}
}

func TestException(t *testing.T) {
	const podDefault = `match: {any: [{resources: {kinds: [Pod], namespaces: [default]}}]}`
	tests := []struct {
		name         string
		ex           string
		policy, rule string
		req          *Request
		want         bool
		wantErr      error
	}{
		{name: "policy and rule", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], ` + podDefault + `}`, want: true},
		{name: "other policy", ex: `{exceptions: [{policyName: other, ruleNames: [check]}], ` + podDefault + `}`, want: false},
		{name: "policy names have no wildcards", ex: `{exceptions: [{policyName: "p*", ruleNames: [check]}], ` + podDefault + `}`, want: false},
		{name: "other rule", ex: `{exceptions: [{policyName: pol, ruleNames: [other]}], ` + podDefault + `}`, want: false},
		{name: "rule wildcard", ex: `{exceptions: [{policyName: pol, ruleNames: ["ch?ck"]}], ` + podDefault + `}`, want: true},
		{name: "second entry", ex: `{exceptions: [{policyName: other, ruleNames: ["*"]}, {policyName: pol, ruleNames: [x, check]}], ` + podDefault + `}`, want: true},
		{name: "base name does not cover autogen", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Deployment]}}]}}`, rule: "autogen-check", req: newReq(kind(deployGVK, "")), want: false},
		{name: "autogen name", ex: `{exceptions: [{policyName: pol, ruleNames: [autogen-check]}], match: {any: [{resources: {kinds: [Deployment]}}]}}`, rule: "autogen-check", req: newReq(kind(deployGVK, "")), want: true},
		{name: "wildcard covers autogen", ex: `{exceptions: [{policyName: pol, ruleNames: ["*check"]}], match: {any: [{resources: {kinds: [CronJob]}}]}}`, rule: "autogen-cronjob-check", req: newReq(kind(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, "")), want: true},
		{name: "namespaced policy", ex: `{exceptions: [{policyName: team/pol, ruleNames: [check]}], ` + podDefault + `}`, policy: "team/pol", want: true},
		{name: "match fails", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod], namespaces: [kube-system]}}]}}`, want: false},
		{name: "all", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {all: [{resources: {kinds: [Pod]}}, {subjects: [{kind: User, name: alice}]}]}}`, want: true},
		{name: "all: one fails", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {all: [{resources: {kinds: [Pod]}}, {subjects: [{kind: User, name: bob}]}]}}`, want: false},
		{name: "no match block", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {}}`, want: false},
		{name: "empty filter", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{}]}}`, want: false},
		{name: "explicit empty roles are empty here", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{roles: []}]}}`, want: false},
		{name: "operations are ignored", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod], operations: [DELETE]}}]}}`, want: true},
		{name: "namespaceSelector", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: prod}}}}]}}`, want: true},
		{name: "namespaceSelector differs", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: dev}}}}]}}`, want: false},
		{name: "namespaceSelector is skipped for a Namespace", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Namespace], namespaceSelector: {matchLabels: {env: dev}}}}]}}`, req: newReq(namespaceObj("prod", "prod", nil)), want: true},
		{name: "DELETE matches the old object", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod], names: [nginx]}}]}}`, req: newReq(asDelete), want: true},
		{name: "no object: kinds still match", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod]}}]}}`, req: newReq(func(r *Request) { r.Object = nil }), want: true},
		{name: "roles", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{roles: ["default:editor"]}]}}`, req: newReq(roles("default:editor")), want: true},
		{name: "no user: user filters still apply", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod]}, subjects: [{kind: User, name: bob}]}]}}`, req: newReq(noUser), want: false},
		{name: "JMESPath conditions are the caller's", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], ` + podDefault + `, conditions: {any: [{key: "{{ request.object.metadata.name }}", operator: Equals, value: other}]}}`, want: true},
		{name: "JMESPath conditions of a non-matching exception", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Deployment]}}]}, conditions: {all: [{key: a, operator: Equals, value: a}]}}`, want: false},
		{name: "empty conditions pass", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], ` + podDefault + `, conditions: {}}`, want: true},
		{name: "bad selector", ex: `{exceptions: [{policyName: pol, ruleNames: [check]}], match: {any: [{resources: {kinds: [Pod], selector: {matchExpressions: [{key: app, operator: In}]}}}]}}`, want: false, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy, rule, req := tt.policy, tt.rule, tt.req
			if policy == "" {
				policy = "pol"
			}
			if rule == "" {
				rule = "check"
			}
			if req == nil {
				req = newReq()
			}
			got, err := Exception(parseException(t, tt.ex), policy, rule, req)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("Exception() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFailureAction(t *testing.T) {
	prod := inNS("prod", map[string]string{"env": "prod"})
	dev := inNS("dev-1", map[string]string{"env": "dev"})
	tests := []struct {
		name string
		spec string
		// rule is the rule's validate block ("" for none).
		rule string
		req  *Request
		want string
	}{
		{name: "Enforce", spec: `validationFailureAction: Enforce`, want: "Enforce"},
		{name: "legacy enforce", spec: `validationFailureAction: enforce`, want: "Enforce"},
		{name: "Audit", spec: `validationFailureAction: Audit`, want: "Audit"},
		{name: "default is Audit", spec: `{}`, want: "Audit"},
		{name: "override names the namespace", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: [prod]}]}`, req: newReq(prod), want: "Enforce"},
		{name: "override names another namespace", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: [prod]}]}`, req: newReq(dev), want: "Audit"},
		{name: "override namespace wildcard", spec: `{validationFailureAction: Enforce, validationFailureActionOverrides: [{action: Audit, namespaces: ["dev-*"]}]}`, req: newReq(dev), want: "Audit"},
		{name: "first override wins", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: ["*"]}, {action: Audit, namespaces: [prod]}]}`, req: newReq(prod), want: "Enforce"},
		{name: "override selector", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaceSelector: {matchLabels: {env: prod}}}]}`, req: newReq(prod), want: "Enforce"},
		{name: "override selector, other labels", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaceSelector: {matchLabels: {env: prod}}}]}`, req: newReq(dev), want: "Audit"},
		{name: "override selector wildcard: the cache has none", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaceSelector: {matchLabels: {env: "pr*"}}}]}`, req: newReq(prod), want: "Audit"},
		{name: "namespaces and selector: both must hold", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: [prod], namespaceSelector: {matchLabels: {env: x}}}]}`, req: newReq(prod), want: "Audit"},
		{name: "namespaces and selector: both hold", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: [prod], namespaceSelector: {matchLabels: {env: prod}}}]}`, req: newReq(prod), want: "Enforce"},
		{name: "namespaces and selector: name enough to audit", spec: `{validationFailureAction: Enforce, validationFailureActionOverrides: [{action: Audit, namespaces: [prod], namespaceSelector: {matchLabels: {env: x}}}]}`, req: newReq(prod), want: "Audit"},
		{name: "empty namespaces list", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: []}]}`, req: newReq(prod), want: "Audit"},
		{name: "override for all namespaces", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce}]}`, req: newReq(prod), want: "Enforce"},
		{name: "override without an action audits", spec: `{validationFailureAction: Enforce, validationFailureActionOverrides: [{namespaces: [prod]}]}`, req: newReq(prod), want: "Audit"},
		{name: "rule Enforce over spec Audit", spec: `validationFailureAction: Audit`, rule: `{failureAction: Enforce}`, want: "Enforce"},
		{name: "rule Audit over spec Enforce", spec: `validationFailureAction: Enforce`, rule: `{failureAction: Audit}`, want: "Audit"},
		{name: "spec override beats rule Enforce in the cache", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Audit, namespaces: ["dev-*"]}]}`, rule: `{failureAction: Enforce}`, req: newReq(dev), want: "Audit"},
		{name: "rule Enforce outside the spec override", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Audit, namespaces: ["dev-*"]}]}`, rule: `{failureAction: Enforce}`, req: newReq(prod), want: "Enforce"},
		{name: "rule overrides replace spec overrides", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Audit, namespaces: [prod]}]}`, rule: `{failureActionOverrides: [{action: Enforce, namespaces: [prod]}]}`, req: newReq(prod), want: "Enforce"},
		{name: "rule override", spec: `validationFailureAction: Audit`, rule: `{failureAction: Enforce, failureActionOverrides: [{action: Audit, namespaces: ["dev-*"]}]}`, req: newReq(dev), want: "Audit"},
		{name: "rule override elsewhere", spec: `validationFailureAction: Audit`, rule: `{failureAction: Enforce, failureActionOverrides: [{action: Audit, namespaces: ["dev-*"]}]}`, req: newReq(prod), want: "Enforce"},
		{name: "cluster-scoped: no namespace for the cache", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: ["*"]}]}`, req: newReq(clusterRole), want: "Audit"},
		{name: "cluster-scoped: star audits in the engine", spec: `{validationFailureAction: Enforce, validationFailureActionOverrides: [{action: Audit, namespaces: ["*"]}]}`, req: newReq(clusterRole), want: "Audit"},
		{name: "Namespace itself: the engine sees no namespace", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: [prod]}]}`, req: newReq(namespaceObj("prod", "prod", map[string]any{"env": "prod"})), want: "Audit"},
		{name: "DELETE: the old object's namespace", spec: `{validationFailureAction: Audit, validationFailureActionOverrides: [{action: Enforce, namespaces: [prod]}]}`, req: newReq(prod, asDelete), want: "Enforce"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			if req == nil {
				req = newReq()
			}
			var rule *kyvernov1.Rule
			if tt.rule != "" {
				rule = parseRule(t, "match: {any: [{resources: {kinds: [Pod]}}]}\nvalidate: "+tt.rule)
			}
			if got := FailureAction(parseSpec(t, tt.spec), rule, req); got != tt.want {
				t.Errorf("FailureAction() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRoleRefs(t *testing.T) {
	rb := func(ns, kind, name string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{Kind: kind, Name: name},
			Subjects:   subjects,
		}
	}
	crb := func(name string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: name}, Subjects: subjects}
	}
	userAlice := rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}
	groupDev := rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "dev"}
	saDeployer := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "deployer"} // namespace from the binding
	roleBindings := []*rbacv1.RoleBinding{
		rb("default", "Role", "editor", userAlice),
		rb("default", "Role", "editor", groupDev), // duplicate
		rb("other", "Role", "viewer", groupDev),
		rb("default", "ClusterRole", "admin", groupDev),
		rb("other", "ClusterRole", "edit", userAlice), // not the request's namespace
		rb("ci", "Role", "pusher", saDeployer),
		rb("default", "Role", "bob", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}),
		nil,
	}
	clusterRoleBindings := []*rbacv1.ClusterRoleBinding{crb("view", groupDev), crb("nobody")}

	gotRoles, gotCluster := RoleRefs(roleBindings, clusterRoleBindings, alice, "default")
	if strings.Join(gotRoles, ",") != "default:editor,other:viewer" || strings.Join(gotCluster, ",") != "admin,view" {
		t.Errorf("alice: roles %v, cluster roles %v", gotRoles, gotCluster)
	}
	gotRoles, gotCluster = RoleRefs(roleBindings, clusterRoleBindings, deployerSA, "ci")
	if strings.Join(gotRoles, ",") != "ci:pusher" || gotCluster != nil {
		t.Errorf("deployer: roles %v, cluster roles %v", gotRoles, gotCluster)
	}

	// The computed roles feed Rule directly.
	rule := parseRule(t, `match: {any: [{roles: ["other:viewer"]}]}`)
	r, c := RoleRefs(roleBindings, clusterRoleBindings, alice, "default")
	if ok, err := Rule(rule, newReq(roles(r...), clusterRoles(c...))); !ok || err != nil {
		t.Errorf("Rule with RoleRefs = %v, %v", ok, err)
	}
}
