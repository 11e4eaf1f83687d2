// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"os"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// testCRDs are the CRDs the golden cases may match (testdata/crds.yaml).
func testCRDs() []apiextensionsv1.CustomResourceDefinition {
	data, err := os.ReadFile("testdata/crds.yaml")
	if err != nil {
		panic(err)
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict([]byte(doc), &crd); err != nil {
			panic(err)
		}
		crds = append(crds, crd)
	}
	return crds
}
