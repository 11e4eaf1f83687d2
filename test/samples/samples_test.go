// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package samples keeps config/samples honest: every sample ClusterPolicy is
// accepted by Kyverno's CRD, reaches the status its comment promises when the
// operator runs against the real control plane, and the API server enforces
// what `make demo` shows.
package samples

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// expected is what each sample's comment promises: the reason of kyvap's
// condition, whether status.validatingadmissionpolicy.generated is true,
// and, for fallbacks, the translator's reason in the message. A new sample
// must be added here.
var expected = map[string]struct {
	reason    string
	generated bool
	message   string
}{
	"max-deployment-replicas": {reason: controllers.ReasonAllRulesTranslated, generated: true},
	"require-team-label":      {reason: controllers.ReasonAllRulesTranslated, generated: true},
	"disallow-latest-tag":     {reason: controllers.ReasonAllRulesTranslated, generated: true},
	"restrict-host-network":   {reason: controllers.ReasonFallback, message: string(model.ReasonRolesOrClusterRoles)},
	// A classic validate.pattern rule, compiled to CEL.
	"disallow-privileged-containers": {reason: controllers.ReasonAllRulesTranslated, generated: true},
	// A classic validate.deny rule, compiled to CEL.
	"block-retired-teams": {reason: controllers.ReasonAllRulesTranslated, generated: true},
	// A validate.podSecurity rule with an exclusion, compiled to CEL.
	"pod-security-baseline": {reason: controllers.ReasonAllRulesTranslated, generated: true},
}

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

func TestSamples(t *testing.T) {
	cp.StartOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: true})
	ctx := context.Background()
	c := quietClient(t)

	policies := readSamples(t)
	var names []string
	for _, p := range policies {
		names = append(names, p.GetName())
		// Strict: a field Kyverno's CRD does not know fails instead of being pruned.
		if err := c.Create(ctx, p, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Fatalf("Kyverno's CRD refuses sample %s: %v", p.GetName(), err)
		}
	}
	var want []string
	for name := range expected {
		want = append(want, name)
	}
	sort.Strings(names)
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Fatalf("samples %v, but the test expects %v: update `expected`", names, want)
	}

	for _, name := range names {
		policy := cp.WaitForStatus(t, &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}, "")
		cond := meta.FindStatusCondition(policy.Status.Conditions, controllers.ConditionType)
		exp := expected[name]
		if cond.Reason != exp.reason {
			t.Errorf("%s: reason %s, want %s (%s)", name, cond.Reason, exp.reason, cond.Message)
		}
		if got := policy.Status.ValidatingAdmissionPolicy.Generated; got != exp.generated {
			t.Errorf("%s: status.validatingadmissionpolicy.generated = %t, want %t", name, got, exp.generated)
		}
		if !strings.Contains(cond.Message, exp.message) {
			t.Errorf("%s: message %q does not contain %q", name, cond.Message, exp.message)
		}
	}

	cp.Namespace(t, "samples-dev", nil)
	cp.Namespace(t, "samples-prod", map[string]string{"env": "prod"})
	// max-deployment-replicas
	cp.WaitForDenial(t, deployment("samples-dev", "too-big", 10, "nginx:1.27"), "at most 5 replicas")
	// disallow-latest-tag: Enforce in env=prod namespaces, Audit elsewhere.
	cp.WaitForDenial(t, deployment("samples-prod", "latest", 1, "nginx:latest"), "other than 'latest'")
	cp.WaitForWarning(t, deployment("samples-dev", "latest", 1, "nginx:latest"), "other than 'latest'")
	// require-team-label: the Pod part is a VAP.
	unlabelled := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "samples-dev", Name: "no-team"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}
	cp.WaitForDenial(t, unlabelled, "'team' is required")
	// disallow-privileged-containers: the compiled pattern, for a Pod and,
	// through the pod-controller variant, for a Deployment's init container.
	privileged := unlabelled.DeepCopy()
	privileged.Name, privileged.Labels = "privileged", map[string]string{"team": "shop"}
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	cp.WaitForDenial(t, privileged, "ValidatingAdmissionPolicy 'kyvap-disallow-privileged-containers.privileged-containers'")
	privilegedInit := deployment("samples-prod", "privileged-init", 1, "nginx:1.27")
	privilegedInit.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
	cp.WaitForDenial(t, privilegedInit, "ValidatingAdmissionPolicy 'kyvap-disallow-privileged-containers.autogen-privileged-containers'")
	// block-retired-teams: the compiled deny, its message rendered by the
	// API server, for a Pod and a Deployment's pod template.
	retired := unlabelled.DeepCopy()
	retired.Name, retired.Labels = "retired", map[string]string{"team": "sandbox-7"}
	cp.WaitForDenial(t, retired, "team sandbox-7 is retired")
	retiredDeployment := deployment("samples-prod", "legacy", 1, "nginx:1.27")
	retiredDeployment.Spec.Template.Labels["team"] = "legacy"
	cp.WaitForDenial(t, retiredDeployment, "ValidatingAdmissionPolicy 'kyvap-block-retired-teams.autogen-retired-teams'")
	// pod-security-baseline: the Pod Security Standards' baseline in the
	// namespace pod-security, by VAP, for Pods and a Deployment's template;
	// the excluded image's hostPort 80 is admitted. There
	// disallow-privileged-containers does not apply.
	cp.Namespace(t, "pod-security", nil)
	hostNetwork := unlabelled.DeepCopy()
	hostNetwork.Namespace, hostNetwork.Name, hostNetwork.Labels = "pod-security", "host-network", map[string]string{"team": "shop"}
	hostNetwork.Spec.HostNetwork = true
	cp.WaitForDenial(t, hostNetwork, "ValidatingAdmissionPolicy 'kyvap-pod-security-baseline.baseline'")
	hostPort := hostNetwork.DeepCopy()
	hostPort.Name, hostPort.Spec.HostNetwork = "host-port", false
	hostPort.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
	cp.WaitForDenial(t, hostPort, `It violates PodSecurity "baseline:latest"`)
	privilegedDeployment := deployment("pod-security", "privileged", 1, "nginx:1.27")
	privilegedDeployment.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	cp.WaitForDenial(t, privilegedDeployment, "ValidatingAdmissionPolicy 'kyvap-pod-security-baseline.autogen-baseline'")
	ingress := hostPort.DeepCopy()
	ingress.Name = "ingress"
	ingress.Spec.Containers[0].Image = "registry.k8s.io/ingress-nginx/controller:v1.11.2"
	ingress.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
	if warnings := cp.MustAdmit(t, ingress); len(warnings) > 0 {
		t.Errorf("the excluded image's hostPort was admitted with warnings %q", warnings)
	}
	// Compliant with every sample: admitted without a warning.
	if warnings := cp.MustAdmit(t, deployment("samples-prod", "web", 3, "nginx:1.27")); len(warnings) > 0 {
		t.Errorf("a compliant Deployment was admitted with warnings %q", warnings)
	}
}

