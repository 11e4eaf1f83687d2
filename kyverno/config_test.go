// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// rf is a ResourceFilter written in the order of its fields.
func rf(group, version, kind, subresource, namespace, name string) ResourceFilter {
	return ResourceFilter{
		Group: group, Version: version, Kind: kind, Subresource: subresource,
		Namespace: namespace, Name: name,
	}
}

// filters is the Config of a resourceFilters value alone; it fails the test
// on a problem.
func filters(t *testing.T, resourceFilters string) Config {
	t.Helper()
	c, problems := ParseConfig(map[string]string{keyResourceFilters: resourceFilters})
	if len(problems) > 0 {
		t.Fatalf("ParseConfig(resourceFilters %q) problems: %q", resourceFilters, problems)
	}
	return c
}

// checkProblems reports unless problems are one per wanted substring, in
// order.
func checkProblems(t *testing.T, name string, problems, want []string) {
	t.Helper()
	if len(problems) != len(want) {
		t.Errorf("%s: problems %q, want %d containing %q", name, problems, len(want), want)
		return
	}
	for i, p := range problems {
		if !strings.Contains(p, want[i]) {
			t.Errorf("%s: problem %d %q does not contain %q", name, i, p, want[i])
		}
	}
}

func TestParseConfigResourceFilters(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		want         []ResourceFilter
		wantProblems []string
	}{
		{name: "kind only", in: "[Event,*,*]", want: []ResourceFilter{rf("*", "*", "Event", "", "*", "*")}},
		{name: "every resource and subresource", in: "[*/*,kube-system,*]", want: []ResourceFilter{rf("*", "*", "*", "*", "kube-system", "*")}},
		{name: "any subresource", in: "[Node/?*,*,*]", want: []ResourceFilter{rf("*", "*", "Node", "?*", "*", "*")}},
		{name: "one subresource", in: "[Pod/binding,*,*]", want: []ResourceFilter{rf("*", "*", "Pod", "binding", "*", "*")}},
		{name: "dotted subresource", in: "[Pod.exec,*,*]", want: []ResourceFilter{rf("*", "*", "Pod", "exec", "*", "*")}},
		{name: "group version kind", in: "[apps/v1/Deployment,ns,n]", want: []ResourceFilter{rf("apps", "v1", "Deployment", "", "ns", "n")}},
		{name: "version kind subresource", in: "[v1/Pod/status,a,b]", want: []ResourceFilter{rf("*", "v1", "Pod", "status", "a", "b")}},
		{name: "any kind's subresource", in: "[*/scale,*,*]", want: []ResourceFilter{rf("*", "*", "*", "scale", "*", "*")}},
		{name: "no name", in: "[Pod,default]", want: []ResourceFilter{rf("*", "*", "Pod", "", "default", "")}},
		{name: "no namespace nor name", in: "[Pod]", want: []ResourceFilter{rf("*", "*", "Pod", "", "", "")}},
		{name: "spaces are kept, as Kyverno keeps them", in: "[Pod, default , x]", want: []ResourceFilter{rf("*", "*", "Pod", "", " default ", " x")}},
		{
			name: "separated by spaces and newlines",
			in:   "[Event,*,*] [Node,*,*]\n[Pod,a,b]\n\n  [ReplicaSet/?*,*,*]",
			want: []ResourceFilter{
				rf("*", "*", "Event", "", "*", "*"),
				rf("*", "*", "Node", "", "*", "*"),
				rf("*", "*", "Pod", "", "a", "b"),
				rf("*", "*", "ReplicaSet", "?*", "*", "*"),
			},
		},
		{
			name: "text between entries is ignored",
			in:   "filters: [Event,*,*], then [[Pod,a,b]] and [Node",
			want: []ResourceFilter{rf("*", "*", "Event", "", "*", "*"), rf("*", "*", "Pod", "", "a", "b")},
		},
		{name: "empty", in: "", want: nil},
		{name: "no entry", in: "Event,*,*", want: nil},
		{
			name:         "four parts",
			in:           "[Pod,a,b,c]",
			want:         []ResourceFilter{{}},
			wantProblems: []string{"[Pod,a,b,c]"},
		},
		{name: "empty kind", in: "[,a,b]", want: []ResourceFilter{{}}, wantProblems: []string{"[,a,b]"}},
		{name: "empty entry", in: "[]", want: []ResourceFilter{{}}, wantProblems: []string{"[]"}},
		{
			name:         "kind with five segments",
			in:           "[*/*/*/*/*,a,b]",
			want:         []ResourceFilter{rf("", "", "", "", "a", "b")},
			wantProblems: []string{"invalid kind"},
		},
		{
			name:         "empty kind after the version",
			in:           "[v1/,a,b]",
			want:         []ResourceFilter{rf("*", "v1", "", "", "a", "b")},
			wantProblems: []string{"invalid kind"},
		},
		{
			name: "a bad entry among good ones",
			in:   "[Event,*,*] [,a,b] [Node,*,*]",
			want: []ResourceFilter{
				rf("*", "*", "Event", "", "*", "*"),
				{},
				rf("*", "*", "Node", "", "*", "*"),
			},
			wantProblems: []string{"[,a,b]"},
		},
	}
	for _, tt := range tests {
		c, problems := ParseConfig(map[string]string{keyResourceFilters: tt.in})
		if diff := cmp.Diff(tt.want, c.ResourceFilters); diff != "" {
			t.Errorf("%s: ParseConfig(resourceFilters %q).ResourceFilters (-want +got):\n%s", tt.name, tt.in, diff)
		}
		checkProblems(t, tt.name, problems, tt.wantProblems)
	}
}

