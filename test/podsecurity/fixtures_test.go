// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podsecurity proves frontend/podsecurity against Kyverno: the
// Pod Security Admission library's own fixtures (k8s.io/pod-security-
// admission's test/testdata: pods that pass or fail each check at each
// level and version), as Pods and inside a Deployment and a CronJob, are
// judged at every level and version Kyverno accepts by the compiled CEL
// and by Kyverno's engine (v1.19.1, built outside kyvap's module by
// hack/build-kyverno.sh pattern-oracle), and the verdicts must agree.
package podsecurity

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/podsecurity"
	"github.com/kyvap/kyvap/test/celtest"
	"github.com/kyvap/kyvap/test/kyvernooracle"
)

// fixturesModule is the Pod Security Admission library whose fixtures
// are judged (the API server's own version).
const fixturesModule = "k8s.io/pod-security-admission@v0.37.2"

// versions are the versions Kyverno's CRD accepts.
var versions = func() []string {
	out := []string{"latest"}
	for minor := 19; minor <= 32; minor++ {
		out = append(out, fmt.Sprintf("v1.%d", minor))
	}
	return out
}()

var levels = []string{podsecurity.LevelPrivileged, podsecurity.LevelBaseline, podsecurity.LevelRestricted}

// full: KYVAP_DIFFERENTIAL=full (make differential) judges every pod at
// every profile; make test judges each pod at every sliceEvery-th profile,
// a different slice for each pod.
var full = os.Getenv("KYVAP_DIFFERENTIAL") == "full"

const sliceEvery = 5

// TestFixturesAgreeWithKyverno judges every distinct fixture pod, and
// variants of it (on Windows, with its containers also ephemeral, with
// null security contexts, with hostUsers false), each as a Pod, a
// Deployment's template and a CronJob's, at every level and version: the
// compiled CEL and Kyverno's engine must agree on each.
func TestFixturesAgreeWithKyverno(t *testing.T) {
	pods := fixtures(t)
	if len(pods) < 300 {
		t.Fatalf("only %d distinct fixture pods found", len(pods))
	}
	var judgedPods []map[string]any
	for _, pod := range pods {
		judgedPods = append(judgedPods, pod)
		judgedPods = append(judgedPods, variants(pod)...)
	}
	oracle := buildOracle(t)
	env := celtest.Env(t, "object")
	var profiles []kyvernov1.PodSecurity
	for _, level := range levels {
		for _, v := range versions {
			profiles = append(profiles, kyvernov1.PodSecurity{Level: level, Version: v})
		}
	}
	policy := policyOf(profiles)
	var tally tally
	for _, kind := range []string{"Pod", "Deployment", "CronJob"} {
		objects := asKindAll(judgedPods, kind)
		want := askKyverno(t, oracle, policy, kind, objects, len(profiles))
		place, _ := podsecurity.PodOf("object", kind)
		for p, profile := range profiles {
			compiled, fl := podsecurity.Compile(&profile, place)
			if fl != nil {
				t.Fatalf("%s:%s: %s", profile.Level, profile.Version, fl.Message)
			}
			program := celtest.Program(t, env, compiled.Violates)
			for i, object := range objects {
				if !full && (i+p)%sliceEvery != 0 {
					continue
				}
				tally.judge(t, program, object, want[i][ruleName(profile, kind)], fmt.Sprintf("%s:%s %s", profile.Level, profile.Version, kind))
			}
		}
	}
	judged, failed, disagreements := tally.judged, tally.failed, tally.disagreements
	t.Logf("%d verdicts on %d pods (%d distinct fixtures and their variants; as Pods, Deployments and CronJobs) at %d levels and %d versions: %d fail, %d disagreements",
		judged, len(judgedPods), len(pods), len(levels), len(versions), failed, disagreements)
	if failed == 0 || failed == judged {
		t.Errorf("the fixtures gave %d failures of %d verdicts: the comparison decides nothing", failed, judged)
	}
}

