// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package certs gives kyvap's admission webhook a serving certificate without
// any other tool: a private CA and a serving certificate it signs live in one
// Secret in the operator's namespace, every replica keeps that Secret fresh
// (rotating before expiry) and serves the key pair from memory.
//
// A CA that is due is rotated in two phases so that no replica serves a
// certificate the API server does not trust yet: phase 1 adds the next CA
// to the bundle (after the current one) and keeps serving the current CA's
// certificate; phase 2, once the webhook configuration's caBundle holds the
// next CA, makes it current and issues the serving certificate from it.
//
// The pure functions (NewCA, NewServingCert, NeedsRotation) hold the
// certificate logic; Manager adds the Secret, the replicas' coordination
// through optimistic concurrency, the look at what the API server trusts
// (Options.TrustedBundle, ConfigurationCABundle) and the hooks the webhook
// server and the ValidatingWebhookConfiguration need. docs/webhook-tls.md
// describes the design from an operator's point of view.
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
// bundle to put in the webhook configuration's caBundle, the current CA
// first; ca.key is the current CA's key, kept so that any replica can renew
// the serving certificate without changing the bundle. ca-next.key exists
// only while a CA rotation is pending: it is the key of the next CA, which
// ca.crt already carries after the current one but which signs nothing
// until the webhook configuration trusts it (see NeedsRotation).
const (
	TLSCertKey   = corev1.TLSCertKey
	TLSKeyKey    = corev1.TLSPrivateKeyKey
	CACertKey    = "ca.crt"
	CAKeyKey     = "ca.key"
	CANextKeyKey = "ca-next.key"
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

// NeedsRotation reports whether the Secret data must be rewritten before
// serving dnsNames and ips at now, and why. It is true when:
//
//   - the current CA (the first certificate of ca.crt, whose key is ca.key)
//     is unusable: missing or unparseable, ca.key does not match it, it is
//     not a CA, not yet valid or expired. It is then replaced in one step
//     (or by the pending next CA, if there is a usable one): there is
//     nothing valid to keep;
//   - the current CA is usable but has less than a third of its lifetime
//     left and no next CA is pending: phase 1 of a CA rotation adds a new CA
//     to ca.crt, after the current one, and its key as ca-next.key, leaving
//     ca.key and the serving pair as they are;
//   - ca-next.key is present but unusable (unparseable, matching no
//     certificate of ca.crt after the first, not a CA, not valid now or
//     itself due): the pending CA is discarded, and phase 1 starts again if
//     the current CA is due;
//   - tls.key does not match tls.crt, tls.crt is not signed by the current
//     CA or does not cover every requested name and address, or it is not
//     yet valid or has less than a third of its lifetime left: it is
//     re-issued by the current CA.
//
// A usable pending next CA is not a reason: phase 2, which makes it the
// current CA and issues the serving certificate from it, depends on what
// the API server trusts, which only the Manager knows. Extra names in the
// certificate do not trigger a rotation: they are harmless, and replicas of
// different versions with different name lists would otherwise keep
// replacing each other's certificate.
func NeedsRotation(secretData map[string][]byte, dnsNames []string, ips []net.IP, now time.Time) (bool, string) {
	st := inspect(secretData, now)
	switch {
	case st.unusable != "":
		return true, st.unusable
	case st.badNext != "":
		return true, "discarding the pending next CA: " + st.badNext
	case st.due != "" && st.next == nil:
		return true, st.due
	}
	if reason := checkServing(secretData, st.ca, dnsNames, ips, now); reason != "" {
		return true, reason
	}
	return false, ""
}

// caState is what Secret data says about its CAs at a moment.
type caState struct {
	// bundle is ca.crt, parsed; nil when it does not parse.
	bundle []*x509.Certificate
	// ca is the current CA (bundle[0]) when it is usable: ca.key matches,
	// it is a CA, it is valid now.
	ca *x509.Certificate
	// unusable is why the current CA cannot be used ("" when ca is set).
	unusable string
	// due is why the usable current CA must be replaced: less than a third
	// of its lifetime is left ("" otherwise).
	due string
	// next is the pending next CA: a certificate of bundle after the first
	// whose key is ca-next.key, usable and not due. Nil when there is none.
	next *x509.Certificate
	// badNext is why a ca-next.key present is unusable ("" otherwise), and
	// badNextCert the certificate of bundle it matches, if any, to be
	// dropped with it.
	badNext     string
	badNextCert *x509.Certificate
}

// inspect parses the CAs of data and checks them at now.
func inspect(data map[string][]byte, now time.Time) caState {
	var st caState
	st.bundle, st.ca, st.unusable, st.due = checkCA(data, now)
	if len(data[CANextKeyKey]) > 0 {
		st.next, st.badNextCert, st.badNext = checkNext(data[CANextKeyKey], st.bundle, now)
	}
	return st
}

// pendingCA returns the pending next CA of data, usable at now, when the
// current CA is usable too (phase 2 may then happen); nil otherwise.
func pendingCA(data map[string][]byte, now time.Time) *x509.Certificate {
	st := inspect(data, now)
	if st.unusable != "" {
		return nil
	}
	return st.next
}

// checkCA parses ca.crt (bundle, nil when it does not parse) and ca.key and
// returns the current CA when it is usable at now, with why it is due, or
// why it is unusable.
func checkCA(data map[string][]byte, now time.Time) (bundle []*x509.Certificate, ca *x509.Certificate, unusable, due string) {
	if len(data[CACertKey]) == 0 {
		return nil, nil, CACertKey + " is missing", ""
	}
	bundle, err := parseCertsPEM(data[CACertKey])
	if err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", CACertKey, err), ""
	}
	if len(data[CAKeyKey]) == 0 {
		return bundle, nil, CAKeyKey + " is missing", ""
	}
	key, err := parseKeyPEM(data[CAKeyKey])
	if err != nil {
		return bundle, nil, fmt.Sprintf("%s: %v", CAKeyKey, err), ""
	}
	if !publicKeysEqual(key.Public(), bundle[0].PublicKey) {
		return bundle, nil, fmt.Sprintf("%s does not match the first certificate of %s", CAKeyKey, CACertKey), ""
	}
	if !isCA(bundle[0]) {
		return bundle, nil, fmt.Sprintf("the first certificate of %s is not a CA (basic constraints or certSign key usage missing)", CACertKey), ""
	}
	if unusable, due = lifetime("the CA certificate", bundle[0], now); unusable != "" {
		return bundle, nil, unusable, ""
	}
	return bundle, bundle[0], "", due
}