// The resourceFilters value as a ConfigMap writes it, folded by YAML.
func TestParseConfigFoldedYAML(t *testing.T) {
	const manifest = `
data:
  resourceFilters: >-
    [Event,*,*]
    [*/*,kube-system,*]
    [Pod,kyverno,kyverno-admission-controller-*]
  excludeGroups: system:nodes
`
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.UnmarshalStrict([]byte(manifest), &cm); err != nil {
		t.Fatal(err)
	}
	c, problems := ParseConfig(cm.Data)
	checkProblems(t, "folded YAML", problems, nil)
	want := Config{
		ResourceFilters: []ResourceFilter{
			rf("*", "*", "Event", "", "*", "*"),
			rf("*", "*", "*", "*", "kube-system", "*"),
			rf("*", "*", "Pod", "", "kyverno", "kyverno-admission-controller-*"),
		},
		Exclude: Subjects{Groups: []string{"system:nodes"}},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("ParseConfig(folded YAML) (-want +got):\n%s", diff)
	}
}

func TestParseConfig(t *testing.T) {
	validMatchConditions := []admissionregistrationv1.MatchCondition{
		{Name: "not-system", Expression: "!request.userInfo.username.startsWith('system:')"},
		{Name: "has-object", Expression: "object != null"},
	}
	tests := []struct {
		name         string
		data         map[string]string
		want         Config
		wantProblems []string
	}{
		{name: "no data", data: nil, want: Config{}},
		{name: "unused keys", data: map[string]string{"defaultRegistry": "docker.io", "webhookAnnotations": "{"}, want: Config{}},
		{
			name: "exclusions and inclusions",
			data: map[string]string{
				keyExcludeGroups:       "system:nodes, !ops ,robot-*,!",
				keyExcludeUsernames:    "!alice,bob, ,",
				keyExcludeRoles:        "ns:admin, ! ns:view",
				keyExcludeClusterRoles: "!view,cluster-admin",
			},
			want: Config{
				Exclude: Subjects{
					Usernames:    []string{"bob"},
					Groups:       []string{"system:nodes", "robot-*"},
					Roles:        []string{"ns:admin"},
					ClusterRoles: []string{"cluster-admin"},
				},
				Include: Subjects{
					Usernames:    []string{"alice"},
					Groups:       []string{"ops"},
					Roles:        []string{"ns:view"},
					ClusterRoles: []string{"view"},
				},
			},
		},
		{
			name: "only inclusions",
			data: map[string]string{keyExcludeUsernames: "!a,!b"},
			want: Config{Include: Subjects{Usernames: []string{"a", "b"}}},
		},
		{
			name: "webhook selectors",
			data: map[string]string{
				keyWebhooks: `{"namespaceSelector":{"matchLabels":{"team":"a"}},"objectSelector":{"matchExpressions":[{"key":"skip","operator":"DoesNotExist"}]}}`,
			},
			want: Config{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
				ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist},
				}},
			},
		},
		{
			name: "webhook namespace selector only",
			data: map[string]string{keyWebhooks: `{"namespaceSelector":{"matchLabels":{"team":"a"}}}`},
			want: Config{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
		},
		{name: "webhooks without selectors", data: map[string]string{keyWebhooks: `{}`}, want: Config{}},
		{
			name:         "invalid webhooks JSON",
			data:         map[string]string{keyWebhooks: `{"namespaceSelector":`},
			want:         Config{},
			wantProblems: []string{keyWebhooks},
		},
		{
			// The namespace selector decodes before the error: Kyverno drops it too.
			name:         "webhooks with a bad object selector",
			data:         map[string]string{keyWebhooks: `{"namespaceSelector":{"matchLabels":{"team":"a"}},"objectSelector":5}`},
			want:         Config{},
			wantProblems: []string{keyWebhooks},
		},
		{
			name:         "empty webhooks",
			data:         map[string]string{keyWebhooks: ""},
			want:         Config{},
			wantProblems: []string{keyWebhooks},
		},
		{
			name: "match conditions",
			data: map[string]string{
				keyMatchConditions: `[{"name":"not-system","expression":"!request.userInfo.username.startsWith('system:')"},{"name":"has-object","expression":"object != null"}]`,
			},
			want: Config{MatchConditions: validMatchConditions},
		},
		{
			name:         "invalid match conditions",
			data:         map[string]string{keyMatchConditions: `{"name":"x"}`},
			want:         Config{},
			wantProblems: []string{keyMatchConditions},
		},
		{
			name: "every problem is reported",
			data: map[string]string{
				keyResourceFilters: "[Pod,a,b,c] [Event,*,*]",
				keyWebhooks:        "nope",
				keyMatchConditions: "nope",
				keyExcludeGroups:   "system:nodes",
			},
			want: Config{
				ResourceFilters: []ResourceFilter{{}, rf("*", "*", "Event", "", "*", "*")},
				Exclude:         Subjects{Groups: []string{"system:nodes"}},
			},
			wantProblems: []string{keyResourceFilters, keyWebhooks, keyMatchConditions},
		},
	}
	for _, tt := range tests {
		c, problems := ParseConfig(tt.data)
		if diff := cmp.Diff(tt.want, c); diff != "" {
			t.Errorf("%s: ParseConfig (-want +got):\n%s", tt.name, diff)
		}
		checkProblems(t, tt.name, problems, tt.wantProblems)
	}
}

