// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// paramRule is a rule on the kind matched whose parameters are of kind, which
// the shipped RBAC does not grant.
func paramRule(name, matched, kind string) kyvernov1.Rule {
	r := controlplane.CELRule(name, matched, "params != null && object.metadata.name != 'forbidden'", "forbidden by "+name)
	r.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: kind}
	r.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "params"}
	return r
}

// TestParamKindsNeedOneGrant runs kyvap with exactly the shipped RBAC. A
// policy whose paramKind is not granted cannot become a VAP (the API server
// requires its creator to read every object of the kind): the status says
// which permission is missing and how to grant it; once a ClusterRole
// labelled for aggregation grants it, the VAP is created. kyvap's webhook,
// for a fallback rule on another ungranted kind, answers at once with the
// same advice instead of waiting for an informer that can never sync.
func TestParamKindsNeedOneGrant(t *testing.T) {
	ctx := context.Background()
	cfg := cp.ManagerUserConfig(t, "kyvap-params-test")
	cp.StartWebhookOperatorAs(t, cfg, generateOn, controlplane.FreePort(t))
	cp.EnsureNamespace(t, "params", nil)

	policy := controlplane.ClusterPolicy("params-limitrange", kyvernov1.Enforce, paramRule("limits", "ConfigMap", "LimitRange"))
	got := cp.CreatePolicy(t, policy, controllers.ReasonApplyFailed)
	msg := got.Status.ValidatingAdmissionPolicy.Message
	for _, want := range []string{"LimitRange (v1)", webhook.ParamsReaderLabel, "get, list and watch"} {
		if !strings.Contains(msg, want) {
			t.Errorf("status message %q does not contain %q", msg, want)
		}
	}

	cp.Create(t, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kyvap-params-limitranges", Labels: map[string]string{webhook.ParamsReaderLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"limitranges"}, Verbs: []string{"get", "list", "watch"}}},
	})
	cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)

	// A fallback rule whose parameters kyvap may not read, on Secrets (the
	// VAP above denies every ConfigMap of the namespace, its parameter
	// being absent).
	fallback := controlplane.ClusterPolicy("params-podtemplate", kyvernov1.Enforce, paramRule("templates", "Secret", "PodTemplate"))
	fallback.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, fallback, controllers.ReasonFallback)
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cp.DryRunCreate(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "params", Name: "any"}})
		if err == nil {
			return false, nil
		}
		return strings.Contains(err.Error(), "may not list and watch podtemplates") && strings.Contains(err.Error(), webhook.ParamsReaderLabel), err
	})
	if err != nil {
		t.Fatalf("kyvap's webhook never explained the missing permission: %v", err)
	}
}

// paramProbe sends dry-run creates without pause, two at a time: one the
// parameters admit, one they refuse, and records every answer that a rule
// enforced with its parameters cannot give.
type paramProbe struct {
	good, bad client.Object
	// enforced: from now on the rule is in force, so bad must be refused.
	enforced atomic.Bool
	// rounds counts the pairs sent.
	rounds atomic.Int64
	mu     sync.Mutex
	wrong  []string
}

func (p *paramProbe) run(ctx context.Context) {
	for ctx.Err() == nil {
		enforced := p.enforced.Load()
		if _, err := cp.DryRunCreate(ctx, p.good); err != nil && ctx.Err() == nil {
			p.record("%s refused although its parameters admit it: %v", p.good.GetName(), err)
		}
		_, err := cp.DryRunCreate(ctx, p.bad)
		switch {
		case ctx.Err() != nil:
		case err == nil && enforced:
			p.record("%s admitted while the rule is in force", p.bad.GetName())
		case err != nil && !strings.Contains(err.Error(), "name too long"):
			p.record("%s refused for another reason than the rule's: %v", p.bad.GetName(), err)
		}
		p.rounds.Add(1)
	}
}

func (p *paramProbe) record(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.wrong) < 20 {
		p.wrong = append(p.wrong, fmt.Sprintf(format, args...))
	}
}

