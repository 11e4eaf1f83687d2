// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package match decides, with Kyverno's own semantics, whether a Kyverno rule
// applies to an admission request, whether a PolicyException exempts the
// request from a rule, and whether a failing rule denies or only audits.
//
// kyvap's fallback engine enforces the rules it could not translate into
// ValidatingAdmissionPolicies; to give the verdicts Kyverno would give, it
// must select requests exactly as Kyverno v1.19 does, quirks included. The
// functions here are pure: the caller gathers everything a decision needs
// (namespace labels, the user's RBAC roles) into a Request first, so they
// can be tested exhaustively without a cluster.
//
// The semantics follow github.com/kyverno/kyverno v1.19.1:
// pkg/engine/utils/match.go (rules), pkg/engine/utils/exceptions.go
// (exceptions), pkg/utils/match (kinds, names, annotations, selectors,
// subjects), pkg/engine/policycontext and pkg/utils/admission (which object
// is matched), pkg/policycache/cache.go and pkg/engine/api/engineresponse.go
// (failure actions). Deliberate deviations are documented where they occur.
// The pieces the translator needs too (wildcards, kind spellings, autogen
// rule names, exception names) are in kyverno, so both select
// alike.
package match

import (
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/kyverno"
)

// ErrUnsupported marks decisions this package cannot make because they need
// JMESPath, which kyvap does not evaluate; the caller must not guess.
var ErrUnsupported = errors.New("unsupported by kyvap's matcher")

// ErrInvalid marks a broken policy: a kind spelling or label selector that
// cannot be parsed. Kyverno treats such a filter as not matching and only
// logs; we report it so the fallback engine can surface the policy bug, and
// still return Kyverno's verdict alongside the error.
var ErrInvalid = errors.New("invalid match filter")

// Request is the admission request as the matcher sees it, with everything
// it needs already gathered (namespace labels and the user's RBAC roles are
// looked up by the caller: gather first, evaluate with pure functions).
type Request struct {
	// Operation is CREATE, UPDATE, DELETE or CONNECT.
	Operation string
	// Kind is the kind of the resource the request addresses, which is what
	// Kyverno matches `kinds` against: for a subresource request the parent
	// resource's kind (v1 Pod for pods/exec, apps/v1 Deployment for
	// deployments/scale), not the AdmissionRequest's kind (PodExecOptions,
	// autoscaling/v1 Scale). Kyverno resolves it from Resource by discovery;
	// a RESTMapper's KindFor(Resource without subresource) gives the same.
	// Left empty, the object's own apiVersion and kind are used, as Kyverno
	// does for requests that carry no kind.
	Kind schema.GroupVersionKind
	// Resource is the requested resource; the matcher does not use it.
	Resource schema.GroupVersionResource
	// SubResource is the requested subresource ("exec", "status", ...).
	SubResource string
	// Namespace is the AdmissionRequest's namespace. The API server sets it
	// to a Namespace's own name on UPDATE and DELETE of that Namespace.
	Namespace string
	// Name is the AdmissionRequest's name. Kyverno matches names against the
	// object's metadata (name, else generateName), never this field; for
	// CONNECT the object is an options object without a name, so a `names`
	// filter never matches pods/exec in Kyverno, nor here.
	Name string
	// Object is the new object, unstructured; nil on DELETE.
	Object map[string]any
	// OldObject is the old object; nil on CREATE. Kyverno matches it only
	// when there is no Object.
	OldObject map[string]any
	// UserInfo is the requesting user.
	UserInfo authenticationv1.UserInfo
	// Roles are the Roles bound to the user, as "namespace:name" (Kyverno's
	// format; RoleRefs computes it).
	Roles []string
	// ClusterRoles are the ClusterRoles bound to the user, by name.
	ClusterRoles []string
	// NamespaceLabels are the labels of the Namespace named by Namespace, as
	// stored (nil if the request is cluster-scoped or the namespace unknown).
	NamespaceLabels map[string]string
}

