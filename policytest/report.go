// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
)

// Result is what a path concluded for one rule and one resource, in
// Kyverno's vocabulary plus the states of kyvap's two paths.
type Result string

// The results.
const (
	// Pass, Fail, Skip, Error: Kyverno's rule statuses. Skip: a
	// celPrecondition is false or a PolicyException applies.
	Pass  Result = "pass"
	Fail  Result = "fail"
	Skip  Result = "skip"
	Error Result = "error"
	// None: the path has no result for the rule; the rule does not match
	// the resource. When neither path has one, Kyverno's CLI counts the
	// expectation as met ("excluded").
	None Result = "none"
	// Fallback: on the VAP path, the rule (or this pod-controller variant)
	// is not a VAP; the fallback engine alone decides, so the VAP column is
	// not compared.
	Fallback Result = "fallback"
	// NotApplicable: the path cannot reproduce the case (Message says why),
	// so it is not compared.
	NotApplicable Result = "n/a"
)

// Status is a row's verdict.
type Status string

// The statuses.
const (
	// StatusPass: every evaluated path gave the expected result.
	StatusPass Status = "pass"
	// StatusFail: some path did not.
	StatusFail Status = "fail"
	// StatusSkipped: the result could not be evaluated (Reason says why):
	// it is counted apart and does not fail the run.
	StatusSkipped Status = "skipped"
)

// PathResult is one path's result for a row.
type PathResult struct {
	Result  Result `json:"result"`
	Message string `json:"message,omitempty"`
	// Match is whether the result agrees with the expectation; absent for
	// fallback and skipped rows.
	Match *bool `json:"match,omitempty"`
}

// Row is one checked (expected result, resource, rule) triple.
type Row struct {
	Policy string `json:"policy"`
	// Rule is the rule the test result names; ReportedRule the rule the
	// paths reported (an autogen-... variant for pod controllers), when it
	// differs.
	Rule         string `json:"rule"`
	ReportedRule string `json:"reportedRule,omitempty"`
	// Resource is "apiVersion/kind/namespace/name".
	Resource  string `json:"resource"`
	Operation string `json:"operation,omitempty"`
	Expected  string `json:"expected"`
	// VAP is the ValidatingAdmissionPolicy path: the generated VAPs and
	// bindings evaluated as kube-apiserver does. Engine is the fallback
	// engine with every CEL rule handed to it.
	VAP    PathResult `json:"vap"`
	Engine PathResult `json:"engine"`
	// Cluster is the API server's answer, in a replay on a live cluster
	// (kyvap test --cluster); the offline paths are not evaluated then.
	Cluster *PathResult `json:"cluster,omitempty"`
	Status  Status      `json:"status"`
	// Reason explains a skipped row or a failure.
	Reason string `json:"reason,omitempty"`
	// Result is the index of the test's result the row checks.
	Result int `json:"-"`
}

// Summary counts rows.
type Summary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// SkipReasons counts skipped rows by reason.
	SkipReasons map[string]int `json:"skipReasons,omitempty"`
}

// Add counts another summary in.
func (s *Summary) Add(o Summary) {
	s.Passed += o.Passed
	s.Failed += o.Failed
	s.Skipped += o.Skipped
	for r, n := range o.SkipReasons {
		if s.SkipReasons == nil {
			s.SkipReasons = map[string]int{}
		}
		s.SkipReasons[r] += n
	}
}

func (s *Summary) count(r Row) {
	switch r.Status {
	case StatusPass:
		s.Passed++
	case StatusFail:
		s.Failed++
	case StatusSkipped:
		s.Skipped++
		if s.SkipReasons == nil {
			s.SkipReasons = map[string]int{}
		}
		s.SkipReasons[r.Reason]++
	}
}

// String is "N passed, M failed", plus ", K skipped (reason; ...)" when
// some result could not be evaluated.
func (s Summary) String() string {
	out := fmt.Sprintf("%d passed, %d failed", s.Passed, s.Failed)
	if s.Skipped == 0 {
		return out
	}
	reasons := make([]string, 0, len(s.SkipReasons))
	for r := range s.SkipReasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for i, r := range reasons {
		reasons[i] = fmt.Sprintf("%d: %s", s.SkipReasons[r], r)
	}
	return fmt.Sprintf("%s, %d skipped (%s)", out, s.Skipped, strings.Join(reasons, "; "))
}

// Report is the outcome of one test (one Test document).
type Report struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Document int    `json:"document"`
	// Rules has the translation verdict of every rule of every policy.
	Rules []RuleVerdict `json:"rules,omitempty"`
	Rows  []Row         `json:"rows"`
	// Cluster: the rows were replayed on a live cluster.
	Cluster  bool     `json:"cluster,omitempty"`
	Summary  Summary  `json:"summary"`
	Warnings []string `json:"warnings,omitempty"`
}

