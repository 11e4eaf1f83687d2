// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// TestAlertsUseExportedMetrics runs the operator with its webhook and
// background scans, sends a request through the webhook, and checks that
// every metric (and every label it selects or groups by) that the shipped
// PrometheusRule's alerts and the Grafana dashboard query is one the
// manager exports: the registry controller-runtime serves on /metrics.
// `up` is Prometheus's own.
func TestAlertsUseExportedMetrics(t *testing.T) {
	ns := "alerts"
	cp.EnsureNamespace(t, ns, nil)
	cp.InstallPolicyReportCRDs(t)
	cp.StartWebhookOperator(t, translate.Options{GenerateValidatingAdmissionPolicy: false}, controlplane.FreePort(t))
	policy := controlplane.ClusterPolicy("alerts-webhook", kyvernov1.Enforce, controlplane.CELRule("named", "ConfigMap", "object.metadata.name != 'bad-alerts'", "bad-alerts is refused"))
	cp.CreatePolicy(t, policy, controllers.ReasonGenerationDisabled)
	cp.WaitForDenial(t, controlplane.ConfigMap(ns, "bad-alerts", nil), "bad-alerts is refused")

	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]*dto.MetricFamily{}
	for _, f := range families {
		exported[f.GetName()] = f
	}
	if f := exported[webhook.MetricCertificateExpiry]; f == nil || f.Metric[0].GetGauge().GetValue() == 0 {
		t.Errorf("%s is not exported with the serving certificate's expiry", webhook.MetricCertificateExpiry)
	}

	var expressions []string
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	data, err := os.ReadFile(controlplane.RepoPath(t, "config", "prometheus", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts++
			expressions = append(expressions, r.Expr)
		}
	}
	var dashboard struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, err = os.ReadFile(controlplane.RepoPath(t, "config", "prometheus", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatal(err)
	}
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			expressions = append(expressions, target.Expr)
		}
	}
	if alerts < 8 || len(expressions) < alerts+10 {
		t.Fatalf("%d alerts, %d expressions", alerts, len(expressions))
	}
	for _, expr := range expressions {
		for _, sel := range promSelectors(expr) {
			if sel.metric == "up" {
				continue
			}
			f := familyOf(exported, sel.metric)
			if f == nil {
				t.Errorf("%q queries %s, which the manager does not export", expr, sel.metric)
				continue
			}
			have := map[string]bool{"job": true, "instance": true} // Prometheus's target labels
			for _, m := range f.Metric {
				for _, l := range m.Label {
					have[l.GetName()] = true
				}
			}
			if f.GetType() == dto.MetricType_HISTOGRAM {
				have["le"] = true
			}
			for _, l := range sel.labels {
				if !have[l] {
					t.Errorf("%q: %s has no label %s", expr, sel.metric, l)
				}
			}
		}
	}
}

// familyOf finds the family a series name belongs to (a histogram's
// _bucket, _sum and _count series are its family's).
func familyOf(exported map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	if f := exported[name]; f != nil {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f := exported[base]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
				return f
			}
		}
	}
	return nil
}

// selector is a metric a PromQL expression reads and the labels it
// matches on or aggregates by.
type selector struct {
	metric string
	labels []string
}

var (
	promMatchers  = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	promLabelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring)\s*\(([^)]*)\)`)
	promString    = regexp.MustCompile(`"[^"]*"`)
	promRange     = regexp.MustCompile(`\[[^\]]*\]`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// promKeywords are PromQL words that are not metric names.
var promKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "offset": true, "bool": true, "inf": true, "nan": true,
}

// promSelectors lists the metrics an expression reads, each with the
// labels its matchers name and the labels the expression groups by (which
// apply to every metric of the expression).
func promSelectors(expr string) []selector {
	var grouped []string
	for _, m := range promGrouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouped = append(grouped, l)
			}
		}
	}
	byMetric := map[string][]string{}
	var order []string
	add := func(metric string, labels ...string) {
		if _, ok := byMetric[metric]; !ok {
			order = append(order, metric)
		}
		byMetric[metric] = append(byMetric[metric], labels...)
	}
	for _, m := range promMatchers.FindAllStringSubmatch(expr, -1) {
		var labels []string
		for _, l := range promLabelName.FindAllStringSubmatch(promString.ReplaceAllString(m[2], `""`), -1) {
			labels = append(labels, l[1])
		}
		add(m[1], labels...)
	}
	// Bare metric names: what is left that is no function, keyword or
	// grouping label.
	rest := promMatchers.ReplaceAllString(expr, " ")
	rest = promGrouping.ReplaceAllString(rest, " ")
	rest = promRange.ReplaceAllString(promString.ReplaceAllString(rest, " "), " ")
	for _, loc := range promIdent.FindAllStringIndex(rest, -1) {
		word := rest[loc[0]:loc[1]]
		after := strings.TrimLeft(rest[loc[1]:], " \t\n")
		if promKeywords[word] || strings.HasPrefix(after, "(") || (loc[0] > 0 && rest[loc[0]-1] >= '0' && rest[loc[0]-1] <= '9') {
			continue
		}
		add(word)
	}
	out := make([]selector, 0, len(order))
	for _, metric := range order {
		out = append(out, selector{metric: metric, labels: append(byMetric[metric], grouped...)})
	}
	return out
}
