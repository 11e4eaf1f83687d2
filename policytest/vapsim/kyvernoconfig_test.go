// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package vapsim

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/translate"
)

// TestKyvernoConfigConditions checks that the VAPs kyvap generates under a
// Kyverno configuration skip exactly the requests kyverno's model
// of Kyverno's configuration (IsExcluded, IsFiltered, the webhook namespace
// selector) says Kyverno skips, over the product of resources, namespaces,
// names, users and operations. test/kyverno compares that model with the
// real Kyverno admission controller.
func TestKyvernoConfigConditions(t *testing.T) {
	chart := kyverno.ChartDefaultsConfigMap().Data
	chart["resourceFilters"] += " [Pod,default,skip-*] [ConfigMap,*,cm-?] [v1/Secret,team-*,*] [apps/v1/Deployment/scale,*,*] [Namespace,team-?,*]"
	// A blanket filter of a namespace pattern, and filters it subsumes
	// (left out of the condition: the blanket names what they name).
	chart["resourceFilters"] += " [*/*,team-b?,*] [Pod,team-bb,p] [ClusterRole,team-bb,*] [Namespace/?*,team-bb,*]"
	chart["excludeGroups"] = "system:nodes,!ops"
	chart["excludeUsernames"] = "robot-*"
	// Single entries: each condition is then one comparison.
	single := map[string]string{"resourceFilters": "[*/scale,*,*]", "excludeUsernames": "alice"}
	for name, data := range map[string]map[string]string{"chart defaults and more": chart, "single entries": single} {
		t.Run(name, func(t *testing.T) { checkKyvernoConfigConditions(t, data, everything) })
	}
	// A policy of namespaced kinds confined to named namespaces: only the
	// filters that can name a request in them are kept, and the others'
	// requests never reach the VAP.
	t.Run("confined to namespaces", func(t *testing.T) {
		vaps := checkKyvernoConfigConditions(t, chart, confinedMatch)
		condition := ""
		for _, v := range vaps {
			for _, mc := range v.Spec.MatchConditions {
				if mc.Name == kyverno.ConditionResourceFilters {
					condition += mc.Expression + "\n"
				}
			}
		}
		for _, kept := range []string{`"kyverno"`, `"default"`} {
			if !strings.Contains(condition, kept) {
				t.Errorf("the resource filters' condition lost the filters of %s: %s", kept, condition)
			}
		}
		for _, dropped := range []string{`"kube-system"`, `"kube-public"`, "team-"} {
			if strings.Contains(condition, dropped) {
				t.Errorf("the resource filters' condition keeps filters of %s, where the VAP's requests cannot be: %s", dropped, condition)
			}
		}
	})
}

// policyMatch is the match of the policy TestKyvernoConfigConditions
// translates: its YAML, and whether it matches a request.
type policyMatch struct {
	yaml    string
	matches func(r configResource, ns string) bool
}

var (
	// everything matches every resource and subresource.
	everything = policyMatch{
		yaml:    `{any: [{resources: {kinds: ["*/*"], operations: [CREATE, UPDATE, DELETE, CONNECT]}}]}`,
		matches: func(configResource, string) bool { return true },
	}
	// confinedMatch matches namespaced kinds (not pods/binding) in two
	// named namespaces.
	confinedMatch = policyMatch{
		yaml: `{any: [{resources: {kinds: [Pod, Pod/exec, ConfigMap, Secret, Deployment, Deployment/scale, ReplicaSet, Event], namespaces: [kyverno, default], operations: [CREATE, UPDATE, DELETE, CONNECT]}}]}`,
		matches: func(r configResource, ns string) bool {
			return !r.cluster && r.sub != "binding" && (ns == "kyverno" || ns == "default")
		},
	}
)

