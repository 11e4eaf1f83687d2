// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"reflect"
	"sort"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kyvap/kyvap/kyverno"
)

// builtinTypes maps a built-in resource (group, version, plural) to the Go
// type the API server decodes it into: the objects a
// ValidatingAdmissionPolicy reads of it are that type converted to
// unstructured. Built once.
var builtinTypes = sync.OnceValue(func() map[schema.GroupVersionResource]reflect.Type {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		admissionregistrationv1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme,
		batchv1.AddToScheme, coordinationv1.AddToScheme, corev1.AddToScheme, discoveryv1.AddToScheme,
		networkingv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme, schedulingv1.AddToScheme,
		storagev1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err) // a static registration: cannot fail
		}
	}
	resources, _ := kyverno.NewStaticResolver().Resolve("*")
	out := map[schema.GroupVersionResource]reflect.Type{}
	for _, r := range resources {
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		if t, ok := scheme.AllKnownTypes()[gvk]; ok {
			out[schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}] = t
		}
	}
	return out
})

// objectType is the Go type of the objects a resource rule's resource (or
// subresource) carries in admission, when it is a built-in one known here.
// Of the subresources, only pods/ephemeralcontainers carries its parent
// object (a Pod); the others carry other kinds (Scale, Binding, ...) or
// none, and are not specialized.
func objectType(group, version, resource, subresource string) (reflect.Type, bool) {
	podEphemeral := group == "" && resource == "pods" && subresource == "ephemeralcontainers"
	if subresource != "" && !podEphemeral {
		return nil, false
	}
	t, ok := builtinTypes()[schema.GroupVersionResource{Group: group, Version: version, Resource: resource}]
	return t, ok
}

// BuiltinObject is a built-in resource a VAP matches: the Go type of
// its objects and the facts the API server's validation adds.
type BuiltinObject struct {
	Type  reflect.Type
	Facts []string
}

// ObjectTypes are the built-in resources constraints match (their
// objects' types, and facts), sorted by type; nil where ShapeOf is nil.
// Tests generate objects of these types to compare the specialized forms
// with the general ones.
func ObjectTypes(constraints *admissionregistrationv1.MatchResources) []BuiltinObject {
	if ShapeOf(constraints) == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []BuiltinObject
	for _, rule := range constraints.ResourceRules {
		for _, group := range rule.APIGroups {
			for _, v := range rule.APIVersions {
				for _, res := range rule.Resources {
					name, sub, _ := strings.Cut(res, "/")
					t, ok := objectType(group, v, name, sub)
					if !ok || seen[t.String()+group+name] {
						continue
					}
					seen[t.String()+group+name] = true
					out = append(out, BuiltinObject{Type: t, Facts: AdmittedFacts(group, name)})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type.String() < out[j].Type.String() })
	return out
}
