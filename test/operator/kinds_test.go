// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/internal/discovery"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/migrate"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// gizmoCRD is a namespaced custom kind no policy can resolve before it is
// installed.
func gizmoCRD(group string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// TestCRDInstalledLaterReachesEveryComponent: the operator's single CRD
// watch refreshes discovery and fans out. A policy on a kind that is not
// served yet goes to the webhook as KindUnresolved; once the CRD is
// established, the policy controller re-translates it into a VAP, and the
// webhook configuration (for the policy whose generation is opted out)
// registers the new resource.
func TestCRDInstalledLaterReachesEveryComponent(t *testing.T) {
	const group = "kinds.kyvap.test"
	cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	vapPolicy := controlplane.ClusterPolicy("gizmo-vap", kyvernov1.Enforce, controlplane.CELRule("gizmo-size", "Gizmo", "true", "gizmos are fine"))
	webhookPolicy := controlplane.ClusterPolicy("gizmo-webhook", kyvernov1.Enforce, controlplane.CELRule("gizmo-color", "Gizmo", "true", "gizmos are fine"))
	webhookPolicy.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.Create(t, vapPolicy)
	cp.Create(t, webhookPolicy)
	before := cp.WaitForStatus(t, vapPolicy, controllers.ReasonFallback)
	if msg := before.Status.ValidatingAdmissionPolicy.Message; !strings.Contains(msg, string(model.ReasonKindUnresolved)) {
		t.Fatalf("before the CRD: status message %q, want %s", msg, model.ReasonKindUnresolved)
	}

	cp.Create(t, gizmoCRD(group))
	cp.WaitForStatus(t, vapPolicy, controllers.ReasonAllRulesTranslated)
	err := controlplane.Eventually(context.Background(), 60*time.Second, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		if err != nil {
			return false, err
		}
		got := registeredResources(vwc)
		return slices.Contains(got, "gizmos"), fmt.Errorf("the webhook is registered for %v, want gizmos", got)
	})
	if err != nil {
		t.Errorf("the webhook configuration never registered the new kind: %v", err)
	}
}

// TestMixedPolicyIsNotMarkedGenerated: a running Kyverno skips a policy
// marked generated entirely, so a policy whose CEL rule is a VAP but which
// also has a pattern rule the classic compiler refuses (a wildcard key;
// enforced by Kyverno only) must stay generated: false, with the pattern
// rule reported as left to Kyverno.
func TestMixedPolicyIsNotMarkedGenerated(t *testing.T) {
	cp.StartOperator(t, generateOn)
	pattern := kyvernov1.Rule{
		Name:           "team-pattern",
		MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"ConfigMap"}}}}},
		Validation:     &kyvernov1.Validation{Message: "team label", RawPattern: &apiextensionsv1.JSON{Raw: []byte(`{"metadata":{"labels":{"tea?":"?*"}}}`)}},
	}
	policy := controlplane.ClusterPolicy("mixed-cel-pattern", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden", "ConfigMap", "object.metadata.name != 'forbidden'", "not forbidden"), pattern)
	got := cp.CreatePolicy(t, policy, controllers.ReasonAllRulesTranslated)
	vap := got.Status.ValidatingAdmissionPolicy
	if vap.Generated || !strings.Contains(vap.Message, `rule "team-pattern": left to Kyverno (PatternNotExpressible`) {
		t.Errorf("Kyverno status = %+v, want generated false and the pattern rule left to Kyverno", vap)
	}
}

// TestConvertResolvesKindsFromTheClustersDiscovery: kyvap convert
// --cluster resolves a custom kind from the cluster's discovery, with the
// plural the CRD declares (which no guess from the kind gives), and says so.
func TestConvertResolvesKindsFromTheClustersDiscovery(t *testing.T) {
	crd := gizmoCRD("convert.kyvap.test")
	crd.Name = "gizmoz.convert.kyvap.test"
	crd.Spec.Names.Plural = "gizmoz"
	cp.Create(t, crd)
	client, err := clientdiscovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	var resolver kyverno.KindResolver
	err = controlplane.Eventually(context.Background(), time.Minute, func(context.Context) (bool, error) {
		r, _, err := discovery.Resolver(client)
		if err != nil {
			return false, err
		}
		served, err := r.Resolve("convert.kyvap.test/v1/Gizmo")
		resolver = r
		return len(served) == 1, fmt.Errorf("resolved to %v (%w)", served, err)
	})
	if err != nil {
		t.Fatalf("the CRD never appeared in discovery: %v", err)
	}
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: gizmo-size}
spec:
  validationFailureAction: Enforce
  rules:
  - name: small
    match: {any: [{resources: {kinds: [convert.kyvap.test/v1/Gizmo]}}]}
    validate:
      cel:
        expressions: [{expression: "object.spec.size < 10", message: too big}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	c := migrate.New(migrate.Options{Files: []string{policy}, Cluster: resolver}, &stderr)
	if code := c.ConvertPolicies(strings.NewReader(""), &stdout); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "- gizmoz\n") {
		t.Errorf("the converted policy does not match gizmoz:\n%s", stdout.String())
	}
	if want := `resolved from the cluster's discovery: convert.kyvap.test/v1 gizmoz`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
	}
}
