// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricCertificateExpiry is the Unix time at which the webhook's serving
// certificate expires (0 until one is loaded): alerts fire well before the
// API server would refuse to call the webhook.
const MetricCertificateExpiry = "kyvap_webhook_certificate_expiry_timestamp_seconds"

// servingCertificate returns the certificate the latest webhook of the
// process serves (tests run several in one process).
var servingCertificate atomic.Pointer[func() (*tls.Certificate, error)]

var registerExpiry sync.Once

// publishCertificateExpiry makes the expiry gauge read the certificate
// get serves; registered once per process, it reads it at each scrape.
func publishCertificateExpiry(get func() (*tls.Certificate, error)) {
	servingCertificate.Store(&get)
	registerExpiry.Do(func() {
		metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricCertificateExpiry,
			Help: "Unix time at which the webhook's serving certificate expires (0 until one is loaded).",
		}, certificateExpiry))
	})
}

func certificateExpiry() float64 {
	get := servingCertificate.Load()
	if get == nil {
		return 0
	}
	cert, err := (*get)()
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		return 0
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return 0
		}
	}
	return float64(leaf.NotAfter.Unix())
}

// certificateFromDir reads the serving certificate cert-manager mounts.
func certificateFromDir(dir string) func() (*tls.Certificate, error) {
	return func() (*tls.Certificate, error) {
		crt, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
		if err != nil {
			return nil, err
		}
		key, err := os.ReadFile(filepath.Join(dir, "tls.key"))
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(crt, key)
		return &cert, err
	}
}
