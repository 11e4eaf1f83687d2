// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestMakefilePinsTheSameVersions keeps the Makefile's pins and this
// package's defaults in step, so `make test` and `go test` use one control plane.
func TestMakefilePinsTheSameVersions(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"KUBE_VERSION":    DefaultKubeVersion,
		"ETCD_VERSION":    DefaultEtcdVersion,
		"KYVERNO_VERSION": DefaultKyvernoVersion,
	} {
		m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(makefile)
		if m == nil {
			t.Errorf("Makefile does not pin %s", name)
			continue
		}
		if got := string(m[1]); got != want {
			t.Errorf("Makefile pins %s = %s, test/controlplane defaults to %s", name, got, want)
		}
	}
}

func TestLineLoggerSplitsLines(t *testing.T) {
	var lines []string
	l := &lineLogger{logf: func(format string, args ...any) { lines = append(lines, string(args[0].([]byte))) }}
	_, _ = l.Write([]byte("one\ntw"))
	_, _ = l.Write([]byte("o\nthree"))
	if len(lines) != 2 || lines[0] != "one" || lines[1] != "two" {
		t.Errorf("lines = %q, want [one two]", lines)
	}
}

// TestFreePortsAvoidTheEphemeralRange: ports handed to processes lie below
// the kernel's ephemeral range, where no ":0" bind and no outgoing
// connection takes them between the choice and the process's own bind,
// and one process never hands out a port twice.
func TestFreePortsAvoidTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	below := low-portsFloor >= minPortRange // false where the range is unknown (not Linux) or too low
	seen := map[int]bool{}
	for range 200 {
		port := FreePort(t)
		if below && (port < portsFloor || port >= low) {
			t.Fatalf("port %d outside [%d, %d)", port, portsFloor, low)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
