// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

// KyvernoNamespace is the namespace of the Kyverno admission controller the
// tests run.
const KyvernoNamespace = "kyverno"

// Kyverno is Kyverno's admission controller (built from its module by
// hack/build-kyverno.sh) running out of cluster against the control plane:
// its webhook listens on 127.0.0.1 and the API server calls it there.
type Kyverno struct {
	cmd *exec.Cmd
	// exited is closed when the process has exited, with exitErr set.
	exited  chan struct{}
	exitErr error
	// LogPath is the file holding Kyverno's output.
	LogPath string
}

// KyvernoOptions configure StartKyverno.
type KyvernoOptions struct {
	// GenerateValidatingAdmissionPolicy is Kyverno's own VAP generator
	// (--generateValidatingAdmissionPolicy; Kyverno's default is true).
	GenerateValidatingAdmissionPolicy bool
	// ExtraArgs are more flags of Kyverno's admission controller (e.g.
	// --profile to serve pprof); the last of a repeated flag wins.
	ExtraArgs []string
	// Env adds environment variables ("NAME=value") to Kyverno's.
	Env []string
}

// Pid is the process ID of Kyverno's admission controller.
func (k *Kyverno) Pid() int { return k.cmd.Process.Pid }

// LogTail is the end of Kyverno's output (at most 8 KiB), for a failing
// test to show what Kyverno did.
func (k *Kyverno) LogTail() string {
	log, err := os.ReadFile(k.LogPath)
	if err != nil {
		return err.Error()
	}
	return string(tail(log, 8192))
}

// kyvernoLeaderElectionRetryPeriod is the --leaderElectionRetryPeriod the
// tests give Kyverno's controllers, against Kyverno's 2 s. Kyverno's
// leader election runs once (cmd/kyverno/main.go calls le.Run a single
// time): a leader that misses its renew deadline (5 retry periods) stops
// its leader controllers (the VAP generator, the webhook and status
// controllers) and never leads again while its webhooks keep serving. On a
// CI machine running the corpus suites beside it, the API server can take
// longer than 10 s to renew a lease; 50 s it does not. A restart is not
// slower: each process re-acquires at once the Lease its fixed identity
// (KYVERNO_POD_NAME) holds.
const kyvernoLeaderElectionRetryPeriod = "--leaderElectionRetryPeriod=10s"

// StartKyverno builds (or reuses) Kyverno's admission controller and runs it
// as a cluster admin, and waits until it has written its webhook
// configurations. The control plane must have been started with
// AllKyvernoCRDs.
func (cp *ControlPlane) StartKyverno(ctx context.Context, opts KyvernoOptions) (*Kyverno, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	build := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-kyverno.sh"))
	build.Env = append(os.Environ(), "KYVERNO_VERSION="+envOr("KYVERNO_VERSION", DefaultKyvernoVersion))
	out, err := build.Output()
	if err != nil {
		return nil, fmt.Errorf("building Kyverno's admission controller: %w", err)
	}
	binary := strings.TrimSpace(string(out))

	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KyvernoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	for _, name := range []string{"kyverno", "kyverno-metrics"} {
		if err := cp.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: KyvernoNamespace, Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	user, err := cp.Env.AddUser(envtest.User{Name: "kyverno", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kyvap-kyverno-")
	if err != nil {
		return nil, err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	port, err := freeTCPPort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freeTCPPort()
	if err != nil {
		return nil, err
	}
	k := &Kyverno{exited: make(chan struct{}), LogPath: filepath.Join(dir, "kyverno.log")}
	logFile, err := os.Create(k.LogPath)
	if err != nil {
		return nil, err
	}
	k.cmd = exec.Command(binary, append([]string{
		"--kubeconfig=" + kubeconfigPath,
		"--serverIP=127.0.0.1:" + strconv.Itoa(port),
		"--webhookServerPort=" + strconv.Itoa(port),
		"--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca",
		"--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair",
		"--controllerRuntimeMetricsAddress=0",
		"--disableMetrics=true",
		// It serves metrics anyway, by default on :8000.
		"--metricsPort=" + strconv.Itoa(metricsPort),
		"--generateValidatingAdmissionPolicy=" + strconv.FormatBool(opts.GenerateValidatingAdmissionPolicy),
		kyvernoLeaderElectionRetryPeriod,
	}, opts.ExtraArgs...)...)
	k.cmd.Env = append(os.Environ(),
		"KYVERNO_NAMESPACE="+KyvernoNamespace,
		"KYVERNO_SERVICEACCOUNT_NAME=kyverno",
		"KYVERNO_DEPLOYMENT=kyverno-admission-controller",
		"KYVERNO_POD_NAME=kyverno-test",
		"INIT_CONFIG=kyverno",
		"METRICS_CONFIG=kyverno-metrics",
	)
	k.cmd.Env = append(k.cmd.Env, opts.Env...)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	if err := k.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		k.exitErr = k.cmd.Wait()
		_ = logFile.Close()
		close(k.exited)
	}()
	err = Eventually(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		select {
		case <-k.exited:
			return false, fmt.Errorf("the Kyverno process exited: %w (log: %s)", k.exitErr, k.LogPath)
		default:
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "kyverno-resource-validating-webhook-cfg"}, vwc); err != nil {
			return false, fmt.Errorf("waiting for the resource webhook configuration of Kyverno: %w (log: %s)", err, k.LogPath)
		}
		// Its webhooks answer once its serving certificate is loaded: a
		// policy (dry run) goes through its policy webhooks.
		probe := &kyvernov1.ClusterPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "kyverno-ready-probe"},
			Spec:       kyvernov1.Spec{Background: ptr.To(false), Rules: []kyvernov1.Rule{CELRule("probe", "ConfigMap", "true", "probe")}},
		}
		err := cp.Client.Create(ctx, probe, client.DryRunAll)
		return err == nil, fmt.Errorf("the webhooks of Kyverno do not answer yet: %w (log: %s)", err, k.LogPath)
	})
	if err != nil {
		return nil, errors.Join(err, k.Stop(ctx, cp))
	}
	return k, nil
}

