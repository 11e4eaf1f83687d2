// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultCheckInterval is how often a Manager re-reads the Secret when
// Options.CheckInterval is zero. Renewals are due months ahead, so the
// interval matters only for picking up what another replica (or a person)
// changed: one uncached GET a minute per replica is cheap.
const DefaultCheckInterval = time.Minute

// DefaultPendingCheckInterval is how often a Manager re-reads the Secret and
// the trusted bundle while a new CA waits to be trusted, when
// Options.PendingCheckInterval is zero: the switch to the new CA should
// follow soon after the leader writes it into the webhook configuration.
const DefaultPendingCheckInterval = 5 * time.Second

// maxRetryDelay caps the backoff after a failed check, so that a replica that
// has no certificate yet retries sooner than CheckInterval.
const maxRetryDelay = 30 * time.Second

// Options configure a Manager.
type Options struct {
	// Namespace and SecretName locate the Secret (the operator's namespace).
	Namespace, SecretName string
	// DNSNames and IPs are the names the serving certificate must cover;
	// the API server calls a webhook Service as <service>.<namespace>.svc.
	DNSNames []string
	IPs      []net.IP
	// CheckInterval is how often the Secret is re-read (DefaultCheckInterval
	// when zero).
	CheckInterval time.Duration
	// Now returns the current time (time.Now when nil); tests move it.
	Now func() time.Time
	// CAValidity and ServingValidity are the lifetimes of new certificates
	// (DefaultCAValidity and DefaultServingValidity when zero).
	CAValidity, ServingValidity time.Duration
	// TrustedBundle returns the CA bundle the API server verifies the
	// webhook's certificate with (the caBundle of kyvap's
	// ValidatingWebhookConfiguration: see ConfigurationCABundle) and whether
	// that configuration exists. A pending next CA becomes current, and
	// signs the serving certificate, only once this bundle holds it or there
	// is no configuration (no request can reach the webhook then). Nil
	// means that every bundle is trusted at once: tests; in cert-manager
	// mode kyvap runs no Manager.
	TrustedBundle func(ctx context.Context) (bundle []byte, exists bool, err error)
	// PendingCheckInterval is how often the Secret and TrustedBundle are
	// checked while a next CA is pending (DefaultPendingCheckInterval when
	// zero; never more than CheckInterval).
	PendingCheckInterval time.Duration
}

// Manager keeps the webhook's TLS Secret up to date and serves its key pair
// from memory. Every replica runs one (NeedLeaderElection is false): each may
// renew the Secret, start a CA rotation or finish one (see Sync), and
// optimistic concurrency makes sure that when two do it at once, one wins
// and the other adopts the winner's certificate.
type Manager struct {
	client client.Client
	reader client.Reader
	opts   Options
	log    logr.Logger
	// optsErr is the configuration error Start and Sync report: NewManager
	// cannot return one without breaking the constructor's shape.
	optsErr error

	// syncMu serialises Sync: Start's loop and a caller may both run it.
	syncMu sync.Mutex
	// pendingCA is the pending next CA this Manager last saw and
	// pendingSince when it first saw it (Options.Now); guarded by syncMu.
	pendingCA    *x509.Certificate
	pendingSince time.Time
	// pending reports whether the last Sync left a next CA pending, for
	// Start's pace.
	pending atomic.Bool
	// cert is the loaded key pair, nil until the first load.
	cert atomic.Pointer[tls.Certificate]

	mu        sync.Mutex
	caBundle  []byte
	ca        *x509.Certificate
	callbacks []func([]byte)
}

var (
	_ manager.Runnable               = (*Manager)(nil)
	_ manager.LeaderElectionRunnable = (*Manager)(nil)
)

// NewManager returns a Manager for the Secret opts describe. It writes with c
// and reads with reader, which should be uncached (the manager's APIReader):
// a cached read would need a cluster-wide watch on Secrets and could return a
// stale copy right after another replica's write. Invalid options are
// reported by Start and Sync.
func NewManager(c client.Client, reader client.Reader, opts Options, log logr.Logger) *Manager {
	m := &Manager{client: c, reader: reader, opts: opts, log: log.WithValues("secret", opts.Namespace+"/"+opts.SecretName)}
	m.opts.DNSNames = slices.Clone(opts.DNSNames)
	m.opts.IPs = slices.Clone(opts.IPs)
	if m.opts.CheckInterval == 0 {
		m.opts.CheckInterval = DefaultCheckInterval
	}
	if m.opts.PendingCheckInterval == 0 {
		m.opts.PendingCheckInterval = DefaultPendingCheckInterval
	}
	m.opts.PendingCheckInterval = min(m.opts.PendingCheckInterval, m.opts.CheckInterval)
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	if m.opts.CAValidity == 0 {
		m.opts.CAValidity = DefaultCAValidity
	}
	if m.opts.ServingValidity == 0 {
		m.opts.ServingValidity = DefaultServingValidity
	}
	m.optsErr = m.opts.validate()
	if c == nil || reader == nil {
		m.optsErr = errors.Join(m.optsErr, errors.New("webhook certificate manager: nil client or reader"))
	}
	return m
}