func checkKyvernoConfigConditions(t *testing.T, data map[string]string, match policyMatch) []admissionregistrationv1.ValidatingAdmissionPolicy {
	cfg, problems := kyverno.ParseConfig(data)
	if len(problems) > 0 {
		t.Fatalf("problems: %q", problems)
	}
	selector := labels.Everything()
	if cfg.NamespaceSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(cfg.NamespaceSelector); err != nil {
			t.Fatal(err)
		}
	}

	gv := func(g, v, k string) metav1.GroupVersionKind {
		return metav1.GroupVersionKind{Group: g, Version: v, Kind: k}
	}
	gr := func(g, v, r string) metav1.GroupVersionResource {
		return metav1.GroupVersionResource{Group: g, Version: v, Resource: r}
	}
	crud := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}
	resources := []configResource{
		{gvr: gr("", "v1", "pods"), kind: gv("", "v1", "Pod"), topKind: gv("", "v1", "Pod"), ops: crud},
		{gvr: gr("", "v1", "pods"), sub: "exec", kind: gv("", "v1", "PodExecOptions"), topKind: gv("", "v1", "Pod"), ops: []admissionv1.Operation{admissionv1.Connect}},
		{gvr: gr("", "v1", "pods"), sub: "binding", kind: gv("", "v1", "Binding"), topKind: gv("", "v1", "Pod"), ops: []admissionv1.Operation{admissionv1.Create}},
		{gvr: gr("", "v1", "configmaps"), kind: gv("", "v1", "ConfigMap"), topKind: gv("", "v1", "ConfigMap"), ops: crud},
		{gvr: gr("", "v1", "secrets"), kind: gv("", "v1", "Secret"), topKind: gv("", "v1", "Secret"), ops: crud},
		{gvr: gr("apps", "v1", "deployments"), kind: gv("apps", "v1", "Deployment"), topKind: gv("apps", "v1", "Deployment"), ops: crud},
		{gvr: gr("apps", "v1", "deployments"), sub: "scale", kind: gv("autoscaling", "v1", "Scale"), topKind: gv("apps", "v1", "Deployment"), ops: []admissionv1.Operation{admissionv1.Update}},
		{gvr: gr("apps", "v1", "replicasets"), kind: gv("apps", "v1", "ReplicaSet"), topKind: gv("apps", "v1", "ReplicaSet"), ops: []admissionv1.Operation{admissionv1.Create}},
		{gvr: gr("", "v1", "events"), kind: gv("", "v1", "Event"), topKind: gv("", "v1", "Event"), ops: []admissionv1.Operation{admissionv1.Create}},
		{gvr: gr("", "v1", "namespaces"), kind: gv("", "v1", "Namespace"), topKind: gv("", "v1", "Namespace"), ops: crud, cluster: true},
		{gvr: gr("", "v1", "nodes"), kind: gv("", "v1", "Node"), topKind: gv("", "v1", "Node"), ops: crud, cluster: true},
		{gvr: gr("", "v1", "nodes"), sub: "status", kind: gv("", "v1", "Node"), topKind: gv("", "v1", "Node"), ops: []admissionv1.Operation{admissionv1.Update}, cluster: true},
		{gvr: gr("rbac.authorization.k8s.io", "v1", "clusterroles"), kind: gv("rbac.authorization.k8s.io", "v1", "ClusterRole"), topKind: gv("rbac.authorization.k8s.io", "v1", "ClusterRole"), ops: crud, cluster: true},
	}
	namespaces := []string{"default", "kube-system", "kyverno", "team-a", "team-bb"}
	names := []string{"p", "skip-1", "cm-1", "cm-12", "kyverno-admission-controller-x", "kyverno:admission-controller", "kube-public", "team-a", "team-bb"}
	users := []authenticationv1.UserInfo{
		{Username: "alice", Groups: []string{"dev"}},
		{Username: "robot-7"},
		{Username: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}},
		{Username: "carol", Groups: []string{"system:nodes", "ops"}},
	}
	var knownNamespaces []corev1.Namespace
	for _, ns := range append(namespaces, names...) {
		knownNamespaces = append(knownNamespaces, namespace(ns, map[string]string{"kubernetes.io/metadata.name": ns}))
	}

	vaps, bindings := translatedDenyAll(t, cfg, match.yaml)
	sim := New(vaps, bindings)
	checked, skipped := 0, 0
	for _, r := range resources {
		for _, ns := range namespaces {
			if r.cluster {
				ns = ""
			}
			for _, name := range names {
				for _, user := range users {
					for _, op := range r.ops {
						req := configRequest(r.gvr, r.sub, r.kind, ns, name, op, user)
						evaluated := match.matches(r, ns) && !cfg.IsExcluded(user.Username, user.Groups, nil, nil) &&
							!cfg.IsFiltered(r.topKind.Group, r.topKind.Version, r.topKind.Kind, r.sub, ns, name) &&
							selectorSelects(selector, r, ns, name)
						resp, err := sim.Evaluate(context.Background(), Request{Admission: req, Namespaces: knownNamespaces})
						if err != nil {
							t.Fatal(err)
						}
						if resp.Allowed == evaluated {
							t.Errorf("%s %s/%s %s/%s by %s %v: VAP allowed=%v, Kyverno evaluates=%v",
								op, r.gvr.Resource, r.sub, ns, name, user.Username, user.Groups, resp.Allowed, evaluated)
						}
						if evaluated {
							checked++
						} else {
							skipped++
						}
					}
				}
			}
			if r.cluster {
				break
			}
		}
	}
	t.Logf("%d requests evaluated, %d skipped by the configuration", checked, skipped)
	if checked == 0 || skipped == 0 {
		t.Fatal("the product exercises only one side")
	}
	return vaps
}