// Stop stops Kyverno and removes the webhook configurations it wrote, so
// that nothing calls a webhook that is gone.
func (k *Kyverno) Stop(ctx context.Context, cp *ControlPlane) error {
	if k.cmd != nil && k.cmd.Process != nil {
		terminate(k.cmd, k.exited)
		k.cmd = nil
	}
	var errs []error
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		if err := cp.Client.DeleteAllOf(ctx, obj, client.MatchingLabels{"webhook.kyverno.io/managed-by": "kyverno"}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// freeTCPPort asks the kernel for a port nobody listens on.

// KyvernoReports is Kyverno's reports controller (background scans and
// PolicyReports; built from its module by hack/build-kyverno.sh
// reports-controller) running out of cluster against the control plane.
type KyvernoReports struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	// LogPath is the file holding its output.
	LogPath string
}

// Pid is the process ID of Kyverno's reports controller.
func (k *KyvernoReports) Pid() int { return k.cmd.Process.Pid }

// Stop stops the reports controller (again: nothing) and waits until it
// has exited.
func (k *KyvernoReports) Stop() { terminate(k.cmd, k.exited) }

// terminate stops a process started by this package (exited is closed when
// it has exited): SIGTERM, then SIGKILL after 30 s. It returns at once when
// the process has exited already.
func terminate(cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// StartKyvernoReports builds (or reuses) Kyverno's reports controller, runs
// it as a cluster admin until the test ends, and waits until it leads (its
// Lease names it). Run it beside StartKyverno, which creates Kyverno's
// namespace and ConfigMaps; the control plane must have AllKyvernoCRDs.
// The options' ExtraArgs and Env are added to its own.
func (cp *ControlPlane) StartKyvernoReports(t testing.TB, opts ...KyvernoOptions) *KyvernoReports {
	t.Helper()
	ctx := context.Background()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-kyverno.sh"), "reports-controller")
	build.Env = append(os.Environ(), "KYVERNO_VERSION="+envOr("KYVERNO_VERSION", DefaultKyvernoVersion))
	build.Stderr = os.Stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("building Kyverno's reports controller: %v", err)
	}
	user, err := cp.Env.AddUser(envtest.User{Name: "kyverno-reports-controller", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	k := &KyvernoReports{exited: make(chan struct{}), LogPath: filepath.Join(dir, "reports-controller.log")}
	logFile, err := os.Create(k.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	const pod = "kyverno-reports-test"
	metricsPort, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfigPath,
		"--disableMetrics=true",
		// It serves metrics anyway, by default on :8000, which the
		// admission controller holds.
		"--metricsPort=" + strconv.Itoa(metricsPort),
		kyvernoLeaderElectionRetryPeriod,
	}
	var env []string
	for _, o := range opts {
		args = append(args, o.ExtraArgs...)
		env = append(env, o.Env...)
	}
	k.cmd = exec.Command(strings.TrimSpace(string(out)), args...)
	k.cmd.Env = append(os.Environ(),
		"KYVERNO_NAMESPACE="+KyvernoNamespace,
		"KYVERNO_SERVICEACCOUNT_NAME=kyverno-reports-controller",
		"KYVERNO_DEPLOYMENT=kyverno-reports-controller",
		"KYVERNO_POD_NAME="+pod,
		"INIT_CONFIG=kyverno",
		"METRICS_CONFIG=kyverno-metrics",
	)
	k.cmd.Env = append(k.cmd.Env, env...)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		k.exitErr = k.cmd.Wait()
		_ = logFile.Close()
		close(k.exited)
	}()
	t.Cleanup(k.Stop)
	exited := false
	err = Eventually(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		select {
		case <-k.exited:
			exited = true
			return true, nil
		default:
		}
		lease := &coordinationv1.Lease{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: KyvernoNamespace, Name: "kyverno-reports-controller"}, lease); err != nil {
			return false, fmt.Errorf("waiting for its Lease: %w (log: %s)", err, k.LogPath)
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == pod, fmt.Errorf("the Lease is held by %v (log: %s)", lease.Spec.HolderIdentity, k.LogPath)
	})
	if exited {
		log, _ := os.ReadFile(k.LogPath)
		t.Fatalf("Kyverno's reports controller exited: %v; its log ends with:\n%s", k.exitErr, tail(log, 4096))
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tail is the end of b, at most n bytes.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
