// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/model"
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

// TestCompileRefusesExclusions: what Kyverno's policy validation rejects,
// and the controls whose checks read the pod's and the containers' fields
// together, are refused, naming the exclusion and why.
func TestCompileRefusesExclusions(t *testing.T) {
	pod, _ := PodOf("object", "Pod")
	type std = kyvernov1.PodSecurityStandard
	for _, c := range []struct {
		level   string
		exclude std
		want    string
	}{
		{"baseline", std{ControlName: "Host Ports"}, `exclude[0] (control "Host Ports"): a container-level control needs images`},
		{"baseline", std{ControlName: "Sysctls", Images: []string{"*"}}, `exclude[0] (control "Sysctls"): a pod-level control takes no images`},
		{"baseline", std{ControlName: "Sysctls", RestrictedField: "spec.securityContext.sysctls[*].name"}, "restrictedField without values"},
		{"baseline", std{ControlName: "Sysctls", Values: []string{"x"}}, "values without restrictedField"},
		{"baseline", std{ControlName: "Volume Types"}, "a restricted control at level baseline"},
		{"baseline", std{ControlName: "Host Pots"}, `(control "Host Pots"): no such control`},
		{"baseline", std{ControlName: "AppArmor"}, `(control "AppArmor"): its errors name annotations`},
	} {
		_, fl := Compile(&kyvernov1.PodSecurity{Level: c.level, Version: "latest", Exclude: []std{{ControlName: "Host Namespaces"}, c.exclude}}, pod)
		if fl == nil || fl.Reason != model.ReasonPodSecurityNotExpressible || !strings.Contains(fl.Message, strings.Replace(c.want, "exclude[0]", "exclude[1]", 1)) {
			t.Errorf("%s %+v: %v; want refused with %q", c.level, c.exclude, fl, c.want)
		}
	}
}

// TestCompileRefusesMixedExclusions: exclusions with images and without
// of a control whose container errors read the pod's fields are refused
// where both select the containers' field, unless the one with images
// removes every container's error.
func TestCompileRefusesMixedExclusions(t *testing.T) {
	pod, _ := PodOf("object", "Pod")
	type std = kyvernov1.PodSecurityStandard
	for _, c := range []struct {
		control, field string
	}{
		{"Seccomp", "spec.containers[*].securityContext.seccompProfile.type"},
		{"Running as Non-root", "spec.containers[*].securityContext.runAsNonRoot"},
	} {
		compile := func(excludes ...std) *model.Refusal {
			_, fl := Compile(&kyvernov1.PodSecurity{Level: "restricted", Version: "latest", Exclude: excludes}, pod)
			return fl
		}
		if fl := compile(std{ControlName: c.control}, std{ControlName: c.control, Images: []string{"app-*"}}); fl == nil || !strings.Contains(fl.Message, "with podSecurity exclude[1], exclusions with images and without") {
			t.Errorf("%s without images and with app-*: %v", c.control, fl)
		}
		if fl := compile(std{ControlName: c.control, Images: []string{"*"}, RestrictedField: c.field, Values: []string{"x"}}, std{ControlName: c.control, RestrictedField: c.field, Values: []string{"y"}}); fl == nil {
			t.Errorf("%s with * selecting some values, and without images: not refused", c.control)
		}
		for name, excludes := range map[string][]std{
			"with * and without":                 {{ControlName: c.control, Images: []string{"*"}}, {ControlName: c.control}},
			"without and with *":                 {{ControlName: c.control}, {ControlName: c.control, Images: []string{"nginx", "*"}}},
			"without on another field, with":     {{ControlName: c.control, RestrictedField: "spec.securityContext.x", Values: []string{"x"}}, {ControlName: c.control, Images: []string{"app-*"}}},
			"with images beside another control": {{ControlName: c.control, Images: []string{"app-*"}}, {ControlName: "Running as Non-root user"}},
		} {
			if fl := compile(excludes...); fl != nil {
				t.Errorf("%s %s: refused: %s", c.control, name, fl.Message)
			}
		}
	}
}

