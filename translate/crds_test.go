package translate

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// testCRDs are the CRDs the golden cases may match: one served in a
// single version, one in two (an ambiguous kind).
func testCRDs() []apiextensionsv1.CustomResourceDefinition {
	crd := func(group, kind, plural string, scope apiextensionsv1.ResourceScope, versions ...string) apiextensionsv1.CustomResourceDefinition {
		c := apiextensionsv1.CustomResourceDefinition{}
		c.Spec.Group, c.Spec.Names.Kind, c.Spec.Names.Plural, c.Spec.Scope = group, kind, plural, scope
		for _, v := range versions {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
				Name: v, Served: true, Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			})
		}
		return c
	}
	return []apiextensionsv1.CustomResourceDefinition{
		crd("example.com", "Widget", "widgets", apiextensionsv1.NamespaceScoped, "v1"),
		crd("example.com", "Gadget", "gadgets", apiextensionsv1.ClusterScoped, "v1", "v2"),
	}
}
