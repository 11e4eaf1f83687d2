// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"maps"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kyvap/kyvap/translate"
)

// TranslationOptionsConfigMap is the ConfigMap, in the operator's
// namespace, where the leader publishes its translation options.
//
// The leader decides which rules become VAPs; every replica's engine
// enforces the others. A replica whose flags differ (during a rollout that
// changes --generate-validating-admission-policy, say) would drop rules the
// leader did not turn into VAPs, and requests it serves would pass
// unchecked. So every replica's engine follows the leader's options, and a
// replica whose own differ says so (log, metric) until it leads.
const TranslationOptionsConfigMap = "kyvap-translation-options"

// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,verbs=create
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,resourceNames=kyvap-translation-options,verbs=update;patch

// Keys of TranslationOptionsConfigMap.
const (
	optionGenerate      = "generateValidatingAdmissionPolicy"
	optionCELVersion    = "celCompatibilityVersion"
	optionRespectField  = "respectGenerateField"
	optionsManagedByKey = "app.kubernetes.io/managed-by"
)

var optionsDiffer = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "kyvap_translation_options_differ_from_leader",
	Help: "1 when this replica's translation flags differ from the leader's: its webhook engine follows the leader's until it leads.",
})

func init() { metrics.Registry.MustRegister(optionsDiffer) }

func optionsData(o translate.Options) map[string]string {
	return map[string]string{
		optionGenerate:     strconv.FormatBool(o.GenerateValidatingAdmissionPolicy),
		optionCELVersion:   o.CompatibilityVersion,
		optionRespectField: strconv.FormatBool(o.RespectGenerateField),
	}
}

// optionsFrom applies published options over own; ok is false when the
// data is not a complete publication.
func optionsFrom(data map[string]string, own translate.Options) (translate.Options, bool) {
	generate, err1 := strconv.ParseBool(data[optionGenerate])
	respect, err2 := strconv.ParseBool(data[optionRespectField])
	version, ok := data[optionCELVersion]
	if err1 != nil || err2 != nil || !ok {
		return own, false
	}
	own.GenerateValidatingAdmissionPolicy, own.CompatibilityVersion, own.RespectGenerateField = generate, version, respect
	return own, true
}

// LeaderOptions publishes the leader's translation options and gives every
// replica's engine the options in force.
type LeaderOptions struct {
	key       types.NamespacedName
	own       translate.Options
	writer    client.Client
	apiReader client.Reader
	reader    client.Reader
	effective atomic.Pointer[translate.Options]
	listeners []func()
	// elected is closed once this replica leads: its own options are then
	// the leader's, whatever an earlier leader published.
	elected <-chan struct{}
}

// Effective returns the options the engine translates with: the leader's
// once published, else this replica's own.
func (l *LeaderOptions) Effective() translate.Options {
	select {
	case <-l.elected:
		return l.own
	default:
	}
	if o := l.effective.Load(); o != nil {
		return *o
	}
	return l.own
}

// setupLeaderOptions registers the publisher (leader only) and the watcher
// (every replica) of the options ConfigMap in namespace.
func setupLeaderOptions(mgr ctrl.Manager, cfg *rest.Config, namespace string, own translate.Options) (*LeaderOptions, error) {
	l := &LeaderOptions{key: types.NamespacedName{Namespace: namespace, Name: TranslationOptionsConfigMap}, own: own, writer: mgr.GetClient(), apiReader: mgr.GetAPIReader(), elected: mgr.Elected()}
	if err := mgr.Add(publisher{l}); err != nil {
		return nil, err
	}
	namespaces := map[string]cache.Config{namespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", TranslationOptionsConfigMap)}}
	reader, err := watchConfigMaps(mgr, cfg, "translation-options", namespaces, l, reconcile.Request{NamespacedName: l.key})
	if err != nil {
		return nil, err
	}
	l.reader = reader
	return l, nil
}

// publisher writes the options once this replica leads.
type publisher struct{ l *LeaderOptions }

func (p publisher) NeedLeaderElection() bool { return true }

func (p publisher) Start(ctx context.Context) error {
	want := optionsData(p.l.own)
	// Leading, this replica's engine uses its own options (Effective):
	// re-translate in case it followed another leader's until now.
	for _, notify := range p.l.listeners {
		notify()
	}
	cm := &corev1.ConfigMap{}
	err := p.l.apiReader.Get(ctx, p.l.key, cm) // not the manager's cache: it would hold every ConfigMap
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.l.key.Namespace, Name: p.l.key.Name, Labels: map[string]string{optionsManagedByKey: translate.ManagedByValue}}, Data: want}
		err = p.l.writer.Create(ctx, cm)
	case err == nil && !maps.Equal(cm.Data, want):
		cm.Data = want
		err = p.l.writer.Update(ctx, cm)
	}
	if err != nil {
		// Followers keep their own options; the leader's are its own anyway.
		log.FromContext(ctx).Error(err, "publishing the leader's translation options", "configMap", p.l.key.String())
	}
	return nil
}

// Reconcile reads the published options and, when they change what the
// engine translates with, tells the listeners.
func (l *LeaderOptions) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	cm := &corev1.ConfigMap{}
	err := l.reader.Get(ctx, l.key, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	effective, ok := optionsFrom(cm.Data, l.own)
	if ok && !maps.Equal(optionsData(effective), optionsData(l.own)) {
		optionsDiffer.Set(1)
		log.FromContext(ctx).Info("this replica's translation flags differ from the leader's: its webhook follows the leader's until it leads", "own", optionsData(l.own), "leader", optionsData(effective))
	} else {
		optionsDiffer.Set(0)
	}
	if old := l.Effective(); maps.Equal(optionsData(old), optionsData(effective)) {
		return reconcile.Result{}, nil
	}
	l.effective.Store(&effective)
	for _, notify := range l.listeners {
		notify()
	}
	return reconcile.Result{}, nil
}
