// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kyvap/kyvap/webhook"
)

func TestParseFlagsGenerateToggle(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{args: nil, want: true},
		{args: []string{"--generate-validating-admission-policy=false"}, want: false},
		{args: []string{"--generateValidatingAdmissionPolicy=false"}, want: false},
		{args: []string{"--generateValidatingAdmissionPolicy=false", "--generate-validating-admission-policy=true"}, want: true},
	}
	for _, tt := range tests {
		o, err := parseFlags(tt.args)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", tt.args, err)
		}
		if o.generateVAP != tt.want {
			t.Errorf("parseFlags(%q).generateVAP = %v, want %v", tt.args, o.generateVAP, tt.want)
		}
	}
}

func TestParseFlagsRejectsUnknown(t *testing.T) {
	if _, err := parseFlags([]string{"--no-such-flag"}); err == nil {
		t.Fatal("parseFlags accepted an unknown flag")
	}
}

func TestKyvernoConfigFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr bool
	}{
		{args: nil, want: "{Kyverno:kyverno/kyverno Own:/ Disabled:false}"},
		{args: []string{"--webhook-namespace=kyvap-system"}, want: "{Kyverno:kyverno/kyverno Own:kyvap-system/kyvap-kyverno-config Disabled:false}"},
		{args: []string{"--kyverno-config=security/kyverno-cfg", "--kyverno-config-fallback=ops/filters"}, want: "{Kyverno:security/kyverno-cfg Own:ops/filters Disabled:false}"},
		{args: []string{"--kyverno-config=none"}, want: "{Kyverno:/ Own:/ Disabled:true}"},
		{args: []string{"--kyverno-config=kyverno"}, wantErr: true},
		{args: []string{"--kyverno-config=a/b/c"}, wantErr: true},
		{args: []string{"--kyverno-config-fallback=/x"}, wantErr: true},
	} {
		o, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.kyvernoConfigOptions()
		if (err != nil) != tc.wantErr {
			t.Errorf("%v: error %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && fmt.Sprintf("%+v", got) != tc.want {
			t.Errorf("%v: got %+v, want %s", tc.args, got, tc.want)
		}
	}
}

func TestMetricsAndHTTP2Flags(t *testing.T) {
	offered := func(opts []func(*tls.Config)) []string {
		c := &tls.Config{NextProtos: []string{"h2"}} // controller-runtime's default
		for _, o := range opts {
			o(c)
		}
		return c.NextProtos
	}
	for _, tc := range []struct {
		args                []string
		addr                string
		secure, filter      bool
		protos, webhookHTTP []string
	}{
		// The default is kubebuilder v4's: HTTPS on 8443 with authentication
		// and authorization, HTTP/2 off on both servers.
		{args: nil, addr: ":8443", secure: true, filter: true, protos: []string{"http/1.1"}, webhookHTTP: []string{"http/1.1"}},
		{args: []string{"--metrics-secure=false", "--metrics-bind-address=:8080"}, addr: ":8080", protos: []string{"http/1.1"}, webhookHTTP: []string{"http/1.1"}},
		{args: []string{"--enable-http2"}, addr: ":8443", secure: true, filter: true, protos: []string{"h2"}, webhookHTTP: []string{"h2"}},
	} {
		o, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		m := o.metricsOptions()
		if m.BindAddress != tc.addr || m.SecureServing != tc.secure || (m.FilterProvider != nil) != tc.filter {
			t.Errorf("%v: metrics on %q, secure %v, filter %v; want %q, %v, %v", tc.args, m.BindAddress, m.SecureServing, m.FilterProvider != nil, tc.addr, tc.secure, tc.filter)
		}
		if got := offered(m.TLSOpts); !slices.Equal(got, tc.protos) {
			t.Errorf("%v: metrics server offers %v, want %v", tc.args, got, tc.protos)
		}
		wh, err := webhook.New(withNamespace(o.webhookOpts))
		if err != nil {
			t.Fatal(err)
		}
		if got := offered(wh.Server().(*ctrlwebhook.DefaultServer).Options.TLSOpts); !slices.Equal(got, tc.webhookHTTP) {
			t.Errorf("%v: webhook server offers %v, want %v", tc.args, got, tc.webhookHTTP)
		}
	}
}

func withNamespace(o webhook.Options) webhook.Options {
	o.Namespace = "kyvap-system"
	return o
}

func TestWebhookRequestLimitFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.webhookOpts.MaxRequestBytes != 3<<20 || o.webhookOpts.MaxInFlightBytes != 3<<20 {
		t.Errorf("defaults: max request %d, in flight %d; want 3 MiB and 3 MiB", o.webhookOpts.MaxRequestBytes, o.webhookOpts.MaxInFlightBytes)
	}
	o, err = parseFlags([]string{"--webhook-max-request-bytes=8388608", "--webhook-max-inflight-bytes=4194304", "--webhook-namespace=kyvap-system"})
	if err != nil {
		t.Fatal(err)
	}
	// main exits with 2 before it connects to anything.
	if err := o.webhookOpts.Validate(); err == nil {
		t.Error("a request limit over the in-flight budget was accepted")
	}
}

func TestMetricsCertDir(t *testing.T) {
	dir := t.TempDir()
	o, err := parseFlags([]string{"--metrics-cert-dir=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.checkMetricsCertDir(); err == nil {
		t.Error("an empty --metrics-cert-dir was accepted (controller-runtime would serve a self-signed certificate)")
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.checkMetricsCertDir(); err != nil {
		t.Error(err)
	}
}

func TestBackgroundScanFlag(t *testing.T) {
	for args, want := range map[string]bool{"": true, "--background-scan=false": false, "--background-scan=true": true} {
		var list []string
		if args != "" {
			list = []string{args}
		}
		o, err := parseFlags(list)
		if err != nil {
			t.Fatal(err)
		}
		if o.backgroundScan != want {
			t.Errorf("parseFlags(%q).backgroundScan = %v, want %v", args, o.backgroundScan, want)
		}
	}
}

func TestBackgroundScanWorkersFlag(t *testing.T) {
	o, err := parseFlags([]string{"--background-scan-workers=2"})
	if err != nil || o.backgroundScanWorkers != 2 {
		t.Fatalf("workers %d, err %v", o.backgroundScanWorkers, err)
	}
	if o, _ := parseFlags(nil); o.backgroundScanWorkers != 8 {
		t.Errorf("default workers %d, want 8", o.backgroundScanWorkers)
	}
	if _, err := parseFlags([]string{"--background-scan-workers=0"}); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("0 workers: %v", err)
	}
}
