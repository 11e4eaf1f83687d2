// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestParseProfile(t *testing.T) {
	for _, c := range []struct {
		level, version, want string
	}{
		{"baseline", "", "baseline:latest"},
		{"baseline", "latest", "baseline:latest"},
		{"restricted", "v1.19", "restricted:v1.19"},
		{"privileged", "v1.32", "privileged:v1.32"},
	} {
		p, fl := ParseProfile(c.level, c.version)
		if fl != nil {
			t.Errorf("%s %s: refused: %s", c.level, c.version, fl.Message)
			continue
		}
		if p.String() != c.want {
			t.Errorf("%s %s: %s, want %s", c.level, c.version, p, c.want)
		}
	}
	for _, c := range [][2]string{
		{"Baseline", "latest"}, {"", "latest"}, {"baseline", "v1.18"}, {"baseline", "v1.33"},
		{"baseline", "1.25"}, {"baseline", "v1.025"}, {"baseline", "v2.0"}, {"baseline", "v1.x"},
	} {
		if _, fl := ParseProfile(c[0], c[1]); fl == nil || !strings.Contains(fl.Message, "podSecurity") {
			t.Errorf("%q %q: not refused with a reason naming podSecurity (%v)", c[0], c[1], fl)
		}
	}
}

// TestChecksAsKyvernoSelectsThem: Kyverno's selection, not upstream's: at
// baseline the baseline checks only; at restricted and privileged every
// check; of each the newest version at or below the profile's, or the
// first (host probes, from v1.34, at v1.19 too).
func TestChecksAsKyvernoSelectsThem(t *testing.T) {
	ids := func(level, version string) map[string]int {
		p, fl := ParseProfile(level, version)
		if fl != nil {
			t.Fatal(fl.Message)
		}
		out := map[string]int{}
		for _, c := range Checks(p) {
			out[c.ID] = c.Minor
		}
		return out
	}
	baseline := ids("baseline", "v1.19")
	if diff := cmp.Diff(map[string]int{
		"appArmorProfile": 0, "capabilities_baseline": 0, "hostNamespaces": 0, "hostPathVolumes": 0, "hostPorts": 0,
		"hostProbesAndHostLifecycle": 34, "privileged": 0, "procMount": 0, "seLinuxOptions": 0,
		"seccompProfile_baseline": 19, "sysctls": 0, "windowsHostProcess": 0,
	}, baseline); diff != "" {
		t.Errorf("baseline:v1.19 (-want +got):\n%s", diff)
	}
	restricted := ids("restricted", "v1.24")
	for id, minor := range map[string]int{"allowPrivilegeEscalation": 8, "capabilities_restricted": 22, "runAsUser": 23, "seccompProfile_restricted": 19, "hostPathVolumes": 0, "restrictedVolumes": 0} {
		if got, ok := restricted[id]; !ok || got != minor {
			t.Errorf("restricted:v1.24: %s at v1.%d (present %v), want v1.%d", id, got, ok, minor)
		}
	}
	if len(restricted) != 18 {
		t.Errorf("restricted:v1.24 runs %d checks, want all 18", len(restricted))
	}
	if diff := cmp.Diff(restricted, ids("privileged", "v1.24")); diff != "" {
		t.Errorf("privileged runs other checks than restricted (-restricted +privileged):\n%s", diff)
	}
	latest := ids("baseline", "latest")
	if latest["sysctls"] != 32 || latest["seLinuxOptions"] != 31 {
		t.Errorf("baseline:latest: sysctls at v1.%d, seLinuxOptions at v1.%d; want v1.32, v1.31", latest["sysctls"], latest["seLinuxOptions"])
	}
}

func TestCompileRefusesExclusions(t *testing.T) {
	pod, _ := PodOf("object", "Pod")
	_, fl := Compile(&kyvernov1.PodSecurity{Level: "baseline", Version: "latest", Exclude: []kyvernov1.PodSecurityStandard{{ControlName: "Host Ports"}}}, pod)
	if fl == nil || !strings.Contains(fl.Message, `podSecurity exclude (control "Host Ports")`) {
		t.Errorf("an exclusion is not refused by name: %v", fl)
	}
}

func TestPodOfUnknownKind(t *testing.T) {
	if _, ok := PodOf("object", "ConfigMap"); ok {
		t.Error("a ConfigMap has a pod")
	}
}

// TestCompiledGolden: the compiled predicate of each case, byte for byte
// (go test -update rewrites testdata).
func TestCompiledGolden(t *testing.T) {
	for _, c := range []struct{ level, version, kind string }{
		{"baseline", "latest", "Pod"},
		{"restricted", "v1.24", "CronJob"},
		{"restricted", "latest", "Deployment"},
	} {
		name := c.level + "-" + c.version + "-" + c.kind
		t.Run(name, func(t *testing.T) {
			pod, _ := PodOf("object", c.kind)
			compiled, fl := Compile(&kyvernov1.PodSecurity{Level: c.level, Version: c.version}, pod)
			if fl != nil {
				t.Fatal(fl.Message)
			}
			var b strings.Builder
			for _, check := range compiled.Checks {
				b.WriteString("# " + check.ID + " (" + check.Reason + ")\n" + check.Violated(pod) + "\n")
			}
			golden := filepath.Join("testdata", name+".cel")
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		})
	}
}
