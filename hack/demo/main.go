// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo is `make demo`: on a fresh machine it starts the local control
// plane the tests use, runs the kyvap manager binary against it with the RBAC
// of config/rbac, applies the sample policies of config/samples, prints what
// kyvap made of them and shows the API server admitting and denying
// Deployments. Everything it starts is stopped before it exits.
//
// DEMO_KEEP=1 keeps the cluster and the operator running (with a kubeconfig to
// explore them) until Ctrl-C.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// Names the demo gives to what it creates. The RBAC names are the ones
// `kubectl apply -k config/default` produces (namePrefix kyvap-).
const (
	managerUser        = "kyvap-manager"
	managerRoleName    = "kyvap-manager-role"
	managerBindingName = "kyvap-manager-rolebinding"
	adminUser          = "demo-admin"
	devNamespace       = "demo-dev"
	prodNamespace      = "demo-prod"
	// podSecurityNamespace is where config/samples/pod-security-baseline.yaml
	// applies.
	podSecurityNamespace = "pod-security"
)

// Timeouts: generous, the machine may be shared.
const (
	operatorReadyTimeout = 60 * time.Second
	statusTimeout        = 60 * time.Second
	managerStopTimeout   = 20 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{out: os.Stdout, keep: os.Getenv("DEMO_KEEP") == "1", started: time.Now()}
	err := d.run(ctx)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started has been stopped")
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// demo holds the state of one run.
type demo struct {
	out     io.Writer
	keep    bool
	started time.Time

	root    string
	tmp     string
	cp      *controlplane.ControlPlane
	client  client.Client // cluster admin, deprecation warnings silenced
	manager *managerProcess
}

func (d *demo) run(ctx context.Context) (err error) {
	if d.root, err = controlplane.RepoRoot(); err != nil {
		return err
	}
	if d.tmp, err = os.MkdirTemp("", "kyvap-demo-"); err != nil {
		return err
	}
	defer os.RemoveAll(d.tmp)

	// Deferred in this order so that the operator stops before the control
	// plane it talks to.
	defer func() { err = errors.Join(err, d.stopControlPlane()) }()
	if err := d.startControlPlane(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.stopOperator()) }()
	steps := []func(context.Context) error{d.startOperator, d.applySamples, d.showStatus, d.showAdmission, d.showValidatingPolicies, d.showReports}
	for _, step := range steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := step(ctx); err != nil {
			return err
		}
	}
	if d.keep {
		return d.waitForInterrupt(ctx)
	}
	return nil
}

func (d *demo) heading(n int, title string) {
	fmt.Fprintf(d.out, "\n%d. %s  [%s]\n%s\n", n, title, time.Since(d.started).Round(100*time.Millisecond), strings.Repeat("─", len(title)+3))
}

func (d *demo) printf(format string, args ...any) {
	fmt.Fprintf(d.out, "   "+format+"\n", args...)
}

// ----------------------------------------------------------------------------
// 1. Control plane

func (d *demo) startControlPlane() error {
	d.heading(1, "Control plane")
	d.printf("starting kube-apiserver + etcd + kube-controller-manager (garbage collector);")
	d.printf("the first run builds them into bin/k8s/ (about 15 minutes on 2 cores)")
	var err error
	d.cp, err = controlplane.Start(controlplane.Options{GarbageCollector: true, PolicyReportCRDs: true})
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(d.cp.Config)
	// Kyverno 1.19 marks kyverno.io/v1 deprecated; the warning would repeat on every call.
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	if d.client, err = client.New(cfg, client.Options{Scheme: d.cp.Scheme}); err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	version, err := dc.ServerVersion()
	if err != nil {
		return err
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := d.client.List(context.Background(), &crds); err != nil {
		return err
	}
	var kyvernoKinds []string
	for _, crd := range crds.Items {
		if crd.Spec.Group == "kyverno.io" {
			kyvernoKinds = append(kyvernoKinds, crd.Spec.Names.Kind)
		}
	}
	sort.Strings(kyvernoKinds)
	d.printf("kube-apiserver %s at %s", version.GitVersion, d.cp.Config.Host)
	d.printf("Kyverno's CRDs, and the wgpolicyk8s.io PolicyReport CRDs, installed from the kyverno module (Kyverno itself does not run):")
	d.printf("  %s", strings.Join(kyvernoKinds, ", "))
	return nil
}

func (d *demo) stopControlPlane() error {
	if d.cp == nil {
		return nil
	}
	err := d.cp.Stop()
	if err == nil {
		d.printf("control plane stopped (kube-controller-manager, kube-apiserver, etcd)")
	}
	return err
}

// ----------------------------------------------------------------------------
// 2. Operator

// startOperator runs the real manager binary as a user holding only the
// ClusterRole of config/rbac/role.yaml, so the demo also proves that RBAC is
// enough.
func (d *demo) startOperator(ctx context.Context) error {
	d.heading(2, "Operator")
	binary, err := d.managerBinary(ctx)
	if err != nil {
		return err
	}
	version, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", binary, err)
	}
	if err := d.grantManagerRole(ctx); err != nil {
		return err
	}
	kubeconfig, err := d.writeKubeconfig(envtest.User{Name: managerUser}, "manager.kubeconfig")
	if err != nil {
		return err
	}
	d.printf("RBAC: ClusterRole %s from config/rbac/role.yaml, bound to user %q", managerRoleName, managerUser)

	probePort, err := freePort()
	if err != nil {
		return err
	}
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	d.manager, err = startManager(binary, kubeconfig, filepath.Join(d.tmp, "manager.log"), probePort, metricsPort)
	if err != nil {
		return err
	}
	d.printf("started %s (%s), pid %d, as user %q", relativeTo(d.root, binary), strings.TrimSpace(string(version)), d.manager.cmd.Process.Pid, managerUser)
	if err := d.manager.waitReady(ctx, operatorReadyTimeout); err != nil {
		return err
	}
	d.printf("ready: http://127.0.0.1:%d/readyz answers 200; metrics at http://127.0.0.1:%d/metrics", probePort, metricsPort)
	return nil
}

