// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command manager is the kyvap operator: it reconciles Kyverno ClusterPolicies
// into ValidatingAdmissionPolicies and serves the fallback CEL webhook.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kyvap/kyvap/internal/memory"
	"github.com/kyvap/kyvap/internal/version"
	"github.com/kyvap/kyvap/operator"
	"github.com/kyvap/kyvap/reporter"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook"
)

// options are the manager's command-line settings (documented in docs/flags.md).
type options struct {
	metricsAddr    string
	metricsSecure  bool
	metricsCertDir string
	enableHTTP2    bool
	probeAddr      string
	leaderElect    bool
	leaderElectNS  string
	generateVAP    bool
	celVersion     string
	concurrency    int
	pprofAddr      string
	showVersion    bool
	webhook        bool
	webhookOpts    webhook.Options
	zapOptions     zap.Options
	// kyvernoConfig and kyvernoConfigFallback are "namespace/name".
	kyvernoConfig              string
	shutdownDrain              time.Duration
	backgroundScanInterval     time.Duration
	backgroundScan             bool
	backgroundScanWorkers      int
	backgroundScanMetadataOnly bool
	resourceReads              bool
	kyvernoConfigFallback      string
	releaseMemory              bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", `address the Prometheus metrics endpoint binds to ("0" disables it)`)
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients the API server authenticates (TokenReview) and authorizes (SubjectAccessReview for GET /metrics); false serves plain HTTP to anyone")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate generated at start)")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "let the webhook and metrics servers negotiate HTTP/2 (off: HTTP/2 stream attacks such as CVE-2023-44487 do not apply)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health and readiness probes bind to")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so that only one replica writes")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.BoolVar(&o.generateVAP, "generate-validating-admission-policy", true, "translate CEL rules into ValidatingAdmissionPolicies; when false every CEL rule is enforced by kyvap's webhook")
	fs.BoolVar(&o.generateVAP, "generateValidatingAdmissionPolicy", true, "Kyverno's spelling of --generate-validating-admission-policy")
	fs.StringVar(&o.celVersion, "cel-compatibility-version", "", `CEL compatibility version of the target cluster, "<major>.<minor>" (default: the newest kyvap knows)`)
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", 16, "policies reconciled in parallel (the work is API-bound)")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", `address of the Go pprof endpoints (empty or "0": off)`)
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&o.webhook, "webhook", true, "serve the fallback webhook that enforces the rules not expressed as ValidatingAdmissionPolicies (when false, such rules are reported NOT ENFORCED)")
	fs.IntVar(&o.webhookOpts.Port, "webhook-port", webhook.DefaultPort, "port the fallback webhook listens on")
	fs.StringVar(&o.webhookOpts.Host, "webhook-host", "", "address the fallback webhook listens on (default: all)")
	fs.StringVar(&o.webhookOpts.CertManagement, "cert-management", webhook.CertManagementSelf, `who provides the webhook's TLS certificate: "self" (kyvap keeps a CA and certificate in a Secret and rotates them) or "cert-manager"`)
	fs.StringVar(&o.webhookOpts.CertDir, "cert-dir", "", "directory with tls.crt and tls.key (cert-manager mode)")
	fs.StringVar(&o.webhookOpts.Namespace, "webhook-namespace", os.Getenv("POD_NAMESPACE"), "the operator's namespace (default: $POD_NAMESPACE); its requests and kube-system's never reach the webhook")
	fs.StringVar(&o.webhookOpts.ServiceName, "webhook-service-name", webhook.DefaultServiceName, "Service in front of the webhook")
	fs.StringVar(&o.webhookOpts.URL, "webhook-url", "", "base URL the API server calls instead of the Service (https://host:port), for a manager outside the cluster")
	fs.StringVar(&o.webhookOpts.SecretName, "webhook-secret-name", webhook.DefaultSecretName, "Secret holding the webhook's CA and certificate")
	fs.StringVar(&o.webhookOpts.ConfigurationName, "webhook-configuration-name", webhook.DefaultConfigurationName, "name of the ValidatingWebhookConfiguration kyvap manages (the shipped RBAC lets kyvap write only kyvap-fallback)")
	fs.BoolVar(&o.webhookOpts.ForceFailurePolicyIgnore, "force-failure-policy-ignore", false, "register every webhook of kyvap's with failurePolicy Ignore, whatever the policies' failurePolicy: the API server admits requests it cannot send to kyvap (availability over enforcement; Kyverno's --forceFailurePolicyIgnore)")
	fs.BoolVar(&o.webhookOpts.ForceFailurePolicyIgnore, "forceFailurePolicyIgnore", false, "Kyverno's spelling of --force-failure-policy-ignore")
	fs.StringVar(&o.webhookOpts.OwnerClusterRole, "webhook-configuration-owner-clusterrole", "", "ClusterRole that owns the webhook configuration, so that deleting it (helm uninstall) has the garbage collector delete the configuration (default: the operator's Namespace owns it; the shipped RBAC lets kyvap read only kyvap-manager-role)")
	fs.Int64Var(&o.webhookOpts.MaxRequestBytes, "webhook-max-request-bytes", webhook.DefaultMaxRequestBytes, "largest admission request body the webhook reads; larger ones are refused (413) unread")
	fs.IntVar(&o.webhookOpts.MaxConcurrentEvaluations, "webhook-max-concurrent-evaluations", 0, "requests the webhook evaluates at once; the others wait until their deadline (0: twice GOMAXPROCS)")
	fs.BoolVar(&o.resourceReads, "resource-library-reads", false, "let kyvap's engine evaluate Kyverno's CEL resource library (resource.Get/List in ValidatingPolicies) by reading from the API server with kyvap's RBAC, which must then grant get and list on what the policies read; off, such rules are reported NOT ENFORCED by kyvap")
	fs.BoolVar(&o.backgroundScan, "background-scan", true, "scan resources in the background and write PolicyReports (with the webhook's admission results); false writes no PolicyReports and keeps no cache of the scanned kinds, which bounds the manager's memory whatever the cluster's size; enforcement is not affected")
	fs.IntVar(&o.backgroundScanWorkers, "background-scan-workers", reporter.Workers, "resources the background scan evaluates and reports at once (the scan's CPU and its burst of report writes to the API server)")
	fs.BoolVar(&o.backgroundScanMetadataOnly, "background-scan-metadata-only", false, "cache only the metadata of the resources the background scan reports on, and read each resource from the API server when it is evaluated: the manager's memory stays flat however large the scanned objects are, for one GET per evaluation")
	fs.DurationVar(&o.backgroundScanInterval, "background-scan-interval", time.Hour, "how often the background scan re-evaluates every resource it reports on (PolicyReports), besides policy and resource changes; 0: only on changes")
	fs.DurationVar(&o.shutdownDrain, "shutdown-drain", 5*time.Second, "on SIGTERM, how long the webhook keeps answering (closing each connection after its response, readiness failing) before the manager stops; keep it below the pod's terminationGracePeriodSeconds")
	fs.Int64Var(&o.webhookOpts.MaxInFlightBytes, "webhook-max-inflight-bytes", webhook.DefaultMaxInFlightBytes, "request bodies the webhook handles at once, in bytes; further requests wait (decoded, they take up to 10 times this, 21 for the worst JSON: raise it with the memory limit)")
	fs.StringVar(&o.kyvernoConfig, "kyverno-config", operator.DefaultKyvernoConfigNamespace+"/"+operator.DefaultKyvernoConfigName, `Kyverno's global configuration ConfigMap, "namespace/name" (its resource filters, excluded users and groups, webhook selectors and match conditions apply to every VAP and to kyvap's webhook); "none" applies no configuration`)
	fs.StringVar(&o.kyvernoConfigFallback, "kyverno-config-fallback", "", `kyvap's copy of that ConfigMap, "namespace/name", read when Kyverno's does not exist (default: <operator namespace>/`+operator.DefaultOwnKyvernoConfigName+`); without either, Kyverno's chart defaults apply`)
	fs.BoolVar(&o.releaseMemory, "release-memory", true, "return the heap of a burst (e.g. many new policies compiled at once) to the system once the manager is idle again, instead of leaving it to Go's background scavenger, which takes minutes")
	o.zapOptions.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.webhookOpts.EnableHTTP2 = o.enableHTTP2
	if o.backgroundScanWorkers < 1 {
		return o, invalidFlagError(fmt.Sprintf("--background-scan-workers=%d: want at least 1 (--background-scan=false turns scans off)", o.backgroundScanWorkers))
	}
	return o, nil
}

