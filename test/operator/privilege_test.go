// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/webhook"
	"github.com/kyvap/kyvap/webhook/certs"
)

// What config/default does to config/rbac: its namePrefix and namespace.
const (
	shippedPrefix    = "kyvap-"
	shippedNamespace = controlplane.OperatorNamespace
	managerSA        = shippedPrefix + "controller-manager"
)

// shippedRBAC reads the objects config/rbac's kustomization lists and
// names and places them as config/default does (namePrefix kyvap-,
// namespace kyvap-system, role references and ServiceAccount subjects
// renamed with them).
func shippedRBAC(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	dir := controlplane.RepoPath(t, "config", "rbac")
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, file := range kustomization.Resources {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split("\n"+string(data), "\n---") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if obj == nil {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetName(shippedPrefix + u.GetName())
			switch u.GetKind() {
			case "ServiceAccount", "Role", "RoleBinding":
				u.SetNamespace(shippedNamespace)
			}
			if ref, ok := obj["roleRef"].(map[string]any); ok {
				ref["name"] = shippedPrefix + ref["name"].(string)
			}
			if subjects, ok := obj["subjects"].([]any); ok {
				for _, s := range subjects {
					subject := s.(map[string]any)
					if subject["kind"] == "ServiceAccount" {
						subject["name"] = shippedPrefix + subject["name"].(string)
						subject["namespace"] = shippedNamespace
					}
				}
			}
			out = append(out, u)
		}
	}
	return out
}

// installShippedRBAC creates the shipped RBAC (removed when the test ends)
// and returns it.
func installShippedRBAC(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	cp.EnsureNamespace(t, shippedNamespace, nil)
	objs := shippedRBAC(t)
	for _, obj := range objs {
		if err := cp.Client.Create(context.Background(), obj.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() {
			if err := cp.Client.Delete(context.Background(), obj.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		})
	}
	return objs
}

// serviceAccountToken returns a token of the ServiceAccount, created if
// needed (and then deleted when the test ends).
func serviceAccountToken(t *testing.T, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	switch err := cp.Client.Create(ctx, sa); {
	case err == nil:
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), sa) })
	case !apierrors.IsAlreadyExists(err):
		t.Fatal(err)
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := cp.Client.SubResource("token").Create(ctx, sa, request); err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", namespace, name, err)
	}
	return request.Status.Token
}

// tokenConfig reaches the API server with a bearer token only.
func tokenConfig(token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = token
	return cfg
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kubeconfig.AuthInfos["kyvap"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kubeconfig.Contexts["kyvap"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "kyvap"}
	kubeconfig.CurrentContext = "kyvap"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildManagerBinary builds cmd/manager into dir.
func buildManagerBinary(dir string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", out, "./cmd/manager")
	build.Dir = root
	if msg, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the manager: %w\n%s", err, msg)
	}
	return out, nil
}

// managerProcess is the manager binary, run as deployed (leader election,
// webhook, metrics with their defaults) with a kubeconfig.
type managerProcess struct {
	cmd                                 *exec.Cmd
	log                                 string
	probeAddr, metricsAddr, webhookAddr string
}

func startManagerBinary(t *testing.T, bin, kubeconfig string, webhookPort int, args ...string) *managerProcess {
	t.Helper()
	local := func() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(controlplane.FreePort(t))) }
	m := &managerProcess{
		log:         filepath.Join(t.TempDir(), "manager.log"),
		probeAddr:   local(),
		metricsAddr: local(),
		webhookAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPort)),
	}
	logFile, err := os.Create(m.log)
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(bin, append([]string{
		"--leader-elect", "--leader-election-namespace=" + shippedNamespace,
		"--health-probe-bind-address=" + m.probeAddr, "--metrics-bind-address=" + m.metricsAddr,
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(webhookPort), "--webhook-url=https://" + m.webhookAddr,
		"--webhook-namespace=" + shippedNamespace,
	}, args...)...)
	m.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE=")
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.stop(t)
		logFile.Close()
		m.checkNothingForbidden(t)
		if t.Failed() {
			m.printLog(t)
		}
	})
	err = controlplane.Eventually(context.Background(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		if m.cmd.ProcessState != nil {
			return false, errors.New("the manager exited")
		}
		resp, err := http.Get("http://" + m.probeAddr + "/readyz")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s: %s", resp.Status, body)
	})
	if err != nil {
		m.printLog(t)
		t.Fatalf("the manager never became ready: %v", err)
	}
	// The metrics server listens once its authentication filter is built,
	// which may be after readiness: readiness is about admission, and a
	// scraper retries.
	err = controlplane.Eventually(context.Background(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		if m.cmd.ProcessState != nil {
			return false, errors.New("the manager exited")
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", m.metricsAddr)
		if err != nil {
			return false, err
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		m.printLog(t)
		t.Fatalf("the metrics server never listened: %v", err)
	}
	return m
}

func (m *managerProcess) stop(t *testing.T) {
	if m.cmd.Process == nil || m.cmd.ProcessState != nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the manager stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		if err := <-done; err != nil {
			t.Logf("killed: %v", err)
		}
		t.Error("the manager did not stop within 30s of SIGTERM")
	}
}

// checkNothingForbidden fails the test if the API server refused the
// manager anything: the shipped RBAC must cover all it does.
func (m *managerProcess) checkNothingForbidden(t *testing.T) {
	data, err := os.ReadFile(m.log)
	if err != nil {
		t.Error(err)
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the API server refused the manager something: %s", line)
		}
	}
}

