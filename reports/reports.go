// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package reports builds the PolicyReports kyvap writes for what it
// enforces (issue 15), in the layout of Kyverno's own reports
// (wgpolicyk8s.io/v1alpha2, one PolicyReport per namespaced resource, owned
// by it, a ClusterPolicyReport per cluster-scoped one), so that
// `kubectl get polr`, Policy Reporter and dashboards read them unchanged.
// kyvap's reports carry their own source and names, so they never overwrite
// or duplicate Kyverno's. The package is pure: it builds objects, the
// operator writes them.
package reports

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Group, version and kinds of the reports (the CRDs of
// github.com/kyverno/kyverno config/crds/policyreport).
const (
	APIVersion              = "wgpolicyk8s.io/v1alpha2"
	KindPolicyReport        = "PolicyReport"
	KindClusterPolicyReport = "ClusterPolicyReport"
)

// Source is the `source` of kyvap's results; Kyverno writes "kyverno".
const Source = "kyvap"

// Labels, annotations and the name prefix of kyvap's reports.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedByValue   = "kyvap"
	LabelResourceUID = "kyvap.io/resource.uid"
	// LabelAdmissionResults marks a report that holds admission-time
	// results, so that they can be found without reading every report.
	LabelAdmissionResults = "kyvap.io/admission-results"
	// AnnotationBackgroundResults is the Fingerprint of the report's
	// background results: a rescan compares it, from a metadata-only cache,
	// without reading the report.
	AnnotationBackgroundResults = "kyvap.io/background-results"
	namePrefix                  = "kyvap-"
)

// The `process` property of a result, as Kyverno writes it.
const (
	ProcessBackground = "background scan"
	ProcessAdmission  = "admission review"
)

// Policy annotations Kyverno reads into a result (api/kyverno annotations).
const (
	AnnotationCategory = "policies.kyverno.io/category"
	AnnotationSeverity = "policies.kyverno.io/severity"
	AnnotationScored   = "policies.kyverno.io/scored"
)

// Status is a result's outcome.
type Status string

// The outcomes kyvap reports (the CRD also allows warn).
const (
	StatusPass  Status = "pass"
	StatusFail  Status = "fail"
	StatusError Status = "error"
	StatusSkip  Status = "skip"
)

// PolicyReport is a wgpolicyk8s.io/v1alpha2 PolicyReport or
// ClusterPolicyReport, with the fields kyvap writes.
type PolicyReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Scope             *corev1.ObjectReference `json:"scope,omitempty"`
	Summary           Summary                 `json:"summary"`
	Results           []Result                `json:"results,omitempty"`
}

// Summary counts the results by outcome.
type Summary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error"`
	Skip  int `json:"skip"`
}

