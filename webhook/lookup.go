// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/kyverno/match"
)

// ClusterLookup answers the engine's questions from the manager's cache
// (namespaces, RBAC bindings, parameter objects; informers start on first
// use, so a cluster without role-based rules never caches its bindings) and
// from SubjectAccessReviews for the CEL `authorizer`.
type ClusterLookup struct {
	Reader client.Reader
	// APIReader reads from the API server: a parameter named by a binding
	// but missing from the cache is read there before it counts as
	// missing, as the API server does for a VAP (its CollectParams falls
	// back to a direct read): an object created a moment ago is not in
	// the cache yet, and a rule bridged through the webhook would deny
	// with "no params found" where the VAP admits. nil: the cache alone.
	APIReader client.Reader
	// Writer creates SubjectAccessReviews.
	Writer client.Client

	// access remembers, per parameter resource, whether kyvap may list and
	// watch it (paramAccess).
	access paramAccess
}

var _ Lookup = &ClusterLookup{}

// Namespace implements Lookup.
func (l *ClusterLookup) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := l.Reader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return ns, nil
}

// Roles implements Lookup.
func (l *ClusterLookup) Roles(ctx context.Context, user authenticationv1.UserInfo, namespace string) ([]string, []string, error) {
	var rbs rbacv1.RoleBindingList
	if err := l.Reader.List(ctx, &rbs); err != nil {
		return nil, nil, fmt.Errorf("listing RoleBindings: %w", err)
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := l.Reader.List(ctx, &crbs); err != nil {
		return nil, nil, fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	roles, clusterRoles := RolesOf(rbs.Items, crbs.Items, user, namespace)
	return roles, clusterRoles, nil
}

// RolesOf resolves the Roles ("namespace:name") and ClusterRoles bound to a
// user the way Kyverno does (see match.RoleRefs).
func RolesOf(rbs []rbacv1.RoleBinding, crbs []rbacv1.ClusterRoleBinding, user authenticationv1.UserInfo, namespace string) (roles, clusterRoles []string) {
	rbPtrs := make([]*rbacv1.RoleBinding, len(rbs))
	for i := range rbs {
		rbPtrs[i] = &rbs[i]
	}
	crbPtrs := make([]*rbacv1.ClusterRoleBinding, len(crbs))
	for i := range crbs {
		crbPtrs[i] = &crbs[i]
	}
	return match.RoleRefs(rbPtrs, crbPtrs, user, namespace)
}

// Params implements engine.ParamSource with engine.ResolveParams, reading
// parameter objects from the cache; the scope of a paramKind is the REST
// mapper's (discovery).
func (l *ClusterLookup) Params(ctx context.Context, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, namespace string) ([]runtime.Object, error) {
	return engine.ResolveParams(ctx, clusterParams{l}, kind, ref, namespace)
}

// clusterParams is a ClusterLookup as engine.ParamObjects.
type clusterParams struct{ l *ClusterLookup }

func (c clusterParams) Scope(gvk schema.GroupVersionKind) (namespaced, known bool, err error) {
	mapping, err := c.l.Writer.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, false, err
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace, true, nil
}

func (c clusterParams) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	if err := c.l.access.check(ctx, c.l.Writer, gvk); err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := c.l.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && c.l.APIReader != nil {
		err = c.l.APIReader.Get(ctx, key, obj)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return obj, nil
}

func (c clusterParams) List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	if err := c.l.access.check(ctx, c.l.Writer, gvk); err != nil {
		return nil, err
	}
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	opts = append(opts, client.MatchingLabelsSelector{Selector: selector})
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.l.Reader.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	out := make([]runtime.Object, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// KindFor implements Lookup through the manager's REST mapper (discovery).
func (l *ClusterLookup) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return l.Writer.RESTMapper().KindFor(resource)
}

// Authorizer implements Lookup: checks become SubjectAccessReviews.
func (l *ClusterLookup) Authorizer() authorizer.UnconditionalAuthorizer {
	return sarAuthorizer{c: l.Writer}
}

// sarAuthorizer asks the API server, as the API server asks its authorizer
// when it evaluates a VAP's `authorizer` checks.
type sarAuthorizer struct{ c client.Client }

func (a sarAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	sar := &authorizationv1.SubjectAccessReview{}
	if u := attrs.GetUser(); u != nil {
		sar.Spec.User, sar.Spec.UID, sar.Spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); len(extra) > 0 {
			sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
			for k, v := range extra {
				sar.Spec.Extra[k] = v
			}
		}
	}
	if attrs.IsResourceRequest() {
		sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: attrs.GetNamespace(), Verb: attrs.GetVerb(), Group: attrs.GetAPIGroup(),
			Version: attrs.GetAPIVersion(), Resource: attrs.GetResource(), Subresource: attrs.GetSubresource(), Name: attrs.GetName(),
		}
	} else {
		sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.GetPath(), Verb: attrs.GetVerb()}
	}
	if err := a.c.Create(ctx, sar); err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	switch {
	case sar.Status.Allowed:
		return authorizer.DecisionAllow, sar.Status.Reason, nil
	case sar.Status.Denied:
		return authorizer.DecisionDeny, sar.Status.Reason, nil
	default:
		return authorizer.DecisionNoOpinion, sar.Status.Reason, nil
	}
}