// managerBinary returns bin/manager (which `make demo` builds first), and
// builds it when the demo runs on its own (`go run ./hack/demo`).
func (d *demo) managerBinary(ctx context.Context) (string, error) {
	binary := filepath.Join(d.root, "bin", "manager")
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	d.printf("building bin/manager")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binary, "./cmd/manager")
	build.Dir = d.root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the manager: %w\n%s", err, out)
	}
	return binary, nil
}

// grantManagerRole creates the manager's ClusterRole from config/rbac/role.yaml
// (generated from the +kubebuilder:rbac markers) and binds it to the demo's
// manager user.
func (d *demo) grantManagerRole(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(d.root, "config", "rbac", "role.yaml"))
	if err != nil {
		return err
	}
	// role.yaml holds the ClusterRole, then the Role for the operator's
	// namespace (the webhook's certificate Secret).
	docs := bytes.Split(bytes.TrimPrefix(data, []byte("---\n")), []byte("\n---\n"))
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(docs[0], &role); err != nil {
		return fmt.Errorf("reading config/rbac/role.yaml: %w", err)
	}
	role.Name = managerRoleName
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: managerBindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerRoleName},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	}
	if err := d.client.Create(ctx, &role); err != nil {
		return err
	}
	if err := d.client.Create(ctx, binding); err != nil {
		return err
	}
	if err := d.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return err
	}
	for _, doc := range docs[1:] {
		var nsRole rbacv1.Role
		if err := yaml.UnmarshalStrict(doc, &nsRole); err != nil {
			return fmt.Errorf("reading config/rbac/role.yaml: %w", err)
		}
		nsRole.Namespace = operatorNamespace
		if err := d.client.Create(ctx, &nsRole); err != nil {
			return err
		}
		nsBinding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: nsRole.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: nsRole.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
		}
		if err := d.client.Create(ctx, nsBinding); err != nil {
			return err
		}
	}
	return nil
}

// operatorNamespace is where the demo's manager keeps its webhook Secret.
const operatorNamespace = "kyvap-system"

// writeKubeconfig writes a kubeconfig for a new user of the envtest server
// into the demo's temporary directory.
func (d *demo) writeKubeconfig(user envtest.User, name string) (string, error) {
	authenticated, err := d.cp.Env.AddUser(user, nil)
	if err != nil {
		return "", fmt.Errorf("creating user %s: %w", user.Name, err)
	}
	data, err := authenticated.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(d.tmp, name)
	return path, os.WriteFile(path, data, 0o600)
}

func (d *demo) stopOperator() error {
	if d.manager == nil {
		return nil
	}
	d.heading(8, "Stopping")
	took, err := d.manager.stop()
	if err != nil {
		d.printf("operator: %v; its log:", err)
		d.printLogTail()
		return err
	}
	d.printf("operator stopped (SIGTERM, clean exit in %s)", took.Round(time.Millisecond))
	return nil
}

