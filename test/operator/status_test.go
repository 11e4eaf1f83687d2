package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
)

// 500 rules whose CEL does not compile: the status names some, counts the
// others, and is small enough for the API server to store.
func TestStatusOfManyInvalidRulesIsBounded(t *testing.T) {
	cp.StartOperator(t, generateOn)
	expression := "object.spec.containers.all(c, c.image.startsWith('registry.example.com/') && " + strings.Repeat("has(c.name) && ", 40)
	var rules []kyvernov1.Rule
	for i := range 500 {
		rules = append(rules, controlplane.CELRule(fmt.Sprintf("broken-%03d", i), "Pod", expression, "broken"))
	}
	policy := controlplane.ClusterPolicy("many-invalid", kyvernov1.Enforce, rules...)
	cp.Create(t, policy)
	// 500 rules that fail to compile, each tried at several CEL versions,
	// take ~40 s under the race detector on 2 idle cores: a minute was too
	// short with the other suites running beside it.
	got, cond, err := controlplane.WaitForPolicyStatus(context.Background(), cp.Client, policy.Name, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if cond.Reason != controllers.ReasonInvalidRules {
		t.Fatalf("condition %s/%s, want %s", cond.Status, cond.Reason, controllers.ReasonInvalidRules)
	}
	msg := got.Status.ValidatingAdmissionPolicy.Message
	t.Logf("status message: %d bytes", len(msg))
	if len(msg) > 4096 {
		t.Errorf("status message has %d bytes, want at most 4096", len(msg))
	}
	if !strings.HasPrefix(msg, `rule "broken-000": not enforced: `) || !strings.Contains(msg, "more rules (kyvap translate lists every rule)") {
		t.Errorf("status message %q: want the first rules and a count of the others", msg)
	}
	if strings.Contains(msg, "startsWith") {
		t.Errorf("status message echoes the CEL source: %q", msg)
	}
}
