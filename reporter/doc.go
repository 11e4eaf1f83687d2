// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package reporter is the controller of background scans and PolicyReports:
// it watches the policies kyvap enforces and the resources they match,
// judges each resource with package scan (as Kyverno's background
// controller does), records the admission results kyvap's webhook gives,
// and writes the wgpolicyk8s.io PolicyReports, as Kyverno writes them.
package reporter
