package operator

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

type staticResolvers struct{}

func (staticResolvers) Resolver() translate.KindResolver { return translate.NewStaticResolver() }

// TestNewLeaderKeepsTheConfigurationUntilItsEngineIsLoaded: a replica
// whose engine has not loaded every policy yet (a freshly elected leader)
// would compute an empty configuration and delete the one the other
// replica's rules need; it leaves it alone until its engine is loaded, and
// then reconciles as usual.
func TestNewLeaderKeepsTheConfigurationUntilItsEngineIsLoaded(t *testing.T) {
	ctx := context.Background()
	const name = "kyvap-handover-test"
	existing := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{translate.LabelManagedBy: translate.ManagedByValue}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "fail-10.fallback.kyvap.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate/fail/10")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kyvap-handover-test": "never"}},
		}},
	}
	cp.Create(t, existing)
	loaded := false
	r := &webhook.ConfigurationReconciler{
		Client: cp.Client, Engine: engine.New(), Resolvers: staticResolvers{},
		Options:      webhook.ConfigOptions{Name: name, URL: "https://127.0.0.1:1"},
		CABundle:     func() []byte { return []byte("ca") },
		EngineLoaded: func() bool { return loaded },
	}
	result, err := r.Reconcile(ctx, reconcile.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if result.RequeueAfter == 0 {
		t.Error("a reconcile waiting for the engine must look again")
	}
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatalf("the configuration was removed before the engine was loaded: %v", err)
	}
	if got.ResourceVersion != existing.ResourceVersion {
		t.Errorf("the configuration was written before the engine was loaded")
	}

	// Loaded, with no fallback rule: the configuration goes.
	loaded = true
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); !apierrors.IsNotFound(err) {
		t.Errorf("once loaded, an engine without rules removes the configuration; get: %v", err)
	}
}