func (o Options) validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("no namespace"))
	}
	if o.SecretName == "" {
		errs = append(errs, errors.New("no secret name"))
	}
	if len(o.DNSNames) == 0 && len(o.IPs) == 0 {
		errs = append(errs, errors.New("no DNS name and no IP address to certify"))
	}
	if o.CheckInterval < 0 || o.PendingCheckInterval < 0 || o.CAValidity < 0 || o.ServingValidity < 0 {
		errs = append(errs, errors.New("negative interval or validity"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook certificate manager options: %w", err)
	}
	return nil
}

// OnCABundleChange registers fn to be called with the CA bundle (ca.crt)
// whenever it changes, the first load included, so that the caller can put
// it in the ValidatingWebhookConfiguration. fn runs synchronously, after
// CABundle returns the new bundle and before the new serving certificate is
// served: a callback that updates the webhook configuration before returning
// leaves no moment where this replica serves a certificate the API server
// does not trust. Register callbacks before Start.
func (m *Manager) OnCABundleChange(fn func(caBundle []byte)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.callbacks = append(m.callbacks, fn)
}

// NeedLeaderElection returns false: every replica serves the webhook, so
// every replica needs the certificate.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start checks the Secret at once and then every CheckInterval (every
// PendingCheckInterval while a next CA is pending) until ctx is done (see
// Sync). A failed check is logged and retried with a backoff, up
// to CheckInterval, while the loaded certificate, if any, stays in use: a
// replica must not stop serving because the API server hiccupped. Start
// returns an error only for invalid options.
func (m *Manager) Start(ctx context.Context) error {
	if m.optsErr != nil {
		return m.optsErr
	}
	retry := time.Second
	for {
		err := m.Sync(ctx)
		wait := m.opts.CheckInterval
		if m.pending.Load() {
			wait = m.opts.PendingCheckInterval
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = min(retry, wait)
			retry = min(2*retry, maxRetryDelay)
			m.log.Error(err, "checking the webhook serving certificate failed", "retryIn", wait.String())
		} else {
			retry = time.Second
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// Sync reads the Secret, rewrites it if NeedsRotation says so (see renew:
// the serving pair is re-issued, or phase 1 of a CA rotation adds a next CA
// to the bundle, or an unusable CA is replaced), then, when a next CA is
// pending, makes it current if the API server trusts it (phase 2, see
// switchCA), and loads the result. A write that loses a race with another
// replica (Conflict on update, AlreadyExists on create) is not retried: the
// Secret is read again and the other replica's certificate is used, so that
// a fresh certificate is never overwritten. When phase 2 fails (the trusted
// bundle cannot be read, the write fails), the Secret read is still loaded
// and the error returned.
func (m *Manager) Sync(ctx context.Context) error {
	if m.optsErr != nil {
		return m.optsErr
	}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	secret, err := m.read(ctx)
	if err != nil {
		return err
	}
	var data map[string][]byte
	if secret != nil {
		data = secret.Data
	}
	now := m.opts.Now()
	if rotate, reason := NeedsRotation(data, m.opts.DNSNames, m.opts.IPs, now); rotate {
		renewed, err := renew(data, m.loadedCA(), m.opts.DNSNames, m.opts.IPs, now, m.opts.CAValidity, m.opts.ServingValidity)
		if err != nil {
			return fmt.Errorf("renewing secret %s/%s: %w", m.opts.Namespace, m.opts.SecretName, err)
		}
		if next := renewed[CANextKeyKey]; len(next) > 0 && !bytes.Equal(next, data[CANextKeyKey]) {
			m.log.Info("starting a webhook CA rotation: adding a new CA to the CA bundle", "reason", reason)
		} else {
			m.log.Info("renewing the webhook serving certificate", "reason", reason)
		}
		if secret, err = m.write(ctx, secret, renewed); err != nil {
			return err
		}
	}
	secret, switchErr := m.switchCA(ctx, secret)
	if err := m.load(secret.Data); err != nil {
		return errors.Join(switchErr, err)
	}
	return switchErr
}

// switchCA is phase 2 of a CA rotation. When secret holds a pending next CA
// that this Manager has seen for at least CheckInterval (so that every
// replica, the leader included, has loaded a bundle that holds it: the
// leader writes the bundle it loaded into the webhook configuration, and a
// bundle without the new CA must not be written after the switch), and the
// bundle the API server trusts holds it too (or there is no
// configuration), it makes it the current CA and issues the serving
// certificate from it. It returns the Secret to load: the one written, or
// secret when nothing was written.
func (m *Manager) switchCA(ctx context.Context, secret *corev1.Secret) (*corev1.Secret, error) {
	now := m.opts.Now()
	next := pendingCA(secret.Data, now)
	m.pending.Store(next != nil)
	if next == nil {
		m.pendingCA = nil
		return secret, nil
	}
	if m.pendingCA == nil || !m.pendingCA.Equal(next) {
		m.pendingCA, m.pendingSince = next, now
		m.log.Info("a new webhook CA is in the CA bundle; the serving certificate switches to it once every replica has loaded the bundle and the webhook configuration trusts it",
			"ca", next.Subject.CommonName, "caNotAfter", next.NotAfter)
	}
	if now.Sub(m.pendingSince) < m.opts.CheckInterval {
		return secret, nil
	}
	trusted, why, err := m.trusts(ctx, next)
	if err != nil || !trusted {
		return secret, err
	}
	switched, err := promote(secret.Data, m.opts.DNSNames, m.opts.IPs, now, m.opts.ServingValidity)
	if err != nil {
		return secret, fmt.Errorf("secret %s/%s: %w", m.opts.Namespace, m.opts.SecretName, err)
	}
	m.log.Info("switching the webhook serving certificate to the new CA", "ca", next.Subject.CommonName, "reason", why)
	written, err := m.write(ctx, secret, switched)
	if err != nil {
		return secret, err
	}
	m.pending.Store(pendingCA(written.Data, now) != nil)
	return written, nil
}

// trusts reports whether the bundle the API server trusts holds ca, and why.
func (m *Manager) trusts(ctx context.Context, ca *x509.Certificate) (bool, string, error) {
	if m.opts.TrustedBundle == nil {
		return true, "no trusted bundle to wait for", nil
	}
	bundle, exists, err := m.opts.TrustedBundle(ctx)
	if err != nil {
		return false, "", fmt.Errorf("reading the CA bundle the webhook configuration trusts: %w", err)
	}
	if !exists {
		return true, "there is no webhook configuration", nil
	}
	if slices.ContainsFunc(pemCertificates(bundle), ca.Equal) {
		return true, "the webhook configuration's caBundle holds the new CA", nil
	}
	m.log.V(1).Info("waiting for the webhook configuration's caBundle to hold the new CA", "ca", ca.Subject.CommonName)
	return false, "", nil
}

// pemCertificates returns the certificates of the CERTIFICATE blocks of
// data that parse, skipping anything else.
func pemCertificates(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, cert)
		}
	}
}

// ConfigurationCABundle returns an Options.TrustedBundle that reads the
// ValidatingWebhookConfiguration name with reader, which should be uncached
// (the manager's APIReader: the configuration just written by the leader
// must be seen), and returns the certificates every one of its webhooks
// trusts: kyvap writes one bundle into all of them, so this is the bundle
// of the first webhook. A configuration without webhooks counts as none: no
// request can reach the webhook.
func ConfigurationCABundle(reader client.Reader, name string) func(context.Context) ([]byte, bool, error) {
	return func(ctx context.Context) ([]byte, bool, error) {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		err := reader.Get(ctx, client.ObjectKey{Name: name}, &vwc)
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", name, err)
		}
		if len(vwc.Webhooks) == 0 {
			return nil, false, nil
		}
		first := vwc.Webhooks[0].ClientConfig.CABundle
		same := true
		for _, wh := range vwc.Webhooks[1:] {
			same = same && bytes.Equal(wh.ClientConfig.CABundle, first)
		}
		if same {
			return first, true, nil
		}
		// Someone edited a webhook: trust only what all of them trust.
		var common []byte
		for _, cert := range pemCertificates(first) {
			inAll := true
			for _, wh := range vwc.Webhooks[1:] {
				inAll = inAll && slices.ContainsFunc(pemCertificates(wh.ClientConfig.CABundle), cert.Equal)
			}
			if inAll {
				common = append(common, encodeCert(cert.Raw)...)
			}
		}
		return common, true, nil
	}
}

