// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// rotationFixture is a Manager on a fake API server with a clock the test
// moves and a webhook configuration whose caBundle the test writes.
type rotationFixture struct {
	t      *testing.T
	client client.Client
	now    time.Time
	// exists, bundle and err are what TrustedBundle returns; calls counts
	// its calls.
	exists bool
	bundle []byte
	err    error
	calls  int
}

func newRotationFixture(t *testing.T) *rotationFixture {
	return &rotationFixture{t: t, client: fake.NewClientBuilder().Build(), now: testNow, exists: true}
}

func (f *rotationFixture) manager() *Manager {
	return NewManager(f.client, f.client, Options{
		Namespace: "ns", SecretName: "tls", DNSNames: testDNS, IPs: testIPs,
		CheckInterval: time.Minute,
		Now:           func() time.Time { return f.now },
		TrustedBundle: func(context.Context) ([]byte, bool, error) {
			f.calls++
			return f.bundle, f.exists, f.err
		},
	}, logr.Discard())
}

func (f *rotationFixture) sync(m *Manager) {
	f.t.Helper()
	if err := m.Sync(context.Background()); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
}

func (f *rotationFixture) secret() *corev1.Secret {
	f.t.Helper()
	var s corev1.Secret
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "tls"}, &s); err != nil {
		f.t.Fatal(err)
	}
	return &s
}

// issuer returns the CA of the bundle that signed the certificate m serves.
func issuer(t *testing.T, m *Manager) *x509.Certificate {
	t.Helper()
	cert, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ca := range pemCertificates(m.CABundle()) {
		if cert.Leaf.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	t.Fatal("the served certificate is signed by no CA of the loaded bundle")
	return nil
}

// startRotation syncs m until the CA is created, makes the configuration
// trust it, moves the clock to when the CA is due and syncs again: phase 1.
// It returns the old and the new CA.
func (f *rotationFixture) startRotation(m *Manager) (old, next *x509.Certificate) {
	f.t.Helper()
	f.sync(m)
	f.bundle = m.CABundle()
	old = issuer(f.t, m)
	f.now = f.now.Add(DefaultCAValidity * 3 / 4)
	f.sync(m)
	next = pendingCA(f.secret().Data, f.now)
	if next == nil {
		f.t.Fatal("the due CA did not start phase 1")
	}
	if got := issuer(f.t, m); !got.Equal(old) {
		f.t.Fatal("phase 1 switched the serving certificate to another CA")
	}
	if bundle := pemCertificates(m.CABundle()); len(bundle) != 2 || !bundle[0].Equal(old) || !bundle[1].Equal(next) {
		f.t.Fatal("the loaded bundle is not the current CA then the next one")
	}
	if !m.pending.Load() {
		f.t.Error("the Manager does not report the rotation pending")
	}
	return old, next
}

func TestManagerSwitchesToTheNextCAOnlyOnceTheConfigurationTrustsIt(t *testing.T) {
	f := newRotationFixture(t)
	m := f.manager()
	var loaded [][]byte
	m.OnCABundleChange(func(b []byte) { loaded = append(loaded, b) })
	old, next := f.startRotation(m)
	if len(loaded) != 2 {
		t.Errorf("OnCABundleChange called %d times, want twice (creation, phase 1)", len(loaded))
	}

	// Another replica sees the pending CA: no second phase 1.
	before := f.secret().ResourceVersion
	replica := f.manager()
	f.sync(replica)
	if f.secret().ResourceVersion != before {
		t.Error("another replica rewrote the Secret while the next CA is pending")
	}

	// Every replica must load the bundle first: no look at the
	// configuration during the first CheckInterval.
	f.now = f.now.Add(30 * time.Second)
	f.sync(m)
	if f.calls != 0 {
		t.Errorf("TrustedBundle called %d times within CheckInterval of phase 1", f.calls)
	}
	// The configuration still carries the old bundle: nothing changes, for
	// as long as that lasts.
	for range 3 {
		f.now = f.now.Add(time.Minute)
		f.sync(m)
	}
	if f.calls != 3 || !issuer(t, m).Equal(old) || f.secret().ResourceVersion != before {
		t.Fatalf("with the old bundle in the configuration: %d checks, serving from the new CA %v, Secret rewritten %v",
			f.calls, issuer(t, m).Equal(next), f.secret().ResourceVersion != before)
	}

	// The leader writes the phase 1 bundle: phase 2.
	f.bundle = m.CABundle()
	f.now = f.now.Add(5 * time.Second)
	f.sync(m)
	if !issuer(t, m).Equal(next) {
		t.Fatal("phase 2 did not switch the serving certificate to the new CA")
	}
	data := f.secret().Data
	if _, ok := data[CANextKeyKey]; ok || pendingCA(data, f.now) != nil {
		t.Errorf("%s survived phase 2", CANextKeyKey)
	}
	if bundle := pemCertificates(m.CABundle()); len(bundle) != 2 || !bundle[0].Equal(next) || !bundle[1].Equal(old) {
		t.Error("the phase 2 bundle is not the new CA then the old one")
	}
	if m.pending.Load() {
		t.Error("the Manager reports a rotation pending after phase 2")
	}
	if len(loaded) != 3 {
		t.Errorf("OnCABundleChange called %d times, want 3 (creation, phase 1, phase 2)", len(loaded))
	}
	// The other replica follows without writing.
	before = f.secret().ResourceVersion
	f.sync(replica)
	if f.secret().ResourceVersion != before || !issuer(t, replica).Equal(next) {
		t.Error("the other replica did not simply load phase 2")
	}
}

func TestManagerWaitsCheckIntervalEvenWhenTheConfigurationTrustsTheNextCA(t *testing.T) {
	f := newRotationFixture(t)
	m := f.manager()
	old, next := f.startRotation(m)
	f.bundle = m.CABundle() // the leader was quick
	f.now = f.now.Add(time.Minute - time.Second)
	f.sync(m)
	if !issuer(t, m).Equal(old) {
		t.Fatal("switched to the new CA before every replica can have loaded the phase 1 bundle")
	}
	f.now = f.now.Add(time.Second)
	f.sync(m)
	if !issuer(t, m).Equal(next) {
		t.Fatal("did not switch CheckInterval after phase 1")
	}
}

func TestManagerSwitchesWhenThereIsNoConfiguration(t *testing.T) {
	f := newRotationFixture(t)
	m := f.manager()
	_, next := f.startRotation(m)
	f.exists, f.bundle = false, nil
	f.now = f.now.Add(time.Minute)
	f.sync(m)
	if !issuer(t, m).Equal(next) {
		t.Fatal("no configuration, yet the serving certificate was not switched to the new CA")
	}
}

func TestManagerWithoutTrustedBundleSwitchesAfterCheckInterval(t *testing.T) {
	f := newRotationFixture(t)
	m := f.manager()
	m.opts.TrustedBundle = nil
	_, next := f.startRotation(m)
	f.now = f.now.Add(time.Minute)
	f.sync(m)
	if !issuer(t, m).Equal(next) {
		t.Fatal("not switched to the new CA")
	}
}

func TestManagerLoadsPhaseOneWhenTheConfigurationCannotBeRead(t *testing.T) {
	f := newRotationFixture(t)
	m := f.manager()
	f.sync(m)
	old := issuer(t, m)
	f.now = f.now.Add(DefaultCAValidity * 3 / 4)
	f.sync(m)
	f.err = errors.New("API server unavailable")
	f.now = f.now.Add(time.Minute)
	err := m.Sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "API server unavailable") {
		t.Fatalf("Sync: %v, want the TrustedBundle error", err)
	}
	if !issuer(t, m).Equal(old) || len(pemCertificates(m.CABundle())) != 2 {
		t.Error("the phase 1 Secret was not loaded, or the serving certificate switched")
	}
}

