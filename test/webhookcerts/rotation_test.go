// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhookcerts

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/webhook/certs"
)

// gatedReader is a Manager's reader whose Gets wait while the gate is
// closed: the replica is between two checks for as long as the test wants.
type gatedReader struct {
	client.Reader
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
	// blocked receives when a Get starts waiting at the closed gate.
	blocked chan struct{}
}

func newGatedReader(r client.Reader) *gatedReader {
	g := &gatedReader{Reader: r, open: make(chan struct{}), blocked: make(chan struct{}, 1)}
	close(g.open)
	return g
}

func (g *gatedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	default:
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		select {
		case <-open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Reader.Get(ctx, key, obj, opts...)
}

// close closes the gate and returns once a Get waits at it: no check of
// the replica is under way.
func (g *gatedReader) close(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
	select {
	case <-g.blocked: // from an earlier closing
	default:
	}
	select {
	case <-g.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the replica did not come back to read the Secret")
	}
}

func (g *gatedReader) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// standInReconciler does what webhook.ConfigurationReconciler does with the
// CA: when the leader's Manager loads a new bundle (OnCABundleChange), it
// writes the leader's CABundle into every webhook of the configuration,
// asynchronously, as the real one does after Trigger.
func standInReconciler(ctx context.Context, t *testing.T, wg *sync.WaitGroup, leader *certs.Manager, name string) {
	t.Helper()
	trigger := make(chan struct{}, 1)
	leader.OnCABundleChange(func([]byte) {
		select {
		case trigger <- struct{}{}:
		default:
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-trigger:
			}
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				bundle := leader.CABundle()
				var vwc admissionregistrationv1.ValidatingWebhookConfiguration
				err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, &vwc)
				if apierrors.IsNotFound(err) {
					return cp.Client.Create(ctx, rotationConfiguration(name, bundle))
				}
				if err != nil {
					return err
				}
				for i := range vwc.Webhooks {
					vwc.Webhooks[i].ClientConfig.CABundle = bundle
				}
				return cp.Client.Update(ctx, &vwc)
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("writing the CA bundle into the webhook configuration: %v", err)
			}
		}
	})
}

// rotationConfiguration is a configuration whose webhooks no request
// reaches (no such resource): only its caBundle matters.
func rotationConfiguration(name string, bundle []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	url := "https://127.0.0.1:1/" + name
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, webhook := range []string{"first", "second"} {
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    webhook + ".webhookcerts.kyvap.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: bundle},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"webhookcerts.kyvap.io"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
			}},
		})
	}
	return vwc
}

// configurationBundle returns the caBundle of the configuration's first
// webhook, nil when there is none.
func configurationBundle(ctx context.Context, name string) ([]byte, error) {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, &vwc)
	if apierrors.IsNotFound(err) || (err == nil && len(vwc.Webhooks) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return vwc.Webhooks[0].ClientConfig.CABundle, nil
}

func pemCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cert)
	}
}

// violations collects the moments a replica serves, or writes, a
// certificate the configuration does not trust.
type violations struct {
	mu   sync.Mutex
	list []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.list) < 10 {
		v.list = append(v.list, fmt.Sprintf(format, args...))
	}
}

func (v *violations) check(t *testing.T, when string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, msg := range v.list {
		t.Errorf("%s: %s", when, msg)
	}
	if len(v.list) > 0 {
		t.FailNow()
	}
}

