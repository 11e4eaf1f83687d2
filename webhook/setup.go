// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook/certs"
)

// Certificate management modes.
const (
	// CertManagementSelf: kyvap creates and rotates its CA and serving
	// certificate in a Secret and injects the CA into its configuration.
	CertManagementSelf = "self"
	// CertManagementCertManager: cert-manager writes the certificate (mounted
	// in CertDir) and its CA injector fills in the configuration's CA bundle.
	CertManagementCertManager = "cert-manager"
)

// Options configure the fallback webhook.
type Options struct {
	// Host and Port the webhook server listens on.
	Host string
	Port int
	// CertManagement is CertManagementSelf (default) or CertManagementCertManager.
	CertManagement string
	// CertDir holds tls.crt and tls.key in cert-manager mode.
	CertDir string
	// Namespace is the operator's namespace: the Secret lives there, and its
	// requests never go to the webhook.
	Namespace string
	// ServiceName and ServicePort reach the webhook inside the cluster.
	ServiceName string
	ServicePort int32
	// URL, when set, replaces the Service: "https://host:port" for a manager
	// that runs outside the cluster (development, tests).
	URL string
	// SecretName is the TLS Secret in self mode (in cert-manager mode, the
	// CA comes from the Certificate CertManagerCertificate).
	SecretName string
	// ConfigurationName is the ValidatingWebhookConfiguration's name.
	ConfigurationName string
	// OwnerClusterRole, when set, names the ClusterRole that owns the
	// ValidatingWebhookConfiguration instead of the operator's Namespace:
	// an install whose removal keeps the namespace (helm uninstall) deletes
	// that ClusterRole, and the garbage collector the configuration with it.
	OwnerClusterRole string
	// ForceFailurePolicyIgnore gives every webhook failurePolicy Ignore
	// (ConfigOptions.ForceFailurePolicyIgnore).
	ForceFailurePolicyIgnore bool
	// EnableHTTP2 lets the server negotiate HTTP/2. Off by default, as in
	// kubebuilder's scaffold: HTTP/2's stream multiplexing made the server
	// vulnerable to the Rapid Reset and stream-cancellation attacks
	// (CVE-2023-44487, CVE-2023-39325), and the API server calls webhooks
	// over HTTP/1.1 as well.
	EnableHTTP2 bool
	// MaxRequestBytes is the largest request body the webhook reads
	// (DefaultMaxRequestBytes when zero); a larger one is refused with 413
	// before it is read.
	MaxRequestBytes int64
	// MaxConcurrentEvaluations caps the requests evaluating rules at once
	// (Handler.MaxConcurrent; zero is twice GOMAXPROCS).
	MaxConcurrentEvaluations int
	// Certificates tunes the self-managed certificates: lifetimes, check
	// intervals and the clock (tests and benchmarks rotate them in seconds);
	// the zero value is the defaults. Namespace, SecretName, the names and
	// TrustedBundle are set by Setup.
	Certificates certs.Options
	// MaxInFlightBytes bounds the request bodies being read, decoded and
	// evaluated at once (DefaultMaxInFlightBytes when zero): a request
	// waits until its body fits, so memory stays bounded however many
	// requests arrive together. It is at least MaxRequestBytes.
	MaxInFlightBytes int64
}

// Defaults for Options.
const (
	DefaultPort        = 9443
	DefaultServiceName = "kyvap-webhook-service"
	DefaultSecretName  = "kyvap-webhook-tls"
	// CertManagerCertificate is the cert-manager Certificate of config/cert-manager.
	CertManagerCertificate   = "kyvap-webhook-cert"
	DefaultConfigurationName = "kyvap-fallback"
	// DefaultMaxRequestBytes is the API server's own limit on a request
	// body (3 MiB, --max-request-bytes' default): an object stored in etcd
	// is at most 1.5 MiB, so an UPDATE's AdmissionReview, which carries
	// the object and the old object, fits.
	DefaultMaxRequestBytes = 3 << 20
	// DefaultMaxInFlightBytes keeps a 128 Mi pod alive: decoding an
	// AdmissionReview and its objects into the maps CEL evaluates keeps
	// about 10 times the body's size live for Kubernetes objects and up to
	// 21 times for the worst JSON (long arrays of small numbers), so 3 MiB
	// of bodies in flight add at most about 65 MiB to the 24 MiB heap of a
	// manager with 1,000 policies: well under config/manager's GOMEMLIMIT
	// (256 MiB, sized for the background scan's peak as well). The
	// measurements are in docs/webhook.md ("The listener").
	DefaultMaxInFlightBytes = 3 << 20
)

