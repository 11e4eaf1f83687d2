// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestX509Decode compares x509.decode with what Kyverno v1.19.1 gives for the
// same PEM (testdata/x509-*.json: its json.marshal of the result, by its CLI).
func TestX509Decode(t *testing.T) {
	env := newEnv(t, "x509")
	for _, name := range []string{"ca", "leaf", "csr"} {
		t.Run(name, func(t *testing.T) {
			var want map[string]any
			if err := json.Unmarshal([]byte(readFile(t, "x509-"+name+".json")), &want); err != nil {
				t.Fatal(err)
			}
			got, compileErr, err := evaluate(t, env, "x509.decode(object.pem)", map[string]any{"pem": readFile(t, "x509-"+name+".pem")})
			if compileErr != nil || err != nil {
				t.Fatal(compileErr, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("x509.decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestX509(t *testing.T) {
	pems := map[string]any{}
	for _, name := range []string{"ca", "leaf", "ec", "eccsr", "key", "garbage", "badcsr"} {
		pems[name] = readFile(t, "x509-"+name+".pem")
	}
	pems["text"] = "just some text"
	pems["n"] = int64(1)
	runCases(t, newEnv(t, "x509"), []evalCase{
		{name: "issuer", expr: "x509.decode(object.ca).Issuer.CommonName", object: pems, want: "kyvap-ca"},
		// Only the first PEM block counts: the leaf, not the CA after it.
		{name: "first block", expr: "x509.decode(object.leaf).IsCA", object: pems, want: false},
		{name: "CA", expr: "x509.decode(object.ca).IsCA", object: pems, want: true},
		// The low 64 bits of the serial number, a double after JSON.
		{name: "serial number", expr: "x509.decode(object.ca).SerialNumber", object: pems, want: -4.362896299872286e+18},
		{name: "exponent", expr: "x509.decode(object.ca).PublicKey.E", object: pems, want: 65537.0},
		{name: "not after", expr: "x509.decode(object.leaf).NotAfter", object: pems, want: "2025-06-01T12:30:00Z"},
		{name: "key usage", expr: "x509.decode(object.ca).KeyUsage", object: pems, want: 33.0},
		{name: "IP addresses", expr: "x509.decode(object.ca).IPAddresses", object: pems, want: []any{"192.0.2.1", "2001:db8::1"}},
		{name: "ECDSA certificate", expr: "x509.decode(object.ec)", object: pems, wantErr: "certificate should use rsa algorithm"},
		{name: "ECDSA request", expr: "x509.decode(object.eccsr)", object: pems, wantErr: "certificate should use rsa algorithm"},
		{name: "private key", expr: "x509.decode(object.key)", object: pems, wantErr: "PEM block neither contains a CERTIFICATE or CERTIFICATE REQUEST"},
		{name: "malformed certificate", expr: "x509.decode(object.garbage)", object: pems, wantErr: "x509: malformed certificate"},
		{name: "malformed request", expr: "x509.decode(object.badcsr)", object: pems,
			wantErr: "asn1: structure error: tags don't match (16 vs {class:0 tag:2 length:1 isCompound:false}) {optional:false explicit:false application:false private:false defaultValue:<nil> tag:<nil> stringType:0 timeType:0 set:false omitEmpty:false} tbsCertificateRequest @2"},
		{name: "not PEM", expr: "x509.decode(object.text)", object: pems, wantErr: "failed to decode PEM block"},
		{name: "empty", expr: "x509.decode('')", wantErr: "failed to decode PEM block"},
		{name: "dyn int", expr: "x509.decode(object.n)", object: pems, wantErr: "no such overload: x509.decode(int)"},
		{name: "int", expr: "x509.decode(1)", wantNoComp: "found no matching overload for 'x509.decode' applied to '(int)'"},
	})
}
