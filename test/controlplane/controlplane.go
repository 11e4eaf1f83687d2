// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controlplane starts the real Kubernetes control plane every kyvap
// suite that talks to an API server uses: kube-apiserver and etcd through
// controller-runtime's envtest, Kyverno's CRDs from the pinned kyverno module,
// and, when garbage collection matters, kube-controller-manager beside them.
//
// The binaries are built from the Go module proxy by hack/build-control-plane.sh
// (setup-envtest's download is unreachable from our machines) and cached under
// bin/k8s/<version>/; KUBEBUILDER_ASSETS overrides the location.
package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kyvap/kyvap/operator"
)

// Versions of the parts the control plane is made of. The Makefile pins the
// same values (a test keeps them in step); the environment variables of the
// same names override both.
const (
	DefaultKubeVersion    = "1.37.1"
	DefaultEtcdVersion    = "3.6.5"
	DefaultKyvernoVersion = "v1.19.1"
	kyvernoModule         = "github.com/kyverno/kyverno"
)

// Options say what to start beside kube-apiserver and etcd.
type Options struct {
	// GarbageCollector runs kube-controller-manager with its garbage
	// collector (owner references are honoured), its
	// ValidatingAdmissionPolicy status controller (VAPs get type-checked)
	// and its namespace controller (deleted namespaces go).
	GarbageCollector bool
	// AllKyvernoCRDs also installs the CRDs Kyverno's admission controller
	// needs to run (every policies.kyverno.io kind, reports.kyverno.io,
	// wgpolicyk8s.io, from the kyverno module), besides the kyverno.io ones
	// kyvap reads; otherwise the policies.kyverno.io kinds kyvap reads come
	// from the github.com/kyverno/api module (PoliciesCRDFiles).
	AllKyvernoCRDs bool
	// PolicyReportCRDs installs the wgpolicyk8s.io PolicyReport CRDs of the
	// pinned Kyverno module (AllKyvernoCRDs includes them).
	PolicyReportCRDs bool
	// Log receives the output of kube-controller-manager; nil discards it.
	Log func(format string, args ...any)
}

// ControlPlane is a running test control plane.
type ControlPlane struct {
	// Env is the envtest environment (kube-apiserver + etcd).
	Env *envtest.Environment
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client with Scheme.
	Client client.Client
	// Scheme knows the built-in kinds and kyvap's Kyverno types.
	Scheme *runtime.Scheme

	controllerManager *exec.Cmd
	workDir           string
}

// NewScheme returns a scheme with the built-in Kubernetes kinds and the
// Kyverno kinds kyvap reads.
func NewScheme() *runtime.Scheme { return operator.NewScheme() }

// Start builds (or reuses) the binaries, starts the control plane, installs
// Kyverno's CRDs (the kyverno.io ones and the policies.kyverno.io
// ValidatingPolicy, NamespacedValidatingPolicy and PolicyException) and
// waits until they are served.
func Start(opts Options) (*ControlPlane, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	crds, err := KyvernoCRDDir()
	if err != nil {
		return nil, err
	}
	crdDirs := []string{crds}
	if opts.AllKyvernoCRDs {
		for _, d := range []string{"policies.kyverno.io", "reports", "policyreport"} {
			crdDirs = append(crdDirs, filepath.Join(filepath.Dir(crds), d))
		}
	} else {
		// The policies.kyverno.io kinds kyvap translates, from the module
		// its code reads them with (the same CRDs as Kyverno's).
		files, err := PoliciesCRDFiles()
		if err != nil {
			return nil, err
		}
		crdDirs = append(crdDirs, files...)
		if opts.PolicyReportCRDs {
			crdDirs = append(crdDirs, filepath.Join(filepath.Dir(crds), "policyreport"))
		}
	}
	scheme := NewScheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// CI machines have 2 cores shared by parallel test binaries, each
		// with its own control plane: envtest's 20s defaults are too tight.
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	cp := &ControlPlane{Env: env, Config: cfg, Scheme: scheme}
	cp.Client, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	if opts.GarbageCollector {
		if err := cp.startControllerManager(assets, opts.Log); err != nil {
			return nil, errors.Join(err, cp.Stop())
		}
	}
	return cp, nil
}

// startControllerManager runs kube-controller-manager with only the garbage
// collector, authenticated as a system:masters user of the envtest server.
func (cp *ControlPlane) startControllerManager(assets string, logf func(string, ...any)) error {
	user, err := cp.Env.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating the kube-controller-manager user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	cp.workDir, err = os.MkdirTemp("", "kyvap-kcm-")
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(cp.workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfigPath,
		// The garbage collector honours owner references; the VAP status
		// controller type-checks VAPs and writes status.typeChecking, the
		// aggregation controller fills aggregated ClusterRoles (kyvap's
		// params-reader), and the namespace controller finishes deleting
		// namespaces (kyvap test --cluster replays suites that reuse one), as
		// in a real cluster.
		"--controllers=garbagecollector,validatingadmissionpolicy-status-controller,clusterrole-aggregation,namespace",
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=5",
	)
	out := &lineLogger{logf: logf}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cp.controllerManager = cmd
	return nil
}