// checkNext finds the certificate of bundle, after the first, whose key is
// keyPEM, and returns it as next when it is a CA usable at now and not due;
// otherwise why not, and the certificate it matched, if any.
func checkNext(keyPEM []byte, bundle []*x509.Certificate, now time.Time) (next, matched *x509.Certificate, reason string) {
	if bundle == nil {
		return nil, nil, CACertKey + " does not parse"
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", CANextKeyKey, err)
	}
	for _, cert := range bundle[1:] {
		if publicKeysEqual(key.Public(), cert.PublicKey) {
			matched = cert
			break
		}
	}
	if matched == nil {
		return nil, nil, fmt.Sprintf("%s matches no certificate of %s after the first", CANextKeyKey, CACertKey)
	}
	if !isCA(matched) {
		return nil, matched, "the certificate of " + CANextKeyKey + " is not a CA"
	}
	if unusable, due := lifetime("the next CA certificate", matched, now); unusable != "" || due != "" {
		return nil, matched, unusable + due
	}
	return matched, nil, ""
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
	unusable, due := lifetime(what, cert, now)
	return unusable + due
}

// lifetime returns why cert cannot be used at now (not yet valid, expired),
// or, when it can, why it is due for renewal (less than a third of its
// lifetime left).
func lifetime(what string, cert *x509.Certificate, now time.Time) (unusable, due string) {
	if now.Before(cert.NotBefore) {
		return fmt.Sprintf("%s is not valid before %s", what, cert.NotBefore.Format(time.RFC3339)), ""
	}
	total := cert.NotAfter.Sub(cert.NotBefore)
	left := cert.NotAfter.Sub(now)
	if left <= 0 {
		return fmt.Sprintf("%s expired at %s", what, cert.NotAfter.Format(time.RFC3339)), ""
	}
	if left < total/3 {
		return "", fmt.Sprintf("%s expires at %s, less than a third of its lifetime left", what, cert.NotAfter.Format(time.RFC3339))
	}
	return "", ""
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

// renew returns new Secret data for dnsNames and ips, fixing what
// NeedsRotation finds at now:
//
//   - a current CA that is unusable is replaced at once: by the pending next
//     CA when it is usable (promote), otherwise by a new CA whose bundle keeps
//     the previous CA (from data, or previous when data has lost it) while
//     it is unexpired, so that serving certificates it signed, still served
//     by other replicas until they reload, keep verifying;
//   - a current CA that is due, with no usable pending CA, stays current:
//     phase 1 puts a new CA after it in the bundle and its key in
//     ca-next.key;
//   - an unusable ca-next.key is dropped, with the certificate it matched;
//   - the serving pair is kept when it is good, and otherwise issued by the
//     current CA.
//
// Expired certificates and certificates that are not CAs are dropped from
// the bundle after the first.
func renew(data map[string][]byte, previous *x509.Certificate, dnsNames []string, ips []net.IP, now time.Time, caValidity, servingValidity time.Duration) (map[string][]byte, error) {
	st := inspect(data, now)
	if st.unusable != "" {
		if st.next != nil {
			return promote(data, dnsNames, ips, now, servingValidity)
		}
		return replace(st, previous, dnsNames, ips, now, caValidity, servingValidity)
	}
	out := map[string][]byte{CAKeyKey: data[CAKeyKey]}
	var rest []*x509.Certificate
	for _, cert := range st.bundle[1:] {
		if st.badNextCert == nil || !cert.Equal(st.badNextCert) {
			rest = append(rest, cert)
		}
	}
	switch {
	case st.next != nil:
		out[CANextKeyKey] = data[CANextKeyKey]
	case st.due != "":
		next, keyPEM, err := newCA(now, caValidity)
		if err != nil {
			return nil, err
		}
		rest = append([]*x509.Certificate{next}, rest...)
		out[CANextKeyKey] = keyPEM
	}
	out[CACertKey] = encodeBundle(st.ca, rest, now)
	if checkServing(data, st.ca, dnsNames, ips, now) == "" {
		out[TLSCertKey], out[TLSKeyKey] = data[TLSCertKey], data[TLSKeyKey]
		return out, nil
	}
	var err error
	if out[TLSCertKey], out[TLSKeyKey], err = NewServingCert(out[CACertKey], out[CAKeyKey], dnsNames, ips, now, servingValidity); err != nil {
		return nil, err
	}
	return out, nil
}

// replace is the one-step replacement of an unusable CA: a new CA, the
// previous one after it in the bundle, and a serving certificate from the
// new CA.
func replace(st caState, previous *x509.Certificate, dnsNames []string, ips []net.IP, now time.Time, caValidity, servingValidity time.Duration) (map[string][]byte, error) {
	if st.bundle != nil && isCA(st.bundle[0]) {
		previous = st.bundle[0]
	}
	ca, keyPEM, err := newCA(now, caValidity)
	if err != nil {
		return nil, err
	}
	var rest []*x509.Certificate
	if previous != nil {
		rest = append(rest, previous)
	}
	bundlePEM := encodeBundle(ca, rest, now)
	certPEM, certKeyPEM, err := NewServingCert(bundlePEM, keyPEM, dnsNames, ips, now, servingValidity)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{TLSCertKey: certPEM, TLSKeyKey: certKeyPEM, CACertKey: bundlePEM, CAKeyKey: keyPEM}, nil
}

// promote is phase 2 of a CA rotation: the pending next CA of data becomes
// the current CA (first in the bundle, its key in ca.key, ca-next.key gone),
// the previous current CA and the rest of the bundle follow it, and the
// serving certificate is issued by the new CA. data must have a usable
// pending CA.
func promote(data map[string][]byte, dnsNames []string, ips []net.IP, now time.Time, servingValidity time.Duration) (map[string][]byte, error) {
	st := inspect(data, now)
	if st.next == nil {
		return nil, errors.New("switching to the next CA: there is no usable pending CA")
	}
	var rest []*x509.Certificate
	for _, cert := range st.bundle {
		if !cert.Equal(st.next) {
			rest = append(rest, cert)
		}
	}
	bundlePEM := encodeBundle(st.next, rest, now)
	keyPEM := data[CANextKeyKey]
	certPEM, certKeyPEM, err := NewServingCert(bundlePEM, keyPEM, dnsNames, ips, now, servingValidity)
	if err != nil {
		return nil, fmt.Errorf("switching to the next CA: %w", err)
	}
	return map[string][]byte{TLSCertKey: certPEM, TLSKeyKey: certKeyPEM, CACertKey: bundlePEM, CAKeyKey: keyPEM}, nil
}

// newCA returns a new CA, parsed, and its key.
func newCA(now time.Time, validity time.Duration) (*x509.Certificate, []byte, error) {
	certPEM, keyPEM, err := NewCA(fmt.Sprintf("kyvap-webhook-ca@%d", now.Unix()), now, validity)
	if err != nil {
		return nil, nil, err
	}
	certs, err := parseCertsPEM(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the new CA: %w", err)
	}
	return certs[0], keyPEM, nil
}

// encodeBundle encodes first and then the certificates of rest that are
// CAs, unexpired at now and not already in the bundle.
func encodeBundle(first *x509.Certificate, rest []*x509.Certificate, now time.Time) []byte {
	out := encodeCert(first.Raw)
	kept := []*x509.Certificate{first}
	for _, cert := range rest {
		if !isCA(cert) || !now.Before(cert.NotAfter) || slices.ContainsFunc(kept, cert.Equal) {
			continue
		}
		kept = append(kept, cert)
		out = append(out, encodeCert(cert.Raw)...)
	}
	return out
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
