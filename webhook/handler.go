// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/translate"
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
//
// The work per request is bounded: the handler stops after the group's
// evaluation budget (translate.WebhookEvaluationBudget of its timeout),
// between rules and inside CEL, and answers as the group's failurePolicy
// says; and at most MaxConcurrent requests evaluate rules at once, the
// others wait for a slot within their budget.
type Handler struct {
	Engine *engine.Engine
	Lookup Lookup
	// Budget, when set, replaces translate.WebhookEvaluationBudget: how
	// long the handler works on a request of a group (tests).
	Budget func(Group) time.Duration
	// MaxConcurrent caps the requests evaluating rules at once; zero is
	// DefaultMaxConcurrent() when the handler first serves.
	MaxConcurrent int
	// Record, when set, receives the outcomes of every request the handler
	// admits (for the PolicyReports); it must not block.
	Record func(*admissionv1.AdmissionRequest, []engine.Outcome)

	slotsOnce sync.Once
	slots     chan struct{}
}

// DefaultMaxConcurrent is two evaluations per CPU the process may use
// (GOMAXPROCS, which follows the container's CPU limit): evaluation is CPU
// work, and more of it at once only makes every request slower; the factor
// two keeps the CPUs busy while some evaluations wait for parameter
// look-ups.
func DefaultMaxConcurrent() int { return 2 * runtime.GOMAXPROCS(0) }

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
	// directly (tests, benchmarks), every policy is evaluated, under the
	// default timeout.
	var group *Group
	budgetOf := Group{FailurePolicy: admissionregistrationv1.Fail, TimeoutSeconds: DefaultTimeoutSeconds}
	if path, ok := pathFrom(ctx); ok {
		g, err := ParseGroupPath(path)
		if err != nil {
			return admission.Errored(http.StatusNotFound, err)
		}
		group, budgetOf = &g, g
		in.Policies = func(p engine.PolicyGroup) bool { return GroupFor(p) == g }
	}
	budget := h.budget(budgetOf)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	limit := outOfTime{group: group, budget: budget, timeoutSeconds: budgetOf.TimeoutSeconds}
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
	release, ok := h.acquire(ctx)
	if !ok {
		limit.why = fmt.Sprintf("all %d of its evaluation slots stayed busy", cap(h.slots))
		return limit.response(nil, 0, 0)
	}
	defer release()
	outcomes, err := h.Engine.Evaluate(ctx, in)
	var oot *engine.OutOfTimeError
	if errors.As(err, &oot) {
		return limit.response(outcomes, oot.Evaluated, oot.Rules)
	}
	if err != nil {
		return failed(group, http.StatusBadRequest, err)
	}
	resp := Response(outcomes)
	if resp.Allowed && h.Record != nil {
		h.Record(&ar, outcomes)
	}
	return resp
}

func (h *Handler) budget(g Group) time.Duration {
	if h.Budget != nil {
		return h.Budget(g)
	}
	return translate.WebhookEvaluationBudget(g.TimeoutSeconds)
}

// acquire takes an evaluation slot, waiting until ctx ends at the latest;
// false when none freed up.
func (h *Handler) acquire(ctx context.Context) (release func(), ok bool) {
	h.slotsOnce.Do(func() {
		n := h.MaxConcurrent
		if n <= 0 {
			n = DefaultMaxConcurrent()
		}
		h.slots = make(chan struct{}, n)
	})
	select {
	case h.slots <- struct{}{}:
		return func() { <-h.slots }, true
	case <-ctx.Done():
		return nil, false
	}
}

// outOfTime answers a request whose budget ran out before every rule was
// evaluated.
type outOfTime struct {
	group          *Group
	budget         time.Duration
	timeoutSeconds int32
	// why is said when the rules are not all that took the time.
	why string
}

// response: a denial by a rule that ran stands (the other rules cannot
// undo it); otherwise the group's failurePolicy decides, as it would have
// had the API server's call timed out: Fail refuses, Ignore admits with a
// warning. Audit annotations and warnings of the rules that ran are kept.
func (l outOfTime) response(outcomes []engine.Outcome, evaluated, rules int) admission.Response {
	msg := fmt.Sprintf("kyvap's webhook ran out of time after %d rules", evaluated)
	if rules > 0 {
		msg += fmt.Sprintf(" (of %d)", rules)
	}
	msg += fmt.Sprintf(": it stops after %s of the webhook's %ds timeout", l.budget, l.timeoutSeconds)
	if l.why != "" {
		msg += ", and " + l.why
	}
	resp := Response(outcomes)
	switch {
	case !resp.Allowed:
		resp.Warnings = append(resp.Warnings, msg+"; the denial by the rules that ran stands")
	case l.group != nil && l.group.FailurePolicy == admissionregistrationv1.Ignore:
		resp.Warnings = append(resp.Warnings, msg+"; failurePolicy Ignore: admitted without the other rules")
	default:
		resp.Allowed = false
		resp.Result = &metav1.Status{
			Status: metav1.StatusFailure, Message: msg + "; failurePolicy Fail: refused",
			Reason: metav1.StatusReasonTimeout, Code: http.StatusGatewayTimeout,
		}
	}
	return resp
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
		if o.Kind != "" {
			// Kyverno's ValidatingPolicy webhook's words
			// (webhooks/resource/vpol/handler.go).
			verb := "failed"
			if o.Result == engine.Error {
				verb = "error"
			}
			if o.Result == engine.Fail || o.Result == engine.Error {
				text := fmt.Sprintf("Policy %s %s: %s", o.Policy, verb, o.Message)
				if o.Blocking {
					if len(denials) == 0 {
						reason = o.Reason
					}
					denials = append(denials, text)
				}
				if o.Warn {
					resp.Warnings = append(resp.Warnings, text)
				}
			}
			continue
		}
		if !o.Blocking {
			continue
		}
		kind := "ClusterPolicy"
		if o.Namespace != "" {
			kind = "Policy"
		}
		for _, m := range o.Messages {
			if o.Action.IsEnforce() {
				if len(denials) == 0 {
					reason = o.Reason
				}
				denials = append(denials, fmt.Sprintf("%s '%s' rule '%s' denied request: %s", kind, o.Policy, o.Rule, m))
			} else {
				resp.Warnings = append(resp.Warnings, fmt.Sprintf("Validation failed for %s '%s' rule '%s': %s", kind, o.Policy, o.Rule, m))
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
