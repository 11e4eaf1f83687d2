// Package certs gives kyvap's admission webhook a serving certificate without
// any other tool: a private CA and a serving certificate it signs live in one
// Secret in the operator's namespace, every replica keeps that Secret fresh
// (rotating before expiry) and serves the key pair from memory.
//
// The pure functions (NewCA, NewServingCert, NeedsRotation) hold the
// certificate logic; Manager adds the Secret, the replicas' coordination
// through optimistic concurrency, and the hooks the webhook server and the
// ValidatingWebhookConfiguration need. docs/webhook-tls.md describes the
// design from an operator's point of view.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the Secret. tls.crt and tls.key are those of a kubernetes.io/tls
// Secret (the serving certificate alone, and its key); ca.crt is the CA
// bundle to put in the webhook configuration's caBundle; ca.key is the CA's
// key, kept so that any replica can renew the serving certificate without
// changing the bundle.
const (
	TLSCertKey = corev1.TLSCertKey
	TLSKeyKey  = corev1.TLSPrivateKeyKey
	CACertKey  = "ca.crt"
	CAKeyKey   = "ca.key"
)

// Default lifetimes. The CA lives long because replacing it changes the
// caBundle every webhook configuration must carry; the serving certificate
// lives a year because renewing it changes nothing outside the Secret. Both
// are renewed when less than a third of their lifetime is left (after about
// 3 years 4 months and 8 months), which leaves ample time to notice a replica
// that cannot write the Secret.
const (
	DefaultCAValidity      = 5 * 365 * 24 * time.Hour
	DefaultServingValidity = 365 * 24 * time.Hour
)

// clockSkew backdates NotBefore: a certificate issued by one replica must be
// accepted at once by the API server and the other replica, whose clocks may
// be slightly behind.
const clockSkew = time.Hour

// maxCommonNameLength is the X.509 upper bound of a CommonName (RFC 5280
// ub-common-name); longer names go in the SANs only.
const maxCommonNameLength = 64

// NewCA returns a new self-signed CA certificate and its ECDSA P-256 private
// key, PEM-encoded (CERTIFICATE and PKCS #8 PRIVATE KEY). It is valid from
// an hour before now (to tolerate clock skew) until now+validity, and may
// sign only end-entity certificates (path length 0).
func NewCA(commonName string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("creating a CA: empty common name")
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("creating a CA: validity %s is not positive", validity)
	}
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("creating a CA: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, fmt.Errorf("creating a CA: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew).UTC(),
		NotAfter:              now.Add(validity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a CA: signing the certificate: %w", err)
	}
	return encodeCert(der), keyPEM, nil
}

// NewServingCert returns a new TLS server certificate for dnsNames and ips,
// signed by the CA (the first certificate of caCertPEM, whose key is
// caKeyPEM), and its ECDSA P-256 private key, PEM-encoded. The certificate is
// valid from an hour before now until now+validity, but never beyond the CA:
// a certificate that outlives its issuer would only fail verification later.
func NewServingCert(caCertPEM, caKeyPEM []byte, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, nil, errors.New("creating a serving certificate: no DNS name and no IP address")
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("creating a serving certificate: validity %s is not positive", validity)
	}
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a serving certificate: %w", err)
	}
	if now.Before(ca.NotBefore) || !now.Before(ca.NotAfter) {
		return nil, nil, fmt.Errorf("creating a serving certificate: the CA is valid from %s to %s, not at %s",
			ca.NotBefore.Format(time.RFC3339), ca.NotAfter.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("creating a serving certificate: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, fmt.Errorf("creating a serving certificate: %w", err)
	}
	notBefore := now.Add(-clockSkew)
	if notBefore.Before(ca.NotBefore) {
		notBefore = ca.NotBefore
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName(dnsNames, ips)},
		DNSNames:     slices.Clone(dnsNames),
		IPAddresses:  slices.Clone(ips),
		NotBefore:    notBefore.UTC(),
		NotAfter:     notAfter.UTC(),
		// ECDSA keys sign the handshake; they do not encipher keys, so
		// KeyEncipherment (an RSA key-transport usage) is not set.
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a serving certificate: signing: %w", err)
	}
	return encodeCert(der), keyPEM, nil
}