// RuleVerdict is how kyvap translates a rule (with VAP generation on).
type RuleVerdict struct {
	Policy  string   `json:"policy"`
	Rule    string   `json:"rule"`
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason,omitempty"`
	VAPs    []string `json:"vaps,omitempty"`
	Message string   `json:"message,omitempty"`
}

// Failed reports whether some row failed.
func (r *Report) Failed() bool { return r.Summary.Failed > 0 }

// Results is what `kyvap test -o json` prints: every test and the total.
type Results struct {
	Tests   []Report `json:"tests"`
	Summary Summary  `json:"summary"`
	// Detailed adds each row's message to the text tables (kyvap test
	// --detailed-results, as Kyverno's CLI).
	Detailed bool `json:"-"`
}

// NewResults aggregates reports.
func NewResults(reports []Report) Results {
	r := Results{Tests: reports}
	if r.Tests == nil {
		r.Tests = []Report{}
	}
	for _, t := range reports {
		r.Summary.Add(t.Summary)
	}
	return r
}

// WriteJSON writes the results as indented JSON.
func (r Results) WriteJSON(w io.Writer) error {
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(out, '\n'))
	return err
}

// WriteText writes a table per test and the summary line.
func (r Results) WriteText(w io.Writer) error {
	for i := range r.Tests {
		if err := r.Tests[i].writeText(w, r.Detailed); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%s\n", r.Summary)
	return err
}

// WriteText writes the test's table: one line per row, the translation
// verdicts that are not plain Translated, warnings, and failure reasons.
func (r *Report) WriteText(w io.Writer) error { return r.writeText(w, false) }

// writeText is WriteText, with a MESSAGE column when detailed.
func (r *Report) writeText(w io.Writer, detailed bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nTest %s (%s", r.Name, r.Path)
	if r.Document > 1 {
		fmt.Fprintf(&b, ", document %d", r.Document)
	}
	b.WriteString(")\n")
	for _, v := range r.Rules {
		if v.Verdict == "Translated" {
			continue
		}
		fmt.Fprintf(&b, "  %s/%s: %s", v.Policy, v.Rule, v.Verdict)
		if v.Reason != "" {
			fmt.Fprintf(&b, " (%s)", v.Reason)
		}
		b.WriteString("\n")
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", warning)
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	header := "  #\tPOLICY\tRULE\tRESOURCE\tEXPECTED\tVAP\tENGINE\tOK"
	if r.Cluster {
		header = "  #\tPOLICY\tRULE\tRESOURCE\tEXPECTED\tAPI SERVER\tOK"
	}
	if detailed {
		header += "\tMESSAGE"
	}
	fmt.Fprintln(tw, header)
	var notes []string
	for i, row := range r.Rows {
		rule := row.Rule
		if row.ReportedRule != "" && row.ReportedRule != row.Rule {
			rule = row.ReportedRule
		}
		resource := row.Resource
		if row.Operation != "" && row.Operation != "CREATE" {
			resource += " (" + row.Operation + ")"
		}
		mark := "✓"
		switch row.Status {
		case StatusFail:
			mark = "✗"
		case StatusSkipped:
			mark = "-"
		}
		message := ""
		if detailed {
			message = "\t" + shorten(rowMessage(&row))
		}
		if r.Cluster {
			got := Result("-")
			if row.Cluster != nil {
				got = row.Cluster.Result
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s%s\n", i+1, row.Policy, rule, resource, row.Expected, got, mark, message)
		} else {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", i+1, row.Policy, rule, resource, row.Expected, row.VAP.Result, row.Engine.Result, mark, message)
		}
		if row.Reason != "" && row.Status != StatusPass {
			notes = append(notes, fmt.Sprintf("  %d: %s", i+1, shorten(row.Reason)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	fmt.Fprintf(&b, "  %s\n", r.Summary)
	_, err := io.WriteString(w, b.String())
	return err
}

// longExpression is a CEL expression quoted in an API server message.
var longExpression = regexp.MustCompile(`(?s)expression '(.{40}).{20,}?' (resulted in|must)`)

// shorten abbreviates the CEL expressions the API server quotes in its
// messages (kyvap's generated conditions are long); JSON output keeps them.
func shorten(msg string) string {
	return longExpression.ReplaceAllString(msg, "expression '$1…' $2")
}

// rowMessage is the message a row's result carries: the API server's in a
// replay, else the engine's, else the VAP path's, else the row's reason.
func rowMessage(row *Row) string {
	for _, m := range []*PathResult{row.Cluster, &row.Engine, &row.VAP} {
		if m != nil && m.Message != "" {
			return strings.Join(strings.Fields(m.Message), " ")
		}
	}
	return row.Reason
}