// TestCARotationByANonLeaderIsAlwaysTrusted runs two replicas on one Secret
// and one real ValidatingWebhookConfiguration: the "leader" writes the
// bundle it loads into the configuration (a stand-in for the configuration
// reconciler), the "non-leader" finds the CA due and starts the rotation.
// While the test drives them, a poller checks, every few milliseconds, that
// the certificate each replica serves verifies against the caBundle then
// stored in the configuration, and every write of the Secret that changes
// the current CA is checked against the configuration at that moment.
// The non-leader must add the new CA to the bundle (phase 1), not switch
// while the configuration lacks it (the leader is held between two checks),
// and switch once the leader has loaded the bundle and written it (phase
// 2); in the end both serve a certificate of the new CA.
func TestCARotationByANonLeaderIsAlwaysTrusted(t *testing.T) {
	const secretName = "two-phase"
	const vwcName = "webhookcerts-two-phase"
	noSecret(t, secretName)
	// Deleted now and once the replicas and the stand-in have stopped.
	deleteConfiguration := func() {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: vwcName}}
		if err := cp.Client.Delete(context.Background(), vwc); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the webhook configuration: %v", err)
		}
	}
	deleteConfiguration()
	t.Cleanup(deleteConfiguration)
	var c clock
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var bad violations

	// Writes that make another CA current must find it in the
	// configuration: phase 2 only after the configuration carries it.
	checkedWrites := func() client.Client {
		base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return interceptor.NewClient(base, interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if secret, ok := obj.(*corev1.Secret); ok {
					var stored corev1.Secret
					if err := c.Get(ctx, client.ObjectKeyFromObject(secret), &stored); err != nil {
						return err
					}
					was, now := pemCerts(t, stored.Data[certs.CACertKey]), pemCerts(t, secret.Data[certs.CACertKey])
					if len(was) > 0 && len(now) > 0 && !was[0].Equal(now[0]) {
						bundle, err := configurationBundle(ctx, vwcName)
						if err != nil {
							return err
						}
						if !slices.ContainsFunc(pemCerts(t, bundle), now[0].Equal) {
							bad.add("the Secret was written with a new current CA %s that the configuration does not carry", now[0].Subject.CommonName)
						}
					}
				}
				return c.Update(ctx, obj, opts...)
			},
		})
	}

	trusted := certs.ConfigurationCABundle(cp.Client, vwcName)
	var nonLeaderChecks atomic.Int32
	options := func(trustedBundle func(context.Context) ([]byte, bool, error)) certs.Options {
		return certs.Options{
			Namespace: namespace, SecretName: secretName, DNSNames: dnsNames, IPs: ips, Now: c.Now,
			CheckInterval: 300 * time.Millisecond, PendingCheckInterval: 50 * time.Millisecond,
			TrustedBundle: trustedBundle,
		}
	}
	gate := newGatedReader(cp.Client)
	t.Cleanup(gate.reopen)
	leader := certs.NewManager(checkedWrites(), gate, options(trusted), ctrl.Log.WithName(t.Name()+"-leader"))
	nonLeader := certs.NewManager(checkedWrites(), cp.Client, options(func(ctx context.Context) ([]byte, bool, error) {
		nonLeaderChecks.Add(1)
		return trusted(ctx)
	}), ctrl.Log.WithName(t.Name()+"-non-leader"))
	standInReconciler(ctx, t, &wg, leader, vwcName)
	replicas := map[string]*certs.Manager{"leader": leader, "non-leader": nonLeader}

	// The leader starts first and creates the Secret and the configuration.
	start := func(m *certs.Manager) {
		wg.Go(func() {
			if err := m.Start(ctx); err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
	start(leader)
	if err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		bundle, err := configurationBundle(ctx, vwcName)
		return err == nil && len(bundle) > 0 && bytes.Equal(bundle, leader.CABundle()), err
	}); err != nil {
		t.Fatalf("the configuration does not carry the leader's bundle: %v", err)
	}
	start(nonLeader)
	if err := controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) { return nonLeader.Ready(), nil }); err != nil {
		t.Fatalf("the non-leader is not ready: %v", err)
	}
	initial := getSecret(t, secretName)
	oldCA := pemCerts(t, initial.Data[certs.CACertKey])[0]

	// The poller: the certificates served first, then the configuration
	// (the bundle never loses a CA a replica may still serve, so a
	// certificate served before the read must verify against it).
	var polls atomic.Int32
	wg.Go(func() {
		for ctx.Err() == nil {
			servedCerts := map[string]*x509.Certificate{}
			for name, m := range replicas {
				cert, err := m.GetCertificate(nil)
				if err != nil {
					bad.add("%s serves no certificate: %v", name, err)
					continue
				}
				servedCerts[name] = cert.Leaf
			}
			bundle, err := configurationBundle(ctx, vwcName)
			if err != nil {
				if ctx.Err() == nil {
					bad.add("reading the configuration: %v", err)
				}
				return
			}
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(bundle)
			for name, cert := range servedCerts {
				if _, err := cert.Verify(x509.VerifyOptions{DNSName: dnsNames[0], Roots: roots, CurrentTime: c.Now()}); err != nil {
					bad.add("%s serves a certificate (issuer %s) that the configuration's caBundle does not trust: %v", name, cert.Issuer.CommonName, err)
				}
			}
			polls.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	})

	// Time passes; the serving certificate is renewed by the CA every 300
	// days (the replicas' clocks jump, so the certificates served just
	// before a jump must still be valid after it).
	for range 4 {
		c.Advance(300 * 24 * time.Hour)
		if err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			var s corev1.Secret
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(initial), &s); err != nil {
				return false, err
			}
			if rotate, reason := certs.NeedsRotation(s.Data, dnsNames, ips, c.Now()); rotate {
				return false, errors.New(reason)
			}
			for name, m := range replicas {
				if !bytes.Equal(served(t, m), leaf(t, s.Data[certs.TLSCertKey]).Raw) {
					return false, fmt.Errorf("%s does not serve the renewed certificate", name)
				}
			}
			initial = &s
			return true, nil
		}); err != nil {
			t.Fatalf("serving certificate renewal: %v", err)
		}
	}
	if !bytes.Equal(initial.Data[certs.CAKeyKey], getSecret(t, secretName).Data[certs.CAKeyKey]) || len(initial.Data[certs.CANextKeyKey]) > 0 {
		t.Fatal("the CA changed before it is due")
	}

	// The leader is between two checks; 30 more days (3 years 4 months and
	// 20 days in all) and the CA is due.
	gate.close(t)
	c.Advance(30 * 24 * time.Hour)
	var pending *corev1.Secret
	if err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(initial), &s); err != nil {
			return false, err
		}
		pending = &s
		return s.ResourceVersion != initial.ResourceVersion, nil
	}); err != nil {
		t.Fatalf("the non-leader did not rotate the due CA: %v", err)
	}
	bad.check(t, "after the non-leader's first write")
	if len(pending.Data[certs.CANextKeyKey]) == 0 || !bytes.Equal(pending.Data[certs.CAKeyKey], initial.Data[certs.CAKeyKey]) {
		t.Fatal("the non-leader did not start with phase 1 (a next CA added to the bundle, the current CA kept)")
	}
	bundle := pemCerts(t, pending.Data[certs.CACertKey])
	if len(bundle) != 2 || !bundle[0].Equal(oldCA) {
		t.Fatalf("phase 1 bundle of %d certificates, want the current CA then the next one", len(bundle))
	}
	newCA := bundle[1]

	// The non-leader keeps checking the configuration, which lacks the new
	// CA while the leader is held: nothing switches.
	checks := nonLeaderChecks.Load()
	if err := controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) {
		return nonLeaderChecks.Load() >= checks+3, nil
	}); err != nil {
		t.Fatalf("the non-leader does not check the configuration while the new CA is pending: %v", err)
	}
	if now := getSecret(t, secretName); now.ResourceVersion != pending.ResourceVersion {
		t.Fatal("the Secret changed while the configuration lacks the new CA")
	}
	for name, m := range replicas {
		if cert, _ := m.GetCertificate(nil); cert.Leaf.CheckSignatureFrom(oldCA) != nil {
			t.Errorf("%s switched to the new CA while the configuration lacks it", name)
		}
	}
	if b, _ := configurationBundle(ctx, vwcName); slices.ContainsFunc(pemCerts(t, b), newCA.Equal) {
		t.Fatal("the configuration carries the new CA although the leader has not loaded it")
	}
	bad.check(t, "while the leader is held")

	// The leader checks again: it loads the phase 1 bundle and writes it;
	// phase 2 follows, and both replicas end up serving the new CA.
	gate.reopen()
	if err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(initial), &s); err != nil {
			return false, err
		}
		if len(s.Data[certs.CANextKeyKey]) > 0 {
			return false, errors.New("the next CA is still pending")
		}
		if current := pemCerts(t, s.Data[certs.CACertKey]); !current[0].Equal(newCA) {
			return false, errors.New("the new CA is not current")
		}
		for name, m := range replicas {
			cert, err := m.GetCertificate(nil)
			if err != nil || cert.Leaf.CheckSignatureFrom(newCA) != nil {
				return false, fmt.Errorf("%s does not serve a certificate of the new CA", name)
			}
		}
		b, err := configurationBundle(ctx, vwcName)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(b, s.Data[certs.CACertKey]) {
			return false, errors.New("the configuration does not carry the phase 2 bundle")
		}
		return true, nil
	}); err != nil {
		t.Fatalf("phase 2: %v", err)
	}
	// A few more polls of the final state, then the verdict.
	final := polls.Load()
	if err := controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) { return polls.Load() >= final+3, nil }); err != nil {
		t.Fatal(err)
	}
	bad.check(t, "rotation")
	t.Logf("%d polls of the served certificates against the configuration", polls.Load())
}