func (d *demo) printLogTail() {
	data, _ := os.ReadFile(d.manager.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	for _, l := range lines {
		d.printf("  | %s", l)
	}
}

// managerProcess is the running manager binary.
type managerProcess struct {
	cmd         *exec.Cmd
	logPath     string
	logFile     *os.File
	probePort   int
	metricsPort int
	exited      chan struct{}
	waitErr     error
}

func startManager(binary, kubeconfig, logPath string, probePort, metricsPort int) (*managerProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	webhookPort, err := freePort()
	if err != nil {
		return nil, err
	}
	// The manager runs outside any cluster: the API server calls its webhook
	// on this machine, by URL, over TLS with kyvap's own CA.
	cmd := exec.Command(binary,
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		// Plain HTTP on 127.0.0.1, so that the demo's curl needs no token.
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--metrics-secure=false",
		"--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", webhookPort),
		fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", webhookPort),
		"--webhook-namespace="+operatorNamespace,
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: Ctrl-C in the terminal reaches the demo only,
	// which then stops the manager gracefully (SIGTERM) before the API server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	m := &managerProcess{cmd: cmd, logPath: logPath, logFile: logFile, probePort: probePort, metricsPort: metricsPort, exited: make(chan struct{})}
	go func() {
		m.waitErr = cmd.Wait()
		logFile.Close()
		close(m.exited)
	}()
	return m, nil
}

// waitReady polls the readiness probe until it answers 200.
func (m *managerProcess) waitReady(ctx context.Context, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", m.probePort)
	return controlplane.Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		select {
		case <-m.exited:
			return false, fmt.Errorf("the manager exited: %w (log: %s)", m.waitErr, m.logPath)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("%s: %s", url, resp.Status)
	})
}

// stop asks the manager to shut down gracefully and kills it if it takes
// too long.
func (m *managerProcess) stop() (time.Duration, error) {
	start := time.Now()
	select {
	case <-m.exited:
		return 0, fmt.Errorf("the manager had already exited: %w", m.waitErr)
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		return time.Since(start), m.waitErr
	case <-time.After(managerStopTimeout):
		_ = m.cmd.Process.Kill()
		<-m.exited
		return time.Since(start), fmt.Errorf("the manager ignored SIGTERM for %s and was killed", managerStopTimeout)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func relativeTo(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// ----------------------------------------------------------------------------
// 3. Sample policies

// samplePolicies reads the ClusterPolicies listed in config/samples/kustomization.yaml.
func (d *demo) samplePolicies() ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(d.root, "config", "samples")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		return nil, fmt.Errorf("reading config/samples/kustomization.yaml: %w", err)
	}
	var policies []*unstructured.Unstructured
	for _, file := range kustomization.Resources {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return nil, fmt.Errorf("reading config/samples/%s: %w", file, err)
		}
		policies = append(policies, obj)
	}
	return policies, nil
}

func (d *demo) applySamples(ctx context.Context) error {
	d.heading(3, "Sample policies (config/samples/)")
	policies, err := d.samplePolicies()
	if err != nil {
		return err
	}
	w := d.table()
	for _, p := range policies {
		// Strict: a field Kyverno's CRD does not know is an error, not pruned.
		if err := d.client.Create(ctx, p, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			return fmt.Errorf("creating ClusterPolicy %s: %w", p.GetName(), err)
		}
		fmt.Fprintf(w, "clusterpolicy.kyverno.io/%s created\t%s\n", p.GetName(), p.GetAnnotations()["policies.kyverno.io/title"])
	}
	return w.Flush()
}

// table returns a tabwriter indented like the rest of the output.
func (d *demo) table() *tabwriter.Writer {
	return tabwriter.NewWriter(&indenter{w: d.out, prefix: "   "}, 0, 0, 2, ' ', 0)
}

// indenter prefixes every line written through it.
type indenter struct {
	w       io.Writer
	prefix  string
	midLine bool
}

func (in *indenter) Write(p []byte) (int, error) {
	var buf bytes.Buffer
	for _, b := range p {
		if !in.midLine {
			buf.WriteString(in.prefix)
		}
		buf.WriteByte(b)
		in.midLine = b != '\n'
	}
	_, err := in.w.Write(buf.Bytes())
	return len(p), err
}

// ----------------------------------------------------------------------------
// 4. Status