func (m *managerProcess) printLog(t *testing.T) {
	data, _ := os.ReadFile(m.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("manager log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
}

// insecureTLS dials kyvap's servers without verifying their certificate
// (self-signed for metrics; kyvap's own CA for the webhook).
func insecureTLS(protos ...string) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: protos} //nolint:gosec // the test checks the servers' behaviour, not their identity
}

// TestManagerWorksWithTheShippedRBAC runs the manager binary as the
// ServiceAccount of config/rbac, bound as config/default binds it and
// holding nothing else: it creates and renews its certificate Secret and
// creates, updates and deletes its webhook configuration, while the API
// server refuses it other Secrets, a list of the namespace's Secrets and
// other webhook configurations. Its metrics are served over HTTPS to a
// token allowed to GET /metrics only, and neither server speaks HTTP/2.
func TestManagerWorksWithTheShippedRBAC(t *testing.T) {
	ctx := context.Background()
	ensureClusterAdminBinding(t)
	installShippedRBAC(t)
	managerToken := serviceAccountToken(t, shippedNamespace, managerSA)
	managerConfig := tokenConfig(managerToken)
	asManager, err := client.New(managerConfig, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	// Start from scratch: no Secret, no configuration (other tests leave
	// them), and a foreign Secret and configuration the manager must not
	// touch.
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shippedNamespace, Name: webhook.DefaultSecretName}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}},
	} {
		if err := cp.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultConfigurationName}}
		if err := cp.Client.Delete(context.Background(), vwc); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the webhook configuration: %v", err)
		}
	})
	foreignSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shippedNamespace, Name: "someone-elses"}, StringData: map[string]string{"password": "x"}}
	foreignVWC := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}
	cp.Create(t, foreignSecret)
	cp.Create(t, foreignVWC)

	ns := "privilege"
	cp.Namespace(t, ns, nil)
	port := controlplane.FreePort(t)
	kubeconfig := writeKubeconfig(t, managerConfig)
	bin, err := buildManagerBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Every CEL rule goes to the webhook.
	manager := startManagerBinary(t, bin, kubeconfig, port, "--generate-validating-admission-policy=false")

	// Ready means the certificate is loaded: the Secret was created.
	secret := &corev1.Secret{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: shippedNamespace, Name: webhook.DefaultSecretName}, secret); err != nil {
		t.Fatalf("the manager did not create its Secret: %v", err)
	}

	// The configuration is created, updated, enforced.
	first := controlplane.ClusterPolicy("privilege-configmaps", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden-name", "ConfigMap", "object.metadata.name != 'forbidden'", "the name 'forbidden' is not allowed"))
	cp.CreatePolicy(t, first, controllers.ReasonGenerationDisabled)
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")
	second := controlplane.ClusterPolicy("privilege-services", kyvernov1.Enforce,
		controlplane.CELRule("no-forbidden-service", "Service", "object.metadata.name != 'forbidden'", "no such Service"))
	cp.CreatePolicy(t, second, controllers.ReasonGenerationDisabled)
	waitForRegistered(t, "configmaps", "services")

	// Renewal: a Secret that needs rotation (here: garbage) is rewritten by
	// the next check (at start), and the configuration follows the new CA.
	secret.Data = map[string][]byte{corev1.TLSCertKey: []byte("garbage"), corev1.TLSPrivateKeyKey: []byte("garbage")}
	if err := cp.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	manager.stop(t)
	manager.checkNothingForbidden(t)
	manager = startManagerBinary(t, bin, kubeconfig, port, "--generate-validating-admission-policy=false")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	if rotate, reason := certs.NeedsRotation(secret.Data, nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now()); rotate {
		t.Fatalf("the Secret was not renewed: %s", reason)
	}
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		if err != nil || vwc == nil {
			return false, fmt.Errorf("webhook configuration %v: %w", vwc, err)
		}
		return bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, secret.Data[certs.CACertKey]), errors.New("the caBundle is not the new CA")
	})
	if err != nil {
		t.Fatal(err)
	}
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "forbidden", nil), "the name 'forbidden' is not allowed")

	t.Run("refused what is not kyvap's", func(t *testing.T) {
		expectForbidden := func(what string, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: got %v, want Forbidden", what, err)
			}
		}
		expectForbidden("get another Secret", asManager.Get(ctx, client.ObjectKeyFromObject(foreignSecret), &corev1.Secret{}))
		expectForbidden("list the namespace's Secrets", asManager.List(ctx, &corev1.SecretList{}, client.InNamespace(shippedNamespace)))
		expectForbidden("watch the namespace's Secrets", watchSecrets(ctx, managerConfig))
		theirs := &corev1.Secret{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(foreignSecret), theirs); err != nil {
			t.Fatal(err)
		}
		theirs.StringData = map[string]string{"password": "stolen"}
		expectForbidden("update another Secret", asManager.Update(ctx, theirs))
		expectForbidden("delete another Secret", asManager.Delete(ctx, theirs))

		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := asManager.Get(ctx, client.ObjectKeyFromObject(foreignVWC), vwc); err != nil {
			t.Errorf("the manager may read webhook configurations (Kyverno's detector): %v", err)
		}
		vwc.Labels = map[string]string{"hijacked": "yes"}
		expectForbidden("update another webhook configuration", asManager.Update(ctx, vwc))
		expectForbidden("delete another webhook configuration", asManager.Delete(ctx, vwc))
	})

	t.Run("metrics need a token allowed to read them", func(t *testing.T) {
		url := "https://" + manager.metricsAddr + "/metrics"
		get := func(token string) (int, string) {
			t.Helper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}, Timeout: 30 * time.Second}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", url, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		// Go's TLS server answers plain HTTP with a 400 of its own.
		if resp, err := http.Get("http://" + manager.metricsAddr + "/metrics"); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("metrics over plain HTTP: %s, want Go's TLS server's 400", resp.Status)
			}
		}
		if code, _ := get(""); code != http.StatusUnauthorized {
			t.Errorf("without a token: %d, want 401", code)
		}
		if code, _ := get("not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("with an invalid token: %d, want 401", code)
		}
		// The manager's own ServiceAccount is not a metrics reader.
		if code, _ := get(managerToken); code != http.StatusForbidden {
			t.Errorf("with a token not bound to kyvap-metrics-reader: %d, want 403", code)
		}
		monitoring := "privilege-monitoring"
		cp.Namespace(t, monitoring, nil)
		scraper := serviceAccountToken(t, monitoring, "prometheus")
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "privilege-prometheus-kyvap-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: shippedPrefix + "metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: monitoring, Name: "prometheus"}},
		}
		cp.Create(t, binding)
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), binding) })
		err := controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) {
			code, body := get(scraper)
			return code == http.StatusOK && strings.Contains(body, "kyvap_policies"), fmt.Errorf("%d: %.200s", code, body)
		})
		if err != nil {
			t.Errorf("a kyvap-metrics-reader never read the metrics: %v", err)
		}
	})

	t.Run("no HTTP/2", func(t *testing.T) {
		for name, addr := range map[string]string{"webhook": manager.webhookAddr, "metrics": manager.metricsAddr} {
			conn, err := tls.Dial("tcp", addr, insecureTLS("h2", "http/1.1"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := conn.ConnectionState().NegotiatedProtocol; got == "h2" {
				t.Errorf("the %s server negotiated HTTP/2", name)
			}
			conn.Close()
		}
	})

	t.Run("request bodies are bounded", func(t *testing.T) {
		testWebhookBodyLimits(t, manager.webhookAddr)
	})

	// Deleted with the last fallback rule.
	for _, p := range []*kyvernov1.ClusterPolicy{first, second} {
		if err := cp.Client.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		if err != nil {
			return false, err
		}
		return vwc == nil, errors.New("the configuration is still there")
	})
	if err != nil {
		t.Error(err)
	}
}

