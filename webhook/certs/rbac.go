package certs

// RBAC of the webhook certificate Manager and of the code that injects its CA
// bundle: the Secret lives in the operator's namespace ("system" here, which
// config/default renames), so a namespaced Role grants it rather than the
// ClusterRole; the ValidatingWebhookConfiguration kyvap owns is cluster-scoped.
//
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;create;update;patch;delete
