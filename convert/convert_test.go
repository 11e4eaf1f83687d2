// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package convert

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/frontend/validatingpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate"
)

var update = flag.Bool("update", false, "rewrite the golden converted.yaml files")

// convertFile converts every policy of a file, as kyvap convert writes
// them to stdout.
func convertFile(t testing.TB, path string) ([]kyvernov1.ClusterPolicy, []Result, []byte) {
	t.Helper()
	var set manifest.Set
	if err := set.ReadPath(path, nil, manifest.AcceptAll); err != nil {
		t.Fatal(err)
	}
	var results []Result
	var out bytes.Buffer
	for i := range set.Policies {
		res, err := Policy(&set.Policies[i], Options{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := YAML(res)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
		out.Write(data)
	}
	return set.Policies, results, out.Bytes()
}

// TestGolden converts every testdata/<case>/policy.yaml and compares the
// YAML with converted.yaml (-update rewrites it). The output must be
// deterministic, leave the input alone, and every converted policy must be
// a ValidatingPolicy kyvap translates without an Invalid rule.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/policy.yaml")
	if err != nil || len(dirs) < 9 {
		t.Fatalf("found %d golden cases (%v)", len(dirs), err)
	}
	for _, path := range dirs {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			policies, results, got := convertFile(t, path)
			before := make([]*kyvernov1.ClusterPolicy, len(policies))
			for i := range policies {
				before[i] = policies[i].DeepCopy()
			}
			_, _, again := convertFile(t, path)
			if !bytes.Equal(got, again) {
				t.Fatal("conversion is not deterministic")
			}
			for i := range policies {
				if _, err := Policy(&policies[i], Options{}); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(before[i], &policies[i]); diff != "" {
					t.Fatalf("input mutated (-before +after):\n%s", diff)
				}
			}
			for i := range results {
				assertValid(t, &results[i])
			}
			golden := filepath.Join(dir, "converted.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("converted YAML differs (-want +got):\n%s", diff)
			}
		})
	}
}

// assertValid checks what every conversion guarantees: each rule is either
// converted or reported, names are unique DNS names, and each converted
// policy, read back as kyvap reads ValidatingPolicies, translates without
// an Invalid rule.
func assertValid(t testing.TB, res *Result) {
	t.Helper()
	names := map[string]bool{}
	for i := range res.Policies {
		c := &res.Policies[i]
		if errs := validation.IsDNS1123Subdomain(c.Name()); len(errs) > 0 || len(c.Name()) > maxName {
			t.Errorf("name %q: %v", c.Name(), errs)
		}
		if names[c.Name()] {
			t.Errorf("name %q is used twice", c.Name())
		}
		names[c.Name()] = true
		data, err := document(c)
		if err != nil {
			t.Fatal(err)
		}
		var lowered model.Policy
		if res.Source.Namespaced() {
			var p policiesv1.NamespacedValidatingPolicy
			if err := yaml.UnmarshalStrict(data, &p); err != nil {
				t.Fatalf("%s: %v", c.Name(), err)
			}
			lowered = validatingpolicy.LowerNamespaced(&p, nil, time.Time{})
		} else {
			var p policiesv1.ValidatingPolicy
			if err := yaml.UnmarshalStrict(data, &p); err != nil {
				t.Fatalf("%s: %v", c.Name(), err)
			}
			lowered = validatingpolicy.Lower(&p, nil, time.Time{})
		}
		if c.NoAutogen && len(lowered.Rules) != 1 {
			t.Errorf("%s: autogen is off but Kyverno would derive %d rules", c.Name(), len(lowered.Rules))
		}
		plan := translate.TranslatePolicy(lowered, nil, translate.Options{GenerateValidatingAdmissionPolicy: true})
		for _, rr := range plan.Rules {
			if rr.Verdict == translate.VerdictInvalid {
				t.Errorf("%s: %s is Invalid: %s", c.Name(), rr.Rule, rr.Message)
			}
		}
	}
}

func TestName(t *testing.T) {
	for _, c := range []struct{ policy, rule, want string }{
		{"require-team", "team-label", "require-team-team-label"},
		{"p", "Rule With Spaces", "p-rule-with-spaces-"},
		{"p", "rule", "p-rule"},
	} {
		got := Name(c.policy, c.rule)
		if len(c.want) > 0 && c.want[len(c.want)-1] == '-' {
			if len(got) != len(c.want)+8 || got[:len(c.want)] != c.want {
				t.Errorf("Name(%q, %q) = %q, want %q + hash", c.policy, c.rule, got, c.want)
			}
			continue
		}
		if got != c.want {
			t.Errorf("Name(%q, %q) = %q, want %q", c.policy, c.rule, got, c.want)
		}
	}
	if Name("p", "A B") == Name("p", "a-b") {
		t.Error("distinct rules share a name")
	}
}