func TestIsFiltered(t *testing.T) {
	type request struct {
		group, version, kind, subresource, namespace, name string
	}
	pod := func(subresource, namespace, name string) request {
		return request{"", "v1", "Pod", subresource, namespace, name}
	}
	namespace := func(subresource, name string) request {
		return request{"", "v1", "Namespace", subresource, "", name}
	}
	tests := []struct {
		name    string
		filters string
		req     request
		want    bool
	}{
		{"no filters", "", pod("", "kube-system", "p"), false},

		{"namespace pattern", "[*/*,kube-system,*]", pod("", "kube-system", "p"), true},
		{"namespace pattern, subresource", "[*/*,kube-system,*]", pod("exec", "kube-system", "p"), true},
		{"namespace pattern, other namespace", "[*/*,kube-system,*]", pod("", "default", "p"), false},
		{"Namespace named by the namespace pattern", "[*/*,kube-system,*]", namespace("", "kube-system"), true},
		{"Namespace subresource named by the namespace pattern", "[*/*,kube-system,*]", namespace("finalize", "kube-system"), true},
		{"Namespace of another name", "[*/*,kube-system,*]", namespace("", "default"), false},
		{"Node is not a Namespace", "[*/*,kube-system,*]", request{"", "v1", "Node", "", "", "kube-system"}, false},
		{"Namespace of another group", "[*/*,kube-system,*]", request{"example.com", "v1", "Namespace", "", "", "kube-system"}, false},
		{"Namespace of another version", "[*/*,kube-system,*]", request{"", "v2", "Namespace", "", "", "kube-system"}, false},
		{"Namespace special case ignores the name pattern", "[Namespace,kube-system,other]", namespace("", "kube-system"), true},
		{"Namespace special case needs the kind", "[Namespace,kube-system,*]", namespace("status", "kube-system"), false},
		{"Namespace by its name pattern", "[Namespace,*,kube-*]", namespace("", "kube-public"), true},

		{"empty patterns: pod with namespace and name", "[Pod]", pod("", "default", "p"), false},
		{"empty patterns: all empty", "[Pod]", pod("", "", ""), true},
		{"empty patterns: namespace set", "[Pod]", pod("", "default", ""), false},
		{"empty name pattern: named pod", "[Pod,default]", pod("", "default", "p"), false},
		{"empty name pattern: unnamed pod", "[Pod,default]", pod("", "default", ""), true},
		{"empty subresource pattern: no subresource", "[Pod,*,*]", pod("", "default", "p"), true},
		{"empty subresource pattern: subresource", "[Pod,*,*]", pod("exec", "default", "p"), false},
		{"?* subresource: subresource", "[Pod/?*,*,*]", pod("exec", "default", "p"), true},
		{"?* subresource: no subresource", "[Pod/?*,*,*]", pod("", "default", "p"), false},
		{"one subresource", "[Pod/binding,*,*]", pod("binding", "default", "p"), true},
		{"one subresource: another", "[Pod/binding,*,*]", pod("eviction", "default", "p"), false},
		{"kind is case sensitive", "[pod,*,*]", pod("", "default", "p"), false},
		{"kind of another resource", "[Pod,*,*]", request{"apps", "v1", "Deployment", "", "default", "p"}, false},

		{"name pattern", "[Pod,kyverno,kyverno-admission-controller-*]", pod("", "kyverno", "kyverno-admission-controller-5d7f9-x2x"), true},
		{"name pattern: without the suffix", "[Pod,kyverno,kyverno-admission-controller-*]", pod("", "kyverno", "kyverno-admission-controller"), false},
		{"name pattern: other namespace", "[Pod,kyverno,kyverno-admission-controller-*]", pod("", "default", "kyverno-admission-controller-1"), false},
		{"name pattern: other prefix", "[Pod,kyverno,kyverno-admission-controller-*]", pod("", "kyverno", "kyverno-reports-controller-1"), false},
		{"name pattern ?", "[ConfigMap,*,cm-?]", request{"", "v1", "ConfigMap", "", "a", "cm-1"}, true},
		{"name pattern ?: two characters", "[ConfigMap,*,cm-?]", request{"", "v1", "ConfigMap", "", "a", "cm-12"}, false},

		{"group version kind", "[apps/v1/Deployment,ns,n]", request{"apps", "v1", "Deployment", "", "ns", "n"}, true},
		{"group version kind: other group", "[apps/v1/Deployment,ns,n]", request{"extensions", "v1", "Deployment", "", "ns", "n"}, false},
		{"group version kind: other version", "[apps/v1/Deployment,ns,n]", request{"apps", "v1beta2", "Deployment", "", "ns", "n"}, false},
		{"group version kind: subresource", "[apps/v1/Deployment,ns,n]", request{"apps", "v1", "Deployment", "scale", "ns", "n"}, false},
		{"version kind: core group", "[v1/Pod,*,*]", pod("", "a", "b"), true},
		{"version kind: other version", "[v1/Pod,*,*]", request{"", "v2", "Pod", "", "a", "b"}, false},
		{"any kind's subresource", "[*/scale,*,*]", request{"apps", "v1", "Deployment", "scale", "a", "b"}, true},
		{"any kind's subresource: none", "[*/scale,*,*]", request{"apps", "v1", "Deployment", "", "a", "b"}, false},

		{"filter of an empty kind names nothing", "[,a,b]", pod("", "a", "b"), false},
		{"filter of four parts names nothing", "[Pod,a,b,c]", pod("", "a", "b"), false},
		{"any filter", "[Event,*,*] [Pod,a,*]", pod("", "a", "b"), true},
		{"no filter", "[Event,*,*] [Pod,a,*]", pod("", "b", "b"), false},
	}
	for _, tt := range tests {
		c, _ := ParseConfig(map[string]string{keyResourceFilters: tt.filters})
		r := tt.req
		if got := c.IsFiltered(r.group, r.version, r.kind, r.subresource, r.namespace, r.name); got != tt.want {
			t.Errorf("%s: %q IsFiltered(%q, %q, %q, %q, %q, %q) = %v, want %v",
				tt.name, tt.filters, r.group, r.version, r.kind, r.subresource, r.namespace, r.name, got, tt.want)
		}
	}
}

