// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/translate"
)

// Cluster is a live cluster running kyvap that suites are replayed against
// (kyvap test --cluster, and the conformance tests' replay).
type Cluster struct {
	// Config is an administrator's configuration: it creates the suite's
	// objects; requests are replayed with it, or impersonating the suite's
	// user.
	Config *rest.Config
	// Scheme knows the Kyverno types (api/v1, api/v2) and the built-in ones.
	Scheme *runtime.Scheme
	// StatusCondition is the condition type kyvap writes on a policy once
	// it has reconciled it; empty means DefaultStatusCondition.
	StatusCondition string
	// Settle bounds how long a request is retried while the API server's
	// answer differs from the expectation: VAPs and webhook configurations
	// take effect asynchronously. Zero means 15 seconds.
	Settle time.Duration

	// namespaces are the namespaces the replay created; Close deletes them.
	// They outlive a suite: a namespace takes a while to terminate, and the
	// next suite may need the same one.
	namespaces []string
}

// Close deletes the namespaces the replays created, and with them whatever
// is left in them. It works on a context of its own.
func (c *Cluster) Close() error {
	if len(c.namespaces) == 0 {
		return nil
	}
	cl, err := client.New(c.Config, client.Options{Scheme: c.Scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, name := range c.namespaces {
		if err := cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting namespace %s: %w", name, err))
		}
	}
	c.namespaces = nil
	return errors.Join(errs...)
}

// DefaultStatusCondition is kyvap's condition type on a ClusterPolicy
// (controllers.ConditionType; the CLI does not link the controllers, a test
// keeps the two equal).
const DefaultStatusCondition = "kyvap.io/Enforced"

// ImpersonationGroup is the group a suite's impersonated user is put in,
// bound to cluster-admin for the replay so that it may send the suite's
// requests at all.
const ImpersonationGroup = "kyvap:test"

// IsLocal reports whether a rest config points at this machine (loopback
// addresses or localhost): kyvap test --cluster refuses other clusters
// unless told otherwise.
func IsLocal(cfg *rest.Config) bool {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		u, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			return false
		}
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Installation is what Install created or changed in the cluster; Remove
// undoes it.
type Installation struct {
	cluster *Cluster
	c       client.Client
	// created objects, deleted in reverse order.
	created []client.Object
	// labels (annotations) of pre-existing namespaces before the suite
	// set its own.
	namespaceLabels, namespaceAnnotations map[string]map[string]string
	policies                              []string
}

// Install creates what a replay of the suite needs, except its policies:
// the CRDs (waiting until they are served), the namespaces (with the values' labels; a namespace that exists gets
// them and has its own restored by Remove), the parameter objects that do
// not exist yet, the PolicyExceptions (kyverno.io and policies.kyverno.io), and, for a suite with a user, that
// user's role bindings. Remove undoes it, also when Install fails half way.
func (c *Cluster) Install(ctx context.Context, s *Suite) (*Installation, error) {
	cl, err := client.New(c.Config, client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, err
	}
	in := &Installation{cluster: c, c: cl, namespaceLabels: map[string]map[string]string{}}
	for _, ns := range sortedNamespaces(s.clusterNamespaces()) {
		if err := in.namespace(ctx, ns.Name, ns.Labels); err != nil {
			return in, err
		}
		if err := in.annotateNamespace(ctx, ns.Name, ns.Annotations); err != nil {
			return in, err
		}
	}
	resources := map[string]bool{}
	for _, r := range s.Resources {
		resources[r.Key()] = true
	}
	for i := range s.Params {
		p := s.Params[i].DeepCopy()
		key := strings.Join([]string{p.GetAPIVersion(), p.GetKind(), p.GetNamespace(), p.GetName()}, "/")
		if resources[key] {
			continue // one of the resources under test, not a parameter
		}
		if ns := p.GetNamespace(); ns != "" {
			if err := in.namespace(ctx, ns, nil); err != nil {
				return in, err
			}
		}
		p.SetResourceVersion("")
		if err := in.create(ctx, p, true); err != nil {
			return in, fmt.Errorf("parameter %s %s: %w", p.GetKind(), p.GetName(), err)
		}
	}
	// The context file's objects are the cluster's, for Kyverno's resource
	// library: a ValidatingPolicy's VAP reads one as its parameter where
	// kyvap wrote a resource.Get as it (translate/libforms). Namespaces
	// are created above; kinds the cluster does not serve are left out
	// (no VAP can read them).
	for i := range s.ContextResources {
		o := s.ContextResources[i].DeepCopy()
		key := strings.Join([]string{o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()}, "/")
		if o.GetAPIVersion() == "v1" && o.GetKind() == "Namespace" || resources[key] {
			continue
		}
		if ns := o.GetNamespace(); ns != "" {
			if err := in.namespace(ctx, ns, nil); err != nil {
				return in, err
			}
		}
		o.SetResourceVersion("")
		if err := in.create(ctx, o, true); err != nil && !meta.IsNoMatchError(err) {
			return in, fmt.Errorf("context resource %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	for i := range s.Exceptions {
		ex := s.Exceptions[i].DeepCopy()
		ex.ResourceVersion = ""
		if err := in.namespace(ctx, ex.Namespace, nil); err != nil {
			return in, err
		}
		if err := in.create(ctx, ex, false); err != nil {
			return in, fmt.Errorf("PolicyException %s/%s: %w", ex.Namespace, ex.Name, err)
		}
	}
	for i := range s.CELExceptions {
		ex := s.CELExceptions[i].DeepCopy()
		ex.ResourceVersion, ex.UID = "", ""
		ex.APIVersion, ex.Kind = policiesv1.GroupVersion.String(), "PolicyException"
		if ex.Namespace == "" {
			ex.Namespace = "default"
		}
		if err := in.namespace(ctx, ex.Namespace, nil); err != nil {
			return in, err
		}
		if err := in.create(ctx, ex, false); err != nil {
			return in, fmt.Errorf("policies.kyverno.io PolicyException %s/%s: %w", ex.Namespace, ex.Name, err)
		}
	}
	if err := in.addCRDs(ctx, s.CRDs); err != nil {
		return in, err
	}
	if s.UserInfo != nil {
		if err := in.bindUser(ctx, s); err != nil {
			return in, err
		}
	}
	return in, nil
}

// PolicyStatusTimeout is how long a replay waits for kyvap's status of a
// policy it installs: translating a large compiled classic policy takes
// seconds on an idle machine (its CEL type-checked at the cluster's
// version, its VAP form specialized), and many times that on a loaded one
// or under the race detector.
const PolicyStatusTimeout = 3 * time.Minute

// namespace ensures a namespace with the labels (plus the name label).
func (in *Installation) namespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{}
	err := in.c.Get(ctx, client.ObjectKey{Name: name}, ns)
	deadline := time.Now().Add(time.Minute)
	for err == nil && ns.DeletionTimestamp != nil && time.Now().Before(deadline) {
		// Deleted by an earlier run: wait until it is gone.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		err = in.c.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	if apierrors.IsNotFound(err) {
		err = in.retried(ctx, func() error {
			return in.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		})
		if err != nil {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
		in.cluster.namespaces = append(in.cluster.namespaces, name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp != nil {
		return fmt.Errorf("namespace %s is being deleted (by an earlier run?) and still there after a minute; a cluster without a namespace controller never finishes deleting namespaces", name)
	}
	changed := false
	for k, v := range labels {
		if ns.Labels[k] != v {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if _, saved := in.namespaceLabels[name]; !saved {
		in.namespaceLabels[name] = ns.Labels
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	if err := in.c.Patch(ctx, ns, patch); err != nil {
		return fmt.Errorf("labelling namespace %s: %w", name, err)
	}
	return nil
}

// annotateNamespace adds the annotations (of the values or the context
// file) to a namespace the installation ensured; the ones it replaces are
// restored with its labels.
func (in *Installation) annotateNamespace(ctx context.Context, name string, annotations map[string]string) error {
	if len(annotations) == 0 {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := in.c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	changed := false
	for k, v := range annotations {
		if ns.Annotations[k] != v {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if _, saved := in.namespaceAnnotations[name]; !saved {
		if in.namespaceAnnotations == nil {
			in.namespaceAnnotations = map[string]map[string]string{}
		}
		in.namespaceAnnotations[name] = ns.Annotations
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Annotations == nil {
		ns.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		ns.Annotations[k] = v
	}
	if err := in.c.Patch(ctx, ns, patch); err != nil {
		return fmt.Errorf("annotating namespace %s: %w", name, err)
	}
	return nil
}

// create creates obj and records it for Remove; an object that exists is
// an error unless keepExisting (it is then left alone, and not removed).
func (in *Installation) create(ctx context.Context, obj client.Object, keepExisting bool) error {
	err := in.retried(ctx, func() error { return in.c.Create(ctx, obj) })
	if apierrors.IsAlreadyExists(err) && keepExisting {
		return nil
	}
	if err != nil {
		return err
	}
	in.created = append(in.created, obj)
	return nil
}

// retried retries a write the API server refuses for a moment: an
// admission denial from a policy deleted just before (the API server
// drops its VAPs asynchronously), or a namespace still terminating.
func (in *Installation) retried(ctx context.Context, write func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := write()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		msg := err.Error()
		if !strings.Contains(msg, "denied request") && !strings.Contains(msg, "denied the request") && !strings.Contains(msg, "being terminated") {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// bindUser gives the suite's user the right to send its requests and the
// roles the suite names, as Kyverno's CLI assumes them.
func (in *Installation) bindUser(ctx context.Context, s *Suite) error {
	suffix := strings.ToLower(strings.Trim(nonName.ReplaceAllString(s.Test.Name, "-"), "-"))
	if suffix == "" {
		suffix = "suite"
	}
	objs := []client.Object{&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kyvap-test-admin-" + suffix},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: ImpersonationGroup}},
	}}
	info := s.UserInfo.AdmissionUserInfo
	subject := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: info.Username}
	if rest, ok := strings.CutPrefix(info.Username, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
		}
	}
	for i, role := range s.UserInfo.Roles {
		ns, name, ok := strings.Cut(role, ":")
		if !ok {
			return fmt.Errorf("userinfo role %q is not namespace:name", role)
		}
		if err := in.namespace(ctx, ns, nil); err != nil {
			return err
		}
		objs = append(objs, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("kyvap-test-%s-%d", suffix, i)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{subject},
		})
	}
	for i, role := range s.UserInfo.ClusterRoles {
		objs = append(objs, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kyvap-test-%s-%d", suffix, i)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		})
	}
	for _, obj := range objs {
		if err := in.create(ctx, obj, false); err != nil {
			return fmt.Errorf("binding %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// UserConfig is the configuration requests of the suite are sent with:
// the administrator's, or impersonating the suite's user (who is also put
// in ImpersonationGroup).
func (c *Cluster) UserConfig(s *Suite) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	if s.UserInfo != nil {
		info := s.UserInfo.AdmissionUserInfo
		cfg.Impersonate = rest.ImpersonationConfig{UserName: info.Username, Groups: append(append([]string{}, info.Groups...), ImpersonationGroup)}
	}
	return cfg
}

// AddPolicies creates the suite's policies and waits until kyvap reports
// each of them in its status for the current generation.
func (in *Installation) AddPolicies(ctx context.Context, policies []kyvernov1.ClusterPolicy, timeout time.Duration) error {
	for i := range policies {
		p := policies[i].DeepCopy()
		p.ResourceVersion, p.UID = "", ""
		var obj client.Object = p
		if p.Kind == "Policy" {
			// A namespaced Policy, carried as a ClusterPolicy of kind Policy.
			np := &kyvernov1.Policy{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
			if np.Namespace == "" {
				np.Namespace = "default"
			}
			if err := in.namespace(ctx, np.Namespace, nil); err != nil {
				return err
			}
			obj = np
		} else {
			p.Namespace, p.TypeMeta = "", metav1.TypeMeta{}
		}
		if err := in.create(ctx, obj, false); err != nil {
			return fmt.Errorf("%s %s: %w", policyKind(obj), p.Name, err)
		}
		in.policies = append(in.policies, p.Name)
	}
	for i := range policies {
		if err := in.waitForStatus(ctx, &policies[i], timeout); err != nil {
			return err
		}
	}
	return nil
}

// RemovePolicies deletes the policies AddPolicies created and waits until
// their VAPs are gone, leaving the rest of the installation in place.
func (in *Installation) RemovePolicies(ctx context.Context) error {
	names := map[string]bool{}
	for _, name := range in.policies {
		names[name] = true
	}
	var kept []client.Object
	var errs []error
	for _, obj := range in.created {
		if !isPolicy(obj) || !names[obj.GetName()] {
			kept = append(kept, obj)
			continue
		}
		if err := in.c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", policyKind(obj), obj.GetName(), err))
			kept = append(kept, obj)
		}
	}
	in.created = kept
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := in.waitForVAPsGone(wctx); err != nil {
		errs = append(errs, err)
	}
	in.policies = nil
	return errors.Join(errs...)
}

// isPolicy: a ClusterPolicy, ValidatingPolicy or NamespacedValidatingPolicy.
func isPolicy(obj client.Object) bool {
	switch o := obj.(type) {
	case *kyvernov1.ClusterPolicy, *kyvernov1.Policy:
		return true
	case *unstructured.Unstructured:
		gvk := o.GroupVersionKind()
		return gvk.Group == policiesv1.GroupName && (gvk.Kind == "ValidatingPolicy" || gvk.Kind == "NamespacedValidatingPolicy")
	}
	return false
}

func policyKind(obj client.Object) string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.GetKind()
	case *kyvernov1.Policy:
		return "Policy"
	}
	return "ClusterPolicy"
}

// AddValidatingPolicy creates a ValidatingPolicy or NamespacedValidatingPolicy
// (and the latter's namespace, if need be) and waits until kyvap reports
// it in its status (status.conditionStatus.conditions) for the current
// generation.
func (in *Installation) AddValidatingPolicy(ctx context.Context, vp *ValidatingPolicy, timeout time.Duration) error {
	obj, err := vp.object()
	if err != nil {
		return fmt.Errorf("%s %s: %w", vp.Kind, vp.Key(), err)
	}
	if ns := obj.GetNamespace(); ns != "" {
		if err := in.namespace(ctx, ns, nil); err != nil {
			return err
		}
	}
	if err := in.create(ctx, obj, false); err != nil {
		return fmt.Errorf("%s %s: %w", vp.Kind, vp.Key(), err)
	}
	in.policies = append(in.policies, obj.GetName())
	return in.waitForVpolStatus(ctx, vp, timeout)
}

// object is the policy to create: the document as written (at
// policies.kyverno.io/v1, the same spec in every version kyvap reads),
// without its server-set fields; a NamespacedValidatingPolicy without a
// namespace is in "default".
func (v *ValidatingPolicy) object() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if len(v.Raw) > 0 {
		if err := json.Unmarshal(v.Raw, &u.Object); err != nil {
			return nil, err
		}
	} else {
		var src any = v.Cluster
		if v.Namespaced != nil {
			src = v.Namespaced
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
		if err != nil {
			return nil, err
		}
		u.Object = m
	}
	u.SetAPIVersion(policiesv1.GroupVersion.String())
	u.SetKind(v.Kind)
	if v.Namespaced != nil {
		u.SetNamespace(v.Namespace())
	} else {
		u.SetNamespace("")
	}
	u.SetResourceVersion("")
	u.SetUID("")
	u.SetGeneration(0)
	u.SetManagedFields(nil)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

func (in *Installation) waitForVpolStatus(ctx context.Context, vp *ValidatingPolicy, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	condition := in.cluster.StatusCondition
	if condition == "" {
		condition = DefaultStatusCondition
	}
	key := client.ObjectKey{Namespace: vp.Namespace(), Name: vp.Name()}
	var last string
	for {
		var err error
		var generation int64
		var conditions []metav1.Condition
		if vp.Namespaced != nil {
			p := &policiesv1.NamespacedValidatingPolicy{}
			err = in.c.Get(ctx, key, p)
			generation, conditions = p.Generation, p.Status.ConditionStatus.Conditions
		} else {
			p := &policiesv1.ValidatingPolicy{}
			err = in.c.Get(ctx, key, p)
			generation, conditions = p.Generation, p.Status.ConditionStatus.Conditions
		}
		if err == nil {
			c := meta.FindStatusCondition(conditions, condition)
			if c != nil && c.ObservedGeneration == generation {
				return nil
			}
			last = "no status for the current generation yet"
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: kyvap did not report it within %s (is kyvap running, with the policies.kyverno.io CRDs installed?): %s", vp.Kind, vp.Key(), timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (in *Installation) waitForStatus(ctx context.Context, policy *kyvernov1.ClusterPolicy, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	kind, key := "ClusterPolicy", client.ObjectKey{Name: policy.Name}
	if policy.Kind == "Policy" {
		kind, key = "Policy", client.ObjectKey{Namespace: policy.Namespace, Name: policy.Name}
		if key.Namespace == "" {
			key.Namespace = "default"
		}
	}
	for {
		var status *kyvernov1.PolicyStatus
		var generation int64
		var err error
		if kind == "Policy" {
			p := &kyvernov1.Policy{}
			err = in.c.Get(ctx, key, p)
			status, generation = &p.Status, p.Generation
		} else {
			p := &kyvernov1.ClusterPolicy{}
			err = in.c.Get(ctx, key, p)
			status, generation = &p.Status, p.Generation
		}
		if err == nil {
			condition := in.cluster.StatusCondition
			if condition == "" {
				condition = DefaultStatusCondition
			}
			c := meta.FindStatusCondition(status.Conditions, condition)
			if c != nil && c.ObservedGeneration == generation {
				return nil
			}
			last = "no status for the current generation yet"
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: kyvap did not report it within %s (is kyvap running?): %s", kind, key, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Remove deletes what the installation created, newest first, restores
// the labels of namespaces it changed and waits until the VAPs of its
// policies are gone. It works on a context of its own, so an interrupted
// replay still cleans up.
func (in *Installation) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for i := len(in.created) - 1; i >= 0; i-- {
		obj := in.created[i]
		// Retried: the policies, deleted first, may still be enforced for a
		// moment (an old object under a policy against deletes).
		if err := in.retried(ctx, func() error { return in.c.Delete(ctx, obj) }); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err))
		}
	}
	for name, labels := range in.namespaceLabels {
		ns := &corev1.Namespace{}
		if err := in.c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		ns.Labels = labels
		if err := in.c.Update(ctx, ns); err != nil {
			errs = append(errs, fmt.Errorf("restoring the labels of namespace %s: %w", name, err))
		}
	}
	for name, annotations := range in.namespaceAnnotations {
		ns := &corev1.Namespace{}
		if err := in.c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		ns.Annotations = annotations
		if err := in.c.Update(ctx, ns); err != nil {
			errs = append(errs, fmt.Errorf("restoring the annotations of namespace %s: %w", name, err))
		}
	}
	if err := in.waitForVAPsGone(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// waitForVAPsGone waits until no VAP of the installation's policies is
// left (they are deleted by the garbage collector through their owner
// references).
func (in *Installation) waitForVAPsGone(ctx context.Context) error {
	names := map[string]bool{}
	for _, p := range in.policies {
		names[p] = true
	}
	if len(names) == 0 {
		return nil
	}
	for {
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		if err := in.c.List(ctx, &vaps, client.MatchingLabels{translate.LabelManagedBy: translate.ManagedByValue}); err != nil {
			return err
		}
		var left []string
		for _, v := range vaps.Items {
			if names[v.Annotations[translate.AnnotationPolicy]] {
				left = append(left, v.Name)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Strings(left)
			return fmt.Errorf("ValidatingAdmissionPolicies still there after their policies were deleted: %v", left)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Answer is the API server's answer to one request.
type Answer struct {
	Allowed  bool
	Denial   string
	Warnings []string
	// NotAdmissible: the API server refused the object before admission
	// (invalid, unknown kind, already there): no verdict.
	NotAdmissible error
}

func (a Answer) String() string {
	switch {
	case a.NotAdmissible != nil:
		return "refused before admission: " + a.NotAdmissible.Error()
	case a.Allowed:
		return fmt.Sprintf("allowed, warnings %q", a.Warnings)
	}
	return "denied: " + a.Denial
}

// Ask sends a request as a server-side dry run with cfg: a create of the
// request's object, an update of it (the old object must exist), or a
// delete. Nothing is stored.
func (c *Cluster) Ask(ctx context.Context, cfg *rest.Config, req *admissionv1.AdmissionRequest, obj *unstructured.Unstructured) Answer {
	var warnings []string
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = warningSink{&warnings}
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		return Answer{NotAdmissible: err}
	}
	obj = obj.DeepCopy()
	switch req.Operation {
	case admissionv1.Update:
		current := &unstructured.Unstructured{}
		current.SetGroupVersionKind(obj.GroupVersionKind())
		if err = cl.Get(ctx, client.ObjectKeyFromObject(obj), current); err == nil {
			obj.SetResourceVersion(current.GetResourceVersion())
			err = cl.Update(ctx, obj, client.DryRunAll)
		}
	case admissionv1.Delete:
		err = cl.Delete(ctx, obj, client.DryRunAll)
	default:
		obj.SetResourceVersion("")
		err = cl.Create(ctx, obj, client.DryRunAll)
	}
	if err == nil {
		return Answer{Allowed: true, Warnings: warnings}
	}
	msg := err.Error()
	if !strings.Contains(msg, "denied request") && !strings.Contains(msg, "denied the request") &&
		(apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err)) {
		return Answer{NotAdmissible: err}
	}
	return Answer{Denial: msg, Warnings: warnings}
}

type warningSink struct{ into *[]string }

func (w warningSink) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	*w.into = append(*w.into, text)
}
