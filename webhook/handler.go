package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine"
)

// Lookup gathers, per request, what the engine needs from the cluster.
type Lookup interface {
	engine.ParamSource
	// Namespace returns the namespace object, or nil when it does not exist.
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// Roles returns the Roles ("namespace:name") and ClusterRoles bound to
	// the user, as Kyverno resolves them for a request in namespace.
	Roles(ctx context.Context, user authenticationv1.UserInfo, namespace string) (roles, clusterRoles []string, err error)
	// Authorizer answers the CEL `authorizer` variable for a request.
	Authorizer() authorizer.UnconditionalAuthorizer
	// KindFor is the kind a resource (without subresource) serves.
	KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error)
}

// Handler is the fallback webhook's admission.Handler: it evaluates the
// engine's rules of one webhook group and turns their outcomes into the
// response a ValidatingAdmissionPolicy would give: Enforce violations deny
// with the rule's message, Audit violations warn, audit annotations are
// returned.
type Handler struct {
	Engine *engine.Engine
	Lookup Lookup
}

var _ admission.Handler = &Handler{}

// Webhook wraps the handler for the webhook server, to be registered at
// PathPrefix: the request's path selects the group.
func (h *Handler) Webhook() *admission.Webhook {
	return &admission.Webhook{Handler: h, WithContextFunc: withPath}
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	ar := req.AdmissionRequest
	in := engine.Request{Admission: &ar, Params: h.Lookup, Authorizer: h.Lookup.Authorizer()}
	// Served under the webhook server, the path names the group; called
	// directly (tests, benchmarks), every policy is evaluated.
	var group *Group
	if path, ok := pathFrom(ctx); ok {
		g, err := ParseGroupPath(path)
		if err != nil {
			return admission.Errored(http.StatusNotFound, err)
		}
		group = &g
		in.Policies = func(_ string, spec *kyvernov1.Spec) bool { return GroupOf(spec) == g }
	}
	if ar.Namespace != "" {
		ns, err := h.Lookup.Namespace(ctx, ar.Namespace)
		if err != nil {
			return failed(group, http.StatusInternalServerError, fmt.Errorf("reading namespace %s: %w", ar.Namespace, err))
		}
		in.Namespace = ns
	}
	if ar.SubResource != "" {
		gvr := schema.GroupVersionResource{Group: ar.Resource.Group, Version: ar.Resource.Version, Resource: ar.Resource.Resource}
		kind, err := h.Lookup.KindFor(gvr)
		if err != nil {
			return failed(group, http.StatusInternalServerError, fmt.Errorf("resolving the kind of %s: %w", gvr, err))
		}
		in.ResourceKind = &kind
	}
	if h.Engine.NeedsRoles() {
		roles, clusterRoles, err := h.Lookup.Roles(ctx, ar.UserInfo, ar.Namespace)
		if err != nil {
			return failed(group, http.StatusInternalServerError, fmt.Errorf("resolving the user's roles: %w", err))
		}
		in.Roles, in.ClusterRoles = roles, clusterRoles
	}
	outcomes, err := h.Engine.Evaluate(ctx, in)
	if err != nil {
		return failed(group, http.StatusBadRequest, err)
	}
	return Response(outcomes)
}

// failed answers a request the handler could not evaluate as the group's
// failurePolicy says: the API server applies failurePolicy only when it
// cannot call the webhook, so an Ignore webhook must admit (with a warning)
// itself.
func failed(group *Group, code int32, err error) admission.Response {
	if group != nil && group.FailurePolicy == admissionregistrationv1.Ignore {
		return admission.Allowed("").WithWarnings("kyvap's webhook could not evaluate the request (failurePolicy Ignore): " + err.Error())
	}
	return admission.Errored(code, err)
}

// Response turns outcomes into an admission response.
func Response(outcomes []engine.Outcome) admission.Response {
	resp := admission.Allowed("")
	var denials []string
	var reason metav1.StatusReason
	for _, o := range outcomes {
		for k, v := range o.AuditAnnotations {
			if resp.AuditAnnotations == nil {
				resp.AuditAnnotations = map[string]string{}
			}
			resp.AuditAnnotations[AuditAnnotationKey(o.Policy, o.Rule, k)] = v
		}
		if !o.Blocking {
			continue
		}
		for _, m := range o.Messages {
			if o.Action.IsEnforce() {
				if len(denials) == 0 {
					reason = o.Reason
				}
				denials = append(denials, fmt.Sprintf("ClusterPolicy '%s' rule '%s' denied request: %s", o.Policy, o.Rule, m))
			} else {
				resp.Warnings = append(resp.Warnings, fmt.Sprintf("Validation failed for ClusterPolicy '%s' rule '%s': %s", o.Policy, o.Rule, m))
			}
		}
	}
	if len(denials) > 0 {
		if reason == "" {
			reason = metav1.StatusReasonInvalid
		}
		resp.Allowed = false
		resp.Result = &metav1.Status{
			Status: metav1.StatusFailure, Message: strings.Join(denials, "; "),
			Reason: reason, Code: codeOf(reason),
		}
	}
	return resp
}

// codeOf is the HTTP code the API server uses for a validation's reason.
func codeOf(reason metav1.StatusReason) int32 {
	switch reason {
	case metav1.StatusReasonUnauthorized:
		return http.StatusUnauthorized
	case metav1.StatusReasonForbidden:
		return http.StatusForbidden
	case metav1.StatusReasonRequestEntityTooLarge:
		return http.StatusRequestEntityTooLarge
	default:
		return http.StatusUnprocessableEntity
	}
}

var notQualified = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// AuditAnnotationKey is the key of a rule's audit annotation in the webhook
// response. The API server prefixes it with the webhook's name; the key
// itself must be a qualified name (at most 63 characters of [A-Za-z0-9._-]),
// so long keys end in a hash that keeps them distinct.
func AuditAnnotationKey(policy, rule, key string) string {
	k := strings.Trim(notQualified.ReplaceAllString(policy+"."+rule+"."+key, "_"), "._-")
	if len(k) <= 63 {
		return k
	}
	sum := sha256.Sum256([]byte(policy + "\x00" + rule + "\x00" + key))
	return strings.TrimRight(k[:50], "._-") + "-" + hex.EncodeToString(sum[:])[:12]
}
