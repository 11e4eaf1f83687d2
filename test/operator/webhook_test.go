package operator

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

const operatorNamespace = "kyvap-system"

// freePort asks the kernel for a port nobody listens on.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// webhookOperator runs the manager with the fallback webhook on a free
// local port, which the API server calls over TLS with kyvap's own CA. The
// webhook configuration is removed after the test (after the manager stops),
// so that later tests never meet a configuration pointing at a dead port.
type webhookOperator struct {
	stop func()
	port int
}

func startWebhookOperator(t testing.TB, opts translate.Options, port int) *webhookOperator {
	t.Helper()
	ensureNamespace(t, operatorNamespace)
	t.Cleanup(func() {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}}
		_ = cp.Client.Delete(context.Background(), vwc)
	})
	op, err := cp.StartOperatorWithWebhook(opts, ctrl.Options{}, webhook.Options{
		Host: "127.0.0.1", Port: port, Namespace: operatorNamespace,
		URL: fmt.Sprintf("https://127.0.0.1:%d", port),
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := op.Stop(); err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	}
	t.Cleanup(stop)
	return &webhookOperator{stop: stop, port: port}
}

func ensureNamespace(t testing.TB, name string) {
	t.Helper()
	err := cp.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

// webhookConfiguration returns kyvap's configuration, or nil.
func webhookConfiguration(ctx context.Context) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := cp.Client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, vwc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return vwc, err
}

func registeredResources(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) []string {
	var out []string
	if vwc == nil {
		return nil
	}
	for _, w := range vwc.Webhooks {
		for _, r := range w.Rules {
			out = append(out, r.Resources...)
		}
	}
	return out
}

func TestWebhookEnforcesWhenGenerationIsOff(t *testing.T) {
	ns := "wh-off"
	namespace(t, ns, nil)
	startWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, freePort(t))

	enforce := clusterPolicy("wh-off-enforce", kyvernov1.Enforce,
		celRule("no-forbidden", "ConfigMap", "!has(object.data) || !('forbidden' in object.data)", "the key 'forbidden' is not allowed"))
	audit := clusterPolicy("wh-off-audit", kyvernov1.Audit,
		celRule("no-audited", "ConfigMap", "!has(object.data) || !('audited' in object.data)", "the key 'audited' is reported"))
	create(t, enforce)
	create(t, audit)
	waitForStatus(t, enforce, controllers.ReasonGenerationDisabled)
	// The status says NOT ENFORCED until the webhook configuration is in
	// place, and is re-reported when it is.
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &kyvernov1.ClusterPolicy{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(enforce), got); err != nil {
			return false, err
		}
		msg := got.Status.ValidatingAdmissionPolicy.Message
		return !strings.Contains(msg, "NOT ENFORCED") && strings.Contains(msg, "enforced by kyvap's webhook"), fmt.Errorf("status message %q", msg)
	})
	if err != nil {
		t.Errorf("the status never said the webhook enforces the rule: %v", err)
	}

	waitForDenial(t, configMap(ns, "bad", map[string]string{"forbidden": "x"}), "the key 'forbidden' is not allowed")
	waitForWarning(t, configMap(ns, "audited", map[string]string{"audited": "x"}), "the key 'audited' is reported")
	mustAdmit(t, configMap(ns, "good", map[string]string{"fine": "x"}))
	// The operator's own namespace never reaches the webhook.
	mustAdmit(t, configMap(operatorNamespace, "bad-but-exempt", map[string]string{"forbidden": "x"}))

	vwc, err := webhookConfiguration(context.Background())
	if err != nil || vwc == nil {
		t.Fatalf("webhook configuration: %v, %v", vwc, err)
	}
	if got := registeredResources(vwc); strings.Join(got, ",") != "configmaps" {
		t.Errorf("the webhook is registered for %v, want exactly configmaps", got)
	}
}

