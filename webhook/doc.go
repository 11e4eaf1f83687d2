// Package webhook is kyvap's own CEL admission webhook: it enforces, with the
// verdicts a ValidatingAdmissionPolicy would give, the rules translate/ could
// not express as VAPs.
package webhook

// RBAC of the webhook's look-ups: namespace labels for namespaceSelector and
// namespaceObject, RBAC bindings for roles/clusterRoles (read only when a
// policy matches on them), and SubjectAccessReviews for the CEL `authorizer`.
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