// view is the request as Kyverno's engine sees it after converting the
// admission request into its resource (pkg/utils/admission/resource.go):
// one object, whose kind and namespace come from the request.
type view struct {
	// present is false when the request carries no object at all.
	present bool
	gvk     schema.GroupVersionKind
	sub     string
	// kind is the object's kind, which Kyverno overwrites with the request's.
	kind string
	// name is metadata.name, else metadata.generateName.
	name string
	// ownName is metadata.name alone: a Namespace's namespace is its name.
	ownName     string
	namespace   string
	labels      map[string]string
	annotations map[string]string
	// nsLabels are the labels a namespaceSelector is checked against: none
	// for cluster-scoped requests and for Namespaces themselves.
	nsLabels map[string]string
	op       kyvernov1.AdmissionOperation
}

func newView(req *Request) view {
	obj := req.Object
	if obj == nil {
		obj = req.OldObject
	}
	u := unstructured.Unstructured{Object: obj}
	v := view{
		present: obj != nil,
		gvk:     req.Kind,
		sub:     req.SubResource,
		kind:    req.Kind.Kind,
		ownName: u.GetName(),
		op:      kyvernov1.AdmissionOperation(req.Operation),
	}
	if req.Kind.Empty() {
		v.gvk, v.sub = u.GroupVersionKind(), ""
		v.kind = v.gvk.Kind
	}
	v.name = v.ownName
	if v.name == "" {
		v.name = u.GetGenerateName()
	}
	switch {
	case v.kind == "Namespace":
		// Kyverno clears a Namespace's namespace.
	case req.Namespace != "":
		v.namespace = req.Namespace
	default:
		v.namespace = u.GetNamespace()
	}
	v.labels = u.GetLabels()
	v.annotations = u.GetAnnotations()
	if v.kind != "Namespace" && v.namespace != "" {
		v.nsLabels = req.NamespaceLabels
	}
	return v
}

// purpose says which of Kyverno's two filter matchers applies; they differ.
type purpose int

const (
	// forRule is a rule's match or exclude (pkg/engine/utils/match.go):
	// operations count, and a namespaceSelector never matches a Namespace.
	forRule purpose = iota
	// forException is a PolicyException's match
	// (pkg/engine/utils/exceptions.go): operations are ignored, and a
	// namespaceSelector is not checked for a Namespace.
	forException
)

// Rule reports whether a Kyverno rule applies to the request: its match
// block matches and its exclude block does not.
//
// Like Kyverno, it matches the new object, or the old one when there is no
// new one (DELETE), and a request with neither never matches. An error
// wraps ErrInvalid and names every unparsable kind or selector the request
// was checked against; the boolean is Kyverno's verdict all the same.
func Rule(rule *kyvernov1.Rule, req *Request) (bool, error) {
	if rule == nil || req == nil {
		return false, errors.New("match: nil rule or request")
	}
	v := newView(req)
	if !v.present {
		return false, nil
	}
	noUser := requestHasNoUser(req)
	matched, err := evalBlock(&rule.MatchResources, func(f kyvernov1.ResourceFilter) (bool, error) {
		if noUser {
			// Kyverno ignores user filters when the request info is empty
			// (background scans): see matchesResourceDescriptionMatchHelper.
			f.UserInfo = kyvernov1.UserInfo{}
		}
		if f.Resources.IsEmpty() && userInfoUnset(f.UserInfo) {
			return false, nil // "match cannot be empty"
		}
		return filterMatches(f, v, req, forRule)
	})
	errs := []error{err}
	if ex := rule.ExcludeResources; ex != nil && !matchResourcesUnset(ex) {
		excluded, err := evalBlock(ex, func(f kyvernov1.ResourceFilter) (bool, error) {
			if f.Resources.IsEmpty() && userInfoUnset(f.UserInfo) {
				return false, nil // an empty exclude filter excludes nothing
			}
			return filterMatches(f, v, req, forRule)
		})
		errs = append(errs, err)
		matched = matched && !excluded
	}
	return matched, joinErrs(errs)
}

