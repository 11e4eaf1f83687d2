// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhookcerts runs webhook/certs' Manager against a real API
// server: the Secret it writes, the races between replicas, rotation and a
// TLS handshake with the certificate it serves.
package webhookcerts

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/webhook/certs"
)

const namespace = "kyvap-system"

var (
	cp       *controlplane.ControlPlane
	dnsNames = []string{"kyvap-webhook-service.kyvap-system.svc", "kyvap-webhook-service.kyvap-system.svc.cluster.local"}
	ips      = []net.IP{net.ParseIP("127.0.0.1")}
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunSuite(m, controlplane.Options{}, &cp))
}

// clock is a wall clock that tests move forward; replicas of one test share
// it, as replicas of one cluster share (roughly) one time.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// newManager returns a Manager of the Secret name writing through c (the
// suite's client when nil) and reading uncached, as in the operator.
func newManager(t *testing.T, name string, c client.Client, now func() time.Time, interval time.Duration) *certs.Manager {
	t.Helper()
	cp.EnsureNamespace(t, namespace, nil)
	if c == nil {
		c = cp.Client
	}
	return certs.NewManager(c, cp.Client, certs.Options{
		Namespace:     namespace,
		SecretName:    name,
		DNSNames:      dnsNames,
		IPs:           ips,
		CheckInterval: interval,
		Now:           now,
	}, ctrl.Log.WithName(t.Name()))
}

// noSecret deletes the Secret name, if any, now and when the test ends:
// tests that move the clock leave certificates from the future behind.
func noSecret(t *testing.T, name string) {
	t.Helper()
	cp.EnsureNamespace(t, namespace, nil)
	del := func() error {
		err := cp.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if err := del(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := del(); err != nil {
			t.Errorf("deleting secret %s: %v", name, err)
		}
	})
}

func getSecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	var secret corev1.Secret
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		t.Fatalf("reading secret %s: %v", name, err)
	}
	return &secret
}

func leaf(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("no PEM certificate in %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// served returns the DER certificate m serves.
func served(t *testing.T, m *certs.Manager) []byte {
	t.Helper()
	cert, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: dnsNames[0]})
	if err != nil {
		t.Fatal(err)
	}
	return cert.Certificate[0]
}

func mustSync(t *testing.T, m *certs.Manager) {
	t.Helper()
	if err := m.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func TestCreatesTheSecret(t *testing.T) {
	m := newManager(t, "create", nil, nil, 0)
	var bundles [][]byte
	m.OnCABundleChange(func(b []byte) { bundles = append(bundles, b) })
	mustSync(t, m)

	secret := getSecret(t, "create")
	if secret.Type != corev1.SecretTypeTLS {
		t.Errorf("type %q, want %q", secret.Type, corev1.SecretTypeTLS)
	}
	for _, key := range []string{certs.TLSCertKey, certs.TLSKeyKey, certs.CACertKey, certs.CAKeyKey} {
		if len(secret.Data[key]) == 0 {
			t.Errorf("secret has no %s", key)
		}
	}
	if rotate, reason := certs.NeedsRotation(secret.Data, dnsNames, ips, time.Now()); rotate {
		t.Errorf("the new secret needs rotation: %s", reason)
	}
	if !m.Ready() || m.Checker(nil) != nil {
		t.Error("not ready after Sync")
	}
	if !bytes.Equal(m.CABundle(), secret.Data[certs.CACertKey]) {
		t.Error("CABundle differs from the secret's ca.crt")
	}
	if len(bundles) != 1 || !bytes.Equal(bundles[0], secret.Data[certs.CACertKey]) {
		t.Errorf("OnCABundleChange called %d times, want once with ca.crt", len(bundles))
	}
	if !bytes.Equal(served(t, m), leaf(t, secret.Data[certs.TLSCertKey]).Raw) {
		t.Error("the served certificate is not the secret's")
	}
	// A second check changes nothing.
	mustSync(t, m)
	if again := getSecret(t, "create"); again.ResourceVersion != secret.ResourceVersion {
		t.Error("a second Sync rewrote a fresh secret")
	}
	if len(bundles) != 1 {
		t.Errorf("OnCABundleChange called again for an unchanged bundle")
	}
}

func TestSecondReplicaReusesTheSecret(t *testing.T) {
	first := newManager(t, "reuse", nil, nil, 0)
	mustSync(t, first)
	before := getSecret(t, "reuse")

	second := newManager(t, "reuse", nil, nil, 0)
	mustSync(t, second)
	if after := getSecret(t, "reuse"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the second replica rewrote the secret: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
	if !bytes.Equal(served(t, first), served(t, second)) || !bytes.Equal(first.CABundle(), second.CABundle()) {
		t.Error("the replicas serve different certificates")
	}
}

// raceClient makes every write of the Secret lose a race: before the write
// reaches the API server, the other replica syncs.
func raceClient(t *testing.T, other *certs.Manager) client.Client {
	t.Helper()
	base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	first := func(ctx context.Context) {
		once.Do(func() {
			if err := other.Sync(ctx); err != nil {
				t.Errorf("the other replica's Sync: %v", err)
			}
		})
	}
	return interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			first(ctx)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			first(ctx)
			return c.Update(ctx, obj, opts...)
		},
	})
}

