// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// The JUnit XML that CI systems read (GitLab, Jenkins, GitHub Actions'
// test reporters): one testsuite per test, one testcase per row.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	File     string      `xml:"file,attr,omitempty"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	ClassName string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	Output    string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the results as JUnit XML: a testsuite per test (named
// after it, with its file), a testcase per row named
// "<policy>/<rule> <resource> [operation]", a failure carrying the row's
// reason and each path's result, a skipped row its reason.
func (r Results) WriteJUnit(w io.Writer) error {
	out := junitSuites{Name: "kyvap test", Tests: r.Summary.Passed + r.Summary.Failed + r.Summary.Skipped, Failures: r.Summary.Failed, Skipped: r.Summary.Skipped}
	for i := range r.Tests {
		t := &r.Tests[i]
		name := t.Name
		if t.Document > 1 {
			name = fmt.Sprintf("%s (document %d)", name, t.Document)
		}
		s := junitSuite{Name: name, File: t.Path, Tests: len(t.Rows), Failures: t.Summary.Failed, Skipped: t.Summary.Skipped}
		for _, row := range t.Rows {
			rule := row.Rule
			if row.ReportedRule != "" && row.ReportedRule != row.Rule {
				rule = row.ReportedRule
			}
			c := junitCase{ClassName: name, Name: strings.TrimSuffix(row.Policy+"/"+rule, "/") + " " + row.Resource}
			if row.Operation != "" && row.Operation != "CREATE" {
				c.Name += " " + row.Operation
			}
			paths := rowPaths(&row)
			switch row.Status {
			case StatusFail:
				c.Failure = &junitMessage{Message: fmt.Sprintf("want %s: %s", row.Expected, paths), Text: row.Reason}
			case StatusSkipped:
				c.Skipped = &junitMessage{Message: row.Reason}
			default:
				c.Output = fmt.Sprintf("want %s: %s", row.Expected, paths)
			}
			s.Cases = append(s.Cases, c)
		}
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// rowPaths says what each path gave.
func rowPaths(row *Row) string {
	if row.Cluster != nil {
		return "API server " + string(row.Cluster.Result)
	}
	return fmt.Sprintf("VAP %s, engine %s", row.VAP.Result, row.Engine.Result)
}