// read returns the Secret, or nil if it does not exist.
func (m *Manager) read(ctx context.Context) (*corev1.Secret, error) {
	var secret corev1.Secret
	err := m.reader.Get(ctx, client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.SecretName}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", m.opts.Namespace, m.opts.SecretName, err)
	}
	return &secret, nil
}

// write writes data over secret (created when nil) and returns the Secret
// to load: the one written, or what another replica wrote first.
func (m *Manager) write(ctx context.Context, secret *corev1.Secret, data map[string][]byte) (*corev1.Secret, error) {
	var err error
	var written *corev1.Secret
	if secret == nil {
		written = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: m.opts.Namespace,
				Name:      m.opts.SecretName,
				Labels: map[string]string{
					"app.kubernetes.io/name":       "kyvap",
					"app.kubernetes.io/component":  "webhook-certificate",
					"app.kubernetes.io/managed-by": "kyvap",
				},
			},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}
		err = m.client.Create(ctx, written)
	} else {
		// The resourceVersion read is kept: the update fails with Conflict if
		// anyone wrote in between. The type is kept too, as it is immutable;
		// the data is what matters.
		written = secret.DeepCopy()
		written.Data = data
		err = m.client.Update(ctx, written)
	}
	switch {
	case err == nil:
		return written, nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		m.log.Info("another replica wrote the webhook serving certificate first; using it")
		current, err := m.read(ctx)
		if err != nil {
			return nil, err
		}
		if current == nil {
			return nil, fmt.Errorf("secret %s/%s was deleted while being renewed", m.opts.Namespace, m.opts.SecretName)
		}
		if rotate, reason := NeedsRotation(current.Data, m.opts.DNSNames, m.opts.IPs, m.opts.Now()); rotate {
			return nil, fmt.Errorf("secret %s/%s was changed concurrently and still needs renewal (%s)", m.opts.Namespace, m.opts.SecretName, reason)
		}
		return current, nil
	default:
		verb := "updating"
		if secret == nil {
			verb = "creating"
		}
		return nil, fmt.Errorf("%s secret %s/%s: %w", verb, m.opts.Namespace, m.opts.SecretName, err)
	}
}