// invalidFlagError is a flag value parseFlags refuses after parsing.
type invalidFlagError string

func (e invalidFlagError) Error() string { return string(e) }

// The metrics endpoint's authentication (TokenReview) and authorization
// (SubjectAccessReview) go through the API server with the manager's
// credentials.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions are the metrics server's options, as kubebuilder v4
// scaffolds them: HTTPS, authenticated and authorized (metricsAuthFilter),
// unless --metrics-secure=false; HTTP/2 off unless --enable-http2.
func (o options) metricsOptions() metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		m.FilterProvider = metricsAuthFilter
		m.CertDir = o.metricsCertDir
	}
	if !o.enableHTTP2 {
		m.TLSOpts = []func(*tls.Config){webhook.DisableHTTP2}
	}
	return m
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		var invalid invalidFlagError
		if errors.As(err, &invalid) {
			fmt.Fprintln(os.Stderr, err) // the flag package printed the others
		}
		os.Exit(2)
	}
	if opts.showVersion {
		fmt.Println(version.String())
		return
	}
	// The heap is mostly informer caches that grow with the cluster; a lower
	// GC target keeps the footprint close to the live heap (GOGC overrides).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zapOptions)))
	log := ctrl.Log.WithName("setup")
	log.Info("starting", "version", version.Version, "generateValidatingAdmissionPolicy", opts.generateVAP)

	kyvernoConfig, err := opts.kyvernoConfigOptions()
	if err == nil {
		err = opts.checkMetricsCertDir()
	}
	if err == nil && opts.webhook {
		err = opts.webhookOpts.Validate()
	}
	if err != nil {
		log.Error(err, "invalid flag")
		os.Exit(2)
	}
	operatorOptions := operator.Options{
		Translate:                  translate.Options{GenerateValidatingAdmissionPolicy: opts.generateVAP, CompatibilityVersion: opts.celVersion, TypedObjects: true},
		KyvernoConfig:              kyvernoConfig,
		ShutdownDrain:              opts.shutdownDrain,
		BackgroundScanInterval:     opts.backgroundScanInterval,
		DisableBackgroundScan:      !opts.backgroundScan,
		BackgroundScanWorkers:      opts.backgroundScanWorkers,
		BackgroundScanMetadataOnly: opts.backgroundScanMetadataOnly,
		ResourceReads:              opts.resourceReads,
	}
	if opts.webhook {
		operatorOptions.Webhook = &opts.webhookOpts
	}
	cfg := ctrl.GetConfigOrDie()
	// Kyverno 1.19 marks kyverno.io/v1 deprecated: every request would log it.
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	managerOptions := ctrl.Options{
		Scheme:                  operator.NewScheme(),
		Controller:              config.Controller{MaxConcurrentReconciles: opts.concurrency},
		Metrics:                 opts.metricsOptions(),
		HealthProbeBindAddress:  opts.probeAddr,
		PprofBindAddress:        opts.pprofAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "kyvap-leader.kyvap.io",
		LeaderElectionNamespace: opts.leaderElectNS,
		// Step down at once on shutdown so the other replica takes over quickly.
		LeaderElectionReleaseOnCancel: true,
	}
	ctx := ctrl.SetupSignalHandler()
	op, err := operator.New(ctx, cfg, managerOptions, operatorOptions)
	if err != nil {
		log.Error(err, "unable to set up the operator")
		os.Exit(1)
	}
	// Return the heap of a burst of new policies once it is over (see
	// internal/memory); --release-memory=false leaves it to the runtime.
	if opts.releaseMemory {
		releaser := memory.NewReleaser(ctrl.Log.WithName("memory"))
		ctrlmetrics.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "kyvap_memory_releases_total",
			Help: "Times the manager returned the heap of a finished burst to the system (--release-memory).",
		}, func() float64 { return float64(releaser.Releases()) }))
		go func() { _ = releaser.Start(ctx) }()
	}
	if err := op.Start(ctx); err != nil {
		log.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}