// Validate reports the error New would return for these options.
func (o Options) Validate() error { return o.defaults() }

func (o *Options) defaults() error {
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.CertManagement == "" {
		o.CertManagement = CertManagementSelf
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.ServicePort == 0 {
		o.ServicePort = 443
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.ConfigurationName == "" {
		o.ConfigurationName = DefaultConfigurationName
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.MaxInFlightBytes == 0 {
		o.MaxInFlightBytes = max(DefaultMaxInFlightBytes, o.MaxRequestBytes)
	}
	if o.MaxRequestBytes < 0 || o.MaxInFlightBytes < o.MaxRequestBytes {
		return fmt.Errorf("webhook request limits: --webhook-max-request-bytes=%d must be positive and at most --webhook-max-inflight-bytes=%d", o.MaxRequestBytes, o.MaxInFlightBytes)
	}
	switch o.CertManagement {
	case CertManagementSelf, CertManagementCertManager:
	default:
		return fmt.Errorf("--cert-management %q: want %q or %q", o.CertManagement, CertManagementSelf, CertManagementCertManager)
	}
	if o.Namespace == "" {
		return errors.New("the operator's namespace is unknown: set --webhook-namespace or the POD_NAMESPACE environment variable")
	}
	if o.CertManagement == CertManagementCertManager && o.CertDir == "" {
		return errors.New("--cert-management=cert-manager needs --cert-dir (where cert-manager's Secret is mounted)")
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--webhook-url %q is not an https://host[:port] URL", o.URL)
		}
	}
	return nil
}

// Webhook is the fallback webhook of one manager: its server, and what
// Setup adds to the manager.
type Webhook struct {
	opts   Options
	server ctrlwebhook.Server
	certs  *certs.Manager
	tls    *certHolder
	config *ConfigurationReconciler
	drain  drain
	// EngineLoaded, set before Setup, reports whether the engine has loaded
	// every policy (ConfigurationReconciler.EngineLoaded).
	EngineLoaded func() bool
	// RecordAdmission, set before Setup, receives the outcomes of every
	// request the webhook admits (Handler.Record).
	RecordAdmission func(*admissionv1.AdmissionRequest, []engine.Outcome)
}

// certHolder lets the server's TLS config exist before the certificate
// manager, which needs the manager's clients.
type certHolder struct{ m *certs.Manager }

func (h *certHolder) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if h.m == nil {
		return nil, errors.New("the webhook certificate is not loaded yet")
	}
	return h.m.GetCertificate(hello)
}

// New validates the options and builds the webhook server, to be passed to
// ctrl.Options.WebhookServer.
func New(opts Options) (*Webhook, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	w := &Webhook{opts: opts, tls: &certHolder{}}
	serverOpts := ctrlwebhook.Options{Host: opts.Host, Port: opts.Port}
	if !opts.EnableHTTP2 {
		serverOpts.TLSOpts = append(serverOpts.TLSOpts, DisableHTTP2)
	}
	if opts.CertManagement == CertManagementSelf {
		serverOpts.TLSOpts = append(serverOpts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.tls.GetCertificate })
	} else {
		serverOpts.CertDir = opts.CertDir
	}
	w.server = ctrlwebhook.NewServer(serverOpts)
	return w, nil
}

// KindsChanged re-computes the configuration: discovery changed. It never
// blocks.
func (w *Webhook) KindsChanged() {
	if w.config != nil {
		w.config.Trigger()
	}
}

// Server is the webhook server for ctrl.Options.WebhookServer.
func (w *Webhook) Server() ctrlwebhook.Server { return w.server }