func (d *demo) showStatus(ctx context.Context) error {
	d.heading(4, "What kyvap made of them")
	policies, err := d.samplePolicies()
	if err != nil {
		return err
	}
	w := d.table()
	fmt.Fprintln(w, "POLICY\tGENERATED\tREASON\tMESSAGE")
	for _, p := range policies {
		policy, cond, err := d.waitForStatus(ctx, p.GetName())
		if err != nil {
			return err
		}
		lines := wrap(cond.Message, 72)
		fmt.Fprintf(w, "%s\t%t\t%s\t%s\n", policy.Name, policy.Status.ValidatingAdmissionPolicy.Generated, cond.Reason, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "\t\t\t%s\n", l)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return d.showGenerated(ctx)
}

// waitForStatus waits until kyvap's condition reflects the policy's current
// generation.
func (d *demo) waitForStatus(ctx context.Context, name string) (*kyvernov1.ClusterPolicy, *metav1.Condition, error) {
	policy, cond, err := controlplane.WaitForPolicyStatus(ctx, d.client, name, statusTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("ClusterPolicy %s got no status from the operator (log: %s): %w", name, d.manager.logPath, err)
	}
	return policy, cond, nil
}

func (d *demo) showGenerated(ctx context.Context) error {
	managed := client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := d.client.List(ctx, &vaps, managed); err != nil {
		return err
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := d.client.List(ctx, &bindings, managed); err != nil {
		return err
	}

	fmt.Fprintf(d.out, "\n   ValidatingAdmissionPolicies (label %s=%s)\n", translate.LabelManagedBy, translate.ManagedByValue)
	w := d.table()
	fmt.Fprintln(w, "NAME\tOWNER\tRESOURCES\tVALIDATIONS")
	for _, vap := range vaps.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", vap.Name, owner(&vap), resources(vap.Spec.MatchConstraints), len(vap.Spec.Validations))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(d.out, "\n   ValidatingAdmissionPolicyBindings (named after their VAP)\n")
	w = d.table()
	fmt.Fprintln(w, "NAME\tACTIONS\tNAMESPACES")
	for _, b := range bindings.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\n", b.Name, actions(b.Spec.ValidationActions), bindingScope(b.Spec.MatchResources))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return d.showWebhookConfiguration(ctx)
}

// showWebhookConfiguration lists what kyvap's own webhook is registered
// for: only what no ValidatingAdmissionPolicy can express.
func (d *demo) showWebhookConfiguration(ctx context.Context) error {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	err := d.client.Get(ctx, client.ObjectKey{Name: webhook.DefaultConfigurationName}, &vwc)
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(d.out, "\n   ValidatingWebhookConfiguration %s: none (every rule is a ValidatingAdmissionPolicy)\n", webhook.DefaultConfigurationName)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\n   ValidatingWebhookConfiguration %s (kyvap's webhook, for what no VAP can express)\n", webhook.DefaultConfigurationName)
	w := d.table()
	fmt.Fprintln(w, "WEBHOOK\tRESOURCES\tOPERATIONS")
	for _, wh := range vwc.Webhooks {
		for _, r := range wh.Rules {
			ops := make([]string, len(r.Operations))
			for i, op := range r.Operations {
				ops[i] = string(op)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", wh.Name, strings.Join(r.Resources, ","), strings.Join(ops, ","))
		}
	}
	return w.Flush()
}

func owner(obj metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return ref.Kind + "/" + ref.Name
	}
	return "-"
}

func resources(m *admissionregistrationv1.MatchResources) string {
	if m == nil {
		return "-"
	}
	var out []string
	for _, r := range m.ResourceRules {
		out = append(out, strings.Join(r.Resources, ","))
	}
	return strings.Join(out, ",")
}

func actions(as []admissionregistrationv1.ValidationAction) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// bindingScope says which namespaces a binding covers.
func bindingScope(m *admissionregistrationv1.MatchResources) string {
	if m == nil {
		return "all"
	}
	scope := "all"
	if m.NamespaceSelector != nil {
		if s := metav1.FormatLabelSelector(m.NamespaceSelector); s != "<none>" {
			scope = s
		}
	}
	for _, r := range m.ResourceRules {
		if r.Scope != nil && *r.Scope == admissionregistrationv1.ClusterScope {
			return "cluster-scoped objects"
		}
	}
	return scope
}

// wrap breaks text into lines of at most width runes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// ----------------------------------------------------------------------------
// 5. Admission

// admissionCheck is one request shown to the API server.
type admissionCheck struct {
	what   string
	object client.Object
	// want is the verdict the generated policies must produce; the API
	// server loads them asynchronously, so the demo polls until it does.
	want verdict
	// message must appear in the denial or warning.
	message string
	// create stores the object (otherwise a dry run).
	create bool
}

type verdict string

const (
	admitted verdict = "ADMITTED"
	warned   verdict = "WARNED"
	denied   verdict = "DENIED"
)

func (d *demo) showAdmission(ctx context.Context) error {
	d.heading(5, "The API server enforces them")
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: prodNamespace, Labels: map[string]string{"env": "prod"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: podSecurityNamespace}},
	} {
		if err := d.client.Create(ctx, ns); err != nil {
			return err
		}
	}
	d.printf("namespaces %s (no labels), %s (env=prod) and %s created", devNamespace, prodNamespace, podSecurityNamespace)

	latest := func(dep *appsv1.Deployment) *appsv1.Deployment {
		dep.Spec.Template.Spec.Containers[0].Image = "nginx:latest"
		return dep
	}
	checks := []admissionCheck{
		{what: "10 replicas", object: deployment(prodNamespace, "too-big", 10), want: denied, message: "at most 5 replicas"},
		{what: "nginx:latest in an env=prod namespace", object: latest(deployment(prodNamespace, "latest", 1)), want: denied, message: "pinned to a tag"},
		{what: "nginx:latest elsewhere (Audit)", object: latest(deployment(devNamespace, "latest", 1)), want: warned, message: "pinned to a tag"},
		{what: "a Pod without the team label", object: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: "no-team"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
		}, want: denied, message: "'team' is required"},
		// Kyverno's autogen applies the Pod rule to the pod template of
		// controllers: that variant is a ValidatingAdmissionPolicy too.
		{what: "a Deployment whose pods lack the team label", object: withoutTeam(deployment(devNamespace, "no-team", 1)), want: denied, message: "ValidatingAdmissionPolicy 'kyvap-require-team-label.autogen-team-label'"},
		// A classic validate.pattern rule (=() anchors), compiled to CEL:
		// the API server denies, for the Pod and for a Deployment's init
		// container (the rule's pod-controller variant).
		{what: "a privileged Pod", object: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: "privileged", Labels: map[string]string{"team": "shop"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
		}, want: denied, message: "ValidatingAdmissionPolicy 'kyvap-disallow-privileged-containers.privileged-containers'"},
		{what: "a Deployment with a privileged init container", object: withPrivilegedInit(deployment(devNamespace, "privileged-init", 1)), want: denied, message: "ValidatingAdmissionPolicy 'kyvap-disallow-privileged-containers.autogen-privileged-containers'"},
		// A classic validate.deny rule (a JMESPath default and AnyIn with
		// a wildcard), compiled to CEL: the API server denies, with the
		// message's variable rendered.
		{what: "a Pod of the retired team sandbox-7", object: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: "retired", Labels: map[string]string{"team": "sandbox-7"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
		}, want: denied, message: "team sandbox-7 is retired"},
		{what: "a Deployment of the retired team legacy", object: withTeam(deployment(devNamespace, "legacy", 1), "legacy"), want: denied, message: "ValidatingAdmissionPolicy 'kyvap-block-retired-teams.autogen-retired-teams'"},
		// A validate.podSecurity rule (baseline, with an exclusion of the
		// ingress controller's hostPorts), compiled to CEL: the API server
		// denies, for Pods and for a Deployment's pod template.
		{what: "a hostNetwork Pod (Pod Security Standards, baseline)", object: pod(podSecurityNamespace, "host-network", func(spec *corev1.PodSpec) { spec.HostNetwork = true }), want: denied, message: "ValidatingAdmissionPolicy 'kyvap-pod-security-baseline.baseline'"},
		{what: "a Pod with a hostPort", object: pod(podSecurityNamespace, "host-port", func(spec *corev1.PodSpec) {
			spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		}), want: denied, message: "ValidatingAdmissionPolicy 'kyvap-pod-security-baseline.baseline'"},
		{what: "a privileged Deployment", object: withPrivileged(deployment(podSecurityNamespace, "privileged", 1)), want: denied, message: "ValidatingAdmissionPolicy 'kyvap-pod-security-baseline.autogen-baseline'"},
		{what: "3 replicas, team=shop, nginx:1.27", object: deployment(prodNamespace, "web", 3), want: admitted, create: true},
		{what: "the ingress controller's hostPort 80 (excluded by image)", object: pod(podSecurityNamespace, "ingress", func(spec *corev1.PodSpec) {
			spec.Containers[0].Image = "registry.k8s.io/ingress-nginx/controller:v1.11.2"
			spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}), want: admitted},
	}
	w := d.table()
	for _, c := range checks {
		got, text, err := d.check(ctx, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\t%s %s/%s: %s\n", got, kindOf(c.object), c.object.GetNamespace(), c.object.GetName(), c.what)
		if text != "" {
			for _, l := range wrap(text, 100) {
				fmt.Fprintf(w, "\t  %s\n", l)
			}
		}
	}
	return w.Flush()
}

// check sends the request until it gets the wanted verdict and returns the
// verdict with the API server's error or warning text.
func (d *demo) check(ctx context.Context, c admissionCheck) (verdict, string, error) {
	var got verdict
	var text string
	send := func(ctx context.Context) (bool, error) {
		var err error
		var warnings []string
		got, text, warnings, err = d.send(ctx, c)
		if err != nil {
			return false, err
		}
		if got == warned {
			text = "Warning: " + strings.Join(warnings, "; Warning: ")
		}
		if got == c.want && strings.Contains(text, c.message) {
			return true, nil
		}
		return false, fmt.Errorf("got %s %s", got, text)
	}
	if c.want == admitted {
		// Every denial and warning has been seen: the policies are loaded.
		// What admits the object may arrive after them, though (a
		// PolicyException's condition in a VAP that already denied): it is
		// waited for as a denial is.
		if err := controlplane.WaitForVAPEnforcement(ctx, send); err != nil {
			return "", "", fmt.Errorf("%s %s/%s was not admitted: %w", kindOf(c.object), c.object.GetNamespace(), c.object.GetName(), err)
		}
		return got, text, nil
	}
	if err := controlplane.WaitForVAPEnforcement(ctx, send); err != nil {
		return "", "", fmt.Errorf("%s %s/%s: want %s with %q: %w", kindOf(c.object), c.object.GetNamespace(), c.object.GetName(), c.want, c.message, err)
	}
	return got, text, nil
}

// send creates the object (a dry run unless the check says otherwise) and
// classifies the API server's answer. Errors other than admission denials
// are returned as errors.
func (d *demo) send(ctx context.Context, c admissionCheck) (verdict, string, []string, error) {
	var warnings []string
	cfg := rest.CopyConfig(d.cp.Config)
	cfg.WarningHandlerWithContext = warningCollector{&warnings}
	cl, err := client.New(cfg, client.Options{Scheme: d.cp.Scheme})
	if err != nil {
		return "", "", nil, err
	}
	var opts []client.CreateOption
	if !c.create {
		opts = append(opts, client.DryRunAll)
	}
	err = cl.Create(ctx, c.object.DeepCopyObject().(client.Object), opts...)
	switch {
	case err == nil && len(warnings) > 0:
		return warned, "", warnings, nil
	case err == nil:
		text := ""
		if c.create {
			text = "created"
		}
		return admitted, text, nil, nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		return denied, err.Error(), nil, nil
	default:
		return "", "", nil, err
	}
}

type warningCollector struct{ into *[]string }

func (w warningCollector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	*w.into = append(*w.into, text)
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Pod:
		return "Pod"
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *batchv1.CronJob:
		return "CronJob"
	}
	return fmt.Sprintf("%T", obj)
}