// Result is one rule's outcome on the report's resource.
type Result struct {
	Source     string            `json:"source,omitempty"`
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule,omitempty"`
	Result     Status            `json:"result,omitempty"`
	Message    string            `json:"message,omitempty"`
	Scored     bool              `json:"scored,omitempty"`
	Category   string            `json:"category,omitempty"`
	Severity   string            `json:"severity,omitempty"`
	Timestamp  metav1.Timestamp  `json:"timestamp,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Resource identifies the resource a report is about.
type Resource struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

// ResultFor is a rule's result on a resource, with the policy's category,
// severity and scoring as Kyverno reads them from its annotations
// (pkg/utils/report/results.go ToPolicyReportResult); process says where it
// was found ("background scan" or "admission review").
func ResultFor(policy metav1.Object, rule string, status Status, message, process string, now time.Time) Result {
	annotations := policy.GetAnnotations()
	return Result{
		Source:     Source,
		Policy:     policy.GetName(),
		Rule:       rule,
		Result:     status,
		Message:    truncate(message, MaxMessage),
		Scored:     annotations[AnnotationScored] != "false",
		Category:   annotations[AnnotationCategory],
		Severity:   severity(annotations[AnnotationSeverity]),
		Timestamp:  metav1.Timestamp{Seconds: now.Unix()},
		Properties: map[string]string{"process": process},
	}
}

// MaxMessage bounds a result's message (a messageExpression can build any
// text): a report holds one result per rule and must fit in etcd.
const MaxMessage = 1024

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// severity keeps only the values the CRD allows, as Kyverno's
// SeverityFromString does.
func severity(s string) string {
	switch s {
	case "critical", "high", "medium", "low", "info":
		return s
	}
	return ""
}

// Name is the name of kyvap's report about the resource: distinct from
// Kyverno's, which is the resource's UID.
func Name(uid types.UID) string { return namePrefix + string(uid) }

// For builds the report about a resource: a PolicyReport in its namespace,
// or a ClusterPolicyReport for a cluster-scoped one, owned by the resource
// (so that it goes with it), with the results sorted as Kyverno sorts them
// and the summary, the Fingerprint of its background results and a label
// when it holds admission-time results. It does not modify results.
func For(resource Resource, results []Result) *PolicyReport {
	kind := KindPolicyReport
	if resource.Namespace == "" {
		kind = KindClusterPolicyReport
	}
	sorted := slices.Clone(results)
	sortResults(sorted)
	labels := map[string]string{LabelManagedBy: ManagedByValue, LabelResourceUID: string(resource.UID)}
	background, admission := Split(sorted)
	if len(admission) > 0 {
		labels[LabelAdmissionResults] = "true"
	}
	var annotations map[string]string
	if fp := Fingerprint(background); fp != "" {
		annotations = map[string]string{AnnotationBackgroundResults: fp}
	}
	return &PolicyReport{
		TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        Name(resource.UID),
			Namespace:   resource.Namespace,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: resource.APIVersion, Kind: resource.Kind, Name: resource.Name, UID: resource.UID,
			}},
		},
		Scope: &corev1.ObjectReference{
			APIVersion: resource.APIVersion, Kind: resource.Kind, Namespace: resource.Namespace, Name: resource.Name, UID: resource.UID,
		},
		Summary: summarize(sorted),
		Results: sorted,
	}
}

// sortResults orders results by policy, rule, source and timestamp, as
// Kyverno's SortReportResults (results have no subjects here).
func sortResults(results []Result) {
	slices.SortStableFunc(results, func(a, b Result) int {
		return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Source, b.Source),
			cmp.Compare(timestampKey(a.Timestamp), timestampKey(b.Timestamp)))
	})
}

// timestampKey is Kyverno's comparison key, Timestamp.String(), for the
// seconds kyvap sets.
func timestampKey(t metav1.Timestamp) string {
	return "seconds:" + strconv.FormatInt(t.Seconds, 10)
}

// summarize counts results as Kyverno's CalculateSummary.
func summarize(results []Result) Summary {
	var s Summary
	for _, r := range results {
		switch r.Result {
		case StatusPass:
			s.Pass++
		case StatusFail:
			s.Fail++
		case StatusError:
			s.Error++
		case StatusSkip:
			s.Skip++
		case "warn":
			s.Warn++
		}
	}
	return s
}

// Stable returns next with the timestamp of the previous result that says
// the same (same policy, rule, source, outcome and message), so that a
// rescan that finds nothing new builds an identical report and nothing is
// written.
func Stable(previous, next []Result) []Result {
	type key struct {
		policy, rule, source, message string
		result                        Status
	}
	seen := make(map[key]metav1.Timestamp, len(previous))
	for _, r := range previous {
		seen[key{r.Policy, r.Rule, r.Source, r.Message, r.Result}] = r.Timestamp
	}
	out := slices.Clone(next)
	for i, r := range out {
		if t, ok := seen[key{r.Policy, r.Rule, r.Source, r.Message, r.Result}]; ok {
			out[i].Timestamp = t
		}
	}
	return out
}

// Fingerprint identifies what results say, timestamps aside and in any
// order: equal fingerprints mean a report needs no write. No results have
// the empty fingerprint.
func Fingerprint(results []Result) string {
	if len(results) == 0 {
		return ""
	}
	sorted := slices.Clone(results)
	for i := range sorted {
		sorted[i].Timestamp = metav1.Timestamp{}
	}
	slices.SortFunc(sorted, func(a, b Result) int {
		return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Source, b.Source),
			cmp.Compare(a.Result, b.Result), cmp.Compare(a.Message, b.Message), cmp.Compare(a.Properties["process"], b.Properties["process"]))
	})
	data, _ := json.Marshal(sorted)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// Split separates admission-time results from the others.
func Split(results []Result) (background, admission []Result) {
	for _, r := range results {
		if r.Properties["process"] == ProcessAdmission {
			admission = append(admission, r)
		} else {
			background = append(background, r)
		}
	}
	return background, admission
}
