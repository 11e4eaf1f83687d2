// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/frontend/clusterpolicy"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
)

// vapEvent is one watch event of a VAP or a binding.
type vapEvent struct {
	rv      uint64
	typ     watch.EventType
	kind    string // "VAP" or "Binding"
	name    string
	binding string // a binding's policyName
}

// recordVAPEvents watches VAPs and bindings until stop is called, which
// returns the events ordered by resourceVersion (etcd's revision, ordered
// in the test control plane), the objects that existed when the watch
// started first.
func recordVAPEvents(t testing.TB) (stop func() []vapEvent) {
	t.Helper()
	wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var events []vapEvent
	var wg sync.WaitGroup
	for _, list := range []client.ObjectList{&admissionregistrationv1.ValidatingAdmissionPolicyList{}, &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}} {
		w, err := wc.Watch(ctx, list)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				e := vapEvent{typ: ev.Type}
				switch o := ev.Object.(type) {
				case *admissionregistrationv1.ValidatingAdmissionPolicy:
					e.kind, e.name = "VAP", o.Name
					e.rv, _ = strconv.ParseUint(o.ResourceVersion, 10, 64)
				case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
					e.kind, e.name, e.binding = "Binding", o.Name, o.Spec.PolicyName
					e.rv, _ = strconv.ParseUint(o.ResourceVersion, 10, 64)
				default:
					continue
				}
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		}()
		go func() {
			<-ctx.Done()
			w.Stop()
		}()
	}
	return func() []vapEvent {
		cancel()
		wg.Wait()
		sort.SliceStable(events, func(i, j int) bool { return events[i].rv < events[j].rv })
		return events
	}
}

// enforcedThroughout replays the events and reports the first one after
// which no binding in bindings pointed at an existing VAP in vaps, once one
// had.
func enforcedThroughout(events []vapEvent, vaps, bindings map[string]bool) error {
	liveVAPs := map[string]bool{}
	liveBindings := map[string]string{}
	enforced := false
	for _, e := range events {
		switch {
		case e.kind == "VAP" && vaps[e.name]:
			liveVAPs[e.name] = e.typ != watch.Deleted
		case e.kind == "Binding" && bindings[e.name]:
			if e.typ == watch.Deleted {
				delete(liveBindings, e.name)
			} else {
				liveBindings[e.name] = e.binding
			}
		default:
			continue
		}
		now := false
		for _, policyName := range liveBindings {
			now = now || liveVAPs[policyName]
		}
		if enforced && !now {
			return fmt.Errorf("after %s %s %s (resourceVersion %d) no VAP and binding enforce the rule", e.typ, e.kind, e.name, e.rv)
		}
		enforced = enforced || now
	}
	if !enforced {
		return fmt.Errorf("the rule was never enforced in %d events", len(events))
	}
	return nil
}

// oldObjects creates, for a policy created with no operator running, the
// VAP and binding an earlier kyvap named kyvap-<policy>-<rule>: the plan's
// objects under that name. It returns the plan's (new) objects.
func oldObjects(t testing.TB, policy *kyvernov1.ClusterPolicy) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, translate.Plan) {
	t.Helper()
	plan, err := translate.Translate(clusterpolicy.Input{Policy: policy}, kyverno.NewStaticResolver(), generateOn)
	if err != nil || len(plan.ValidatingAdmissionPolicies) != 1 || len(plan.Bindings) != 1 {
		t.Fatalf("planning: %v, %d VAPs, %d bindings", err, len(plan.ValidatingAdmissionPolicies), len(plan.Bindings))
	}
	vap := plan.ValidatingAdmissionPolicies[0].DeepCopy()
	vap.Name = "kyvap-" + policy.Name + "-" + vap.Annotations[translate.AnnotationRule]
	binding := plan.Bindings[0].DeepCopy()
	binding.Name, binding.Spec.PolicyName = vap.Name+"-0", vap.Name
	if vap.Name == plan.ValidatingAdmissionPolicies[0].Name {
		t.Fatalf("the old and the new name are both %s", vap.Name)
	}
	cp.Create(t, vap)
	cp.Create(t, binding)
	return vap, binding, plan
}

