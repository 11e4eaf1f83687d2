// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package helm tests kyvap's Helm chart (charts/kyvap) with Helm's Go SDK:
// lint, the values schema, the rendering against config/ (the chart is
// generated from it), and install, upgrade and uninstall on the real test
// control plane with the operator running as the chart's ServiceAccount.
package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

const (
	releaseName = "kyvap"
	// namespace is not config/default's, so that the rendering shows the
	// release's namespace is used everywhere.
	namespace = "kyvap-helm"
	// ownerRole is the chart's ClusterRole that owns the webhook
	// configuration.
	ownerRole = "kyvap-manager-role"
)

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(controlplane.RepoPath(t, "charts", "kyvap"))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// TestLint is helm lint, strict, with the default values and with every
// optional part switched on.
func TestLint(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":   nil,
		"everything": everything(),
	} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = namespace
			result := lint.Run([]string{controlplane.RepoPath(t, "charts", "kyvap")}, values)
			for _, m := range result.Messages {
				t.Log(m)
			}
			if len(result.Errors) > 0 || result.TotalChartsLinted != 1 {
				t.Fatalf("helm lint: %v", errors.Join(result.Errors...))
			}
		})
	}
}

// everything switches every optional part of the chart on.
func everything() map[string]any {
	return map[string]any{
		"certificates": map[string]any{"provider": "cert-manager"},
		"monitoring": map[string]any{
			"serviceMonitor":   map[string]any{"enabled": true},
			"prometheusRule":   map[string]any{"enabled": true},
			"grafanaDashboard": map[string]any{"enabled": true},
		},
		"image":            map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)},
		"nodeSelector":     map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":      []any{map[string]any{"key": "dedicated", "operator": "Exists"}},
		"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		"extraArgs":        []any{"--resource-library-reads"},
	}
}

// TestValuesSchema: values.schema.json refuses what would render a broken
// manager, with a message naming the value.
func TestValuesSchema(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"replicaCount": 0}, "replicaCount"},
		{map[string]any{"replicas": 2}, "replicas"},
		{map[string]any{"certificates": map[string]any{"provider": "vault"}}, "provider"},
		{map[string]any{"image": map[string]any{"digest": "latest"}}, "digest"},
		{map[string]any{"goMemLimit": "256M"}, "goMemLimit"},
		{map[string]any{"backgroundScan": map[string]any{"interval": "hourly"}}, "interval"},
		{map[string]any{"kyvernoConfig": "kyverno"}, "kyvernoConfig"},
		{map[string]any{"extraArgs": "--webhook=false"}, "extraArgs"},
	} {
		_, err := render(t, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %v: error %v, want one naming %s", tc.values, err, tc.want)
		}
	}
}

// render is helm template: the chart's objects for values.
func render(t *testing.T, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = releaseName, namespace
	kubeVersion, err := common.ParseKubeVersion("v" + envOr("KUBE_VERSION", "1.37.1"))
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kubeVersion
	rel, err := install.Run(loadChart(t), values)
	if err != nil {
		return nil, err
	}
	return decode(t, rel.(*release.Release).Manifest), nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding the rendered chart: %v\n%s", err, manifest)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// kustomize builds a directory of config/ into objects.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin := os.Getenv("KUSTOMIZE")
	if bin == "" {
		t.Fatal("KUSTOMIZE is not set: run this test through make test, which builds kustomize")
	}
	cmd := exec.Command(bin, "build", controlplane.RepoPath(t, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return decode(t, string(out))
}

// chartArgs are the manager flags the chart adds to config/'s (its
// defaults are the manager's own, except the owner of the webhook
// configuration).
var chartArgs = []string{
	"--webhook-configuration-owner-clusterrole=" + ownerRole,
	"--generate-validating-admission-policy=true",
	"--webhook=true",
	"--force-failure-policy-ignore=false",
	"--kyverno-config=kyverno/kyverno",
	"--background-scan=true",
	"--background-scan-interval=1h0m0s",
	"--background-scan-workers=8",
	"--background-scan-metadata-only=false",
}

// TestRenderingIsConfig: with its default values the chart renders exactly
// config/default's objects (without the Namespace: the release's), and with
// the optional parts on, config/cert-manager's and config/prometheus's; only
// the labels, the namespace and the flags the chart adds differ.
func TestRenderingIsConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		config []string
	}{
		{"defaults", nil, []string{"config/default"}},
		{"cert-manager and monitoring", map[string]any{
			"certificates": map[string]any{"provider": "cert-manager"},
			"monitoring":   map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}},
		}, []string{"config/cert-manager", "config/prometheus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered, err := render(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]*unstructured.Unstructured{}
			for _, dir := range tc.config {
				for _, o := range kustomize(t, dir) {
					if o.GetKind() != "Namespace" {
						want[key(o)] = normalize(t, o)
					}
				}
			}
			got := map[string]*unstructured.Unstructured{}
			for _, o := range rendered {
				if o.GetNamespace() != "" && o.GetNamespace() != namespace {
					t.Errorf("%s is in namespace %s, want the release's", key(o), o.GetNamespace())
				}
				got[key(o)] = normalize(t, o)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("chart rendering differs from %v (-want +got):\n%s", tc.config, diff)
			}
		})
	}
}