// withoutTeam removes the team label from the Deployment's pod template.
// withTeam sets the team label of the pod template.
func withTeam(dep *appsv1.Deployment, team string) *appsv1.Deployment {
	labels := map[string]string{"team": team}
	for k, v := range dep.Spec.Template.Labels {
		if k != "team" {
			labels[k] = v
		}
	}
	dep.Spec.Template.Labels = labels
	return dep
}

func withoutTeam(dep *appsv1.Deployment) *appsv1.Deployment {
	labels := map[string]string{}
	for k, v := range dep.Spec.Template.Labels {
		if k != "team" {
			labels[k] = v
		}
	}
	dep.Spec.Template.Labels = labels
	return dep
}

// deployment is a Deployment that every sample policy accepts, except for
// the number of replicas.
// withPrivilegedInit gives the Deployment's pods a privileged init container.
func withPrivilegedInit(dep *appsv1.Deployment) *appsv1.Deployment {
	dep.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
	return dep
}

// withPrivileged makes the Deployment's container privileged.
func withPrivileged(dep *appsv1.Deployment) *appsv1.Deployment {
	dep.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	return dep
}

// pod is a Pod that every sample policy accepts, changed by change.
func pod(namespace, name string, change func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"team": "shop"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}
	change(&p.Spec)
	return p
}