// TestPolicyFor checks how test rows find the converted policy of a rule
// and its pod-controller variants.
func TestPolicyFor(t *testing.T) {
	_, results, _ := convertFile(t, "testdata/pod-autogen/policy.yaml")
	res := &results[0]
	for _, c := range []struct{ rule, kind, want string }{
		{"limits", "Pod", "require-limits-limits"},
		{"limits", "Deployment", "require-limits-autogen-limits"},
		{"limits", "apps/v1/StatefulSet", "require-limits-autogen-limits"},
		{"limits", "CronJob", "require-limits-autogen-cronjob-limits"},
		{"autogen-cronjob-limits", "CronJob", "require-limits-autogen-cronjob-limits"},
		{"", "Pod", ""},
		{"missing", "Pod", ""},
	} {
		got, why := res.PolicyFor(c.rule, c.kind)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("PolicyFor(%q, %q) = %s, want none", c.rule, c.kind, got[0].Name())
		case c.want == "" && why == "":
			t.Errorf("PolicyFor(%q, %q): no reason", c.rule, c.kind)
		case c.want != "" && (len(got) != 1 || got[0].Name() != c.want):
			t.Errorf("PolicyFor(%q, %q) = %v (%s), want %s", c.rule, c.kind, got, why, c.want)
		}
	}
}

// TestRegions checks a rule that failure-action overrides split: one
// policy per region, each applying to its namespaces only.
func TestRegions(t *testing.T) {
	_, results, _ := convertFile(t, "testdata/overrides/policy.yaml")
	res := &results[0]
	got, why := res.PolicyFor("no-latest", "Pod")
	if len(got) < 2 {
		t.Fatalf("PolicyFor = %d policies (%s), want one per region", len(got), why)
	}
	for _, c := range []struct {
		namespace string
		labels    map[string]string
		action    string
	}{
		{"prod", map[string]string{"kubernetes.io/metadata.name": "prod"}, "Deny"},
		{"dev", map[string]string{"kubernetes.io/metadata.name": "dev"}, "Audit"},
	} {
		var applies []string
		for _, p := range got {
			if p.Applies(c.namespace, c.labels) {
				applies = append(applies, p.Name()+"="+string(p.ValidatingPolicy.Spec.ValidationAction[0]))
			}
		}
		if len(applies) != 1 || !strings.HasSuffix(applies[0], "="+c.action) {
			t.Errorf("namespace %s: policies %v apply, want exactly one with %s", c.namespace, applies, c.action)
		}
	}
}

// FuzzConvert converts arbitrary policies: no panic, deterministic output,
// input untouched, every rule accounted for, valid output.
func FuzzConvert(f *testing.F) {
	for _, pattern := range []string{"testdata/*/policy.yaml", "../translate/testdata/*/policy.yaml"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var policy kyvernov1.ClusterPolicy
		if err := yaml.Unmarshal(data, &policy); err != nil || policy.Name == "" {
			return
		}
		before := policy.DeepCopy()
		first, err := Policy(&policy, Options{})
		if err != nil {
			t.Fatal(err)
		}
		second, _ := Policy(&policy, Options{})
		a, errA := YAML(first)
		b, errB := YAML(second)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Fatalf("not deterministic (%v, %v)", errA, errB)
		}
		if !reflect.DeepEqual(before, &policy) {
			t.Fatal("input mutated")
		}
		accounted := map[string]bool{}
		for _, c := range first.Policies {
			accounted[c.Rule] = true
			for _, v := range c.Variants {
				accounted[v] = true
			}
		}
		for _, u := range first.Unconverted {
			accounted[u.Rule] = true
		}
		for _, r := range policy.Spec.Rules {
			if !accounted[r.Name] {
				t.Fatalf("rule %q is neither converted nor reported", r.Name)
			}
		}
		assertValid(t, &first)
	})
}

// TestInlineKyvernoConfig folds Kyverno's chart-default configuration into
// a converted policy: its match conditions and its webhook namespace
// selector, which every converted policy then carries itself.
func TestInlineKyvernoConfig(t *testing.T) {
	var set manifest.Set
	if err := set.ReadPath("testdata/basic/policy.yaml", nil, manifest.AcceptAll); err != nil {
		t.Fatal(err)
	}
	cfg := kyverno.ChartDefaults()
	plain, err := Policy(&set.Policies[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	inlined, err := Policy(&set.Policies[0], Options{KyvernoConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	names := func(r Result) []string {
		var out []string
		for _, mc := range r.Policies[0].ValidatingPolicy.Spec.MatchConditions {
			out = append(out, mc.Name)
		}
		return out
	}
	if got := names(plain); strings.Contains(strings.Join(got, ","), "kyverno-") {
		t.Errorf("without the option: conditions %v", got)
	}
	got := strings.Join(names(inlined), ",")
	for _, want := range []string{"kyverno-resource-filters", "kyverno-excluded-subjects", "not-system"} {
		if !strings.Contains(got, want) {
			t.Errorf("inlined conditions %s lack %s", got, want)
		}
	}
	if sel := inlined.Policies[0].ValidatingPolicy.Spec.MatchConstraints.NamespaceSelector; cfg.NamespaceSelector != nil && sel == nil {
		t.Error("the webhook namespace selector is not in the match constraints")
	}
	assertValid(t, &inlined)
}