// TestKustomizationListsEverySample: `kubectl apply -k config/samples` and
// `make demo` apply what kustomization.yaml lists, so it must list every file.
func TestKustomizationListsEverySample(t *testing.T) {
	dir := samplesDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			onDisk = append(onDisk, base)
		}
	}
	listed := kustomizationResources(t)
	sort.Strings(listed)
	if !slices.Equal(onDisk, listed) {
		t.Errorf("config/samples holds %v but kustomization.yaml lists %v", onDisk, listed)
	}
	for _, f := range onDisk {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# ") {
			t.Errorf("%s does not start with a comment explaining what it shows", f)
		}
	}
}

func samplesDir(t testing.TB) string {
	t.Helper()
	return controlplane.RepoPath(t, "config", "samples")
}

func kustomizationResources(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(samplesDir(t), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("config/samples/kustomization.yaml: %v", err)
	}
	return k.Resources
}

// readSamples decodes every ClusterPolicy the kustomization lists.
func readSamples(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, file := range kustomizationResources(t) {
		data, err := os.ReadFile(filepath.Join(samplesDir(t), file))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if obj.GetAPIVersion() != "kyverno.io/v1" || obj.GetKind() != "ClusterPolicy" {
			t.Fatalf("%s is a %s %s, want a kyverno.io/v1 ClusterPolicy", file, obj.GetAPIVersion(), obj.GetKind())
		}
		out = append(out, obj)
	}
	return out
}

// quietClient is a cluster-admin client without Kyverno's deprecation warnings.
func quietClient(t testing.TB) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deployment is a Deployment every sample accepts, except for its replicas
// and image.
func deployment(namespace, name string, replicas int32, image string) *appsv1.Deployment {
	d := controlplane.Deployment(namespace, name, replicas, map[string]string{"team": "shop"})
	d.Spec.Template.Spec.Containers[0].Image = image
	return d
}