// checkMetricsCertDir fails when --metrics-cert-dir lacks tls.crt or
// tls.key: controller-runtime would silently serve a self-signed
// certificate instead.
func (o options) checkMetricsCertDir() error {
	if o.metricsCertDir == "" || !o.metricsSecure {
		return nil
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(o.metricsCertDir, name)); err != nil {
			return fmt.Errorf("--metrics-cert-dir: %w", err)
		}
	}
	return nil
}

// kyvernoConfigOptions parses --kyverno-config and --kyverno-config-fallback.
func (o options) kyvernoConfigOptions() (operator.KyvernoConfigOptions, error) {
	if o.kyvernoConfig == "none" {
		return operator.KyvernoConfigOptions{Disabled: true}, nil
	}
	var out operator.KyvernoConfigOptions
	var err error
	if out.Kyverno, err = namespacedName("--kyverno-config", o.kyvernoConfig); err != nil {
		return out, err
	}
	fallback := o.kyvernoConfigFallback
	if fallback == "" && o.webhookOpts.Namespace != "" {
		fallback = o.webhookOpts.Namespace + "/" + operator.DefaultOwnKyvernoConfigName
	}
	if fallback != "" {
		if out.Own, err = namespacedName("--kyverno-config-fallback", fallback); err != nil {
			return out, err
		}
	}
	return out, nil
}

// namespacedName parses "namespace/name".
func namespacedName(flagName, value string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(value, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf(`%s=%q: want "namespace/name"`, flagName, value)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