func TestIsExcluded(t *testing.T) {
	type user struct {
		username                    string
		groups, roles, clusterRoles []string
	}
	tests := []struct {
		name string
		data map[string]string
		user user
		want bool
	}{
		{"zero config", nil, user{"system:node:n1", []string{"system:nodes"}, []string{"kube-system:r"}, []string{"cluster-admin"}}, false},
		{"excluded group", map[string]string{keyExcludeGroups: "system:nodes"}, user{"system:node:n1", []string{"system:authenticated", "system:nodes"}, nil, nil}, true},
		{"other group", map[string]string{keyExcludeGroups: "system:nodes"}, user{"alice", []string{"system:authenticated"}, nil, nil}, false},
		{"no groups", map[string]string{keyExcludeGroups: "system:nodes"}, user{"alice", nil, nil, nil}, false},
		{"inclusion wins", map[string]string{keyExcludeGroups: "system:nodes, !ops"}, user{"n", []string{"system:nodes", "ops"}, nil, nil}, false},
		{"inclusion alone does not exclude", map[string]string{keyExcludeGroups: "system:nodes, !ops"}, user{"n", []string{"ops"}, nil, nil}, false},
		{"exclusion without the inclusion", map[string]string{keyExcludeGroups: "system:nodes, !ops"}, user{"n", []string{"system:nodes", "dev"}, nil, nil}, true},
		{"group pattern", map[string]string{keyExcludeGroups: "robot-*"}, user{"n", []string{"robot-7"}, nil, nil}, true},
		{
			"inclusion of another list wins",
			map[string]string{keyExcludeGroups: "system:nodes", keyExcludeUsernames: "!system:node:special"},
			user{"system:node:special", []string{"system:nodes"}, nil, nil}, false,
		},
		{
			"username pattern",
			map[string]string{keyExcludeUsernames: "system:serviceaccount:kube-system:*"},
			user{"system:serviceaccount:kube-system:replicaset-controller", nil, nil, nil}, true,
		},
		{
			"username pattern: other namespace",
			map[string]string{keyExcludeUsernames: "system:serviceaccount:kube-system:*"},
			user{"system:serviceaccount:default:sa", nil, nil, nil}, false,
		},
		{
			"username pattern with an included username",
			map[string]string{keyExcludeUsernames: "system:serviceaccount:kube-system:*,!system:serviceaccount:kube-system:job-?"},
			user{"system:serviceaccount:kube-system:job-1", nil, nil, nil}, false,
		},
		{"username ?", map[string]string{keyExcludeUsernames: "user-?"}, user{"user-12", nil, nil, nil}, false},
		{"username is case sensitive", map[string]string{keyExcludeUsernames: "Alice"}, user{"alice", nil, nil, nil}, false},
		{"empty username by *", map[string]string{keyExcludeUsernames: "*"}, user{"", nil, nil, nil}, true},
		{"role", map[string]string{keyExcludeRoles: "kyverno:admin-*"}, user{"u", nil, []string{"default:view", "kyverno:admin-1"}, nil}, true},
		{"role in another namespace", map[string]string{keyExcludeRoles: "kyverno:admin-*"}, user{"u", nil, []string{"default:admin-1"}, nil}, false},
		{"role is not a cluster role", map[string]string{keyExcludeRoles: "admin"}, user{"u", nil, nil, []string{"admin"}}, false},
		{"cluster role", map[string]string{keyExcludeClusterRoles: "cluster-admin"}, user{"u", nil, nil, []string{"view", "cluster-admin"}}, true},
		{"cluster role is not a role", map[string]string{keyExcludeClusterRoles: "*:admin"}, user{"u", nil, []string{"ns:admin"}, nil}, false},
		{"cluster role pattern", map[string]string{keyExcludeClusterRoles: "system:*"}, user{"u", nil, nil, []string{"system:controller:foo"}}, true},
		{
			"included cluster role wins over an excluded group",
			map[string]string{keyExcludeGroups: "system:authenticated", keyExcludeClusterRoles: "!cluster-admin"},
			user{"u", []string{"system:authenticated"}, nil, []string{"cluster-admin"}}, false,
		},
		{
			"included role wins over an excluded username",
			map[string]string{keyExcludeUsernames: "u", keyExcludeRoles: "!ns:*"},
			user{"u", nil, []string{"ns:r"}, nil}, false,
		},
	}
	for _, tt := range tests {
		c, problems := ParseConfig(tt.data)
		checkProblems(t, tt.name, problems, nil)
		u := tt.user
		if got := c.IsExcluded(u.username, u.groups, u.roles, u.clusterRoles); got != tt.want {
			t.Errorf("%s: IsExcluded(%q, %q, %q, %q) = %v, want %v", tt.name, u.username, u.groups, u.roles, u.clusterRoles, got, tt.want)
		}
	}
}

