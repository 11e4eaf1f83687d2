// Package samples keeps config/samples honest: every sample ClusterPolicy is
// accepted by Kyverno's CRD, reaches the status its comment promises when the
// operator runs against the real control plane, and the API server enforces
// what `make demo` shows.
package samples

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
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
	"require-team-label":      {reason: controllers.ReasonFallback, message: string(translate.ReasonPodControllers)},
	"disallow-latest-tag":     {reason: controllers.ReasonAllRulesTranslated, generated: true},
	"restrict-host-network":   {reason: controllers.ReasonFallback, message: string(translate.ReasonRolesOrClusterRoles)},
}

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{GarbageCollector: true}, &cp))
}

func TestSamples(t *testing.T) {
	startOperator(t)
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
		policy, cond := waitForStatus(t, c, name)
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

	createNamespace(t, "samples-dev", nil)
	createNamespace(t, "samples-prod", map[string]string{"env": "prod"})
	// max-deployment-replicas
	waitForVerdict(t, deployment("samples-dev", "too-big", 10, "nginx:1.27"), denied, "at most 5 replicas")
	// disallow-latest-tag: Enforce in env=prod namespaces, Audit elsewhere.
	waitForVerdict(t, deployment("samples-prod", "latest", 1, "nginx:latest"), denied, "other than 'latest'")
	waitForVerdict(t, deployment("samples-dev", "latest", 1, "nginx:latest"), warned, "other than 'latest'")
	// require-team-label: the Pod part is a VAP.
	unlabelled := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "samples-dev", Name: "no-team"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}
	waitForVerdict(t, unlabelled, denied, "'team' is required")
	// Compliant with every sample: admitted without a warning.
	if got, text := send(t, deployment("samples-prod", "web", 3, "nginx:1.27")); got != admitted {
		t.Errorf("a compliant Deployment was %s: %s", got, text)
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
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config", "samples")
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

// startOperator runs the manager in-process, as cmd/manager does, until the
// test ends.
func startOperator(t testing.TB) {
	t.Helper()
	op, err := cp.StartOperator(translate.Options{GenerateValidatingAdmissionPolicy: true}, ctrl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := op.Stop(); err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	})
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

// waitForStatus waits until kyvap's condition reflects the policy's current
// generation.
func waitForStatus(t testing.TB, c client.Client, name string) (*kyvernov1.ClusterPolicy, *metav1.Condition) {
	t.Helper()
	policy, cond, err := controlplane.WaitForPolicyStatus(context.Background(), c, name, 60*time.Second)
	if err != nil {
		t.Fatalf("ClusterPolicy %s got no status: %v", name, err)
	}
	return policy, cond
}

func createNamespace(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := cp.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// deployment is a Deployment every sample accepts, except for its replicas
// and image.
func deployment(namespace, name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name, "team": "shop"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
}

type verdict string

const (
	admitted verdict = "admitted"
	warned   verdict = "admitted with a warning"
	denied   verdict = "denied"
)

// send dry-runs the creation of obj and returns the API server's verdict with
// its error or warning text.
func send(t testing.TB, obj client.Object) (verdict, string) {
	t.Helper()
	var warnings []string
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandlerWithContext = warningCollector{&warnings}
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Create(context.Background(), obj.DeepCopyObject().(client.Object), client.DryRunAll)
	switch {
	case err == nil && len(warnings) > 0:
		return warned, strings.Join(warnings, "; ")
	case err == nil:
		return admitted, ""
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		return denied, err.Error()
	default:
		t.Fatalf("creating %s: %v", obj.GetName(), err)
		return "", ""
	}
}

type warningCollector struct{ into *[]string }

func (w warningCollector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	*w.into = append(*w.into, text)
}

// waitForVerdict waits until the API server gives obj the verdict with a
// text containing message (VAPs are loaded asynchronously).
func waitForVerdict(t testing.TB, obj client.Object, want verdict, message string) {
	t.Helper()
	err := controlplane.WaitForVAPEnforcement(context.Background(), func(context.Context) (bool, error) {
		got, text := send(t, obj)
		return got == want && strings.Contains(text, message), fmt.Errorf("%s: %s", got, text)
	})
	if err != nil {
		t.Errorf("%T %s/%s: want %s with %q: %v", obj, obj.GetNamespace(), obj.GetName(), want, message, err)
	}
}