func deployment(namespace, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name, "team": "shop"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
			},
		},
	}
}

// ----------------------------------------------------------------------------
// 6. ValidatingPolicies

// showValidatingPolicies applies the policies.kyverno.io samples of
// config/samples/validatingpolicies (a Pod ValidatingPolicy, a
// NamespacedValidatingPolicy and a CEL PolicyException), prints kyvap's
// condition on each policy, and lets the API server judge.
func (d *demo) showValidatingPolicies(ctx context.Context) error {
	d.heading(6, "ValidatingPolicies (config/samples/validatingpolicies/)")
	dir := filepath.Join(d.root, "config", "samples", "validatingpolicies")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	var policies []*unstructured.Unstructured
	w := d.table()
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return fmt.Errorf("reading %s: %w", relativeTo(d.root, file), err)
		}
		if err := d.client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		name := obj.GetName()
		if obj.GetNamespace() != "" {
			name = obj.GetNamespace() + "/" + name
		}
		fmt.Fprintf(w, "%s.policies.kyverno.io/%s created\t%s\n", strings.ToLower(obj.GetKind()), name, obj.GetAnnotations()["policies.kyverno.io/title"])
		if obj.GetKind() != "PolicyException" {
			policies = append(policies, obj)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(d.out)
	w = d.table()
	fmt.Fprintln(w, "POLICY\tGENERATED\tREASON\tMESSAGE")
	for _, p := range policies {
		got, cond, err := d.waitForModelStatus(ctx, p)
		if err != nil {
			return err
		}
		generated, _, _ := unstructured.NestedBool(got.Object, "status", "generated")
		lines := wrap(cond["message"], 72)
		fmt.Fprintf(w, "%s/%s\t%t\t%s\t%s\n", got.GetKind(), got.GetName(), generated, cond["reason"], lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "\t\t\t%s\n", l)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}

	hostPath := func(name string) corev1.PodSpec {
		return corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
			Volumes:    []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/" + name}}}},
		}
	}
	withHostPath := func(dep *appsv1.Deployment) *appsv1.Deployment {
		dep.Spec.Template.Spec = hostPath(dep.Name)
		return dep
	}
	team := map[string]string{"team": "shop"}
	cronJob := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: "backup", Labels: team},
		Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: team},
			Spec:       withRestartNever(hostPath("backup")),
		}}}},
	}
	const byVAP = "hostPath volumes are not allowed"
	checks := []admissionCheck{
		{what: "a Pod with a hostPath volume", object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: "host-pod", Labels: team}, Spec: hostPath("pod")}, want: denied, message: byVAP},
		{what: "a Deployment whose pods have one (autogen variant)", object: withHostPath(deployment(devNamespace, "host-deploy", 1)), want: denied, message: byVAP},
		{what: "a CronJob whose pods have one (autogen variant)", object: cronJob, want: denied, message: byVAP},
		{what: "the same Deployment named node-exporter (PolicyException)", object: withHostPath(deployment(devNamespace, "node-exporter", 1)), want: admitted},
		{what: "a ConfigMap without an owner label", object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: "no-owner"}}, want: denied, message: "need an owner label"},
		{what: "the same ConfigMap in another namespace (the nvpol is demo-dev's)", object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: prodNamespace, Name: "no-owner"}}, want: admitted},
	}
	w = d.table()
	for _, c := range checks {
		got, text, err := d.check(ctx, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\t%s %s/%s: %s\n", got, kindOf(c.object), c.object.GetNamespace(), c.object.GetName(), c.what)
		for _, l := range wrap(text, 100) {
			if l != "" {
				fmt.Fprintf(w, "\t  %s\n", l)
			}
		}
	}
	return w.Flush()
}

