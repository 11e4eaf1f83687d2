package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook/certs"
)

// Certificate management modes.
const (
	// CertManagementSelf: kyvap creates and rotates its CA and serving
	// certificate in a Secret and injects the CA into its configuration.
	CertManagementSelf = "self"
	// CertManagementCertManager: cert-manager writes the certificate (mounted
	// in CertDir) and its CA injector fills in the configuration's CA bundle.
	CertManagementCertManager = "cert-manager"
)

// Options configure the fallback webhook.
type Options struct {
	// Host and Port the webhook server listens on.
	Host string
	Port int
	// CertManagement is CertManagementSelf (default) or CertManagementCertManager.
	CertManagement string
	// CertDir holds tls.crt and tls.key in cert-manager mode.
	CertDir string
	// Namespace is the operator's namespace: the Secret lives there, and its
	// requests never go to the webhook.
	Namespace string
	// ServiceName and ServicePort reach the webhook inside the cluster.
	ServiceName string
	ServicePort int32
	// URL, when set, replaces the Service: "https://host:port" for a manager
	// that runs outside the cluster (development, tests).
	URL string
	// SecretName is the TLS Secret in self mode (in cert-manager mode, the
	// CA comes from the Certificate CertManagerCertificate).
	SecretName string
	// ConfigurationName is the ValidatingWebhookConfiguration's name.
	ConfigurationName string
}

// Defaults for Options.
const (
	DefaultPort        = 9443
	DefaultServiceName = "kyvap-webhook-service"
	DefaultSecretName  = "kyvap-webhook-tls"
	// CertManagerCertificate is the cert-manager Certificate of config/cert-manager.
	CertManagerCertificate   = "kyvap-webhook-cert"
	DefaultConfigurationName = "kyvap-fallback"
)

func (o *Options) defaults() error {
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.CertManagement == "" {
		o.CertManagement = CertManagementSelf
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.ServicePort == 0 {
		o.ServicePort = 443
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.ConfigurationName == "" {
		o.ConfigurationName = DefaultConfigurationName
	}
	switch o.CertManagement {
	case CertManagementSelf, CertManagementCertManager:
	default:
		return fmt.Errorf("--cert-management %q: want %q or %q", o.CertManagement, CertManagementSelf, CertManagementCertManager)
	}
	if o.Namespace == "" {
		return errors.New("the operator's namespace is unknown: set --webhook-namespace or the POD_NAMESPACE environment variable")
	}
	if o.CertManagement == CertManagementCertManager && o.CertDir == "" {
		return errors.New("--cert-management=cert-manager needs --cert-dir (where cert-manager's Secret is mounted)")
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--webhook-url %q is not an https://host[:port] URL", o.URL)
		}
	}
	return nil
}

// Webhook is the fallback webhook of one manager: its server, and what
// Setup adds to the manager.
type Webhook struct {
	opts   Options
	server ctrlwebhook.Server
	certs  *certs.Manager
	tls    *certHolder
	config *ConfigurationReconciler
	// EngineLoaded, set before Setup, reports whether the engine has loaded
	// every policy (ConfigurationReconciler.EngineLoaded).
	EngineLoaded func() bool
}

// certHolder lets the server's TLS config exist before the certificate
// manager, which needs the manager's clients.
type certHolder struct{ m *certs.Manager }

func (h *certHolder) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if h.m == nil {
		return nil, errors.New("the webhook certificate is not loaded yet")
	}
	return h.m.GetCertificate(hello)
}

// New validates the options and builds the webhook server, to be passed to
// ctrl.Options.WebhookServer.
func New(opts Options) (*Webhook, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	w := &Webhook{opts: opts, tls: &certHolder{}}
	serverOpts := ctrlwebhook.Options{Host: opts.Host, Port: opts.Port}
	if opts.CertManagement == CertManagementSelf {
		serverOpts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = w.tls.GetCertificate }}
	} else {
		serverOpts.CertDir = opts.CertDir
	}
	w.server = ctrlwebhook.NewServer(serverOpts)
	return w, nil
}

// KindsChanged re-computes the configuration: discovery changed. It never
// blocks.
func (w *Webhook) KindsChanged() {
	if w.config != nil {
		w.config.Trigger()
	}
}

// Server is the webhook server for ctrl.Options.WebhookServer.
func (w *Webhook) Server() ctrlwebhook.Server { return w.server }

// Setup registers the handler, the certificate manager (self mode) and the
// configuration reconciler with a manager created with Server().
func (w *Webhook) Setup(mgr ctrl.Manager, eng *engine.Engine, resolvers ResolverSource) error {
	lookup := &ClusterLookup{Reader: mgr.GetClient(), Writer: mgr.GetClient()}
	handler := &Handler{Engine: eng, Lookup: lookup}
	mgr.GetWebhookServer().Register(PathPrefix, handler.Webhook())

	configOpts := ConfigOptions{
		Name:               w.opts.ConfigurationName,
		ExcludedNamespaces: append(append([]string(nil), translate.WebhookProtectedNamespaces...), w.opts.Namespace),
		Labels:             map[string]string{translate.LabelManagedBy: translate.ManagedByValue},
	}
	var dnsNames []string
	var ips []net.IP
	if w.opts.URL != "" {
		configOpts.URL = w.opts.URL
		u, _ := url.Parse(w.opts.URL)
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, u.Hostname())
		}
	} else {
		port := w.opts.ServicePort
		configOpts.Service = &admissionregistrationv1.ServiceReference{Namespace: w.opts.Namespace, Name: w.opts.ServiceName, Port: &port}
		svc := w.opts.ServiceName
		dnsNames = []string{svc, svc + "." + w.opts.Namespace, svc + "." + w.opts.Namespace + ".svc", svc + "." + w.opts.Namespace + ".svc.cluster.local"}
	}
	reconciler := &ConfigurationReconciler{Client: mgr.GetClient(), Engine: eng, Resolvers: resolvers, Options: configOpts, EngineLoaded: w.EngineLoaded}
	w.config = reconciler
	if w.opts.CertManagement == CertManagementSelf {
		w.certs = certs.NewManager(mgr.GetClient(), mgr.GetAPIReader(), certs.Options{
			Namespace: w.opts.Namespace, SecretName: w.opts.SecretName, DNSNames: dnsNames, IPs: ips,
		}, ctrl.Log.WithName("webhook-certs"))
		w.tls.m = w.certs
		reconciler.CABundle = w.certs.CABundle
		w.certs.OnCABundleChange(func([]byte) { reconciler.Trigger() })
		if err := mgr.Add(w.certs); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", w.certs.Checker); err != nil {
			return err
		}
	} else {
		configOpts.Annotations = map[string]string{AnnotationInjectCAFrom: w.opts.Namespace + "/" + CertManagerCertificate}
		reconciler.Options = configOpts
	}
	return reconciler.SetupWithManager(mgr)
}