func TestLosingTheCreateRaceAdoptsTheWinner(t *testing.T) {
	noSecret(t, "create-race")
	winner := newManager(t, "create-race", nil, nil, 0)
	loser := newManager(t, "create-race", raceClient(t, winner), nil, 0)
	mustSync(t, loser) // its Create gets AlreadyExists
	secret := getSecret(t, "create-race")
	want := leaf(t, secret.Data[certs.TLSCertKey]).Raw
	if !bytes.Equal(served(t, loser), want) || !bytes.Equal(served(t, winner), want) {
		t.Error("the replicas do not both serve the certificate in the secret")
	}
	if !bytes.Equal(loser.CABundle(), secret.Data[certs.CACertKey]) {
		t.Error("the loser's CA bundle is not the secret's")
	}
}

func TestLosingTheUpdateRaceAdoptsTheWinner(t *testing.T) {
	garbage(t, "update-race", corev1.SecretTypeTLS)
	winner := newManager(t, "update-race", nil, nil, 0)
	loser := newManager(t, "update-race", raceClient(t, winner), nil, 0)
	mustSync(t, loser) // its Update gets Conflict
	secret := getSecret(t, "update-race")
	if rotate, reason := certs.NeedsRotation(secret.Data, dnsNames, ips, time.Now()); rotate {
		t.Fatalf("the secret still needs rotation: %s", reason)
	}
	want := leaf(t, secret.Data[certs.TLSCertKey]).Raw
	if !bytes.Equal(served(t, loser), want) || !bytes.Equal(served(t, winner), want) {
		t.Error("the replicas do not both serve the certificate in the secret")
	}
}

// garbage creates the Secret name with unusable content.
func garbage(t *testing.T, name string, typ corev1.SecretType) {
	t.Helper()
	cp.EnsureNamespace(t, namespace, nil)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       typ,
		Data: map[string][]byte{
			certs.TLSCertKey: []byte("not a certificate"),
			certs.TLSKeyKey:  []byte("not a key"),
			certs.CACertKey:  []byte("not a CA"),
			certs.CAKeyKey:   []byte("not a CA key"),
			"unrelated":      []byte("x"),
		},
	}
	cp.Create(t, secret)
}

func TestGarbageSecretIsReplaced(t *testing.T) {
	for name, typ := range map[string]corev1.SecretType{"garbage-tls": corev1.SecretTypeTLS, "garbage-opaque": corev1.SecretTypeOpaque} {
		t.Run(name, func(t *testing.T) {
			garbage(t, name, typ)
			m := newManager(t, name, nil, nil, 0)
			mustSync(t, m)
			secret := getSecret(t, name)
			if rotate, reason := certs.NeedsRotation(secret.Data, dnsNames, ips, time.Now()); rotate {
				t.Errorf("the secret still needs rotation: %s", reason)
			}
			if _, ok := secret.Data["unrelated"]; ok {
				t.Error("unrelated data survived the replacement")
			}
			if secret.Type != typ {
				t.Errorf("type changed to %q: it is immutable", secret.Type)
			}
			if !bytes.Equal(served(t, m), leaf(t, secret.Data[certs.TLSCertKey]).Raw) {
				t.Error("the served certificate is not the secret's")
			}
		})
	}
}