// watchSecrets starts a watch on the operator namespace's Secrets.
func watchSecrets(ctx context.Context, cfg *rest.Config) error {
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return err
	}
	w, err := wc.Watch(ctx, &corev1.SecretList{}, client.InNamespace(shippedNamespace))
	if err == nil {
		w.Stop()
	}
	return err
}

// waitForRegistered waits until kyvap's configuration registers exactly
// resources.
func waitForRegistered(t *testing.T, resources ...string) {
	t.Helper()
	err := controlplane.Eventually(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
		vwc, err := cp.WebhookConfiguration(ctx)
		if err != nil {
			return false, err
		}
		got := registeredResources(vwc)
		slices.Sort(got)
		return slices.Equal(got, resources), fmt.Errorf("registered for %v", got)
	})
	if err != nil {
		t.Fatalf("the webhook configuration never registered %v: %v", resources, err)
	}
}

// testWebhookBodyLimits sends the webhook at addr bodies over its limit.
func testWebhookBodyLimits(t *testing.T, addr string) {
	path := webhook.PathPrefix + "fail/10?timeout=10s"

	// Announced too large: refused before a byte of it is sent.
	conn, err := tls.Dial("tcp", addr, insecureTLS("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, addr, 1<<30)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a 1 GiB request before its body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 GiB request: %s, want 413", resp.Status)
	}

	// Of unknown length (chunked): cut off after the limit, not read to the end.
	var sent atomic.Int64
	body := &endlessJSON{sent: &sent, limit: 1 << 30}
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}, Timeout: 30 * time.Second}
	start := time.Now()
	resp, err = c.Do(req)
	if err == nil {
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// http.MaxBytesReader's error: cut at kyvap's limit, not at
		// controller-runtime's 7 MiB.
		if !strings.Contains(string(answer), "http: request body too large") {
			t.Errorf("an endless body: %s %s, want it refused as too large", resp.Status, answer)
		}
	}
	// Either an answer or a closed connection; what matters is that the
	// server stopped reading near the limit.
	t.Logf("the client sent %d bytes of an endless body before the webhook refused it", sent.Load())
	if got := sent.Load(); got > 4*webhook.DefaultMaxRequestBytes {
		t.Errorf("the client sent %d bytes of an endless body (limit %d)", got, webhook.DefaultMaxRequestBytes)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("refusing an endless body took %s", took)
	}
}

