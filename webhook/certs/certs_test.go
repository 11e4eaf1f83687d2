package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"net"
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

func TestRenewReplacesADueCAAndKeepsItInTheBundle(t *testing.T) {
	later := testNow.Add(DefaultCAValidity * 3 / 4)
	// The serving certificate was renewed by the old CA not long ago.
	fresh := secretData(t, testCA, later.Add(-30*24*time.Hour))
	renewed, err := renew(fresh, nil, testDNS, testIPs, later, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if rotate, reason := NeedsRotation(renewed, testDNS, testIPs, later); rotate {
		t.Fatalf("renewed data needs rotation: %s", reason)
	}
	bundle, err := parseCertsPEM(renewed[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 2 || !bundle[1].Equal(parseCert(t, testCA.cert)) {
		t.Fatalf("bundle has %d certificates, want the new CA then the previous one", len(bundle))
	}
	// A replica still serving the old certificate must be trusted through
	// the new bundle.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(renewed[CACertKey])
	for _, data := range []map[string][]byte{fresh, renewed} {
		if _, err := parseCert(t, data[TLSCertKey]).Verify(x509.VerifyOptions{DNSName: testDNS[0], Roots: roots, CurrentTime: later}); err != nil {
			t.Errorf("does not verify against the new bundle: %v", err)
		}
	}
	// Once the previous CA expires, the next renewal drops it.
	muchLater := testNow.Add(DefaultCAValidity + time.Hour)
	again, err := renew(renewed, nil, testDNS, testIPs, muchLater, DefaultCAValidity, DefaultServingValidity)
	if err != nil {
		t.Fatal(err)
	}
	if bundle, _ := parseCertsPEM(again[CACertKey]); len(bundle) != 1 {
		t.Errorf("bundle has %d certificates after the previous CA expired, want 1", len(bundle))
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