func key(o *unstructured.Unstructured) string { return o.GetKind() + "/" + o.GetName() }

// normalize drops what legitimately differs between the chart and
// config/: labels (Helm's or kustomize's), the namespace, and the flags
// the chart adds.
func normalize(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	o = o.DeepCopy()
	labels := o.GetLabels()
	for k := range labels {
		if strings.HasPrefix(k, "app.kubernetes.io/") || k == "helm.sh/chart" {
			delete(labels, k)
		}
	}
	o.SetLabels(labels)
	if o.GetNamespace() != "" {
		o.SetNamespace("NAMESPACE")
	}
	data, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte(namespace), []byte("NAMESPACE"))
	data = bytes.ReplaceAll(data, []byte(controlplane.OperatorNamespace), []byte("NAMESPACE"))
	if err := o.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	if o.GetKind() == "Deployment" {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		var args []any
		for _, a := range c["args"].([]any) {
			if !slices.Contains(chartArgs, a.(string)) {
				args = append(args, a)
			}
		}
		c["args"] = args
		if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// TestInstallUpgradeUninstall installs the chart on the real API server
// with Helm's SDK, runs the manager as the chart's ServiceAccount (its
// RBAC, its copy of Kyverno's configuration, its ClusterRole owning the
// webhook configuration), upgrades the release, then uninstalls it: the
// webhook configuration goes with it, the request the fallback rule
// denied — which a dead webhook would refuse — is admitted, and the
// generated VAPs stay and keep enforcing.
func TestInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	cfg := helmConfig(t)

	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = releaseName, namespace, true
	install.WaitStrategy = kube.HookOnlyStrategy // no kubelet runs the pods here
	install.Timeout = 2 * time.Minute
	if _, err := install.RunWithContext(ctx, loadChart(t), nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	role := &rbacv1.ClusterRole{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: ownerRole}, role); err != nil {
		t.Fatalf("the chart's ClusterRole: %v", err)
	}
	deployment := &appsv1.Deployment{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kyvap-controller-manager"}, deployment); err != nil {
		t.Fatal(err)
	}
	if got := *deployment.Spec.Replicas; got != 2 {
		t.Errorf("replicas %d, want the default 2", got)
	}

	// The manager as the chart deploys it, with the chart's credentials:
	// one policy enforced by a VAP, one (opted out of generation) by the
	// webhook.
	ns := "helm-target"
	cp.EnsureNamespace(t, ns, nil)
	op := cp.StartWebhookOperatorAsWith(t, serviceAccountConfig(), operator.Options{
		Translate: translate.Options{GenerateValidatingAdmissionPolicy: true},
		Webhook:   &webhook.Options{Namespace: namespace, OwnerClusterRole: ownerRole},
	}, controlplane.FreePort(t))
	byVAP := controlplane.ClusterPolicy("helm-vap", kyvernov1.Enforce,
		controlplane.CELRule("no-vap-forbidden", "ConfigMap", "object.metadata.name != 'vap-forbidden'", "vap-forbidden is forbidden"))
	cp.CreatePolicy(t, byVAP, controllers.ReasonAllRulesTranslated)
	vapForbidden := controlplane.ConfigMap(ns, "vap-forbidden", nil)
	cp.WaitForDenial(t, vapForbidden, "vap-forbidden is forbidden")
	policy := controlplane.ClusterPolicy("helm-no-forbidden", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden", "ConfigMap", "object.metadata.name != 'forbidden'", "forbidden is forbidden"))
	policy.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, policy, controllers.ReasonFallback)
	forbidden := controlplane.ConfigMap(ns, "forbidden", nil)
	cp.WaitForDenial(t, forbidden, "forbidden is forbidden")
	err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, vwc); err != nil {
			return false, err
		}
		want := []string{"ClusterRole/" + ownerRole + "/" + string(role.UID)}
		var got []string
		for _, ref := range vwc.OwnerReferences {
			got = append(got, ref.Kind+"/"+ref.Name+"/"+string(ref.UID))
		}
		return slices.Equal(got, want), fmt.Errorf("owner references %v, want %v", got, want)
	})
	if err != nil {
		t.Fatal(err)
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.WaitStrategy, upgrade.Timeout = namespace, kube.HookOnlyStrategy, 2*time.Minute
	values := map[string]any{
		"replicaCount":   3,
		"backgroundScan": map[string]any{"enabled": false},
		"networkPolicy":  map[string]any{"enabled": false},
		"extraArgs":      []any{"--max-concurrent-reconciles=4"},
	}
	if _, err := upgrade.RunWithContext(ctx, releaseName, loadChart(t), values); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kyvap-controller-manager"}, deployment); err != nil {
		t.Fatal(err)
	}
	args := deployment.Spec.Template.Spec.Containers[0].Args
	if *deployment.Spec.Replicas != 3 || !slices.Contains(args, "--background-scan=false") || !slices.Contains(args, "--max-concurrent-reconciles=4") {
		t.Errorf("after the upgrade: replicas %d, args %v", *deployment.Spec.Replicas, args)
	}
	var policies unstructured.UnstructuredList
	policies.SetAPIVersion("networking.k8s.io/v1")
	policies.SetKind("NetworkPolicyList")
	if err := cp.Client.List(ctx, &policies, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if len(policies.Items) != 0 {
		t.Errorf("%d NetworkPolicies after networkPolicy.enabled=false", len(policies.Items))
	}

	// helm uninstall deletes the release's objects, the ClusterRole among
	// them, and keeps the namespace: the garbage collector deletes the
	// webhook configuration, and the operator (still running, as pods do
	// while they terminate) does not write it again.
	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy, uninstall.Timeout = kube.HookOnlyStrategy, 2*time.Minute
	if _, err := uninstall.Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		return apierrors.IsNotFound(err), fmt.Errorf("the webhook configuration is still there (%w)", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	op.Stop()
	err = controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, forbidden)
		return err == nil, fmt.Errorf("still refused: %w", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}} {
		if err := cp.Client.List(ctx, list, client.MatchingLabels{"app.kubernetes.io/instance": releaseName}); err != nil {
			t.Fatal(err)
		}
		items, err := extractNames(list)
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, items...)
	}
	if len(left) > 0 {
		t.Errorf("left after helm uninstall: %v", left)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("the operator wrote its webhook configuration again after the uninstall (%v)", err)
	}
	// The generated VAPs stay, owned by their policy, and keep enforcing
	// (docs/install.md, Uninstall): kyvap's removal drops no VAP rule.
	if _, err := cp.DryRunCreate(ctx, vapForbidden); err == nil || !strings.Contains(err.Error(), "vap-forbidden is forbidden") {
		t.Errorf("after the uninstall the generated VAP no longer denies: %v", err)
	}
}

// extractNames are the kind/name of a list's items.
func extractNames(list client.ObjectList) ([]string, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, item := range items {
		o := item.(client.Object)
		out = append(out, fmt.Sprintf("%T/%s", o, o.GetName()))
	}
	return out, nil
}

// serviceAccountConfig is the API server as the chart's ServiceAccount
// (impersonated by the admin).
func serviceAccountConfig() *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":kyvap-controller-manager",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// helmConfig is Helm's action configuration for the test control plane,
// through a kubeconfig file as helm reads one.
func helmConfig(t *testing.T) *action.Configuration {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["test"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	kubeconfig.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.Config.CertData, ClientKeyData: cp.Config.KeyData, Token: cp.Config.BearerToken}
	kubeconfig.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin", Namespace: namespace}
	kubeconfig.CurrentContext = "test"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, file); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &file
	ns := namespace
	flags.Namespace = &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}