// Setup registers the handler, the certificate manager (self mode) and the
// configuration reconciler with a manager created with Server().
func (w *Webhook) Setup(mgr ctrl.Manager, eng *engine.Engine, resolvers ResolverSource) error {
	lookup := &ClusterLookup{Reader: mgr.GetClient(), Writer: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	handler := &Handler{Engine: eng, Lookup: lookup, MaxConcurrent: w.opts.MaxConcurrentEvaluations, Record: w.RecordAdmission}
	mgr.GetWebhookServer().Register(PathPrefix, w.drain.wrap(LimitRequestBodies(handler.Webhook(), w.opts.MaxRequestBytes, w.opts.MaxInFlightBytes)))
	if err := mgr.AddReadyzCheck("webhook-not-draining", w.drain.Checker); err != nil {
		return err
	}

	configOpts := ConfigOptions{
		Name:                     w.opts.ConfigurationName,
		ExcludedNamespaces:       append(append([]string(nil), translate.WebhookProtectedNamespaces...), w.opts.Namespace),
		Labels:                   map[string]string{translate.LabelManagedBy: translate.ManagedByValue},
		ForceFailurePolicyIgnore: w.opts.ForceFailurePolicyIgnore,
	}
	var dnsNames []string
	var ips []net.IP
	if w.opts.URL != "" {
		configOpts.URL = w.opts.URL
		u, _ := url.Parse(w.opts.URL)
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, u.Hostname())
		}
	} else {
		port := w.opts.ServicePort
		configOpts.Service = &admissionregistrationv1.ServiceReference{Namespace: w.opts.Namespace, Name: w.opts.ServiceName, Port: &port}
		svc := w.opts.ServiceName
		dnsNames = []string{svc, svc + "." + w.opts.Namespace, svc + "." + w.opts.Namespace + ".svc", svc + "." + w.opts.Namespace + ".svc.cluster.local"}
	}
	reconciler := &ConfigurationReconciler{Client: mgr.GetClient(), Engine: eng, Resolvers: resolvers, Options: configOpts, EngineLoaded: w.EngineLoaded, Namespace: w.opts.Namespace,
		OwnerClusterRole: w.opts.OwnerClusterRole, APIReader: mgr.GetAPIReader()}
	w.config = reconciler
	if w.opts.CertManagement == CertManagementSelf {
		certOpts := w.opts.Certificates
		certOpts.Namespace, certOpts.SecretName, certOpts.DNSNames, certOpts.IPs = w.opts.Namespace, w.opts.SecretName, dnsNames, ips
		// The API server verifies the webhook against this configuration's
		// caBundle: a new CA signs the serving certificate only once it is
		// there (read with a direct GET, as the leader has just written it).
		certOpts.TrustedBundle = certs.ConfigurationCABundle(mgr.GetAPIReader(), w.opts.ConfigurationName)
		w.certs = certs.NewManager(mgr.GetClient(), mgr.GetAPIReader(), certOpts, ctrl.Log.WithName("webhook-certs"))
		w.tls.m = w.certs
		publishCertificateExpiry(func() (*tls.Certificate, error) { return w.certs.GetCertificate(nil) })
		reconciler.CABundle = w.certs.CABundle
		w.certs.OnCABundleChange(func([]byte) { reconciler.Trigger() })
		if err := mgr.Add(w.certs); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", w.certs.Checker); err != nil {
			return err
		}
	} else {
		configOpts.Annotations = map[string]string{AnnotationInjectCAFrom: w.opts.Namespace + "/" + CertManagerCertificate}
		reconciler.Options = configOpts
		publishCertificateExpiry(certificateFromDir(w.opts.CertDir))
	}
	return reconciler.SetupWithManager(mgr)
}

// DisableHTTP2 is a TLS option that offers only HTTP/1.1 (see
// Options.EnableHTTP2); cmd/manager applies it to the metrics server too.
func DisableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// Request body limits.
const (
	// defaultBodyTimeout is how long a request may take to send its body and
	// to wait for room in the in-flight budget when the API server gives no
	// timeout (it sends ?timeout=<webhook timeout>, 10s by default).
	defaultBodyTimeout = 10 * time.Second
	// maxBodyTimeout is the longest timeout a webhook may have.
	maxBodyTimeout = 30 * time.Second
)