func TestNeedsRoles(t *testing.T) {
	tests := []struct {
		name string
		data map[string]string
		want bool
	}{
		{"zero config", nil, false},
		{"users and groups", map[string]string{keyExcludeGroups: "system:nodes,!ops", keyExcludeUsernames: "a,!b"}, false},
		{"empty role lists", map[string]string{keyExcludeRoles: " , ", keyExcludeClusterRoles: "!"}, false},
		{"excluded role", map[string]string{keyExcludeRoles: "ns:r"}, true},
		{"included role", map[string]string{keyExcludeRoles: "!ns:r"}, true},
		{"excluded cluster role", map[string]string{keyExcludeClusterRoles: "cluster-admin"}, true},
		{"included cluster role", map[string]string{keyExcludeClusterRoles: "!cluster-admin"}, true},
		{"chart defaults", ChartDefaultsConfigMap().Data, false},
	}
	for _, tt := range tests {
		c, _ := ParseConfig(tt.data)
		if got := c.NeedsRoles(); got != tt.want {
			t.Errorf("%s: NeedsRoles() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestChartDefaults(t *testing.T) {
	cm := ChartDefaultsConfigMap()
	if cm.Name != "kyverno" || cm.Namespace != "kyverno" {
		t.Errorf("ChartDefaultsConfigMap() is %s/%s, want kyverno/kyverno", cm.Namespace, cm.Name)
	}
	c, problems := ParseConfig(cm.Data)
	checkProblems(t, "chart defaults", problems, nil)
	if !c.Equal(ChartDefaults()) {
		t.Errorf("ChartDefaults() differs from ParseConfig(ChartDefaultsConfigMap().Data)")
	}

	if got, want := len(c.ResourceFilters), 104; got != want {
		t.Errorf("ChartDefaults() has %d resource filters, want %d", got, want)
	}
	if diff := cmp.Diff(rf("*", "*", "*", "*", "kyverno", "*"), c.ResourceFilters[0]); diff != "" {
		t.Errorf("ChartDefaults() first resource filter (-want +got):\n%s", diff)
	}
	var got []string
	for _, f := range c.ResourceFilters {
		got = append(got, f.String())
	}
	for _, want := range []string{
		"[*/*,kyverno,*]",
		"[Event,*,*]",
		"[*/*,kube-system,*]",
		"[*/*,kube-public,*]",
		"[*/*,kube-node-lease,*]",
		"[Node/?*,*,*]",
		"[Pod/binding,*,*]",
		"[ReplicaSet/?*,*,*]",
		"[ClusterRole,*,kyverno:admission-controller:core]",
		"[Pod/?*,kyverno,kyverno-admission-controller-*]",
		"[Secret,kyverno,kyverno-svc.kyverno.svc.*]",
		"[Secret,kyverno,kyverno-cleanup-controller.kyverno.svc.*]",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("ChartDefaults() has no resource filter %s", want)
		}
	}

	wantExclude := Subjects{Groups: []string{"system:nodes"}}
	if diff := cmp.Diff(wantExclude, c.Exclude); diff != "" {
		t.Errorf("ChartDefaults().Exclude (-want +got):\n%s", diff)
	}
	if !c.Include.IsEmpty() {
		t.Errorf("ChartDefaults().Include = %+v, want none", c.Include)
	}
	wantSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}},
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kyverno"}},
	}}
	if diff := cmp.Diff(wantSelector, c.NamespaceSelector); diff != "" {
		t.Errorf("ChartDefaults().NamespaceSelector (-want +got):\n%s", diff)
	}
	if c.ObjectSelector != nil {
		t.Errorf("ChartDefaults().ObjectSelector = %v, want nil", c.ObjectSelector)
	}
	if c.MatchConditions != nil {
		t.Errorf("ChartDefaults().MatchConditions = %v, want nil", c.MatchConditions)
	}

	// A few requests decided by the defaults.
	for _, tt := range []struct {
		group, version, kind, subresource, namespace, name string
		want                                               bool
	}{
		{"", "v1", "Pod", "binding", "default", "p", true},
		{"", "v1", "Pod", "", "default", "p", false},
		{"", "v1", "Pod", "exec", "default", "p", false},
		{"", "v1", "Pod", "", "kyverno", "anything", true},
		{"", "v1", "Pod", "", "kube-system", "p", true},
		{"", "v1", "Namespace", "", "", "kube-node-lease", true},
		{"", "v1", "Namespace", "", "", "kyverno", true},
		{"", "v1", "Namespace", "", "", "default", false},
		{"apps", "v1", "ReplicaSet", "", "default", "rs", true},
		{"apps", "v1", "ReplicaSet", "scale", "default", "rs", true},
		{"apps", "v1", "Deployment", "", "default", "d", false},
		{"", "v1", "Node", "status", "", "n1", true},
		{"", "v1", "Event", "", "default", "e", true},
		{"rbac.authorization.k8s.io", "v1", "ClusterRole", "", "", "kyverno:admission-controller", true},
		{"rbac.authorization.k8s.io", "v1", "ClusterRole", "", "", "admin", false},
		{"", "v1", "Secret", "", "default", "kyverno-svc.kyverno.svc.kyverno-tls-pair", false},
	} {
		if got := c.IsFiltered(tt.group, tt.version, tt.kind, tt.subresource, tt.namespace, tt.name); got != tt.want {
			t.Errorf("ChartDefaults().IsFiltered(%q, %q, %q, %q, %q, %q) = %v, want %v",
				tt.group, tt.version, tt.kind, tt.subresource, tt.namespace, tt.name, got, tt.want)
		}
	}
	if !c.IsExcluded("system:node:n1", []string{"system:nodes", "system:authenticated"}, nil, nil) {
		t.Errorf("ChartDefaults() does not exclude a node")
	}
	if c.IsExcluded("alice", []string{"system:authenticated"}, nil, nil) {
		t.Errorf("ChartDefaults() excludes a user")
	}
}