// Stop stops everything Start started.
func (cp *ControlPlane) Stop() error {
	var errs []error
	if cp.controllerManager != nil && cp.controllerManager.Process != nil {
		_ = cp.controllerManager.Process.Kill()
		_ = cp.controllerManager.Wait()
		cp.controllerManager = nil
	}
	if cp.workDir != "" {
		errs = append(errs, os.RemoveAll(cp.workDir))
	}
	if cp.Env != nil {
		errs = append(errs, cp.Env.Stop())
	}
	return errors.Join(errs...)
}

// WaitForVAPEnforcement blocks until the API server enforces the given
// binding: the admission plugin picks policies up asynchronously, so a test
// that creates a VAP must wait before expecting denials. probe must return
// true once the expected verdict is observed.
func WaitForVAPEnforcement(ctx context.Context, probe func(context.Context) (bool, error)) error {
	return Eventually(ctx, 30*time.Second, probe)
}

// Eventually polls cond every 50ms until it returns true, an error, or the
// timeout elapses.
func Eventually(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return EventuallyEvery(ctx, 50*time.Millisecond, timeout, cond)
}

// EventuallyEvery is Eventually polling every interval: conditions that
// read many objects or a metrics endpoint poll less often, so as not to
// load what a benchmark measures.
func EventuallyEvery(ctx context.Context, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("condition not met within %s: %w", timeout, last)
			}
			return fmt.Errorf("condition not met within %s", timeout)
		case <-time.After(interval):
		}
	}
}

// ValidatingAdmissionPolicyGVR is here so suites need not repeat it.
var ValidatingAdmissionPolicyGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")

// AssetsDir returns the directory holding kube-apiserver, etcd and
// kube-controller-manager, building them on first use.
func AssetsDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "build-control-plane.sh"))
	cmd.Env = append(os.Environ(), "KUBE_VERSION="+envOr("KUBE_VERSION", DefaultKubeVersion), "ETCD_VERSION="+envOr("ETCD_VERSION", DefaultEtcdVersion))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the control plane: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

var kyvernoDir = sync.OnceValues(func() (string, error) {
	version := envOr("KYVERNO_VERSION", DefaultKyvernoVersion)
	cmd := exec.Command("go", "mod", "download", "-json", kyvernoModule+"@"+version)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s@%s: %w\n%s%s", kyvernoModule, version, err, out, stderr.String())
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("reading go mod download output: %w", err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("downloading %s@%s: %s", kyvernoModule, version, mod.Error)
	}
	return mod.Dir, nil
})

// KyvernoModuleDir returns the source directory of the pinned kyverno module
// in the module cache, downloading it from the Go module proxy if needed.
// Kyverno is reference material for tests only; nothing shipped imports it.
func KyvernoModuleDir() (string, error) { return kyvernoDir() }

// KyvernoCRDDir returns the directory of Kyverno's kyverno.io CRDs.
func KyvernoCRDDir() (string, error) {
	dir, err := KyvernoModuleDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "crds", "kyverno"), nil
}

// policiesAPIModule holds Kyverno's policies.kyverno.io types and CRDs.
const policiesAPIModule = "github.com/kyverno/api"

var policiesAPIDir = sync.OnceValues(func() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	// The version kyvap's go.mod requires: the CRDs match the types.
	cmd := exec.Command("go", "list", "-m", "-json", policiesAPIModule)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating %s: %w\n%s", policiesAPIModule, err, stderr.String())
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("reading go list output: %w", err)
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("%s is not in the module cache (go mod download %s)", policiesAPIModule, policiesAPIModule)
	}
	return mod.Dir, nil
})

// PoliciesCRDFiles returns the CRD files of the policies.kyverno.io kinds
// kyvap reads (ValidatingPolicy, NamespacedValidatingPolicy,
// PolicyException), from the github.com/kyverno/api module at the version
// kyvap's go.mod requires.
func PoliciesCRDFiles() ([]string, error) {
	dir, err := policiesAPIDir()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, name := range []string{"validatingpolicies", "namespacedvalidatingpolicies", "policyexceptions"} {
		files = append(files, filepath.Join(dir, "config", "crds", "policies.kyverno.io_"+name+".yaml"))
	}
	return files, nil
}

// RepoRoot returns the root of the kyvap repository (the directory holding
// go.mod), found from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(data, []byte("module github.com/kyvap/kyvap\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kyvap repository root (go.mod) not found above the working directory")
		}
		dir = parent
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// lineLogger forwards a process's output line by line.
type lineLogger struct {
	mu   sync.Mutex
	buf  []byte
	logf func(string, ...any)
}

func (l *lineLogger) Write(p []byte) (int, error) {
	if l.logf == nil {
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.logf("%s", l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}