// variants are pods around a fixture, each changing what a check reads
// in a way the fixtures do not: the pod on Windows (exempt from some
// restricted checks from v1.25), its containers repeated as ephemeral
// containers, every unset security context null (Kyverno decodes a null
// as unset), and hostUsers false (which Kyverno's fork does not relax
// for).
func variants(pod map[string]any) []map[string]any {
	copyOf := func() map[string]any {
		text, _ := json.Marshal(pod)
		var out map[string]any
		_ = utiljson.Unmarshal(text, &out)
		return out
	}
	spec := func(p map[string]any) map[string]any {
		s, _ := p["spec"].(map[string]any)
		return s
	}
	windows := copyOf()
	spec(windows)["os"] = map[string]any{"name": "windows"}
	ephemeral := copyOf()
	if containers, ok := spec(ephemeral)["containers"].([]any); ok {
		var copies []any
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok {
				e := map[string]any{}
				for k, v := range m {
					e[k] = v
				}
				e["name"] = fmt.Sprint(m["name"]) + "-ephemeral"
				copies = append(copies, e)
			}
		}
		spec(ephemeral)["ephemeralContainers"] = copies
	}
	nulls := copyOf()
	if _, ok := spec(nulls)["securityContext"]; !ok {
		spec(nulls)["securityContext"] = nil
	}
	for _, key := range []string{"initContainers", "containers"} {
		containers, _ := spec(nulls)[key].([]any)
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok {
				if _, ok := m["securityContext"]; !ok {
					m["securityContext"] = nil
				}
			}
		}
	}
	userNamespace := copyOf()
	spec(userNamespace)["hostUsers"] = false
	return []map[string]any{windows, ephemeral, nulls, userNamespace}
}

// fixtures are the distinct pods of the Pod Security Admission library's
// fixtures, in the order of their paths.
func fixtures(t *testing.T) []map[string]any {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", fixturesModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", fixturesModule, err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		t.Fatalf("go mod download %s: no directory (%v)", fixturesModule, err)
	}
	paths, err := filepath.Glob(filepath.Join(module.Dir, "test", "testdata", "*", "v1.*", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	seen := map[string]bool{}
	var pods []map[string]any
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text, err := yaml.YAMLToJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var pod map[string]any
		if err := utiljson.Unmarshal(text, &pod); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		canonical, _ := json.Marshal(pod)
		if pod["kind"] != "Pod" || seen[string(canonical)] {
			continue
		}
		seen[string(canonical)] = true
		pods = append(pods, pod)
	}
	return pods
}

// asKindAll is each pod as an object of the kind (asKind).
func asKindAll(pods []map[string]any, kind string) []map[string]any {
	objects := make([]map[string]any, len(pods))
	for i, pod := range pods {
		objects[i] = asKind(pod, kind)
	}
	return objects
}

// asKind is the pod as Kyverno reads it in the kind: itself, a
// Deployment's template, or a CronJob's, whose job template carries the
// pod's metadata (Kyverno reads a CronJob's pod metadata there) while the
// pod template's carries none.
func asKind(pod map[string]any, kind string) map[string]any {
	metadata, _ := pod["metadata"].(map[string]any)
	spec := pod["spec"]
	name, _ := metadata["name"].(string)
	switch kind {
	case "Deployment":
		return map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
				"template": map[string]any{"metadata": metadata, "spec": spec},
			},
		}
	case "CronJob":
		return map[string]any{
			"apiVersion": "batch/v1", "kind": "CronJob",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"schedule": "* * * * *",
				"jobTemplate": map[string]any{
					"metadata": metadata,
					"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"name": name}, "spec": spec}},
				},
			},
		}
	}
	return pod
}

// policyOf is a ClusterPolicy with one podSecurity rule on Pods per
// profile (ruleName), which Kyverno's autogen extends to the pod
// controllers.
func policyOf(profiles []kyvernov1.PodSecurity) map[string]any {
	rules := make([]any, len(profiles))
	for i, profile := range profiles {
		rules[i] = map[string]any{
			"name":     ruleName(profile, "Pod"),
			"match":    map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"Pod"}}}}},
			"validate": map[string]any{"failureAction": "Audit", "podSecurity": profile},
		}
	}
	return map[string]any{
		"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
		"metadata": map[string]any{"name": "pod-security"},
		"spec":     map[string]any{"background": false, "rules": rules},
	}
}