func TestResourceFilterString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"[Event,*,*]", "[Event,*,*]"},
		{"[*/*,kube-system,*]", "[*/*,kube-system,*]"},
		{"[*,kube-system,*]", "[*,kube-system,*]"},
		{"[Node/?*,*,*]", "[Node/?*,*,*]"},
		{"[Pod/binding,*,*]", "[Pod/binding,*,*]"},
		{"[Pod.exec,*,*]", "[Pod/exec,*,*]"},
		{"[*/scale,*,*]", "[*/scale,*,*]"},
		{"[v1/Pod,a,b]", "[v1/Pod,a,b]"},
		{"[v1/Pod/status,a,b]", "[v1/Pod/status,a,b]"},
		{"[apps/v1/Deployment,ns,n]", "[apps/v1/Deployment,ns,n]"},
		{"[apps/v1/Deployment/scale,ns,n]", "[apps/v1/Deployment/scale,ns,n]"},
		{"[Pod,default]", "[Pod,default,]"},
		{"[Pod]", "[Pod,,]"},
		{"[Secret,kyverno,kyverno-svc.kyverno.svc.*]", "[Secret,kyverno,kyverno-svc.kyverno.svc.*]"},
	}
	for _, tt := range tests {
		c := filters(t, tt.in)
		if len(c.ResourceFilters) != 1 {
			t.Fatalf("%s: %d filters, want 1", tt.in, len(c.ResourceFilters))
		}
		f := c.ResourceFilters[0]
		got := f.String()
		if got != tt.want {
			t.Errorf("%s: String() = %s, want %s", tt.in, got, tt.want)
		}
		again := filters(t, got)
		if diff := cmp.Diff([]ResourceFilter{f}, again.ResourceFilters); diff != "" {
			t.Errorf("%s: ParseConfig(String()) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestConfigEqual(t *testing.T) {
	parse := func(data map[string]string) Config {
		c, _ := ParseConfig(data)
		return c
	}
	base := map[string]string{
		keyResourceFilters: "[Event,*,*] [Pod,a,b]",
		keyExcludeGroups:   "system:nodes,!ops",
		keyWebhooks:        `{"namespaceSelector":{"matchLabels":{"a":"b"}}}`,
		keyMatchConditions: `[{"name":"n","expression":"true"}]`,
	}
	with := func(key, value string) map[string]string {
		m := make(map[string]string, len(base))
		for k, v := range base {
			m[k] = v
		}
		m[key] = value
		return m
	}
	tests := []struct {
		name string
		a, b Config
		want bool
	}{
		{"zero", Config{}, Config{}, true},
		{"zero and empty data", Config{}, parse(nil), true},
		{"same data", parse(base), parse(base), true},
		{"same filters, other spacing", parse(base), parse(with(keyResourceFilters, "\n[Event,*,*]\n  [Pod,a,b]\n")), true},
		{"chart defaults", ChartDefaults(), ChartDefaults(), true},
		{"zero and chart defaults", Config{}, ChartDefaults(), false},
		{"other filter order", parse(base), parse(with(keyResourceFilters, "[Pod,a,b] [Event,*,*]")), false},
		{"other filter name", parse(base), parse(with(keyResourceFilters, "[Event,*,*] [Pod,a,c]")), false},
		{"inclusion is not exclusion", parse(base), parse(with(keyExcludeGroups, "system:nodes,ops")), false},
		{"groups are not usernames", parse(map[string]string{keyExcludeGroups: "x"}), parse(map[string]string{keyExcludeUsernames: "x"}), false},
		{"other namespace selector", parse(base), parse(with(keyWebhooks, `{"namespaceSelector":{"matchLabels":{"a":"c"}}}`)), false},
		{"object selector", parse(base), parse(with(keyWebhooks, `{"objectSelector":{"matchLabels":{"a":"b"}}}`)), false},
		{"other match condition", parse(base), parse(with(keyMatchConditions, `[{"name":"n","expression":"false"}]`)), false},
	}
	for _, tt := range tests {
		if got := tt.a.Equal(tt.b); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
		if got := tt.b.Equal(tt.a); got != tt.want {
			t.Errorf("%s: Equal (swapped) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestConfigSummary(t *testing.T) {
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("user-%d", i))
	}
	manyConfig, _ := ParseConfig(map[string]string{keyExcludeUsernames: strings.Join(many, ",")})
	tests := []struct {
		name string
		c    Config
		want string
	}{
		{"zero", Config{}, "0 resource filters"},
		{
			"chart defaults", ChartDefaults(),
			"104 resource filters, excluded groups system:nodes, a webhook namespace selector",
		},
		{"many usernames", manyConfig, "0 resource filters, excluded usernames user-0,user-1,user-2,user-3,user-4,95 more"},
		{
			"six groups", Config{Exclude: Subjects{Groups: []string{"a", "b", "c", "d", "e", "f"}}},
			"0 resource filters, excluded groups a,b,c,d,e,1 more",
		},
		{
			"five groups", Config{Exclude: Subjects{Groups: []string{"a", "b", "c", "d", "e"}}},
			"0 resource filters, excluded groups a,b,c,d,e",
		},
		{
			"everything",
			Config{
				ResourceFilters:   []ResourceFilter{rf("*", "*", "Event", "", "*", "*")},
				Exclude:           Subjects{Usernames: []string{"u"}, Roles: []string{"ns:r"}},
				Include:           Subjects{Groups: []string{"g"}, ClusterRoles: []string{"c"}},
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				MatchConditions:   []admissionregistrationv1.MatchCondition{{Name: "a"}, {Name: "b"}},
			},
			"1 resource filters, excluded usernames u; roles ns:r, included groups g; clusterRoles c, " +
				"a webhook namespace selector, a webhook object selector, 2 match conditions",
		},
	}
	for _, tt := range tests {
		before := slices.Clone(tt.c.Exclude.Usernames)
		if got := tt.c.Summary(); got != tt.want {
			t.Errorf("%s: Summary() = %q, want %q", tt.name, got, tt.want)
		}
		if diff := cmp.Diff(before, tt.c.Exclude.Usernames); diff != "" {
			t.Errorf("%s: Summary() changed the usernames (-want +got):\n%s", tt.name, diff)
		}
	}
	if got := manyConfig.Summary(); len(got) > 200 {
		t.Errorf("Summary() of 100 usernames is %d bytes long: %q", len(got), got)
	}
}