func TestExpiringServingCertificateIsRenewedWithTheSameCA(t *testing.T) {
	mustSync(t, newManager(t, "renew", nil, nil, 0))
	before := getSecret(t, "renew")

	var c clock
	c.Advance(300 * 24 * time.Hour) // less than a third of the year left
	m := newManager(t, "renew", nil, c.Now, 0)
	var bundles int
	m.OnCABundleChange(func([]byte) { bundles++ })
	mustSync(t, m)
	after := getSecret(t, "renew")
	if after.ResourceVersion == before.ResourceVersion {
		t.Fatal("the expiring certificate was not renewed")
	}
	if !bytes.Equal(after.Data[certs.CACertKey], before.Data[certs.CACertKey]) || !bytes.Equal(after.Data[certs.CAKeyKey], before.Data[certs.CAKeyKey]) {
		t.Error("the CA changed although it is still good")
	}
	oldLeaf, newLeaf := leaf(t, before.Data[certs.TLSCertKey]), leaf(t, after.Data[certs.TLSCertKey])
	if !newLeaf.NotAfter.After(oldLeaf.NotAfter) {
		t.Errorf("renewed certificate expires %s, not after the old %s", newLeaf.NotAfter, oldLeaf.NotAfter)
	}
	if !bytes.Equal(served(t, m), newLeaf.Raw) {
		t.Error("the renewed certificate is not served")
	}
	if bundles != 1 {
		t.Errorf("OnCABundleChange called %d times, want once (first load)", bundles)
	}
}

// TestExpiringCAIsRotatedInTwoPhases: a due CA is first added to the bundle
// (phase 1: the serving pair and ca.key stay), and becomes current, signing
// the serving certificate, a CheckInterval later (phase 2), here because
// there is no webhook configuration to wait for.
func TestExpiringCAIsRotatedInTwoPhases(t *testing.T) {
	var c clock
	first := certs.NewManager(cp.Client, cp.Client, certs.Options{
		Namespace: namespace, SecretName: "new-ca", DNSNames: dnsNames, IPs: ips, Now: c.Now,
		TrustedBundle: certs.ConfigurationCABundle(cp.Client, "webhookcerts-no-such-configuration"),
	}, ctrl.Log.WithName(t.Name()))
	noSecret(t, "new-ca")
	mustSync(t, first)
	// 1,200 days on the serving certificate is renewed, by the same CA.
	c.Advance(1200 * 24 * time.Hour)
	mustSync(t, first)
	before := getSecret(t, "new-ca")

	// 30 days later, the CA has less than a third of its five years left.
	c.Advance(30 * 24 * time.Hour)
	var bundles [][]byte
	first.OnCABundleChange(func(b []byte) { bundles = append(bundles, b) })
	mustSync(t, first)
	pending := getSecret(t, "new-ca")
	for _, key := range []string{certs.CAKeyKey, certs.TLSCertKey, certs.TLSKeyKey} {
		if !bytes.Equal(pending.Data[key], before.Data[key]) {
			t.Errorf("phase 1 changed %s", key)
		}
	}
	if len(pending.Data[certs.CANextKeyKey]) == 0 || !bytes.HasPrefix(pending.Data[certs.CACertKey], before.Data[certs.CACertKey]) ||
		bytes.Equal(pending.Data[certs.CACertKey], before.Data[certs.CACertKey]) {
		t.Fatalf("phase 1 did not add a next CA after the current one (%s: %d bytes)", certs.CANextKeyKey, len(pending.Data[certs.CANextKeyKey]))
	}
	if len(bundles) != 1 || !bytes.Equal(bundles[0], pending.Data[certs.CACertKey]) {
		t.Errorf("OnCABundleChange called %d times, want once with the phase 1 bundle", len(bundles))
	}
	if !bytes.Equal(served(t, first), leaf(t, before.Data[certs.TLSCertKey]).Raw) {
		t.Error("phase 1 changed the served certificate")
	}

	// A CheckInterval (the default minute) later, with no configuration:
	// phase 2.
	c.Advance(time.Minute)
	mustSync(t, first)
	after := getSecret(t, "new-ca")
	if !bytes.Equal(after.Data[certs.CAKeyKey], pending.Data[certs.CANextKeyKey]) || len(after.Data[certs.CANextKeyKey]) != 0 {
		t.Fatal("phase 2 did not make the next CA current")
	}
	if !bytes.HasSuffix(after.Data[certs.CACertKey], before.Data[certs.CACertKey]) {
		t.Error("the new bundle does not keep the previous CA")
	}
	if len(bundles) != 2 || !bytes.Equal(bundles[1], after.Data[certs.CACertKey]) {
		t.Errorf("OnCABundleChange called %d times, want twice (phase 1, phase 2)", len(bundles))
	}
	newLeaf := leaf(t, after.Data[certs.TLSCertKey])
	if !bytes.Equal(served(t, first), newLeaf.Raw) {
		t.Error("phase 2's certificate is not served")
	}
	for name, bundle := range map[string][]byte{"phase 1": pending.Data[certs.CACertKey], "phase 2": after.Data[certs.CACertKey]} {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(bundle)
		if _, err := newLeaf.Verify(x509.VerifyOptions{DNSName: dnsNames[0], Roots: roots, CurrentTime: c.Now()}); err != nil {
			t.Errorf("the new certificate does not verify against the %s bundle: %v", name, err)
		}
	}
}