// ruleName is the name of the profile's rule, as Kyverno reports it for
// an object of the kind (its autogen variants' names on controllers).
func ruleName(profile kyvernov1.PodSecurity, kind string) string {
	name := profile.Level + "-" + strings.ReplaceAll(profile.Version, ".", "-")
	switch kind {
	case "Deployment":
		return "autogen-" + name
	case "CronJob":
		return "autogen-cronjob-" + name
	}
	return name
}

var kindsGVR = map[string][2]map[string]string{
	"Pod":        {{"group": "", "version": "v1", "kind": "Pod"}, {"group": "", "version": "v1", "resource": "pods"}},
	"Deployment": {{"group": "apps", "version": "v1", "kind": "Deployment"}, {"group": "apps", "version": "v1", "resource": "deployments"}},
	"CronJob":    {{"group": "batch", "version": "v1", "kind": "CronJob"}, {"group": "batch", "version": "v1", "resource": "cronjobs"}},
}

// askKyverno is the status Kyverno's engine reports for each rule (by
// name) on a CREATE of each object; every one of the rules rules must
// report pass or fail.
func askKyverno(t *testing.T, oracle string, policy map[string]any, kind string, objects []map[string]any, rules int) []map[string]string {
	t.Helper()
	requests := make([]map[string]any, len(objects))
	for i, object := range objects {
		metadata, _ := object["metadata"].(map[string]any)
		requests[i] = map[string]any{
			"kind": kindsGVR[kind][0], "resource": kindsGVR[kind][1], "operation": "CREATE",
			"name": metadata["name"], "namespace": "default", "object": object,
		}
	}
	statuses := runOracle(t, oracle, map[string]any{"policy": policy, "requests": requests}, len(requests))
	for i := range statuses {
		if len(statuses[i]) != rules {
			t.Fatalf("%s %d: Kyverno reported %d rules, not %d", kind, i, len(statuses[i]), rules)
		}
		for name, status := range statuses[i] {
			if status != "pass" && status != "fail" {
				t.Fatalf("%s %d: Kyverno's verdict on %s: %q", kind, i, name, status)
			}
		}
	}
	return statuses
}

// buildOracle builds Kyverno's engine behind a small command (reused when
// built).
func buildOracle(t *testing.T) string { return kyvernooracle.Build(t) }

func evaluate(program cel.Program, object map[string]any) (bool, error) {
	out, _, err := program.Eval(map[string]any{"object": object})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("not a bool: %v", out)
	}
	return b, nil
}

// tally counts the verdicts compared with Kyverno's.
type tally struct {
	judged, failed, disagreements int
}

// judge evaluates the compiled predicate on the object and compares its
// verdict with Kyverno's (wanted, pass or fail); what names the rule and
// kind in an error. It reports whether Kyverno's verdict is fail.
func (n *tally) judge(t *testing.T, program cel.Program, object map[string]any, wanted, what string) bool {
	t.Helper()
	got, err := evaluate(program, object)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return false
	}
	n.judged++
	if wanted == "fail" {
		n.failed++
	}
	verdict := "pass"
	if got {
		verdict = "fail"
	}
	if verdict != wanted {
		n.disagreements++
		if n.disagreements <= 20 {
			text, _ := json.Marshal(object)
			t.Errorf("%s: kyvap %s, Kyverno %q: %s", what, verdict, wanted, text)
		}
	}
	return wanted == "fail"
}

// runOracle runs Kyverno's engine (hack/kyverno-pattern-oracle) on its
// input, which holds n admission requests, and returns the status of each
// rule on each request.
func runOracle(t *testing.T, oracle string, input map[string]any, n int) []map[string]string {
	t.Helper()
	lines := kyvernooracle.Run(t, oracle, input, n)
	statuses := make([]map[string]string, len(lines))
	for i, line := range lines {
		if err := json.Unmarshal([]byte(line), &statuses[i]); err != nil {
			t.Fatalf("the oracle: %q: %v", line, err)
		}
	}
	return statuses
}