// NeedsRotation reports whether the Secret data must be regenerated before
// serving dnsNames and ips at now, and why. It is true when a key is missing
// or unparseable, when tls.key does not match tls.crt or ca.key does not
// match the CA (the first certificate of ca.crt), when tls.crt is not signed
// by that CA or does not cover every requested name and address, or when the
// CA or the serving certificate is not yet valid or has less than a third of
// its lifetime left. Extra names in the certificate do not trigger a
// rotation: they are harmless, and replicas of different versions with
// different name lists would otherwise keep replacing each other's
// certificate.
func NeedsRotation(secretData map[string][]byte, dnsNames []string, ips []net.IP, now time.Time) (bool, string) {
	ca, _, reason := checkCA(secretData, now)
	if reason != "" {
		return true, reason
	}
	if reason := checkServing(secretData, ca, dnsNames, ips, now); reason != "" {
		return true, reason
	}
	return false, ""
}

// checkCA parses ca.crt and ca.key and returns the CA and the whole bundle,
// or why they are unusable at now.
func checkCA(data map[string][]byte, now time.Time) (*x509.Certificate, []*x509.Certificate, string) {
	if len(data[CACertKey]) == 0 {
		return nil, nil, CACertKey + " is missing"
	}
	if len(data[CAKeyKey]) == 0 {
		return nil, nil, CAKeyKey + " is missing"
	}
	bundle, err := parseCertsPEM(data[CACertKey])
	if err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", CACertKey, err)
	}
	key, err := parseKeyPEM(data[CAKeyKey])
	if err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", CAKeyKey, err)
	}
	ca := bundle[0]
	if !publicKeysEqual(key.Public(), ca.PublicKey) {
		return nil, nil, fmt.Sprintf("%s does not match the first certificate of %s", CAKeyKey, CACertKey)
	}
	if !isCA(ca) {
		return nil, nil, fmt.Sprintf("the first certificate of %s is not a CA (basic constraints or certSign key usage missing)", CACertKey)
	}
	if reason := checkLifetime("the CA certificate", ca, now); reason != "" {
		return nil, nil, reason
	}
	return ca, bundle, ""
}

// checkServing checks tls.crt and tls.key against the CA and the requested
// names and returns why they are unusable at now, or "".
func checkServing(data map[string][]byte, ca *x509.Certificate, dnsNames []string, ips []net.IP, now time.Time) string {
	if len(data[TLSCertKey]) == 0 {
		return TLSCertKey + " is missing"
	}
	if len(data[TLSKeyKey]) == 0 {
		return TLSKeyKey + " is missing"
	}
	pair, err := tls.X509KeyPair(data[TLSCertKey], data[TLSKeyKey])
	if err != nil {
		return fmt.Sprintf("%s and %s are not a usable key pair: %v", TLSCertKey, TLSKeyKey, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Sprintf("%s: %v", TLSCertKey, err)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return fmt.Sprintf("%s is not signed by the CA in %s: %v", TLSCertKey, CACertKey, err)
	}
	if missing := missingSANs(leaf, dnsNames, ips); len(missing) > 0 {
		return fmt.Sprintf("%s does not cover %s", TLSCertKey, strings.Join(missing, ", "))
	}
	if reason := checkLifetime("the serving certificate", leaf, now); reason != "" {
		return reason
	}
	// Catch whatever the checks above do not look at (extended key usage,
	// constraints) the way a TLS client would.
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Sprintf("%s does not verify against %s: %v", TLSCertKey, CACertKey, err)
	}
	return ""
}

// checkLifetime returns why cert must be renewed at now: not yet valid, or
// less than a third of its lifetime left (expired included).
func checkLifetime(what string, cert *x509.Certificate, now time.Time) string {
	if now.Before(cert.NotBefore) {
		return fmt.Sprintf("%s is not valid before %s", what, cert.NotBefore.Format(time.RFC3339))
	}
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	left := cert.NotAfter.Sub(now)
	if left <= 0 {
		return fmt.Sprintf("%s expired at %s", what, cert.NotAfter.Format(time.RFC3339))
	}
	if left < lifetime/3 {
		return fmt.Sprintf("%s expires at %s, less than a third of its lifetime left", what, cert.NotAfter.Format(time.RFC3339))
	}
	return ""
}