// TestCompileExclusions: the forms compiled, each changing the predicate
// of its control's checks only.
func TestCompileExclusions(t *testing.T) {
	pod, _ := PodOf("object", "Pod")
	type std = kyvernov1.PodSecurityStandard
	plain, fl := Compile(&kyvernov1.PodSecurity{Level: "restricted", Version: "latest"}, pod)
	if fl != nil {
		t.Fatal(fl.Message)
	}
	for _, c := range []struct {
		exclude std
		checks  []string
	}{
		{std{ControlName: "Host Namespaces"}, []string{"hostNamespaces"}},
		{std{ControlName: "HostPath Volumes"}, []string{"hostPathVolumes"}},
		{std{ControlName: "Sysctls"}, []string{"sysctls"}},
		{std{ControlName: "Volume Types"}, []string{"restrictedVolumes"}},
		{std{ControlName: "Privileged Containers", Images: []string{"*"}}, []string{"privileged"}},
		{std{ControlName: "Host Ports", Images: []string{"*"}}, []string{"hostPorts"}},
		{std{ControlName: "/proc Mount Type", Images: []string{"*"}}, []string{"procMount"}},
		{std{ControlName: "Capabilities", Images: []string{"*"}}, []string{"capabilities_baseline", "capabilities_restricted"}},
		{std{ControlName: "Privilege Escalation", Images: []string{"*"}}, []string{"allowPrivilegeEscalation"}},
		{std{ControlName: "Seccomp"}, []string{"seccompProfile_baseline", "seccompProfile_restricted"}},
		{std{ControlName: "Seccomp", Images: []string{"*"}}, []string{"seccompProfile_baseline", "seccompProfile_restricted"}},
		{std{ControlName: "Running as Non-root"}, []string{"runAsNonRoot"}},
		{std{ControlName: "Running as Non-root user", Images: []string{"*"}}, []string{"runAsUser"}},
		{std{ControlName: "SELinux"}, []string{"seLinuxOptions"}},
		{std{ControlName: "HostProcess", Images: []string{"*"}}, []string{"windowsHostProcess"}},
	} {
		excluded, fl := Compile(&kyvernov1.PodSecurity{Level: "restricted", Version: "latest", Exclude: []std{c.exclude}}, pod)
		if fl != nil {
			t.Errorf("%+v: refused: %s", c.exclude, fl.Message)
			continue
		}
		for i, check := range excluded.Checks {
			changed := check.Violated(pod) != plain.Checks[i].Violated(pod)
			if changed != slices.Contains(c.checks, check.ID) {
				t.Errorf("%+v: check %s changed: %v", c.exclude, check.ID, changed)
			}
		}
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
	type std = kyvernov1.PodSecurityStandard
	for _, c := range []struct {
		level, version, kind, name string
		exclude                    []std
	}{
		{level: "baseline", version: "latest", kind: "Pod"},
		{level: "restricted", version: "v1.24", kind: "CronJob"},
		{level: "restricted", version: "latest", kind: "Deployment"},
		{level: "restricted", version: "latest", kind: "Pod", name: "-exclusions", exclude: []std{
			{ControlName: "Host Namespaces", RestrictedField: "spec.hostNetwork", Values: []string{"true"}},
			{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log*"}},
			{ControlName: "Sysctls"},
			{ControlName: "Volume Types", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"*"}},
			{ControlName: "Host Ports", Images: []string{"nginx:*"}, RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"80"}},
			{ControlName: "Capabilities", Images: []string{"*"}},
			{ControlName: "Privilege Escalation", Images: []string{"ghcr.io/*"}},
		}},
	} {
		name := c.level + "-" + c.version + "-" + c.kind + c.name
		t.Run(name, func(t *testing.T) {
			pod, _ := PodOf("object", c.kind)
			compiled, fl := Compile(&kyvernov1.PodSecurity{Level: c.level, Version: c.version, Exclude: c.exclude}, pod)
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

// TestDifferences: one line per way Kyverno's verdicts differ from
// upstream's at the profile.
func TestDifferences(t *testing.T) {
	profile := func(level, version string) Profile {
		p, fl := ParseProfile(level, version)
		if fl != nil {
			t.Fatal(fl.Message)
		}
		return p
	}
	for _, c := range []struct {
		level, version string
		cronJob        bool
		want           []string
	}{
		{"privileged", "latest", true, []string{"every check at level privileged"}},
		{"baseline", "latest", false, []string{"procMount is not relaxed", "sysctls are allowed as of v1.32"}},
		{"restricted", "latest", true, []string{"procMount is not relaxed", "runAsNonRoot and runAsUser are not relaxed", "sysctls are allowed as of v1.32", "a CronJob's pod metadata"}},
		{"baseline", "v1.29", false, []string{"hostProbesAndHostLifecycle check applies (upstream from v1.34)"}},
		{"restricted", "v1.21", false, []string{"hostProbesAndHostLifecycle", "capabilities_restricted check applies", "runAsUser check applies"}},
		{"restricted", "v1.22", false, []string{"hostProbesAndHostLifecycle", "runAsUser check applies"}},
	} {
		got := Differences(profile(c.level, c.version), c.cronJob)
		if len(got) != len(c.want) {
			t.Errorf("%s:%s: %d lines, want %d: %q", c.level, c.version, len(got), len(c.want), got)
			continue
		}
		for i, line := range got {
			if !strings.Contains(line, c.want[i]) || !strings.HasPrefix(line, "podSecurity "+c.level+":"+c.version+": ") {
				t.Errorf("%s:%s: line %d %q, want %q", c.level, c.version, i, line, c.want[i])
			}
		}
	}
}

// TestCompileExceptions: an exception's controls count only where its
// predicate holds (bound once, as gs); a restricted control of an
// exception at baseline excludes nothing and is no error (Kyverno's
// exception validation has no level); what is refused names the
// exception.
func TestCompileExceptions(t *testing.T) {
	pod, _ := PodOf("object", "Pod")
	type std = kyvernov1.PodSecurityStandard
	baseline := &kyvernov1.PodSecurity{Level: "baseline", Version: "latest", Exclude: []std{{ControlName: "Host Namespaces"}}}
	plain, fl := Compile(baseline, pod)
	if fl != nil {
		t.Fatal(fl.Message)
	}
	if plain.ViolatesExcepted != plain.Violates {
		t.Errorf("without exceptions, ViolatesExcepted is not Violates")
	}
	applies := "request.namespace == 'staging'"
	excepted, fl := Compile(baseline, pod, Exception{Name: "kyverno/staging", Applies: applies, Exclude: []std{{ControlName: "Privileged Containers", Images: []string{"app-*"}}}})
	if fl != nil {
		t.Fatal(fl.Message)
	}
	if excepted.Violates != plain.Violates {
		t.Errorf("an exception changed Violates")
	}
	if !strings.HasPrefix(excepted.ViolatesExcepted, "[["+applies+"]].all(gs, ") || !strings.Contains(excepted.ViolatesExcepted, "(gs[0] ? ") {
		t.Errorf("the exception's controls are not guarded by its predicate: %.400s", excepted.ViolatesExcepted)
	}
	if _, fl := Compile(baseline, pod, Exception{Name: "kyverno/any", Applies: "true", Exclude: []std{{ControlName: "Running as Non-root"}}}); fl != nil {
		t.Errorf("an exception's restricted control at baseline refused: %s", fl.Message)
	}
	_, fl = Compile(baseline, pod, Exception{Name: "kyverno/ports", Applies: "true", Exclude: []std{{ControlName: "Host Ports"}}})
	if fl == nil || !strings.Contains(fl.Message, `PolicyException kyverno/ports podSecurity[0] (control "Host Ports"): a container-level control needs images`) {
		t.Errorf("an invalid exception control: %v", fl)
	}
}
