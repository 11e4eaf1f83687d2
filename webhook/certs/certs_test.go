// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

var (
	testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testDNS = []string{"kyvap-webhook-service.kyvap-system.svc", "kyvap-webhook-service.kyvap-system.svc.cluster.local"}
	testIPs = []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("fd00::7")}
	testCA  = mustCA(testNow)
	otherCA = mustCA(testNow)
)

type caPEM struct{ cert, key []byte }

func mustCA(now time.Time) caPEM {
	cert, key, err := NewCA("test-ca", now, DefaultCAValidity)
	if err != nil {
		panic(err)
	}
	return caPEM{cert, key}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	certs, err := parseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// secretData returns fresh, valid Secret data signed by ca.
func secretData(t *testing.T, ca caPEM, now time.Time) map[string][]byte {
	t.Helper()
	cert, key, err := NewServingCert(ca.cert, ca.key, testDNS, testIPs, now, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{TLSCertKey: cert, TLSKeyKey: key, CACertKey: ca.cert, CAKeyKey: ca.key}
}

func TestNewCA(t *testing.T) {
	ca := parseCert(t, testCA.cert)
	if !ca.IsCA || !ca.BasicConstraintsValid || !ca.MaxPathLenZero || ca.MaxPathLen != 0 {
		t.Errorf("CA constraints: IsCA=%v BasicConstraintsValid=%v MaxPathLen=%d zero=%v", ca.IsCA, ca.BasicConstraintsValid, ca.MaxPathLen, ca.MaxPathLenZero)
	}
	if ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA key usage %b lacks certSign", ca.KeyUsage)
	}
	pub, ok := ca.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key is %T, want ECDSA P-256", ca.PublicKey)
	}
	if got, want := ca.NotAfter, testNow.Add(DefaultCAValidity); !got.Equal(want) {
		t.Errorf("NotAfter = %s, want %s", got, want)
	}
	if !ca.NotBefore.Before(testNow) {
		t.Errorf("NotBefore = %s, want backdated before %s", ca.NotBefore, testNow)
	}
	if err := ca.CheckSignatureFrom(ca); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	block, _ := pem.Decode(testCA.key)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Errorf("CA key is not a PKCS #8 PEM block: %q", testCA.key)
	}
	if _, _, err := NewCA("", testNow, time.Hour); err == nil {
		t.Error("NewCA accepted an empty common name")
	}
	if _, _, err := NewCA("x", testNow, 0); err == nil {
		t.Error("NewCA accepted a zero validity")
	}
}

func TestServingCertVerifiesAgainstItsCA(t *testing.T) {
	data := secretData(t, testCA, testNow)
	leaf := parseCert(t, data[TLSCertKey])
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(testCA.cert)
	for _, name := range append(append([]string{}, testDNS...), "10.0.0.7", "fd00::7") {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("verifying for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.svc", Roots: roots, CurrentTime: testNow}); err == nil {
		t.Error("the certificate verified for a name it does not carry")
	}
	others := x509.NewCertPool()
	others.AppendCertsFromPEM(otherCA.cert)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: testDNS[0], Roots: others, CurrentTime: testNow}); err == nil {
		t.Error("the certificate verified against another CA")
	}
	if leaf.IsCA {
		t.Error("the serving certificate is a CA")
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("key usage %b, extended %v; want digitalSignature and serverAuth", leaf.KeyUsage, leaf.ExtKeyUsage)
	}
	if got, want := leaf.NotAfter, testNow.Add(DefaultServingValidity); !got.Equal(want) {
		t.Errorf("NotAfter = %s, want %s", got, want)
	}
	if leaf.Subject.CommonName != testDNS[0] {
		t.Errorf("CommonName = %q, want %q", leaf.Subject.CommonName, testDNS[0])
	}
	if _, err := tls.X509KeyPair(data[TLSCertKey], data[TLSKeyKey]); err != nil {
		t.Errorf("not a key pair: %v", err)
	}
}