// configResource is a resource the configuration test sends requests for.
type configResource struct {
	gvr     metav1.GroupVersionResource
	sub     string
	kind    metav1.GroupVersionKind // request.kind
	topKind metav1.GroupVersionKind // Kyverno's withTopLevelGVK
	ops     []admissionv1.Operation
	cluster bool
}

// selectorSelects is Kyverno's webhook namespaceSelector: namespaced
// requests by their namespace's labels, a Namespace by its own, other
// cluster-scoped requests always.
func selectorSelects(selector labels.Selector, r configResource, ns, name string) bool {
	switch {
	case r.gvr.Group == "" && r.gvr.Resource == "namespaces":
		return selector.Matches(labels.Set{"kubernetes.io/metadata.name": name})
	case r.cluster:
		return true
	}
	return selector.Matches(labels.Set{"kubernetes.io/metadata.name": ns})
}

// translatedDenyAll translates a policy that denies every request it
// matches (match, as YAML) under the configuration.
func translatedDenyAll(t *testing.T, cfg kyverno.Config, match string) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	const policyYAML = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: deny-all}
spec:
  validationFailureAction: Enforce
  rules:
  - name: everything
    match: MATCH
    validate: {cel: {expressions: [{expression: "false", message: denied}]}}
`
	var policy kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(strings.Replace(policyYAML, "MATCH", match, 1)), &policy); err != nil {
		t.Fatal(err)
	}
	plan, err := translate.Translate(clusterpolicy.Input{Policy: &policy}, kyverno.NewStaticResolver(), translate.Options{GenerateValidatingAdmissionPolicy: true, KyvernoConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ValidatingAdmissionPolicies) == 0 {
		t.Fatalf("plan: %+v", plan.Rules)
	}
	return plan.ValidatingAdmissionPolicies, plan.Bindings
}

func configRequest(gvr metav1.GroupVersionResource, sub string, kind metav1.GroupVersionKind, ns, name string, op admissionv1.Operation, user authenticationv1.UserInfo) *admissionv1.AdmissionRequest {
	apiVersion := kind.Version
	if kind.Group != "" {
		apiVersion = kind.Group + "/" + kind.Version
	}
	o := object(apiVersion, kind.Kind, ns, name, nil, nil)
	var newObj, oldObj obj
	switch op {
	case admissionv1.Create, admissionv1.Connect:
		newObj = o
	case admissionv1.Update:
		newObj, oldObj = o, o
	case admissionv1.Delete:
		oldObj = o
	}
	if op == admissionv1.Connect {
		// CONNECT options carry no metadata.
		newObj = obj{"apiVersion": apiVersion, "kind": kind.Kind}
	}
	req := request(op, gvr, kind, ns, name, newObj, oldObj)
	req.SubResource = sub
	req.UserInfo = user
	return req
}