func TestManagerPendingCheckInterval(t *testing.T) {
	m := NewManager(nil, nil, Options{}, logr.Discard())
	if m.opts.PendingCheckInterval != DefaultPendingCheckInterval {
		t.Errorf("default PendingCheckInterval %s, want %s", m.opts.PendingCheckInterval, DefaultPendingCheckInterval)
	}
	m = NewManager(nil, nil, Options{CheckInterval: time.Second}, logr.Discard())
	if m.opts.PendingCheckInterval != time.Second {
		t.Errorf("PendingCheckInterval %s with a CheckInterval of 1s, want 1s", m.opts.PendingCheckInterval)
	}
	m = NewManager(nil, nil, Options{Namespace: "ns", SecretName: "s", DNSNames: testDNS, PendingCheckInterval: -time.Second}, logr.Discard())
	if err := m.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Sync with a negative PendingCheckInterval: %v", err)
	}
}

func TestConfigurationCABundle(t *testing.T) {
	webhook := func(bundle []byte) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: "w.kyvap.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: bundle}}
	}
	both := append(append([]byte{}, testCA.cert...), otherCA.cert...)
	c := fake.NewClientBuilder().WithObjects(
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{webhook(both), webhook(both)}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "edited"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{webhook(both), webhook(otherCA.cert)}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "empty"}},
	).Build()
	for name, want := range map[string]struct {
		bundle []byte
		exists bool
	}{
		"one":     {both, true},
		"edited":  {otherCA.cert, true}, // what every webhook trusts
		"empty":   {nil, false},
		"missing": {nil, false},
	} {
		bundle, exists, err := ConfigurationCABundle(c, name)(context.Background())
		if err != nil || exists != want.exists || string(bundle) != string(want.bundle) {
			t.Errorf("%s: got exists=%v, %d bytes, %v; want exists=%v, %d bytes", name, exists, len(bundle), err, want.exists, len(want.bundle))
		}
	}
}

// countingReader counts the Gets of the Secret.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestManagerChecksOftenWhileACAIsPending(t *testing.T) {
	f := newRotationFixture(t)
	f.startRotation(f.manager())
	reader := &countingReader{Reader: f.client}
	m := NewManager(f.client, reader, Options{
		Namespace: "ns", SecretName: "tls", DNSNames: testDNS, IPs: testIPs,
		CheckInterval: time.Hour, PendingCheckInterval: 10 * time.Millisecond,
		Now: func() time.Time { return f.now },
	}, logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	deadline := time.After(30 * time.Second)
	for reader.gets.Load() < 5 {
		select {
		case <-deadline:
			t.Fatalf("%d reads of the Secret in 30s while a CA is pending, want one every 10ms", reader.gets.Load())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}
