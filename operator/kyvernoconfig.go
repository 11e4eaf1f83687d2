// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kyvap/kyvap/kyverno"
)

// Where Kyverno's global configuration comes from, by default: Kyverno's
// own ConfigMap (INIT_CONFIG in Kyverno's namespace), else kyvap's copy of
// it in kyvap's namespace (config/manager/kyverno-config.yaml), else the
// chart's defaults built into kyvap.
const (
	DefaultKyvernoConfigNamespace = "kyverno"
	DefaultKyvernoConfigName      = "kyverno"
	DefaultOwnKyvernoConfigName   = "kyvap-kyverno-config"
)

// Values of the source label of kyvap_kyverno_config_source.
const (
	configSourceKyverno  = "kyverno"
	configSourceKyvap    = "kyvap"
	configSourceBuiltIn  = "chart-defaults"
	configSourceDisabled = "none"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

var kyvernoConfigSource = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kyvap_kyverno_config_source",
	Help: "1 for the source of Kyverno's global configuration (resource filters, excluded users and groups, webhook selectors) that kyvap applies: kyverno (Kyverno's ConfigMap), kyvap (kyvap's copy), chart-defaults (built in) or none.",
}, []string{"source"})

var kyvernoConfigProblems = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "kyvap_kyverno_config_problems",
	Help: "Values of Kyverno's configuration that could not be parsed and are ignored, as Kyverno ignores them (the log names them).",
})

func init() { metrics.Registry.MustRegister(kyvernoConfigSource, kyvernoConfigProblems) }

// KyvernoConfigOptions say where kyvap reads Kyverno's global
// configuration.
type KyvernoConfigOptions struct {
	// Kyverno is Kyverno's ConfigMap; Own is kyvap's copy, read when
	// Kyverno's does not exist. Without either, the chart's defaults apply.
	Kyverno, Own types.NamespacedName
	// Disabled applies no configuration at all (every request is evaluated,
	// as `kyverno test` does).
	Disabled bool
}

// KyvernoConfig keeps Kyverno's global configuration in force and tells the
// listeners (re-translation, the engine) when it changes. It runs on every
// replica: each one translates and serves admission.
type KyvernoConfig struct {
	opts      KyvernoConfigOptions
	reader    client.Reader
	current   atomic.Pointer[kyverno.Config]
	mu        sync.Mutex
	source    string
	listeners []func(*kyverno.Config)
}

// Get returns the configuration in force (never nil unless Disabled).
func (k *KyvernoConfig) Get() *kyverno.Config { return k.current.Load() }

// load reads the configuration from reader and reports whether it changed.
func (k *KyvernoConfig) load(ctx context.Context, reader client.Reader) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.opts.Disabled {
		k.setSource(configSourceDisabled)
		return false, nil
	}
	data, source, err := k.read(ctx, reader)
	if err != nil {
		return false, err
	}
	cfg, problems := kyverno.ParseConfig(data)
	kyvernoConfigProblems.Set(float64(len(problems)))
	old := k.current.Load()
	sourceChanged := k.source != source
	k.setSource(source)
	if old != nil && old.Equal(cfg) {
		if sourceChanged {
			log.FromContext(ctx).Info("Kyverno's configuration now read from another source; it is unchanged", "source", source)
		}
		return false, nil
	}
	log.FromContext(ctx).Info("Kyverno's global configuration applied to every ValidatingAdmissionPolicy and to kyvap's webhook", "source", source, "configuration", cfg.Summary(), "problems", problems)
	k.current.Store(&cfg)
	return true, nil
}

func (k *KyvernoConfig) setSource(source string) {
	k.source = source
	for _, s := range []string{configSourceKyverno, configSourceKyvap, configSourceBuiltIn, configSourceDisabled} {
		v := 0.0
		if s == source {
			v = 1
		}
		kyvernoConfigSource.WithLabelValues(s).Set(v)
	}
}

// read returns the data of the first ConfigMap that exists.
func (k *KyvernoConfig) read(ctx context.Context, reader client.Reader) (map[string]string, string, error) {
	for _, c := range []struct {
		key    types.NamespacedName
		source string
	}{{k.opts.Kyverno, configSourceKyverno}, {k.opts.Own, configSourceKyvap}} {
		if c.key.Name == "" {
			continue
		}
		var cm corev1.ConfigMap
		err := reader.Get(ctx, c.key, &cm)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, "", fmt.Errorf("reading Kyverno's configuration from ConfigMap %s: %w", c.key, err)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		return cm.Data, c.source + ":" + c.key.String(), nil
	}
	return kyverno.ChartDefaultsConfigMap().Data, configSourceBuiltIn, nil
}

// kyvernoConfigKey is the single work item of the watcher.
var kyvernoConfigKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "kyverno-config"}}

// setupKyvernoConfig loads the configuration once, before any policy is
// translated (so that no VAP is first written without it), and registers a
// watcher on the two ConfigMaps, through a cache of their own: the
// manager's cache would hold every ConfigMap of the cluster.
func setupKyvernoConfig(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts KyvernoConfigOptions) (*KyvernoConfig, error) {
	k := &KyvernoConfig{opts: opts}
	if _, err := k.load(ctx, mgr.GetAPIReader()); err != nil {
		return nil, err
	}
	if opts.Disabled {
		return k, nil
	}
	namespaces := map[string]cache.Config{}
	for _, key := range []types.NamespacedName{opts.Kyverno, opts.Own} {
		if key.Name == "" {
			continue
		}
		if _, ok := namespaces[key.Namespace]; ok {
			namespaces[key.Namespace] = cache.Config{} // both in one namespace: watch it whole
			continue
		}
		namespaces[key.Namespace] = cache.Config{FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name)}
	}
	reader, err := watchConfigMaps(mgr, cfg, "kyverno-config", namespaces, k, kyvernoConfigKey)
	if err != nil {
		return nil, err
	}
	k.reader = reader
	return k, nil
}

// watchConfigMaps starts, on every replica, a cache of its own holding only
// the ConfigMaps namespaces selects (the manager's cache would hold every
// ConfigMap of the cluster), and a controller that reconciles key with r
// whenever one of them changes. It returns the cache for reading them.
func watchConfigMaps(mgr ctrl.Manager, cfg *rest.Config, name string, namespaces map[string]cache.Config, r reconcile.Reconciler, key reconcile.Request) (client.Reader, error) {
	configMaps, err := cache.New(cfg, cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {}},
	})
	if err != nil {
		return nil, err
	}
	if err := addCache(mgr, configMaps); err != nil {
		return nil, err
	}
	return configMaps, ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(source.Kind(configMaps, &corev1.ConfigMap{}, handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *corev1.ConfigMap) []reconcile.Request {
			return []reconcile.Request{key}
		}))).
		Complete(r)
}

// Reconcile re-reads the configuration and, when it changed, tells the
// listeners.
func (k *KyvernoConfig) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	changed, err := k.load(ctx, k.reader)
	if err != nil || !changed {
		return reconcile.Result{}, err
	}
	cfg := k.Get()
	for _, notify := range k.listeners {
		notify(cfg)
	}
	return reconcile.Result{}, nil
}

// everyReplica runs a cache on every replica: the manager starts a bare
// cache.Cache only once elected (it is not a hasCache runnable), and
// the controllers that read it run on every replica.
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }

// addCache adds a cache of kyvap's own to the manager, on every replica.
func addCache(mgr ctrl.Manager, c cache.Cache) error { return mgr.Add(everyReplica{c}) }