// evalBlock combines a match or exclude block's filters the way Kyverno's
// engine picks them: any (one suffices), else all (each must), else the
// legacy inline filter. Every filter is evaluated, so errors do not depend
// on filter order.
func evalBlock(m *kyvernov1.MatchResources, eval func(kyvernov1.ResourceFilter) (bool, error)) (bool, error) {
	filters, all := m.Any, false
	switch {
	case len(m.Any) > 0:
	case len(m.All) > 0:
		filters, all = m.All, true
	default:
		filters = kyvernov1.ResourceFilters{{UserInfo: m.UserInfo, Resources: m.Resources}}
	}
	result := all
	var errs []error
	for _, f := range filters {
		ok, err := eval(f)
		errs = append(errs, err)
		if all {
			result = result && ok
		} else {
			result = result || ok
		}
	}
	return result, joinErrs(errs)
}

// userInfoUnset mirrors Kyverno's reflect.DeepEqual(userInfo, UserInfo{}):
// an explicitly empty list (`roles: []`) counts as set, so a filter holding
// only that is not "empty" and matches every request.
func userInfoUnset(u kyvernov1.UserInfo) bool {
	return u.Roles == nil && u.ClusterRoles == nil && u.Subjects == nil
}

// matchResourcesUnset mirrors Kyverno's MatchResources.IsEmpty, which
// decides whether an exclude block is looked at at all.
func matchResourcesUnset(m *kyvernov1.MatchResources) bool {
	return len(m.Any) == 0 && len(m.All) == 0 && m.Resources.IsEmpty() && userInfoUnset(m.UserInfo)
}

// requestHasNoUser mirrors Kyverno's DeepEqual(admissionInfo, RequestInfo{}).
func requestHasNoUser(req *Request) bool {
	u := req.UserInfo
	return u.Username == "" && u.UID == "" && u.Groups == nil && u.Extra == nil &&
		req.Roles == nil && req.ClusterRoles == nil
}

// filterMatches reports whether every attribute a resource filter sets
// holds for the request (Kyverno: AND across attributes, OR within a list).
func filterMatches(f kyvernov1.ResourceFilter, v view, req *Request, p purpose) (bool, error) {
	d := f.Resources
	ok := true
	var errs []error
	if p == forRule && len(d.Operations) > 0 && !containsOp(d.Operations, v.op) {
		// Kyverno returns here, before looking at anything else.
		return false, nil
	}
	if len(d.Kinds) > 0 {
		m, err := matchKinds(d.Kinds, v.gvk, v.sub)
		errs = append(errs, err)
		ok = ok && m
	}
	if d.Name != "" && !kyverno.WildcardMatch(d.Name, v.name) {
		ok = false
	}
	if len(d.Names) > 0 && !kyverno.CheckPatterns(d.Names, v.name) {
		ok = false
	}
	if len(d.Namespaces) > 0 {
		ns := v.namespace
		if v.kind == "Namespace" {
			ns = v.ownName
		}
		ok = ok && kyverno.CheckPatterns(d.Namespaces, ns)
	}
	if len(d.Annotations) > 0 && !annotationsMatch(d.Annotations, v.annotations) {
		ok = false
	}
	if d.Selector != nil {
		m, err := selectorMatches(d.Selector, v.labels)
		errs = append(errs, wrapSelectorErr("selector", err))
		ok = ok && m
	}
	if d.NamespaceSelector != nil {
		var check bool
		switch p {
		case forRule:
			if v.kind == "Namespace" {
				// "namespace selector is not applicable for namespace resource"
				ok = false
			}
			check = v.kind != "Namespace" && (v.kind != "" || containsString(d.Kinds, "*"))
		case forException:
			check = v.kind != "Namespace" && v.kind != ""
		}
		if check {
			m, err := selectorMatches(d.NamespaceSelector, v.nsLabels)
			errs = append(errs, wrapSelectorErr("namespaceSelector", err))
			ok = ok && m
		}
	}
	if !userMatches(f.UserInfo, req) {
		ok = false
	}
	return ok, joinErrs(errs)
}