func TestWebhookAndVAPShareACluster(t *testing.T) {
	ns := "wh-mixed"
	namespace(t, ns, nil)
	startWebhookOperator(t, generateOn, freePort(t))

	// Roles need RBAC look-ups at admission: no VAP can express them.
	roles := celRule("admins-only-small", "ConfigMap", "!has(object.data) || size(object.data) <= 1", "at most one key for cluster admins")
	roles.MatchResources.Any[0].ClusterRoles = []string{"cluster-admin"}
	fallback := clusterPolicy("wh-mixed-roles", kyvernov1.Enforce, roles)
	native := clusterPolicy("wh-mixed-native", kyvernov1.Enforce,
		celRule("no-forbidden-name", "ConfigMap", "object.metadata.name != 'forbidden'", "the name 'forbidden' is not allowed"))
	create(t, fallback)
	create(t, native)
	waitForStatus(t, fallback, controllers.ReasonFallback)
	waitForStatus(t, native, controllers.ReasonAllRulesTranslated)

	// The test client is a cluster admin (system:masters binds cluster-admin).
	ensureClusterAdminBinding(t)
	waitForDenial(t, configMap(ns, "two-keys", map[string]string{"a": "1", "b": "2"}), "at most one key for cluster admins")
	waitForDenial(t, configMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")
	mustAdmit(t, configMap(ns, "one-key", map[string]string{"a": "1"}))
}

// ensureClusterAdminBinding binds cluster-admin to system:masters, as every
// real cluster does (envtest's API server does not bootstrap RBAC objects).
func ensureClusterAdminBinding(t testing.TB) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:masters"}},
	}
	err := cp.Client.Create(context.Background(), crb)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func TestGenerationToggleHandsRulesToVAPs(t *testing.T) {
	ns := "wh-toggle"
	namespace(t, ns, nil)
	port := freePort(t)
	off := startWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, port)
	policy := clusterPolicy("wh-toggle", kyvernov1.Enforce,
		celRule("no-forbidden-name", "ConfigMap", "object.metadata.name != 'forbidden'", "the name 'forbidden' is not allowed"))
	create(t, policy)
	waitForStatus(t, policy, controllers.ReasonGenerationDisabled)
	err := controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		vwc, err := webhookConfiguration(ctx)
		return err == nil && len(registeredResources(vwc)) > 0, fmt.Errorf("configuration %v: %w", vwc, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitForDenial(t, configMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")

	off.stop()
	startWebhookOperator(t, generateOn, port)
	waitForStatus(t, policy, controllers.ReasonAllRulesTranslated)
	err = controlplane.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		vwc, err := webhookConfiguration(ctx)
		return err == nil && vwc == nil, fmt.Errorf("configuration still registers %v (err %w)", registeredResources(vwc), err)
	})
	if err != nil {
		t.Fatalf("handing the rule to a VAP must remove the webhook's rules: %v", err)
	}
	waitForDenial(t, configMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")
}

func TestWebhookDownFollowsFailurePolicy(t *testing.T) {
	ns := "wh-down"
	namespace(t, ns, nil)
	op := startWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, freePort(t))
	ignore := kyvernov1.Ignore
	failing := clusterPolicy("wh-down-fail", kyvernov1.Enforce,
		celRule("fail-closed", "ConfigMap", "object.metadata.name != 'closed'", "the name 'closed' is not allowed"))
	ignoring := clusterPolicy("wh-down-ignore", kyvernov1.Enforce,
		celRule("fail-open", "Secret", "object.metadata.name != 'open'", "the name 'open' is not allowed"))
	ignoring.Spec.FailurePolicy = &ignore
	create(t, failing)
	create(t, ignoring)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "open"}}
	waitForDenial(t, configMap(ns, "closed", nil), "the name 'closed' is not allowed")
	waitForDenial(t, secret, "the name 'open' is not allowed")

	// The webhook goes away; its configuration stays, as when its pods are down.
	op.stop()
	if _, err := dryRunCreate(context.Background(), secret); err != nil {
		t.Errorf("failurePolicy Ignore: with the webhook down the Secret must be admitted, got %v", err)
	}
	_, err := dryRunCreate(context.Background(), configMap(ns, "anything", nil))
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("failurePolicy Fail: with the webhook down the ConfigMap must be refused, got %v", err)
	}
}