// An upgrade renames every generated object: the new ones are in place
// before the old ones go, so the rule is enforced at every moment.
func TestRenamedObjectsAreReplacedBeforeTheOldOnesGo(t *testing.T) {
	ctx := context.Background()
	cp.Namespace(t, "rename", nil)
	policy := controlplane.ReplicasPolicy("rename-replicas", kyvernov1.Enforce)
	cp.Create(t, policy) // no operator runs: the previous version's objects stand
	oldVAP, oldBinding, plan := oldObjects(t, policy)
	newVAP, newBinding := plan.ValidatingAdmissionPolicies[0].Name, plan.Bindings[0].Name
	cp.WaitForDenial(t, controlplane.Deployment("rename", "too-many", 10, nil), "ValidatingAdmissionPolicy '"+oldVAP.Name+"'")

	stop := recordVAPEvents(t)
	cp.StartOperator(t, generateOn)
	got := cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)
	err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		vaps, bindings, err := cp.GeneratedFor(ctx, got)
		if err != nil || len(vaps) != 1 || len(bindings) != 1 {
			return false, fmt.Errorf("%d VAPs, %d bindings, %w", len(vaps), len(bindings), err)
		}
		return vaps[0].Name == newVAP && bindings[0].Name == newBinding, fmt.Errorf("VAP %s, binding %s", vaps[0].Name, bindings[0].Name)
	})
	if err != nil {
		t.Fatalf("the old objects were not replaced: %v", err)
	}
	events := stop()
	if err := enforcedThroughout(events, map[string]bool{oldVAP.Name: true, newVAP: true}, map[string]bool{oldBinding.Name: true, newBinding: true}); err != nil {
		t.Errorf("%v; events: %+v", err, events)
	}
	cp.WaitForDenial(t, controlplane.Deployment("rename", "too-many", 10, nil), "ValidatingAdmissionPolicy '"+newVAP+"'")
}

// When a new object cannot be created (here a foreign VAP holds its name),
// the old objects keep enforcing the rule until it can.
func TestOldObjectsStayUntilTheNewOnesAreInPlace(t *testing.T) {
	ctx := context.Background()
	policy := controlplane.ReplicasPolicy("rename-blocked", kyvernov1.Enforce)
	cp.Create(t, policy)
	oldVAP, oldBinding, plan := oldObjects(t, policy)
	foreign := controlplane.VAP(plan.ValidatingAdmissionPolicies[0].Name, configMaps, []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		admissionregistrationv1.Validation{Expression: "true"})
	foreign.Labels = map[string]string{"owner": "someone-else"}
	cp.Create(t, foreign)

	op := cp.StartOperator(t, generateOn)
	got := cp.WaitForStatus(t, policy, controllers.ReasonNameConflict)
	if !strings.Contains(got.Status.ValidatingAdmissionPolicy.Message, foreign.Name) {
		t.Errorf("status message %q does not name the clashing object", got.Status.ValidatingAdmissionPolicy.Message)
	}
	op.Touch(t, got)
	for _, obj := range []client.Object{oldVAP.DeepCopy(), oldBinding.DeepCopy()} {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T %s, which enforces the rule while its new VAP cannot be created, is gone: %v", obj, obj.GetName(), err)
		}
	}

	if err := cp.Client.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	op.Touch(t, got)
	cp.WaitForStatus(t, policy, controllers.ReasonAllRulesTranslated)
	err := controlplane.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		err1 := cp.Client.Get(ctx, client.ObjectKeyFromObject(oldVAP), &admissionregistrationv1.ValidatingAdmissionPolicy{})
		err2 := cp.Client.Get(ctx, client.ObjectKeyFromObject(oldBinding), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), fmt.Errorf("old VAP: %w, old binding: %w", err1, err2)
	})
	if err != nil {
		t.Fatalf("the old objects outlived their replacement: %v", err)
	}
}