// userMatches is Kyverno's user filter: every list that is set must match;
// roles and cluster roles by exact name, subjects with wildcards.
func userMatches(u kyvernov1.UserInfo, req *Request) bool {
	if len(u.Roles) > 0 && !intersects(u.Roles, req.Roles) {
		return false
	}
	if len(u.ClusterRoles) > 0 && !intersects(u.ClusterRoles, req.ClusterRoles) {
		return false
	}
	if len(u.Subjects) > 0 && !subjectsMatch(u.Subjects, req.UserInfo) {
		return false
	}
	return true
}

// subjectsMatch is Kyverno's CheckSubjects: a ServiceAccount subject is
// compared, as a pattern, with the username
// "system:serviceaccount:<namespace>:<name>"; a Group with each of the
// user's groups; a User with the username. Other kinds never match.
func subjectsMatch(subjects []rbacv1.Subject, user authenticationv1.UserInfo) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if kyverno.WildcardMatch("system:serviceaccount:"+s.Namespace+":"+s.Name, user.Username) {
				return true
			}
		case rbacv1.GroupKind:
			if kyverno.CheckPatterns([]string{s.Name}, user.Groups...) {
				return true
			}
		case rbacv1.UserKind:
			if kyverno.WildcardMatch(s.Name, user.Username) {
				return true
			}
		}
	}
	return false
}

// Exception reports whether a PolicyException exempts the request from the
// named policy's rule: one of its entries names the policy exactly and the
// rule by a wildcard pattern, and its match block matches.
//
// policy is the ClusterPolicy's name ("<namespace>/<name>" for a Policy).
// rule is the name of the rule as evaluated: for rules Kyverno generates
// for pod controllers that is the generated name
// (kyverno.AutogenRuleName, kyverno.AutogenCronJobRuleName), and, as in
// Kyverno, an exception naming only the original rule does not cover it.
//
// The exception's JMESPath conditions are not read here: where they are
// set, the exception applies where they hold too
// (clusterpolicy.ExceptionConditions). As with Rule, an error wrapping ErrInvalid
// reports broken kinds or selectors next to Kyverno's verdict.
func Exception(ex *kyvernov2.PolicyException, policy, rule string, req *Request) (bool, error) {
	if ex == nil || req == nil {
		return false, errors.New("match: nil exception or request")
	}
	if !kyverno.ExceptionContains(ex.Spec.Exceptions, policy, rule) {
		return false, nil
	}
	v := newView(req)
	eval := func(f kyvernov1.ResourceFilter) (bool, error) {
		if f.Resources.IsEmpty() && f.UserInfo.IsEmpty() {
			return false, nil // "statement cannot be empty"
		}
		return filterMatches(f, v, req, forException)
	}
	var matched bool
	var err error
	switch m := ex.Spec.Match; {
	case len(m.Any) > 0:
		matched, err = evalBlock(&kyvernov1.MatchResources{Any: m.Any}, eval)
	case len(m.All) > 0:
		matched, err = evalBlock(&kyvernov1.MatchResources{All: m.All}, eval)
	default:
		// An exception without filters exempts nothing.
	}
	return matched, err
}

func containsOp(ops []kyvernov1.AdmissionOperation, op kyvernov1.AdmissionOperation) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// intersects is Kyverno's SliceContains(a, b...): exact, no wildcards.
func intersects(a, b []string) bool {
	for _, x := range b {
		if containsString(a, x) {
			return true
		}
	}
	return false
}

func wrapSelectorErr(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", field, err)
}

// joinErrs joins the non-nil errors, or returns nil.
func joinErrs(errs []error) error {
	return errors.Join(errs...)
}