// TestTLSHandshake serves HTTPS with GetCertificate while Start runs, as the
// webhook server does, and verifies it against CABundle by name and address.
func TestTLSHandshake(t *testing.T) {
	m := newManager(t, "handshake", nil, nil, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	if err := controlplane.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) { return m.Ready(), m.Checker(nil) }); err != nil {
		t.Fatalf("not ready: %v", err)
	}

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: m.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(m.CABundle()) {
		t.Fatal("CABundle holds no certificate")
	}
	port := ln.Addr().(*net.TCPAddr).Port
	for _, serverName := range []string{dnsNames[0], ""} { // by DNS name (SNI), by IP address (no SNI)
		httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
		resp, err := httpClient.Get("https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Errorf("server name %q: %v", serverName, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(body) != "ok" {
			t.Errorf("server name %q: body %q", serverName, body)
		}
	}
	// A client that trusts another CA must fail: the handshake really checks.
	strict := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool(), ServerName: dnsNames[0], MinVersion: tls.VersionTLS12}}}
	if resp, err := strict.Get("https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		_ = resp.Body.Close()
		t.Error("a client without the CA accepted the certificate")
	} else if !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("a client without the CA failed for another reason: %v", err)
	}
}

// TestReplicasFollowRotation runs two replicas' loops on one Secret: when
// the clock makes the certificate due, they converge on one renewal and both
// serve it; when the CA is due, they go through both phases (no
// configuration to wait for) and both serve a certificate of the new CA and
// report the new bundle.
func TestReplicasFollowRotation(t *testing.T) {
	noSecret(t, "replicas")
	var c clock
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var replicas []*certs.Manager
	bundles := make([]atomic.Pointer[[]byte], 2)
	for i := range 2 {
		m := newManager(t, "replicas", nil, c.Now, 100*time.Millisecond)
		m.OnCABundleChange(func(b []byte) { bundles[i].Store(&b) })
		replicas = append(replicas, m)
		wg.Go(func() {
			if err := m.Start(ctx); err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
	converged := func(what string) *corev1.Secret {
		t.Helper()
		var secret *corev1.Secret
		err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			var s corev1.Secret
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "replicas"}, &s); err != nil {
				return false, err
			}
			if rotate, reason := certs.NeedsRotation(s.Data, dnsNames, ips, c.Now()); rotate {
				return false, errors.New(reason)
			}
			if len(s.Data[certs.CANextKeyKey]) > 0 {
				return false, errors.New("a next CA is pending")
			}
			der := leaf(t, s.Data[certs.TLSCertKey]).Raw
			for i, m := range replicas {
				cert, err := m.GetCertificate(nil)
				if err != nil || !bytes.Equal(cert.Certificate[0], der) {
					return false, errors.New("a replica does not serve the secret's certificate")
				}
				if b := bundles[i].Load(); b == nil || !bytes.Equal(*b, s.Data[certs.CACertKey]) {
					return false, errors.New("a replica was not told the secret's CA bundle")
				}
			}
			secret = &s
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return secret
	}
	initial := converged("initial certificate")
	c.Advance(300 * 24 * time.Hour)
	renewed := converged("renewed certificate")
	if bytes.Equal(renewed.Data[certs.TLSCertKey], initial.Data[certs.TLSCertKey]) || !bytes.Equal(renewed.Data[certs.CACertKey], initial.Data[certs.CACertKey]) {
		t.Error("the serving certificate was not renewed with the same CA")
	}
	c.Advance(4 * 365 * 24 * time.Hour)
	newCA := converged("new CA")
	if bytes.Equal(newCA.Data[certs.CAKeyKey], initial.Data[certs.CAKeyKey]) {
		t.Error("the CA was not replaced")
	}
}