// LimitRequestBodies wraps an admission handler so that it never reads a
// body over maxBody bytes and that at most inFlight bytes of bodies are
// handled at once:
//
//   - a request whose Content-Length is over maxBody is answered 413 at once,
//     its body unread; one without a Content-Length (chunked) is cut off
//     after maxBody bytes (the handler then fails to read it and answers
//     400);
//   - a request waits, in arrival order, until its body fits in the
//     in-flight budget (a chunked one counts as maxBody), and is answered
//     503 if it does not fit before its timeout;
//   - the body must arrive within the request's timeout (the API server's
//     ?timeout=, else 10s, at most 30s), so that a slow sender cannot hold
//     the budget.
//
// The API server treats 413 and 503 as a failed call and applies the
// webhook's failurePolicy.
func LimitRequestBodies(next http.Handler, maxBody, inFlight int64) http.Handler {
	return &bodyLimiter{next: next, max: maxBody, budget: newByteBudget(inFlight)}
}

type bodyLimiter struct {
	next   http.Handler
	max    int64
	budget *byteBudget
}

func (l *bodyLimiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > l.max {
		// Unread: the server closes the connection rather than drain it.
		http.Error(w, fmt.Sprintf("request body of %d bytes is over kyvap's limit of %d bytes", r.ContentLength, l.max), http.StatusRequestEntityTooLarge)
		return
	}
	size := r.ContentLength
	if size < 0 {
		size = l.max
	}
	size = max(size, 1)
	timeout := requestTimeout(r)
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	if err := l.budget.acquire(ctx, size); err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("kyvap's webhook is busy: %d bytes of requests in flight; this one did not fit within %s", l.budget.size, timeout), http.StatusServiceUnavailable)
		return
	}
	defer l.budget.release(size)
	// A body still arriving at the deadline fails to read; the handler
	// answers 400. Connections whose writer cannot set deadlines (tests'
	// recorders) go without.
	_ = http.NewResponseController(w).SetReadDeadline(deadline)
	r.Body = http.MaxBytesReader(w, r.Body, l.max)
	l.next.ServeHTTP(w, r)
}

// requestTimeout is the timeout the API server gave the request
// (?timeout=10s), bounded to (0, 30s], else defaultBodyTimeout.
func requestTimeout(r *http.Request) time.Duration {
	d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || d <= 0 {
		return defaultBodyTimeout
	}
	return min(d, maxBodyTimeout)
}

// byteBudget is a weighted semaphore over bytes that serves waiters in
// arrival order, so that a large request is not starved by small ones.
type byteBudget struct {
	size    int64
	mu      sync.Mutex
	free    int64
	waiters list.List // of *budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newByteBudget(size int64) *byteBudget { return &byteBudget{size: size, free: size} }

// acquire takes n bytes (at most size), waiting until they are free or ctx
// ends.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	if n > b.size {
		return fmt.Errorf("%d bytes is over the budget of %d", n, b.size)
	}
	b.mu.Lock()
	if b.waiters.Len() == 0 && n <= b.free {
		b.free -= n
		b.mu.Unlock()
		return nil
	}
	waiter := &budgetWaiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(waiter)
	b.mu.Unlock()
	select {
	case <-waiter.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-waiter.ready:
			// Granted while giving up: hand the bytes on.
			b.free += n
		default:
			b.waiters.Remove(elem)
		}
		b.grantLocked()
		return ctx.Err()
	}
}

// release gives n bytes back.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	b.grantLocked()
}

// grantLocked wakes the waiters at the head of the queue whose bytes fit.
func (b *byteBudget) grantLocked() {
	for elem := b.waiters.Front(); elem != nil; elem = b.waiters.Front() {
		waiter := elem.Value.(*budgetWaiter)
		if waiter.n > b.free {
			return
		}
		b.free -= waiter.n
		b.waiters.Remove(elem)
		close(waiter.ready)
	}
}
