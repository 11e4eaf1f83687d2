// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterpolicy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

func podSecurityPolicy(kinds []string, ps kyvernov1.PodSecurity) *kyvernov1.ClusterPolicy {
	enforce := kyvernov1.Enforce
	return &kyvernov1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pss"},
		Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{{
			Name:           "baseline",
			MatchResources: kyvernov1.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: kinds}}}},
			Validation:     &kyvernov1.Validation{FailureAction: &enforce, PodSecurity: &ps},
		}}},
	}
}

// TestPodSecurityLowered: a podSecurity rule on Pods and its autogen
// variants are lowered, each reading the pod where its kinds hold it,
// with Kyverno's message and no judgement on DELETE.
func TestPodSecurityLowered(t *testing.T) {
	out, err := Lower(Input{Policy: podSecurityPolicy([]string{"Pod"}, kyvernov1.PodSecurity{Level: "baseline", Version: "latest"})}, kyverno.NewStaticResolver(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]string{
		"baseline":                 "object.spec)",
		"autogen-baseline":         "object.spec.template.spec)",
		"autogen-cronjob-baseline": "object.spec.jobTemplate.spec.template.spec)",
	}
	if len(out.Policy.Rules) != len(reads) {
		t.Fatalf("%d rules lowered, want %d: %+v", len(out.Policy.Rules), len(reads), out.Outcomes)
	}
	for _, r := range out.Policy.Rules {
		if len(r.Validations) != 1 {
			t.Fatalf("%s: %d validations", r.Name, len(r.Validations))
		}
		v := r.Validations[0]
		if !strings.Contains(v.Expression, "dyn("+reads[r.Name]) {
			t.Errorf("%s does not read the pod at %s: %.300s", r.Name, reads[r.Name], v.Expression)
		}
		if want := `Validation rule '` + r.Name + `' failed. It violates PodSecurity "baseline:latest"`; v.Message != want {
			t.Errorf("%s: message %q, want %q", r.Name, v.Message, want)
		}
		notDelete := false
		for _, mc := range r.MatchConditions {
			notDelete = notDelete || (mc.Name == ConditionPatternNotDelete && mc.Expression == "request.operation != 'DELETE'")
		}
		if !notDelete {
			t.Errorf("%s: judged on DELETE (match conditions %+v)", r.Name, r.MatchConditions)
		}
	}
	// Where Kyverno's verdicts differ from upstream's, a warning each (the
	// autogen CronJob variant reads the job template's metadata).
	var differences []string
	for _, w := range out.Warnings {
		if strings.Contains(w, "differs from upstream Pod Security Admission") {
			differences = append(differences, w)
		}
	}
	if len(differences) != 3 || !strings.HasPrefix(differences[0], `rule "baseline": podSecurity baseline:latest: `) || !strings.Contains(differences[2], "spec.jobTemplate.metadata") {
		t.Errorf("warnings on the differences from upstream: %q", differences)
	}
}

// TestPodSecurityKindsInSeveralPlacesRefused: a rule matching kinds whose
// pods sit in different places is refused, naming them.
func TestPodSecurityKindsInSeveralPlacesRefused(t *testing.T) {
	_, fl := compilePodSecurity(&kyvernov1.PodSecurity{Level: "baseline"}, []string{"Pod", "apps/v1/Deployment"}, "object", nil)
	if fl == nil || fl.Reason != model.ReasonPodSecurityNotExpressible || !strings.Contains(fl.Message, "Pod, apps/v1/Deployment") {
		t.Errorf("not refused naming the kinds: %+v", fl)
	}
	if _, fl := compilePodSecurity(&kyvernov1.PodSecurity{Level: "baseline"}, []string{"Deployment", "apps/v1/StatefulSet"}, "object", nil); fl != nil {
		t.Errorf("kinds with their pods in one place refused: %s", fl.Message)
	}
}

// TestPodSecurityRefusals: what has no exact form yet is refused by name,
// and Kyverno enforces the rule.
func TestPodSecurityRefusals(t *testing.T) {
	exclusion := kyvernov1.PodSecurity{Level: "restricted", Exclude: []kyvernov1.PodSecurityStandard{{ControlName: "AppArmor"}}}
	exception := kyvernov2.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Name: "ports", Namespace: "default"},
		Spec: kyvernov2.PolicyExceptionSpec{
			Match:       kyvernov2.MatchResources{Any: kyvernov1.ResourceFilters{{Resources: kyvernov1.ResourceDescription{Kinds: []string{"Pod"}}}}},
			Exceptions:  []kyvernov2.Exception{{PolicyName: "pss", RuleNames: []string{"autogen-baseline"}}},
			PodSecurity: []kyvernov1.PodSecurityStandard{{ControlName: "Host Ports"}},
		},
	}
	for name, c := range map[string]struct {
		in   Input
		want string
	}{
		"exclusion":      {Input{Policy: podSecurityPolicy([]string{"Pod"}, exclusion)}, `podSecurity exclude[0] (control "AppArmor")`},
		"exception":      {Input{Policy: podSecurityPolicy([]string{"Pod"}, kyvernov1.PodSecurity{Level: "baseline"}), Exceptions: []kyvernov2.PolicyException{exception}}, `PolicyException default/ports podSecurity[0] (control "Host Ports"): a container-level control needs images`},
		"kind":           {Input{Policy: podSecurityPolicy([]string{"ConfigMap"}, kyvernov1.PodSecurity{Level: "baseline"})}, `podSecurity on kind "ConfigMap"`},
		"version":        {Input{Policy: podSecurityPolicy([]string{"Pod"}, kyvernov1.PodSecurity{Level: "baseline", Version: "v1.18"})}, `podSecurity version "v1.18"`},
		"wildcard kinds": {Input{Policy: podSecurityPolicy([]string{"*"}, kyvernov1.PodSecurity{Level: "baseline"})}, `podSecurity on kind "*"`},
	} {
		out, err := Lower(c.in, kyverno.NewStaticResolver(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Policy.Rules) != 0 || len(out.Outcomes) == 0 {
			t.Errorf("%s: lowered %d rules (%+v)", name, len(out.Policy.Rules), out.Outcomes)
			continue
		}
		o := out.Outcomes[0]
		if o.Fate != NotCEL || o.Refusal == nil || o.Refusal.Reason != model.ReasonPodSecurityNotExpressible || !strings.Contains(o.Refusal.Message, c.want) {
			t.Errorf("%s: outcome %v %+v, want NotCEL PodSecurityNotExpressible naming %q", name, o.Fate, o.Refusal, c.want)
		}
	}
}