func withRestartNever(spec corev1.PodSpec) corev1.PodSpec {
	spec.RestartPolicy = corev1.RestartPolicyNever
	return spec
}

// waitForModelStatus waits until kyvap's condition on a ValidatingPolicy or
// NamespacedValidatingPolicy reflects its generation, and returns the policy
// and the condition's fields.
func (d *demo) waitForModelStatus(ctx context.Context, policy *unstructured.Unstructured) (*unstructured.Unstructured, map[string]string, error) {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(policy.GroupVersionKind())
	cond := map[string]string{}
	err := controlplane.Eventually(ctx, statusTimeout, func(ctx context.Context) (bool, error) {
		if err := d.client.Get(ctx, client.ObjectKeyFromObject(policy), got); err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditionStatus", "conditions")
		for _, c := range conditions {
			m, _ := c.(map[string]any)
			if m["type"] != controllers.ConditionType {
				continue
			}
			if observed, _ := m["observedGeneration"].(int64); observed != got.GetGeneration() {
				return false, fmt.Errorf("condition at generation %d, policy at %d", observed, got.GetGeneration())
			}
			for _, k := range []string{"reason", "message", "status"} {
				cond[k], _ = m[k].(string)
			}
			return true, nil
		}
		return false, fmt.Errorf("no %s condition yet", controllers.ConditionType)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s got no status from the operator (log: %s): %w", policy.GetKind(), policy.GetName(), d.manager.logPath, err)
	}
	return got, cond, nil
}

// ----------------------------------------------------------------------------
// DEMO_KEEP=1

func (d *demo) waitForInterrupt(ctx context.Context) error {
	kubeconfig, err := d.writeKubeconfig(envtest.User{Name: adminUser, Groups: []string{"system:masters"}}, "kubeconfig")
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\nDEMO_KEEP=1: the control plane and the operator keep running. Try:\n\n")
	d.printf("export KUBECONFIG=%s", kubeconfig)
	d.printf("kubectl get clusterpolicies,validatingadmissionpolicies,validatingadmissionpolicybindings")
	d.printf("kubectl get clusterpolicy require-team-label -o jsonpath='{.status}'")
	d.printf("kubectl -n %s create deployment big --image=nginx:1.27 --replicas=9", devNamespace)
	d.printf("curl -s http://127.0.0.1:%d/metrics | grep ^kyvap_", d.manager.metricsPort)
	d.printf("less %s   # the operator's log", d.manager.logPath)
	fmt.Fprintf(d.out, "\nPress Ctrl-C to stop everything.\n")
	select {
	case <-ctx.Done():
		fmt.Fprintln(d.out)
		return nil
	case <-d.manager.exited:
		return fmt.Errorf("the operator exited: %w", d.manager.waitErr)
	}
}

// ----------------------------------------------------------------------------
// 6. PolicyReports

// showReports creates a ConfigMap, then an Audit policy it violates, and
// shows the PolicyReport kyvap's background scan writes for the resource
// that existed before its policy.
func (d *demo) showReports(ctx context.Context) error {
	d.heading(7, "PolicyReports for resources that existed before their policy")
	// An owner label for step 6's NamespacedValidatingPolicy; no team label.
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: "legacy-settings", Labels: map[string]string{"owner": "ops"}}, Data: map[string]string{"mode": "old"}}
	if err := d.client.Create(ctx, legacy); err != nil {
		return err
	}
	d.printf("configmap %s/%s created (no team label)", legacy.Namespace, legacy.Name)
	policy := &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-need-team", Annotations: map[string]string{
			"policies.kyverno.io/category": "Best Practices", "policies.kyverno.io/severity": "medium",
		}},
		Spec: kyvernov1.Spec{ValidationFailureAction: kyvernov1.Audit, Rules: []kyvernov1.Rule{{
			Name: "team-label",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{
				Kinds: []string{"ConfigMap"}, Namespaces: []string{devNamespace},
			}}}},
			Validation: &kyvernov1.Validation{CEL: &kyvernov1.CEL{Expressions: []admissionregistrationv1.Validation{{
				Expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", Message: "ConfigMaps need a team label",
			}}}},
		}}},
	}
	if err := d.client.Create(ctx, policy); err != nil {
		return err
	}
	d.printf("clusterpolicy %s created afterwards (Audit, background scans on by default)", policy.Name)
	report := &unstructured.Unstructured{}
	report.SetAPIVersion("wgpolicyk8s.io/v1alpha2")
	report.SetKind("PolicyReport")
	key := client.ObjectKey{Namespace: legacy.Namespace, Name: "kyvap-" + string(legacy.UID)}
	err := controlplane.Eventually(ctx, statusTimeout, func(ctx context.Context) (bool, error) {
		return d.client.Get(ctx, key, report) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("no PolicyReport %s: %w", key, err)
	}
	w := d.table()
	fmt.Fprintf(w, "kubectl get polr -n %s\n", legacy.Namespace)
	fmt.Fprintf(w, "NAME\tKIND\tNAME\tPASS\tFAIL\n")
	summary, _, _ := unstructured.NestedMap(report.Object, "summary")
	fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%v\n", report.GetName(), "ConfigMap", legacy.Name, summary["pass"], summary["fail"])
	if err := w.Flush(); err != nil {
		return err
	}
	results, _, _ := unstructured.NestedSlice(report.Object, "results")
	for _, r := range results {
		m, _ := r.(map[string]any)
		d.printf("result: %s", resultLine(m))
	}
	return nil
}

// resultLine is a PolicyReport result as one line, without the fields it
// does not have (a ValidatingPolicy's results have no rule name, a pass no
// message).
func resultLine(m map[string]any) string {
	text := fmt.Sprint(m["policy"])
	if rule, ok := m["rule"].(string); ok && rule != "" {
		text += "/" + rule
	}
	text += " " + fmt.Sprint(m["result"])
	if msg, ok := m["message"].(string); ok && msg != "" {
		text += ": " + msg
	}
	var about []string
	for _, k := range []string{"category", "severity", "source"} {
		if v, ok := m[k].(string); ok && v != "" {
			about = append(about, k+" "+v)
		}
	}
	if len(about) > 0 {
		text += " (" + strings.Join(about, ", ") + ")"
	}
	return text
}