// waitRounds waits until n more pairs were sent.
func (p *paramProbe) waitRounds(t *testing.T, n int64) {
	t.Helper()
	target := p.rounds.Load() + n
	err := controlplane.Eventually(context.Background(), time.Minute, func(context.Context) (bool, error) {
		return p.rounds.Load() >= target, fmt.Errorf("%d of %d rounds sent", p.rounds.Load(), target)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// shortNamesRule refuses Secrets whose names are longer than the max of
// the ConfigMap ns/limits; a missing ConfigMap refuses every Secret
// (parameterNotFoundAction Deny, Kyverno's behaviour for a named
// parameter that is missing).
func shortNamesRule(ns, limits string) kyvernov1.Rule {
	r := controlplane.CELRule("short-names", "Secret", "object.metadata.name.size() <= int(params.data.max)", "name too long")
	r.Validation.CEL.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	r.Validation.CEL.ParamRef = &admissionregistrationv1.ParamRef{Name: limits, Namespace: ns, ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
	return r
}

// TestParamsAreInForceThroughTheHandOver (issue 30): a rule with
// parameters is enforced with them, by one path or the other, at every
// moment. Requests go without pause while the rule moves from kyvap's
// webhook to its VAP, and while a new policy becomes a VAP beside a
// parameter object created the moment before (the API server's parameter
// informer has not seen it yet): an object the parameters admit is never
// refused (no "no params found" window), and one they refuse is never
// admitted once the rule is in force.
func TestParamsAreInForceThroughTheHandOver(t *testing.T) {
	ctx := context.Background()
	const ns = "params-handover"
	cp.Namespace(t, ns, nil)
	op := cp.StartWebhookOperator(t, generateOn, controlplane.FreePort(t))
	probe := &paramProbe{
		good: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"}},
		bad:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "much-too-long"}},
	}
	// Policies of earlier tests are deleted when they end, and their VAPs
	// go a moment later (garbage collection): start from a namespace where
	// nothing refuses the objects used here.
	err := controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		for _, obj := range []client.Object{probe.good, probe.bad, controlplane.ConfigMap(ns, "limits", nil)} {
			if _, err := cp.DryRunCreate(ctx, obj); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("an earlier test's policy still refuses the probes: %v", err)
	}
	probeCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); probe.run(probeCtx) }()
	defer func() {
		stop()
		<-done
	}()

	// The webhook enforces the rule with its parameters, then hands it to
	// the VAP.
	cp.Create(t, controlplane.ConfigMap(ns, "limits", map[string]string{"max": "5"}))
	policy := controlplane.ClusterPolicy("params-handover", kyvernov1.Enforce, shortNamesRule(ns, "limits"))
	policy.Annotations = map[string]string{translate.AnnotationGenerate: "false"}
	cp.CreatePolicy(t, policy, controllers.ReasonFallback)
	waitForDenier(t, probe.bad, "webhook")
	probe.enforced.Store(true)
	edit(t, policy, func(o client.Object) { o.SetAnnotations(nil) })
	waitReady(t, policy)
	waitForDenier(t, probe.bad, "vap")
	err = controlplane.Eventually(ctx, time.Minute, func(context.Context) (bool, error) {
		for _, fr := range op.Engine.Rules() {
			if fr.Policy == policy.Name {
				return false, fmt.Errorf("the engine still holds %s", fr.Rule.Name)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	probe.waitRounds(t, 20)

	// A new policy, straight to a VAP, on parameters created just before.
	probe.enforced.Store(false)
	if err := cp.Client.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	err = controlplane.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := denierOf(ctx, probe.bad)
		return got == "", fmt.Errorf("still denied by %q (%w)", got, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	cp.Create(t, controlplane.ConfigMap(ns, "fresh-limits", map[string]string{"max": "5"}))
	fresh := controlplane.ClusterPolicy("params-fresh", kyvernov1.Enforce, shortNamesRule(ns, "fresh-limits"))
	cp.Create(t, fresh)
	waitReady(t, fresh)
	probe.enforced.Store(true)
	probe.waitRounds(t, 20)

	stop()
	<-done
	if probe.rounds.Load() < 40 {
		t.Fatalf("only %d rounds of requests were sent", probe.rounds.Load())
	}
	for _, w := range probe.wrong {
		t.Error(w)
	}
	t.Logf("%d rounds of requests through both transitions", probe.rounds.Load())
}
