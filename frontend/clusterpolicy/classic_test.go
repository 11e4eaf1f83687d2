// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// TestClassicCompiledSizeRefused: a pattern whose compiled CEL is longer
// than the API server parses (80 duration comparisons, each with Go's
// duration grammar) is refused, named, not reported Invalid: Kyverno
// evaluates it. One comparison compiles.
func TestClassicCompiledSizeRefused(t *testing.T) {
	rule := func(n int) *kyvernov1.Rule {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf(`"k%d": ">%ds"`, i, i)
		}
		return &kyvernov1.Rule{
			Name:           "many",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}}}}},
			Validation:     &kyvernov1.Validation{RawPattern: &apiextensionsv1.JSON{Raw: []byte(`{"data": {` + strings.Join(keys, ", ") + `}}`)}},
		}
	}
	if _, _, fl := classicAsCEL(rule(1), kyvernov1.Audit, kyverno.NewStaticResolver(), podSecurityExceptions{}); fl != nil {
		t.Fatalf("one comparison: %v", fl)
	}
	_, _, fl := classicAsCEL(rule(80), kyvernov1.Audit, kyverno.NewStaticResolver(), podSecurityExceptions{})
	if fl == nil || fl.Reason != model.ReasonPatternNotExpressible || !strings.Contains(fl.Message, "more than the 100000 the API server parses") {
		t.Fatalf("80 comparisons: %+v, want a PatternNotExpressible refusal naming the size", fl)
	}
}
