// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// x509Lib is Kyverno's kyverno.x509: x509.decode(pem) parses the first PEM
// block, a CERTIFICATE or a CERTIFICATE REQUEST with an RSA key, into a map:
// the JSON form of Kyverno's Go structs (field names as in Go, byte strings
// in base64, numbers as doubles).
type x509Lib struct{}

func (*x509Lib) LibraryName() string { return "kyverno.x509" }

func (*x509Lib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		withAdapter(func(adapter types.Adapter) []cel.EnvOption {
			return []cel.EnvOption{cel.Function("x509.decode",
				cel.Overload("x509_decode_string", []*cel.Type{cel.StringType}, cel.DynType,
					cel.UnaryBinding(func(arg ref.Val) ref.Val {
						out, err := x509Decode(arg)
						if err != nil {
							return types.WrapErr(err)
						}
						return adapter.NativeToValue(out)
					})))}
		}),
	}
}

func (*x509Lib) ProgramOptions() []cel.ProgramOption { return nil }

// rsaPublicKey replaces the key of Kyverno's output: the modulus in decimal.
type rsaPublicKey struct {
	N string
	E int
}

// certificateOutput is the shape of a decoded certificate: Kyverno's
// CertificateOutput, field for field, since its JSON field names are the
// map's keys.
type certificateOutput struct {
	Raw                         string
	RawTBSCertificate           string
	RawSubjectPublicKeyInfo     string
	RawSubject                  string
	RawIssuer                   string
	Signature                   string
	PublicKeyAlgorithm          x509.PublicKeyAlgorithm
	PublicKey                   rsaPublicKey
	SerialNumber                int64
	Issuer                      pkix.Name
	NotBefore                   string
	NotAfter                    string
	KeyUsage                    x509.KeyUsage
	Extensions                  []pkix.Extension
	ExtraExtensions             []pkix.Extension
	ExtKeyUsage                 []x509.ExtKeyUsage
	BasicConstraintsValid       bool
	IsCA                        bool
	MaxPathLen                  int
	MaxPathLenZero              bool
	AuthorityKeyId              []byte
	OCSPServer                  []string
	IssuingCertificateURL       []string
	DNSNames                    []string
	EmailAddresses              []string
	IPAddresses                 []net.IP
	PermittedDNSDomainsCritical bool
	PermittedDNSDomains         []string
	ExcludedDNSDomains          []string
	PermittedIPRanges           []*net.IPNet
	ExcludedIPRanges            []*net.IPNet
	PermittedEmailAddresses     []string
	ExcludedEmailAddresses      []string
	PermittedURIDomains         []string
	ExcludedURIDomains          []string
	CRLDistributionPoints       []string
	PolicyIdentifiers           []asn1.ObjectIdentifier
}

func x509Decode(arg ref.Val) (map[string]any, error) {
	input, err := convertToNative[string](arg)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode([]byte(input))
	if block == nil {
		return nil, errors.New("failed to decode PEM block")
	}
	switch block.Type {
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		if cert.PublicKeyAlgorithm != x509.RSA {
			return nil, errors.New("certificate should use rsa algorithm")
		}
		key, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			return nil, errors.New("failed to parse subject public key info")
		}
		// Kyverno keeps only the low 64 bits of the serial number.
		return toJSONMap(certificateOutput{
			Raw:                         base64.StdEncoding.EncodeToString(cert.Raw),
			RawTBSCertificate:           base64.StdEncoding.EncodeToString(cert.RawTBSCertificate),
			RawSubjectPublicKeyInfo:     base64.StdEncoding.EncodeToString(cert.RawSubjectPublicKeyInfo),
			RawSubject:                  base64.StdEncoding.EncodeToString(cert.RawSubject),
			RawIssuer:                   base64.StdEncoding.EncodeToString(cert.RawIssuer),
			Signature:                   base64.StdEncoding.EncodeToString(cert.Signature),
			PublicKeyAlgorithm:          cert.PublicKeyAlgorithm,
			PublicKey:                   rsaPublicKey{N: key.N.String(), E: key.E},
			SerialNumber:                cert.SerialNumber.Int64(),
			Issuer:                      cert.Issuer,
			NotBefore:                   cert.NotBefore.Format(time.RFC3339),
			NotAfter:                    cert.NotAfter.Format(time.RFC3339),
			KeyUsage:                    cert.KeyUsage,
			Extensions:                  cert.Extensions,
			ExtraExtensions:             cert.ExtraExtensions,
			ExtKeyUsage:                 cert.ExtKeyUsage,
			BasicConstraintsValid:       cert.BasicConstraintsValid,
			IsCA:                        cert.IsCA,
			MaxPathLen:                  cert.MaxPathLen,
			MaxPathLenZero:              cert.MaxPathLenZero,
			AuthorityKeyId:              cert.AuthorityKeyId,
			OCSPServer:                  cert.OCSPServer,
			IssuingCertificateURL:       cert.IssuingCertificateURL,
			DNSNames:                    cert.DNSNames,
			EmailAddresses:              cert.EmailAddresses,
			IPAddresses:                 cert.IPAddresses,
			PermittedDNSDomainsCritical: cert.PermittedDNSDomainsCritical,
			PermittedDNSDomains:         cert.PermittedDNSDomains,
			ExcludedDNSDomains:          cert.ExcludedDNSDomains,
			PermittedIPRanges:           cert.PermittedIPRanges,
			ExcludedIPRanges:            cert.ExcludedIPRanges,
			PermittedEmailAddresses:     cert.PermittedEmailAddresses,
			ExcludedEmailAddresses:      cert.ExcludedEmailAddresses,
			PermittedURIDomains:         cert.PermittedURIDomains,
			ExcludedURIDomains:          cert.ExcludedURIDomains,
			CRLDistributionPoints:       cert.CRLDistributionPoints,
			PolicyIdentifiers:           cert.PolicyIdentifiers,
		})
	case "CERTIFICATE REQUEST":
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return nil, err
		}
		if csr.PublicKeyAlgorithm != x509.RSA {
			return nil, errors.New("certificate should use rsa algorithm")
		}
		key, ok := csr.PublicKey.(*rsa.PublicKey)
		if !ok {
			return nil, errors.New("failed to parse subject public key info")
		}
		// Kyverno serializes Go's request struct whole, the key replaced:
		// the map has whatever fields this Go release's struct has.
		csr.PublicKey = rsaPublicKey{N: key.N.String(), E: key.E}
		return toJSONMap(csr)
	default:
		return nil, errors.New("PEM block neither contains a CERTIFICATE or CERTIFICATE REQUEST")
	}
}

func toJSONMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}