// endlessJSON is the start of an AdmissionReview whose object never ends
// (up to limit bytes), counting what was read of it.
type endlessJSON struct {
	sent  *atomic.Int64
	limit int64
	began bool
}

func (e *endlessJSON) Read(p []byte) (int, error) {
	if e.sent.Load() >= e.limit {
		return 0, io.EOF
	}
	n := 0
	if !e.began {
		n = copy(p, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"object":{"junk":[`)
		e.began = true
	}
	for n+2 <= len(p) {
		p[n], p[n+1] = '1', ','
		n += 2
	}
	e.sent.Add(int64(n))
	return n, nil
}

// TestRequestBodyBudget: bodies wait, in arrival order, until they fit in
// the in-flight budget, and give up (503) at their timeout.
func TestRequestBodyBudget(t *testing.T) {
	release := make(chan struct{})
	var running atomic.Int32
	var order []string
	var mu sync.Mutex
	h := webhook.LimitRequestBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running.Add(1)
		defer running.Add(-1)
		mu.Lock()
		order = append(order, r.URL.Query().Get("name"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("block") != "" {
			<-release
		}
	}), 300, 400)
	srv := newLocalServer(t, h)
	post := func(name string, size int, query string) *http.Response {
		resp, err := http.Post(srv+"/?name="+name+query, "application/json", bytes.NewReader(make([]byte, size)))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return nil
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("too-large", 301, ""); resp != nil && resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %s, want 413", resp.Status)
	}

	// 300 of 400 bytes held; a second 300 waits, and a small one after it
	// waits too (arrival order), until the first is done.
	done := make(chan string, 3)
	go func() { post("big-1", 300, "&block=1&timeout=30s"); done <- "big-1" }()
	waitFor(t, func() bool { return running.Load() == 1 })
	go func() { post("big-2", 300, "&timeout=30s"); done <- "big-2" }()
	time.Sleep(200 * time.Millisecond)
	go func() { post("small", 10, "&timeout=30s"); done <- "small" }()
	time.Sleep(200 * time.Millisecond)
	if n := running.Load(); n != 1 {
		t.Fatalf("%d requests run beside the first, want none", n-1)
	}
	// One that cannot fit before its timeout is refused.
	if resp := post("impatient", 300, "&timeout=300ms"); resp != nil && resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a request that never fitted: %s, want 503", resp.Status)
	}
	close(release)
	for range 3 {
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 3 || order[0] != "big-1" {
		t.Errorf("handled %v, want big-1 first, then big-2 and small", order)
	}
}

func newLocalServer(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never met")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShippedNetworkPolicies: config/network-policy, which config/default
// includes, selects the manager's pods and opens exactly the webhook port
// (to any source) and the metrics port (to namespaces labelled
// metrics=enabled), the ports the Deployment serves them on; the API
// server accepts the policies.
func TestShippedNetworkPolicies(t *testing.T) {
	var deployment appsv1.Deployment
	readDoc(t, controlplane.RepoPath(t, "config", "manager", "manager.yaml"), "Deployment", &deployment)
	ports := map[string]int32{}
	for _, p := range deployment.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	var args []string
	args = append(args, deployment.Spec.Template.Spec.Containers[0].Args...)
	if !slices.Contains(args, fmt.Sprintf("--webhook-port=%d", ports["webhook-server"])) || !slices.Contains(args, fmt.Sprintf("--metrics-bind-address=:%d", ports["metrics"])) {
		t.Fatalf("the Deployment's flags %v do not match its ports %v", args, ports)
	}

	dir := controlplane.RepoPath(t, "config", "network-policy")
	kustomization, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := os.ReadFile(controlplane.RepoPath(t, "config", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(def), "- ../network-policy") {
		t.Error("config/default does not include config/network-policy")
	}
	open := map[int32]string{}
	for _, file := range []string{"allow-webhook-traffic.yaml", "allow-metrics-traffic.yaml"} {
		if !strings.Contains(string(kustomization), "- "+file) {
			t.Errorf("config/network-policy does not list %s", file)
		}
		var np networkingv1.NetworkPolicy
		readDoc(t, filepath.Join(dir, file), "NetworkPolicy", &np)
		if !equalMaps(np.Spec.PodSelector.MatchLabels, deployment.Spec.Selector.MatchLabels) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: selects %v for %v, want the manager's pods (%v) for ingress", file, np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes, deployment.Spec.Selector.MatchLabels)
		}
		for _, rule := range np.Spec.Ingress {
			from := "any source"
			for _, peer := range rule.From {
				if peer.NamespaceSelector != nil {
					from = fmt.Sprint(peer.NamespaceSelector.MatchLabels)
				}
			}
			for _, p := range rule.Ports {
				open[p.Port.IntVal] = from
			}
		}
		np.Namespace = shippedNamespace
		np.Name = "privilege-" + np.Name
		cp.Create(t, &np)
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), &np) })
	}
	want := map[int32]string{ports["webhook-server"]: "any source", ports["metrics"]: "map[metrics:enabled]"}
	if fmt.Sprint(open) != fmt.Sprint(want) {
		t.Errorf("open ports %v, want %v", open, want)
	}
}

// readDoc decodes the document of kind in a multi-document YAML file.
func readDoc(t *testing.T, path, kind string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split("\n"+string(data), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if meta.Kind == kind {
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return
		}
	}
	t.Fatalf("no %s in %s", kind, path)
}

func equalMaps(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) && len(a) > 0 }

// TestShippedRBACNamesKyvapsObjects: the resourceNames of the shipped
// RBAC are the defaults of --webhook-configuration-name and
// --webhook-secret-name (markers cannot read them).
func TestShippedRBACNamesKyvapsObjects(t *testing.T) {
	names := map[string][]string{}
	for _, obj := range shippedRBAC(t) {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtimeDecode(obj, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			for _, r := range rule.Resources {
				if len(rule.ResourceNames) > 0 {
					names[r] = append(names[r], rule.ResourceNames...)
				}
			}
		}
	}
	if got := names["validatingwebhookconfigurations"]; !slices.Equal(got, []string{webhook.DefaultConfigurationName}) {
		t.Errorf("webhook configurations by name: %v, want [%s]", got, webhook.DefaultConfigurationName)
	}
	if got := names["secrets"]; !slices.Equal(got, []string{webhook.DefaultSecretName}) {
		t.Errorf("secrets by name: %v, want [%s]", got, webhook.DefaultSecretName)
	}
	if got := names["configmaps"]; !slices.Equal(got, []string{operator.TranslationOptionsConfigMap}) {
		t.Errorf("config maps written by name: %v, want [%s]", got, operator.TranslationOptionsConfigMap)
	}
}

func runtimeDecode(u *unstructured.Unstructured, into any) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return yaml.Unmarshal(data, into)
}

// TestShippedResources: the Deployment's memory holds the measured peaks
// (docs/install.md, resources) with margin, GOMEMLIMIT sits between the
// leader's scan peak and the limit, and the pod has the priority of a
// component on the admission path.
func TestShippedResources(t *testing.T) {
	const (
		scanPeak    = 166 << 20 // background scan, 10,000 resources x 50 rules
		webhookPeak = 35 << 20  // a flood of the largest requests, over idle
	)
	var deployment appsv1.Deployment
	readDoc(t, controlplane.RepoPath(t, "config", "manager", "manager.yaml"), "Deployment", &deployment)
	spec := deployment.Spec.Template.Spec
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	c := spec.Containers[0]
	limit := c.Resources.Limits.Memory().Value()
	request := c.Resources.Requests.Memory().Value()
	if limit < (scanPeak+webhookPeak)*5/4 || request < scanPeak {
		t.Errorf("memory request %d, limit %d: below the measured peaks (scan %d, webhook +%d) with margin", request, limit, scanPeak, webhookPeak)
	}
	var goMemLimit int64
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			q, err := resource.ParseQuantity(strings.TrimSuffix(e.Value, "B"))
			if err != nil {
				t.Fatalf("GOMEMLIMIT %q: %v", e.Value, err)
			}
			goMemLimit = q.Value()
		}
	}
	if goMemLimit < scanPeak || goMemLimit >= limit {
		t.Errorf("GOMEMLIMIT %d: want between the scan's peak %d and the limit %d", goMemLimit, int64(scanPeak), limit)
	}
}