func TestServingCertNeverOutlivesItsCA(t *testing.T) {
	ca := parseCert(t, testCA.cert)
	late := ca.NotAfter.Add(-24 * time.Hour)
	cert, _, err := NewServingCert(testCA.cert, testCA.key, testDNS, nil, late, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if got := parseCert(t, cert).NotAfter; !got.Equal(ca.NotAfter) {
		t.Errorf("NotAfter = %s, want the CA's %s", got, ca.NotAfter)
	}
}

func TestNewServingCertErrors(t *testing.T) {
	leafData := secretData(t, testCA, testNow)
	for name, call := range map[string]func() error{
		"no names": func() error {
			_, _, err := NewServingCert(testCA.cert, testCA.key, nil, nil, testNow, time.Hour)
			return err
		},
		"zero validity": func() error {
			_, _, err := NewServingCert(testCA.cert, testCA.key, testDNS, nil, testNow, 0)
			return err
		},
		"key of another CA": func() error {
			_, _, err := NewServingCert(testCA.cert, otherCA.key, testDNS, nil, testNow, time.Hour)
			return err
		},
		"issuer is not a CA": func() error {
			_, _, err := NewServingCert(leafData[TLSCertKey], leafData[TLSKeyKey], testDNS, nil, testNow, time.Hour)
			return err
		},
		"garbage CA": func() error {
			_, _, err := NewServingCert([]byte("garbage"), testCA.key, testDNS, nil, testNow, time.Hour)
			return err
		},
		"CA expired": func() error {
			_, _, err := NewServingCert(testCA.cert, testCA.key, testDNS, nil, testNow.Add(DefaultCAValidity+time.Hour), time.Hour)
			return err
		},
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestNeedsRotationFreshSecret(t *testing.T) {
	data := secretData(t, testCA, testNow)
	for _, now := range []time.Time{testNow, testNow.Add(200 * 24 * time.Hour)} {
		if rotate, reason := NeedsRotation(data, testDNS, testIPs, now); rotate {
			t.Errorf("at %s: rotation wanted: %s", now, reason)
		}
	}
	// A subset of the certified names is fine: extra SANs are harmless.
	if rotate, reason := NeedsRotation(data, testDNS[:1], nil, testNow); rotate {
		t.Errorf("subset of the names: rotation wanted: %s", reason)
	}
}

func TestNeedsRotationReasons(t *testing.T) {
	fresh := secretData(t, testCA, testNow)
	other := secretData(t, otherCA, testNow)
	with := func(key string, value []byte) map[string][]byte {
		data := maps.Clone(fresh)
		if value == nil {
			delete(data, key)
		} else {
			data[key] = value
		}
		return data
	}
	ecKey := func() []byte {
		// The same CA key in SEC 1 form must be accepted: only the key matters.
		key, err := parseKeyPEM(testCA.key)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}()
	if rotate, reason := NeedsRotation(with(CAKeyKey, ecKey), testDNS, testIPs, testNow); rotate {
		t.Errorf("SEC 1 CA key: rotation wanted: %s", reason)
	}

	servingValidity := DefaultServingValidity
	caValidity := DefaultCAValidity
	cases := []struct {
		name   string
		data   map[string][]byte
		dns    []string
		ips    []net.IP
		now    time.Time
		reason string
	}{
		{name: "no secret", data: nil, reason: "ca.crt is missing"},
		{name: "no tls.crt", data: with(TLSCertKey, nil), reason: "tls.crt is missing"},
		{name: "no tls.key", data: with(TLSKeyKey, nil), reason: "tls.key is missing"},
		{name: "no ca.crt", data: with(CACertKey, nil), reason: "ca.crt is missing"},
		{name: "no ca.key", data: with(CAKeyKey, nil), reason: "ca.key is missing"},
		{name: "garbage tls.crt", data: with(TLSCertKey, []byte("garbage")), reason: "not a usable key pair"},
		{name: "garbage tls.key", data: with(TLSKeyKey, []byte("garbage")), reason: "not a usable key pair"},
		{name: "garbage ca.crt", data: with(CACertKey, []byte("garbage")), reason: "ca.crt: no PEM certificate"},
		{name: "trailing garbage in ca.crt", data: with(CACertKey, append(append([]byte{}, testCA.cert...), "junk"...)), reason: "ca.crt: trailing data"},
		{name: "garbage ca.key", data: with(CAKeyKey, []byte("garbage")), reason: "ca.key: no PEM private key"},
		{name: "tls.key of another certificate", data: with(TLSKeyKey, other[TLSKeyKey]), reason: "not a usable key pair"},
		{name: "ca.key of another CA", data: with(CAKeyKey, otherCA.key), reason: "ca.key does not match"},
		{name: "ca.crt is not a CA", data: with(CACertKey, fresh[TLSCertKey]), reason: "ca.key does not match"},
		{name: "leaf as CA with its key", data: func() map[string][]byte {
			d := with(CACertKey, fresh[TLSCertKey])
			d[CAKeyKey] = fresh[TLSKeyKey]
			return d
		}(), reason: "is not a CA"},
		{name: "tls.crt of another key", data: with(TLSCertKey, other[TLSCertKey]), reason: "not a usable key pair"},
		{name: "pair signed by another CA", data: func() map[string][]byte {
			d := maps.Clone(fresh)
			d[TLSCertKey], d[TLSKeyKey] = other[TLSCertKey], other[TLSKeyKey]
			return d
		}(), reason: "not signed by the CA"},
		{name: "DNS name missing", data: fresh, dns: append([]string{"kyvap-webhook-service.elsewhere.svc"}, testDNS...), reason: "does not cover DNS name kyvap-webhook-service.elsewhere.svc"},
		{name: "IP missing", data: fresh, ips: []net.IP{net.ParseIP("10.0.0.8")}, reason: "does not cover IP address 10.0.0.8"},
		{name: "serving certificate with less than a third left", data: fresh, now: testNow.Add(servingValidity * 2 / 3).Add(time.Hour), reason: "the serving certificate expires"},
		{name: "serving certificate expired", data: fresh, now: testNow.Add(servingValidity + time.Minute), reason: "the serving certificate expired"},
		{name: "serving certificate not yet valid", data: fresh, now: testNow.Add(-2 * time.Hour), reason: "not valid before"},
		{name: "CA with less than a third left", data: fresh, now: testNow.Add(caValidity * 2 / 3).Add(time.Hour), reason: "the CA certificate expires"},
		{name: "CA expired", data: fresh, now: testNow.Add(caValidity + time.Minute), reason: "the CA certificate expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dns, ips, now := tc.dns, tc.ips, tc.now
			if dns == nil {
				dns = testDNS
			}
			if ips == nil {
				ips = testIPs
			}
			if now.IsZero() {
				now = testNow
			}
			rotate, reason := NeedsRotation(tc.data, dns, ips, now)
			if !rotate {
				t.Fatal("no rotation wanted")
			}
			if !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", reason, tc.reason)
			}
		})
	}
}

func TestRenewKeepsAGoodCA(t *testing.T) {
	fresh := secretData(t, testCA, testNow)
	later := testNow.Add(300 * 24 * time.Hour) // the serving certificate is due, the CA is not
	renewed, err := renew(fresh, nil, testDNS, testIPs, later, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if string(renewed[CACertKey]) != string(testCA.cert) || string(renewed[CAKeyKey]) != string(testCA.key) {
		t.Error("the CA was replaced although it is still good")
	}
	if string(renewed[TLSCertKey]) == string(fresh[TLSCertKey]) {
		t.Error("the serving certificate was not renewed")
	}
	if rotate, reason := NeedsRotation(renewed, testDNS, testIPs, later); rotate {
		t.Errorf("renewed data needs rotation: %s", reason)
	}
}

// verifies reports whether the serving certificate of data verifies for
// testDNS[0] against bundle at now.
func verifies(t *testing.T, data map[string][]byte, bundle []byte, now time.Time) error {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatalf("no certificate in the bundle %q", bundle)
	}
	_, err := parseCert(t, data[TLSCertKey]).Verify(x509.VerifyOptions{DNSName: testDNS[0], Roots: roots, CurrentTime: now})
	return err
}

// phaseOne returns Secret data whose CA (testCA) is due at the time
// returned, with a serving certificate it issued a month before, and the
// data renew makes of it.
func phaseOne(t *testing.T) (due time.Time, fresh, pending map[string][]byte) {
	t.Helper()
	due = testNow.Add(DefaultCAValidity * 3 / 4)
	fresh = secretData(t, testCA, due.Add(-30*24*time.Hour))
	if rotate, reason := NeedsRotation(fresh, testDNS, testIPs, due); !rotate || !strings.Contains(reason, "the CA certificate expires") {
		t.Fatalf("NeedsRotation = %v, %q; want the CA due", rotate, reason)
	}
	pending, err := renew(fresh, nil, testDNS, testIPs, due, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	return due, fresh, pending
}

func TestRenewDueCAPhaseOneAddsTheNextCAAfterTheCurrentOne(t *testing.T) {
	due, fresh, pending := phaseOne(t)
	for _, key := range []string{CAKeyKey, TLSCertKey, TLSKeyKey} {
		if string(pending[key]) != string(fresh[key]) {
			t.Errorf("phase 1 changed %s", key)
		}
	}
	bundle, err := parseCertsPEM(pending[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 2 || !bundle[0].Equal(parseCert(t, testCA.cert)) {
		t.Fatalf("bundle has %d certificates, want the current CA then the next one", len(bundle))
	}
	if _, _, err := parseCA(encodeCert(bundle[1].Raw), pending[CANextKeyKey]); err != nil {
		t.Errorf("%s is not the key of the second CA of the bundle: %v", CANextKeyKey, err)
	}
	if next := pendingCA(pending, due); next == nil || !next.Equal(bundle[1]) {
		t.Error("the new CA is not pending")
	}
	// Pending is not a reason to rotate: no second phase 1.
	if rotate, reason := NeedsRotation(pending, testDNS, testIPs, due); rotate {
		t.Errorf("rotation wanted while the next CA is pending: %s", reason)
	}
	// The certificate served now still verifies against the bundle.
	if err := verifies(t, pending, pending[CACertKey], due); err != nil {
		t.Errorf("the served certificate does not verify against the phase 1 bundle: %v", err)
	}
	// A serving renewal while pending keeps the next CA and signs with the
	// current one.
	later := due.Add(300 * 24 * time.Hour)
	renewed, err := renew(pending, nil, testDNS, testIPs, later, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if string(renewed[CACertKey]) != string(pending[CACertKey]) || string(renewed[CANextKeyKey]) != string(pending[CANextKeyKey]) || string(renewed[CAKeyKey]) != string(testCA.key) {
		t.Error("a serving renewal while pending changed the CAs")
	}
	if err := parseCert(t, renewed[TLSCertKey]).CheckSignatureFrom(bundle[0]); err != nil || string(renewed[TLSCertKey]) == string(pending[TLSCertKey]) {
		t.Errorf("the serving certificate was not renewed by the current CA: %v", err)
	}
}

func TestPromotePhaseTwoMakesTheNextCACurrent(t *testing.T) {
	due, fresh, pending := phaseOne(t)
	next := pendingCA(pending, due)
	switched, err := promote(pending, testDNS, testIPs, due, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := switched[CANextKeyKey]; ok {
		t.Errorf("%s survived phase 2", CANextKeyKey)
	}
	if string(switched[CAKeyKey]) != string(pending[CANextKeyKey]) {
		t.Errorf("%s is not the next CA's key", CAKeyKey)
	}
	bundle, err := parseCertsPEM(switched[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 2 || !bundle[0].Equal(next) || !bundle[1].Equal(parseCert(t, testCA.cert)) {
		t.Fatalf("bundle has %d certificates, want the new CA then the previous one", len(bundle))
	}
	if err := parseCert(t, switched[TLSCertKey]).CheckSignatureFrom(next); err != nil {
		t.Errorf("the serving certificate is not issued by the new CA: %v", err)
	}
	if rotate, reason := NeedsRotation(switched, testDNS, testIPs, due); rotate {
		t.Errorf("phase 2 data needs rotation: %s", reason)
	}
	// What makes phase 2 safe: the new certificate verifies against the
	// phase 1 bundle (what the configuration carries before the switch),
	// and replicas still serving the old certificate verify against the new
	// bundle.
	if err := verifies(t, switched, pending[CACertKey], due); err != nil {
		t.Errorf("the new certificate does not verify against the phase 1 bundle: %v", err)
	}
	for name, data := range map[string]map[string][]byte{"old": fresh, "new": switched} {
		if err := verifies(t, data, switched[CACertKey], due); err != nil {
			t.Errorf("the %s certificate does not verify against the phase 2 bundle: %v", name, err)
		}
	}
	// Once the previous CA expires, the next renewal drops it.
	muchLater := testNow.Add(DefaultCAValidity + time.Hour)
	again, err := renew(switched, nil, testDNS, testIPs, muchLater, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if bundle, _ := parseCertsPEM(again[CACertKey]); len(bundle) != 1 || !bundle[0].Equal(next) {
		t.Errorf("bundle has %d certificates after the previous CA expired, want the current CA alone", len(bundle))
	}
	if _, err := promote(switched, testDNS, testIPs, due, DefaultServingValidity); err == nil {
		t.Error("promote without a pending CA succeeded")
	}
}

func TestUnusableCAIsReplacedAtOnce(t *testing.T) {
	// Expired: nothing valid to keep; one step, the old CA kept in the
	// bundle until... it is expired, so not at all.
	expired := testNow.Add(DefaultCAValidity + time.Hour)
	data := secretData(t, testCA, testNow)
	renewed, err := renew(data, nil, testDNS, testIPs, expired, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := renewed[CANextKeyKey]; ok || string(renewed[CAKeyKey]) == string(testCA.key) {
		t.Error("an expired CA was not replaced in one step")
	}
	if bundle, _ := parseCertsPEM(renewed[CACertKey]); len(bundle) != 1 {
		t.Errorf("bundle has %d certificates, want the new CA alone", len(bundle))
	}
	if rotate, reason := NeedsRotation(renewed, testDNS, testIPs, expired); rotate {
		t.Errorf("renewed data needs rotation: %s", reason)
	}
	// ca.key of another CA: replaced at once, the old CA kept in the bundle.
	mismatch := secretData(t, testCA, testNow)
	mismatch[CAKeyKey] = otherCA.key
	renewed, err = renew(mismatch, nil, testDNS, testIPs, testNow, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if bundle, _ := parseCertsPEM(renewed[CACertKey]); len(bundle) != 2 || !bundle[1].Equal(parseCert(t, testCA.cert)) {
		t.Errorf("bundle has %d certificates, want the new CA then the old one", len(bundle))
	}
	if _, ok := renewed[CANextKeyKey]; ok {
		t.Errorf("a one-step replacement left %s", CANextKeyKey)
	}
}

func TestUnusableCAWithAPendingNextCAPromotesIt(t *testing.T) {
	_, _, pending := phaseOne(t)
	next := parseCert(t, pending[CACertKey][len(encodeCert(parseCert(t, testCA.cert).Raw)):])
	// The rotation stayed pending until the current CA expired.
	expired := testNow.Add(DefaultCAValidity + time.Hour)
	if rotate, reason := NeedsRotation(pending, testDNS, testIPs, expired); !rotate || !strings.Contains(reason, "the CA certificate expired") {
		t.Fatalf("NeedsRotation = %v, %q; want the CA expired", rotate, reason)
	}
	renewed, err := renew(pending, nil, testDNS, testIPs, expired, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if bundle, _ := parseCertsPEM(renewed[CACertKey]); len(bundle) != 1 || !bundle[0].Equal(next) {
		t.Errorf("the pending CA did not become current: bundle of %d certificates", len(bundle))
	}
	if string(renewed[CAKeyKey]) != string(pending[CANextKeyKey]) {
		t.Error("ca.key is not the pending CA's key")
	}
}

func TestBrokenPendingCAIsDiscarded(t *testing.T) {
	due, fresh, pending := phaseOne(t)
	bundle, err := parseCertsPEM(pending[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	current, next := bundle[0], bundle[1]
	// A CA that is itself due at due: issued long ago, short-lived.
	short, shortKey, err := NewCA("short", due.Add(-48*time.Hour), 72*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	with := func(caCrt, nextKey []byte) map[string][]byte {
		d := maps.Clone(pending)
		d[CACertKey], d[CANextKeyKey] = caCrt, nextKey
		return d
	}
	currentPEM := encodeCert(current.Raw)
	cases := []struct {
		name, reason string
		data         map[string][]byte
		dropped      *x509.Certificate // a certificate that must leave the bundle
	}{
		{name: "garbage key", data: with(pending[CACertKey], []byte("garbage")), reason: "ca-next.key: no PEM private key"},
		{name: "key of no certificate in the bundle", data: with(pending[CACertKey], otherCA.key), reason: "matches no certificate"},
		{name: "key of the current CA", data: with(pending[CACertKey], testCA.key), reason: "matches no certificate"},
		{name: "certificate not in the bundle", data: with(currentPEM, pending[CANextKeyKey]), reason: "matches no certificate"},
		{name: "not a CA", data: with(append(append([]byte{}, currentPEM...), fresh[TLSCertKey]...), fresh[TLSKeyKey]), reason: "is not a CA"},
		{name: "due itself", data: with(append(append([]byte{}, currentPEM...), short...), shortKey), reason: "the next CA certificate expires", dropped: parseCert(t, short)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rotate, reason := NeedsRotation(tc.data, testDNS, testIPs, due)
			if !rotate || !strings.Contains(reason, "discarding the pending next CA") || !strings.Contains(reason, tc.reason) {
				t.Fatalf("NeedsRotation = %v, %q; want the pending CA discarded because %q", rotate, reason, tc.reason)
			}
			if pendingCA(tc.data, due) != nil {
				t.Error("a broken pending CA is pending")
			}
			// The current CA is due: phase 1 starts again with a new CA.
			renewed, err := renew(tc.data, nil, testDNS, testIPs, due, DefaultCAValidity, DefaultServingValidity)
			if err != nil {
				t.Fatal(err)
			}
			if rotate, reason := NeedsRotation(renewed, testDNS, testIPs, due); rotate {
				t.Fatalf("renewed data needs rotation: %s", reason)
			}
			fresh := pendingCA(renewed, due)
			if fresh == nil || fresh.Equal(next) {
				t.Fatal("phase 1 did not start again with a new CA")
			}
			got, _ := parseCertsPEM(renewed[CACertKey])
			if !got[0].Equal(current) || !got[1].Equal(fresh) {
				t.Error("the bundle is not the current CA then the new next CA")
			}
			if tc.dropped != nil && slices.ContainsFunc(got, tc.dropped.Equal) {
				t.Error("the broken next CA stayed in the bundle")
			}
			if string(renewed[TLSCertKey]) != string(pending[TLSCertKey]) || string(renewed[CAKeyKey]) != string(pending[CAKeyKey]) {
				t.Error("restarting phase 1 changed the serving pair or ca.key")
			}
		})
	}
	// The current CA is not due (a replica's clock is behind, or someone
	// edited the Secret): the broken key is dropped, no rotation starts.
	notDue := secretData(t, testCA, testNow)
	notDue[CANextKeyKey] = []byte("garbage")
	renewed, err := renew(notDue, nil, testDNS, testIPs, testNow, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := renewed[CANextKeyKey]; ok || string(renewed[CACertKey]) != string(testCA.cert) || string(renewed[TLSCertKey]) != string(notDue[TLSCertKey]) {
		t.Error("a broken ca-next.key with a CA not due was not simply dropped")
	}
}

func TestRenewFromGarbageKeepsThePreviouslyLoadedCA(t *testing.T) {
	previous := parseCert(t, testCA.cert)
	renewed, err := renew(map[string][]byte{TLSCertKey: []byte("garbage")}, previous, testDNS, nil, testNow, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := parseCertsPEM(renewed[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 2 || !bundle[1].Equal(previous) {
		t.Errorf("bundle has %d certificates, want the new CA then the loaded one", len(bundle))
	}
}

func TestManagerBeforeTheFirstLoad(t *testing.T) {
	m := NewManager(nil, nil, Options{Namespace: "ns", SecretName: "s", DNSNames: testDNS}, logr.Discard())
	if m.Ready() {
		t.Error("ready before any load")
	}
	if _, err := m.GetCertificate(nil); err == nil {
		t.Error("GetCertificate succeeded before any load")
	}
	if err := m.Checker(nil); err == nil {
		t.Error("Checker passed before any load")
	}
	if m.CABundle() != nil {
		t.Error("CA bundle before any load")
	}
	if m.NeedLeaderElection() {
		t.Error("NeedLeaderElection is true: the stand-by replica would serve no certificate")
	}
	if err := m.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "nil client") {
		t.Errorf("Start with a nil client: %v", err)
	}
	bad := NewManager(nil, nil, Options{}, logr.Discard())
	if err := bad.Sync(t.Context()); err == nil || !strings.Contains(err.Error(), "no namespace") {
		t.Errorf("Sync with empty options: %v", err)
	}
}

func TestManagerLoadsAndNotifies(t *testing.T) {
	m := NewManager(nil, nil, Options{Namespace: "ns", SecretName: "s", DNSNames: testDNS, Now: func() time.Time { return testNow }}, logr.Discard())
	var got [][]byte
	var newLeaf []byte // set before loading a certificate from another CA
	m.OnCABundleChange(func(b []byte) {
		if string(m.CABundle()) != string(b) {
			t.Error("CABundle does not return the new bundle while the callback runs")
		}
		if cert, err := m.GetCertificate(nil); err == nil && newLeaf != nil && string(cert.Certificate[0]) == string(parseCert(t, newLeaf).Raw) {
			t.Error("the new certificate is served before the callback returned")
		}
		got = append(got, b)
	})
	first := secretData(t, testCA, testNow)
	if err := m.load(first); err != nil {
		t.Fatal(err)
	}
	if err := m.load(secretData(t, testCA, testNow)); err != nil { // new leaf, same bundle
		t.Fatal(err)
	}
	second := secretData(t, otherCA, testNow)
	newLeaf = second[TLSCertKey]
	if err := m.load(second); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != string(testCA.cert) || string(got[1]) != string(otherCA.cert) {
		t.Errorf("callback got %d bundles, want the two distinct ones", len(got))
	}
	if err := m.Checker(nil); err != nil {
		t.Errorf("Checker after a load: %v", err)
	}
	m.opts.Now = func() time.Time { return testNow.Add(DefaultServingValidity + time.Hour) }
	if err := m.Checker(nil); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Checker with an expired certificate: %v", err)
	}
	if err := m.load(map[string][]byte{TLSCertKey: []byte("garbage")}); err == nil {
		t.Error("loading garbage succeeded")
	}
	if cert, _ := m.GetCertificate(nil); cert == nil || string(cert.Certificate[0]) != string(parseCert(t, second[TLSCertKey]).Raw) {
		t.Error("a failed load replaced the served certificate")
	}
}