// load makes data the served key pair and CA bundle, calling the
// OnCABundleChange callbacks when the bundle changed.
func (m *Manager) load(data map[string][]byte) error {
	pair, err := tls.X509KeyPair(data[TLSCertKey], data[TLSKeyKey])
	if err != nil {
		return fmt.Errorf("loading the serving key pair of secret %s/%s: %w", m.opts.Namespace, m.opts.SecretName, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("parsing the serving certificate of secret %s/%s: %w", m.opts.Namespace, m.opts.SecretName, err)
		}
	}
	bundle, err := parseCertsPEM(data[CACertKey])
	if err != nil {
		return fmt.Errorf("parsing %s of secret %s/%s: %w", CACertKey, m.opts.Namespace, m.opts.SecretName, err)
	}
	caBundle := bytes.Clone(data[CACertKey])

	m.mu.Lock()
	changed := !bytes.Equal(m.caBundle, caBundle)
	m.caBundle, m.ca = caBundle, bundle[0]
	callbacks := slices.Clone(m.callbacks)
	m.mu.Unlock()
	if changed {
		m.log.Info("webhook CA bundle loaded", "ca", bundle[0].Subject.CommonName, "caNotAfter", bundle[0].NotAfter, "certificates", len(bundle))
		for _, fn := range callbacks {
			fn(bytes.Clone(caBundle))
		}
	}
	if old := m.cert.Load(); old == nil || !bytes.Equal(old.Certificate[0], pair.Certificate[0]) {
		m.log.Info("webhook serving certificate loaded", "serial", pair.Leaf.SerialNumber.Text(16), "notAfter", pair.Leaf.NotAfter)
	}
	m.cert.Store(&pair)
	return nil
}

// loadedCA returns the CA of the loaded bundle, or nil.
func (m *Manager) loadedCA() *x509.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ca
}

// GetCertificate returns the loaded serving certificate, for
// tls.Config.GetCertificate (controller-runtime's webhook server uses it
// when TLSOpts set it). It fails until the first load.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := m.cert.Load()
	if cert == nil {
		return nil, fmt.Errorf("webhook serving certificate from secret %s/%s not loaded yet", m.opts.Namespace, m.opts.SecretName)
	}
	return cert, nil
}

// CABundle returns the loaded CA bundle (PEM), nil until the first load.
func (m *Manager) CABundle() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.caBundle)
}

// Ready reports whether a serving certificate is loaded.
func (m *Manager) Ready() bool { return m.cert.Load() != nil }

// Checker is a controller-runtime healthz.Checker for AddReadyzCheck: it
// fails until a certificate is loaded, and again if the loaded one has
// expired (renewal kept failing), so that a replica whose TLS handshakes
// would fail is taken out of the Service.
func (m *Manager) Checker(_ *http.Request) error {
	cert := m.cert.Load()
	if cert == nil {
		return fmt.Errorf("webhook serving certificate from secret %s/%s not loaded yet", m.opts.Namespace, m.opts.SecretName)
	}
	if now := m.opts.Now(); !now.Before(cert.Leaf.NotAfter) {
		return fmt.Errorf("webhook serving certificate expired at %s and could not be renewed", cert.Leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}
