// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package migrate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/policytest"
)

// Offline there is no discovery: the kinds a policy names are resolved
// from what the user can supply, in this order, and each resolution that
// is not of a built-in kind says where it came from:
//
//   - the built-in table of Kubernetes' own kinds;
//   - the CRDs among a test's files, then those of --crd;
//   - a live cluster's discovery (--cluster);
//   - a test's own resources, which carry apiVersion and kind: the plural
//     is guessed as Kubernetes guesses a resource from a kind
//     (meta.UnsafeGuessKindToResource), and the scope from the resource
//     (namespaced when it has a namespace, as Kyverno's CLI gives one to
//     every kind it does not know).
//
// A kind none of them knows is refused (KindUnresolved).

// Names of the kind sources, as the notes say them.
const (
	sourceBuiltin   = "the built-in table"
	sourceTestCRDs  = "the test's CRDs"
	sourceCRDs      = "CRD manifests (--crd)"
	sourceCluster   = "the cluster's discovery"
	sourceResources = "the test's resources"
)

// kindSource is one place kinds are resolved from.
type kindSource struct {
	name     string
	resolver kyverno.KindResolver
}

// sourcedResolver resolves a kind with every source, in order, and keeps
// each served kind (group, version, kind, subresource) from the first
// source that has it. It records which
// sources other than the built-in table contributed to each kind.
type sourcedResolver struct {
	sources []kindSource
	// used maps a kind spelling to the served resources it resolved to
	// from sources other than the built-in table, by source.
	used map[string]map[string][]kyverno.Resource
}

func newSourcedResolver(sources ...kindSource) *sourcedResolver {
	return &sourcedResolver{sources: sources, used: map[string]map[string][]kyverno.Resource{}}
}

// Resolve implements kyverno.KindResolver.
func (r *sourcedResolver) Resolve(kind string) ([]kyverno.Resource, error) {
	seen := map[[4]string]bool{}
	var out []kyverno.Resource
	for i, src := range r.sources {
		rs, err := src.resolver.Resolve(kind)
		if err != nil {
			return nil, err
		}
		for _, res := range rs {
			// One served resource per group, version and kind: the first
			// source that knows it names its plural.
			key := [4]string{res.Group, res.Version, res.Kind, res.Subresource}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, res)
			if i > 0 {
				if r.used[kind] == nil {
					r.used[kind] = map[string][]kyverno.Resource{}
				}
				r.used[kind][src.name] = append(r.used[kind][src.name], res)
			}
		}
	}
	return out, nil
}

// notes say where each kind that is not a built-in one was resolved from.
func (r *sourcedResolver) notes() []string {
	kinds := make([]string, 0, len(r.used))
	for k := range r.used {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var out []string
	for _, kind := range kinds {
		for _, src := range r.sources {
			rs := r.used[kind][src.name]
			if len(rs) == 0 {
				continue
			}
			var served []string
			for _, res := range rs {
				gv := schema.GroupVersion{Group: res.Group, Version: res.Version}.String()
				served = append(served, gv+" "+res.Resource)
			}
			note := fmt.Sprintf("kind %q resolved from %s: %s", kind, src.name, strings.Join(dedupe(served), ", "))
			if src.name == sourceResources {
				note += " (plural guessed from the kind as Kubernetes guesses it, scope from the resources: check them against the CRD, or pass it with --crd)"
			}
			out = append(out, note)
		}
	}
	return out
}

func dedupe(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// resourcesSource resolves the kinds of a test's resources that no other
// source knows: their apiVersion and kind, the plural guessed.
func resourcesSource(s *policytest.Suite, known kyverno.KindResolver) kindSource {
	var table []kyverno.Resource
	seen := map[schema.GroupVersionKind]bool{}
	for i := range s.Resources {
		obj := &s.Resources[i].Object
		gvk := obj.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" || seen[gvk] || s.Unserved(&s.Resources[i]) != "" {
			continue // a version of a built-in group that is not served is no custom kind
		}
		seen[gvk] = true
		spelling := gvk.Version + "/" + gvk.Kind
		if gvk.Group != "" {
			spelling = gvk.Group + "/" + spelling
		}
		if rs, err := known.Resolve(spelling); err == nil && len(rs) > 0 {
			continue
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		table = append(table, kyverno.Resource{Group: gvk.Group, Version: gvk.Version, Resource: plural.Resource, Kind: gvk.Kind, Namespaced: obj.GetNamespace() != ""})
	}
	return kindSource{name: sourceResources, resolver: kyverno.NewResolver(table)}
}

// crdSource resolves the kinds of CRD manifests (the built-in table, in
// the resolver too, comes first).
func crdSource(name string, crds []apiextensionsv1.CustomResourceDefinition) kindSource {
	return kindSource{name: name, resolver: kyverno.NewStaticResolver(crds...)}
}

// carriedCRDs are CRD manifests for the resources resolved from --crd or
// from the cluster: a converted test carries them (clusterResources), so
// that Kyverno's CLI and kyvap test map its resources to the plurals the
// converted policies match. Kinds from the test's own CRDs or resources
// need none: the test's files are copied.
func (r *sourcedResolver) carriedCRDs() []apiextensionsv1.CustomResourceDefinition {
	type key struct{ group, plural string }
	byKey := map[key]*apiextensionsv1.CustomResourceDefinition{}
	var keys []key
	for _, bySource := range r.used {
		for _, src := range []string{sourceCRDs, sourceCluster} {
			for _, res := range bySource[src] {
				if res.Subresource != "" || res.Group == "" {
					continue
				}
				k := key{res.Group, res.Resource}
				crd, ok := byKey[k]
				if !ok {
					scope := apiextensionsv1.ClusterScoped
					if res.Namespaced {
						scope = apiextensionsv1.NamespaceScoped
					}
					crd = &apiextensionsv1.CustomResourceDefinition{
						TypeMeta:   metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
						ObjectMeta: metav1.ObjectMeta{Name: res.Resource + "." + res.Group},
						Spec: apiextensionsv1.CustomResourceDefinitionSpec{
							Group: res.Group,
							Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: res.Kind, Plural: res.Resource, ListKind: res.Kind + "List", Singular: strings.ToLower(res.Kind)},
							Scope: scope,
						},
					}
					byKey[k] = crd
					keys = append(keys, k)
				}
				if !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == res.Version }) {
					crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
						Name: res.Version, Served: true,
						Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}},
					})
				}
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].group+"/"+keys[i].plural < keys[j].group+"/"+keys[j].plural })
	out := make([]apiextensionsv1.CustomResourceDefinition, 0, len(keys))
	for _, k := range keys {
		crd := byKey[k]
		sort.Slice(crd.Spec.Versions, func(i, j int) bool { return crd.Spec.Versions[i].Name < crd.Spec.Versions[j].Name })
		crd.Spec.Versions[0].Storage = true
		out = append(out, *crd)
	}
	return out
}