// missingSANs lists the requested names and addresses cert does not carry.
func missingSANs(cert *x509.Certificate, dnsNames []string, ips []net.IP) []string {
	var missing []string
	for _, name := range dnsNames {
		if !slices.ContainsFunc(cert.DNSNames, func(have string) bool { return strings.EqualFold(have, name) }) {
			missing = append(missing, "DNS name "+name)
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			missing = append(missing, "IP address "+ip.String())
		}
	}
	return missing
}

// renew returns new Secret data for dnsNames and ips: a serving certificate
// signed by the CA in data when that CA is still good (so the bundle the
// webhook configuration carries does not change), otherwise by a new CA.
// A new CA's bundle keeps the previous CA (from data, or previous when data
// has lost it) while it is unexpired, so that serving certificates it signed,
// still served by other replicas until they reload, keep verifying. Expired
// certificates are dropped from the bundle.
func renew(data map[string][]byte, previous *x509.Certificate, dnsNames []string, ips []net.IP, now time.Time, caValidity, servingValidity time.Duration) (map[string][]byte, error) {
	var caCertPEM, caKeyPEM []byte
	var bundle []*x509.Certificate
	if _, current, reason := checkCA(data, now); reason == "" {
		caKeyPEM = data[CAKeyKey]
		bundle = current
	} else {
		if old, err := parseCertsPEM(data[CACertKey]); err == nil && isCA(old[0]) {
			previous = old[0]
		}
		var err error
		caCertPEM, caKeyPEM, err = NewCA(fmt.Sprintf("kyvap-webhook-ca@%d", now.Unix()), now, caValidity)
		if err != nil {
			return nil, err
		}
		ca, err := parseCertsPEM(caCertPEM)
		if err != nil {
			return nil, fmt.Errorf("parsing the new CA: %w", err)
		}
		bundle = ca
		if previous != nil {
			bundle = append(bundle, previous)
		}
	}
	var bundlePEM []byte
	for i, cert := range bundle {
		if i > 0 && (!now.Before(cert.NotAfter) || cert.Equal(bundle[0])) {
			continue
		}
		bundlePEM = append(bundlePEM, encodeCert(cert.Raw)...)
	}
	if caCertPEM == nil {
		caCertPEM = bundlePEM
	}
	certPEM, keyPEM, err := NewServingCert(caCertPEM, caKeyPEM, dnsNames, ips, now, servingValidity)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		TLSCertKey: certPEM,
		TLSKeyKey:  keyPEM,
		CACertKey:  bundlePEM,
		CAKeyKey:   caKeyPEM,
	}, nil
}

// parseCA parses a CA bundle (the first certificate is the CA) and the CA's
// key, and checks they belong together.
func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	certs, err := parseCertsPEM(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the CA key: %w", err)
	}
	ca := certs[0]
	if !publicKeysEqual(key.Public(), ca.PublicKey) {
		return nil, nil, errors.New("the CA key does not match the CA certificate")
	}
	if !isCA(ca) {
		return nil, nil, errors.New("the CA certificate is not a CA (basic constraints or certSign key usage missing)")
	}
	return ca, key, nil
}

func isCA(cert *x509.Certificate) bool {
	return cert.BasicConstraintsValid && cert.IsCA && cert.KeyUsage&x509.KeyUsageCertSign != 0
}

// parseCertsPEM parses every CERTIFICATE block of data; anything else in it
// (other blocks, trailing bytes) is an error, as it means the data is not
// what kyvap wrote.
func parseCertsPEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("trailing data after the PEM certificates")
	}
	return certs, nil
}

// parseKeyPEM parses a PKCS #8 or SEC 1 (EC PRIVATE KEY) private key.
func parseKeyPEM(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	switch block.Type {
	case "PRIVATE KEY":
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return signer, nil
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating an ECDSA P-256 key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the private key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// newSerial returns a random 128-bit serial number (RFC 5280 allows up to
// 20 octets; randomness keeps serials unique across replicas).
func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return serial, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// commonName picks the first DNS name (or address) that fits in a CommonName;
// clients verify the SANs, the CommonName only helps humans reading logs.
func commonName(dnsNames []string, ips []net.IP) string {
	for _, name := range dnsNames {
		if len(name) <= maxCommonNameLength {
			return name
		}
	}
	for _, ip := range ips {
		return ip.String()
	}
	return ""
}
