// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{args: []string{"version"}, wantCode: 0, wantStdout: "kyvap dev"},
		{args: []string{"help"}, wantCode: 0, wantStdout: "Usage:"},
		{args: nil, wantCode: 2, wantStderr: "Usage:"},
		{args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown command "frobnicate"`},
		{args: []string{"handback", "extra"}, wantCode: 2, wantStderr: "unexpected arguments [extra]"},
		{args: []string{"handback", "--nope"}, wantCode: 2, wantStderr: "flag provided but not defined: -nope"},
		{args: []string{"handback", "--kubeconfig", "/nonexistent/kubeconfig"}, wantCode: 2, wantStderr: "kyvap handback: loading the kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, strings.NewReader(""), &stdout, &stderr); code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", code, tt.wantCode)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestStatusFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "-o", "xml"}, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "want text, wide, json or yaml") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"status", "-h"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "kubectl kyvap status") {
		t.Errorf("exit %d, help %q", code, stdout.String())
	}
	if code := run([]string{"status", "--kubeconfig", "/nonexistent/kubeconfig"}, nil, &stdout, &stderr); code != 2 {
		t.Errorf("unreadable kubeconfig: exit %d", code)
	}
}

// TestLibrariesLogThroughTheCLI: the CLI sets controller-runtime's logger
// (kyvap test --cluster printed a goroutine stack dump, "log.SetLogger(...)
// was never called", before every suite's results): a library's error goes
// to the CLI's stderr as one line, its info messages nowhere.
func TestLibrariesLogThroughTheCLI(t *testing.T) {
	var stderr bytes.Buffer
	run([]string{"version"}, strings.NewReader(""), io.Discard, &stderr)
	ctrllog.Log.WithName("client").Info("chatty")
	ctrllog.Log.WithName("client").Error(errors.New("boom"), "watch failed")
	got := stderr.String()
	if !strings.Contains(got, "watch failed") || !strings.Contains(got, "boom") || strings.Contains(got, "chatty") || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr = %q, want one line with the error only", got)
	}
}
