// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyvap/kyvap/kyverno"
)

// Value keys of a values file that shape the admission request, as Kyverno's
// CLI reads them back from its JSON context (processor.makePolicyContext).
const (
	valueOperation = "request.operation"
	valueObject    = "request.object"
	valueOldObject = "request.oldObject"
)

// requestValues are the values that apply to one policy and resource:
// global values overridden by the policy's values for the resource (by
// name), as Kyverno's Variables.ComputeVariables.
func (s *Suite) requestValues(policy, resource string) map[string]any {
	out := map[string]any{}
	if s.Values == nil {
		return out
	}
	for k, v := range s.Values.GlobalValues {
		out[k] = v
	}
	for _, p := range s.Values.Policies {
		if p.Name != policy {
			continue
		}
		for _, r := range p.Resources {
			if r.Name != resource {
				continue
			}
			for k, v := range r.Values {
				out[k] = v
			}
		}
	}
	return out
}

// operationFor is the operation Kyverno's CLI simulates for a policy and a
// resource: the test result's, else request.operation from the values,
// else CREATE. CONNECT from a values file is not simulated: Kyverno's CLI
// falls back to CREATE for it.
func (s *Suite) operationFor(policy, resource, resultOperation string) admissionv1.Operation {
	if resultOperation != "" {
		return admissionv1.Operation(resultOperation)
	}
	switch op, _ := s.requestValues(policy, resource)[valueOperation].(string); op {
	case "UPDATE":
		return admissionv1.Update
	case "DELETE":
		return admissionv1.Delete
	default:
		return admissionv1.Create
	}
}

// requestSpec is everything that makes one admission request.
type requestSpec struct {
	resource  *Resource
	operation admissionv1.Operation
	// object and oldObject overrides from the values (request.object,
	// request.oldObject), merged into the resource as Kyverno merges
	// variables into its JSON context.
	objectPatch, oldObjectPatch map[string]any
}

// key identifies the request, to evaluate each distinct one once.
func (r *requestSpec) key() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(r.objectPatch) // maps encode with sorted keys; errors impossible for decoded JSON
	_ = enc.Encode(r.oldObjectPatch)
	return fmt.Sprintf("%s|%s|%s", r.resource.Key(), r.operation, hex.EncodeToString(h.Sum(nil))[:16])
}

// requestFor is the request a test result evaluates a policy with.
func (s *Suite) requestFor(policy string, res *Resource, resultOperation string) requestSpec {
	values := s.requestValues(policy, res.Object.GetName())
	spec := requestSpec{resource: res, operation: s.operationFor(policy, res.Object.GetName(), resultOperation)}
	spec.objectPatch = valuesUnder(values, valueObject)
	spec.oldObjectPatch = valuesUnder(values, valueOldObject)
	return spec
}

// valuesUnder is the patch the values make of the object at root
// (request.object or request.oldObject): the value of root itself when it
// is a map, merged with the values of the paths under it
// ("request.object.metadata.labels.app", quoted segments allowed), which
// Kyverno's CLI sets in its JSON context as nested maps (AddVariable
// splits a key on dots as a CSV record) and reads the object back from.
// Keys are applied in sorted order, so the patch is deterministic.
func valuesUnder(values map[string]any, root string) map[string]any {
	var patch map[string]any
	if m, ok := values[root].(map[string]any); ok {
		patch = runtime.DeepCopyJSON(m)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		if strings.HasPrefix(k, root+".") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		reader := csv.NewReader(strings.NewReader(k))
		reader.Comma = '.'
		fields, err := reader.Read()
		if err != nil || len(fields) < 3 {
			continue
		}
		nested := values[k]
		for i := len(fields) - 1; i >= 2; i-- {
			nested = map[string]any{fields[i]: nested}
		}
		if patch == nil {
			patch = map[string]any{}
		}
		mergeMaps(nested.(map[string]any), patch)
	}
	return patch
}

// vpolRequestFor is the request Kyverno's CLI evaluates a ValidatingPolicy
// with (processor/operation.go): the result's operation, else the global
// request.operation, else CREATE; no values patch the objects, and no
// per-policy value applies.
func (s *Suite) vpolRequestFor(res *Resource, resultOperation string) requestSpec {
	return requestSpec{resource: res, operation: s.operationFor("", res.Object.GetName(), resultOperation)}
}

// mergeMaps merges src into dst like Kyverno's JSON context: maps merge
// recursively, anything else replaces.
func mergeMaps(src, dst map[string]any) {
	for k, v := range src {
		if next, ok := v.(map[string]any); ok {
			if d, ok := dst[k].(map[string]any); ok {
				mergeMaps(next, d)
				continue
			}
			dst[k] = runtime.DeepCopyJSONValue(next)
			continue
		}
		dst[k] = runtime.DeepCopyJSONValue(v)
	}
}

// requestBuilder turns request specs into admission requests.
type requestBuilder struct {
	suite    *Suite
	resolver kyverno.KindResolver
}

// admissionRequest builds the request the API server would send for the
// spec, shaped like Kyverno's CLI (processor.AdmissionRequestShape): CREATE
// has the object only, UPDATE the object as both object and oldObject, DELETE
// the oldObject only. The resource is resolved with the static resolver (and
// the values' subresource mappings); notes explain approximations.
func (b *requestBuilder) admissionRequest(spec requestSpec) (*admissionv1.AdmissionRequest, []string, error) {
	obj := spec.resource.Object.DeepCopy()
	gvk := obj.GroupVersionKind()
	var notes []string
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID(fmt.Sprintf("kyvap-test-%x", sha256.Sum256([]byte(spec.key())))[:36]),
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Name:      obj.GetName(),
		Namespace: obj.GetNamespace(),
		Operation: spec.operation,
	}
	gvr, sub, _, namespaced, note := b.resource(gvk)
	if note != "" {
		notes = append(notes, note)
	}
	req.Resource = metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}
	req.SubResource = sub
	req.RequestKind = &req.Kind
	req.RequestResource = &req.Resource
	req.RequestSubResource = sub
	if !namespaced {
		req.Namespace = ""
	}
	if gvk.Group == "" && gvk.Kind == "Namespace" && sub == "" {
		// The API server gives a Namespace request the namespace's own
		// name (handlers/create.go; requestinfo for the other verbs).
		req.Namespace = obj.GetName()
	}
	if s := b.suite.UserInfo; s != nil {
		req.UserInfo = *s.AdmissionUserInfo.DeepCopy()
	}
	newObj := obj.Object
	if spec.objectPatch != nil {
		mergeMaps(spec.objectPatch, newObj)
	}
	oldObj := spec.resource.Object.DeepCopy().Object
	if spec.oldObjectPatch != nil {
		mergeMaps(spec.oldObjectPatch, oldObj)
	}
	if gvk.Group == "" && gvk.Kind == "Namespace" && sub == "" {
		// The API server's defaulting (SetDefaults_Namespace) labels every
		// Namespace with its name before admission sees it.
		nameLabel(newObj)
		nameLabel(oldObj)
	}
	var err error
	switch spec.operation {
	case admissionv1.Create:
		req.Object.Raw, err = json.Marshal(newObj)
		req.Options.Raw = options("CreateOptions")
	case admissionv1.Update:
		if req.Object.Raw, err = json.Marshal(newObj); err == nil {
			req.OldObject.Raw, err = json.Marshal(oldObj)
		}
		req.Options.Raw = options("UpdateOptions")
	case admissionv1.Delete:
		req.OldObject.Raw, err = json.Marshal(oldObj)
		req.Options.Raw = options("DeleteOptions")
	default:
		return nil, nil, fmt.Errorf("operation %q: want CREATE, UPDATE or DELETE", spec.operation)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resource %s: %w", spec.resource.Key(), err)
	}
	return req, notes, nil
}

// resourceKind is the kind of the request's resource without its
// subresource, nil when the request is not for a subresource: the API
// server's request kind is then the subresource's (Scale for
// deployments/scale), while Kyverno's webhook matches the parent kind
// (handlers.withTopLevelGVK).
func (b *requestBuilder) resourceKind(req *admissionv1.AdmissionRequest) *schema.GroupVersionKind {
	if req.SubResource == "" {
		return nil
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if _, _, parent, _, _ := b.resource(gvk); parent != nil {
		return parent
	}
	return nil
}

// options is the options object the API server attaches to a request.
func options(kind string) []byte {
	return []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"` + kind + `"}`)
}

// resource maps an object's kind to the resource it is written through: a
// subresource when the values map the kind to one (Kyverno's
// values.subresources), the served resource otherwise. An unknown kind gets
// a guessed plural and a note. parent is the kind of the parent resource of
// a subresource (Kyverno matches kinds against it).
func (b *requestBuilder) resource(gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, sub string, parent *schema.GroupVersionKind, namespaced bool, note string) {
	if b.suite.Values != nil {
		for _, s := range b.suite.Values.Subresources {
			if s.Subresource.Group != gvk.Group || s.Subresource.Version != gvk.Version || s.Subresource.Kind != gvk.Kind {
				continue
			}
			p := schema.GroupVersionKind{Group: s.ParentResource.Group, Version: s.ParentResource.Version, Kind: s.ParentResource.Kind}
			pr, _, _, ns, _ := b.resource(p)
			if s.ParentResource.Name != "" {
				pr.Resource = s.ParentResource.Name
			}
			if _, name, ok := strings.Cut(s.Subresource.Name, "/"); ok {
				sub = name
			}
			return pr, sub, &p, ns || s.ParentResource.Namespaced, ""
		}
	}
	if r, ok := resolveObject(b.resolver, gvk); ok {
		return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}, "", nil, r.Namespaced, ""
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural, "", nil, true, fmt.Sprintf("kind %s is unknown (no CRD in the test): assumed namespaced resource %q", gvk, plural.Resource)
}

// namespaces are the Namespace objects of the test: the values' namespaces
// and namespaceSelector labels (namespaces win, as in Kyverno), plus a bare
// Namespace for every other namespace a resource uses. Each carries the
// kubernetes.io/metadata.name label the API server sets on every namespace.
func (s *Suite) namespaces() map[string]*corev1.Namespace {
	out := map[string]*corev1.Namespace{}
	add := func(name string, labels map[string]string) {
		ns := &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		}
		for k, v := range labels {
			ns.Labels[k] = v
		}
		ns.Labels[corev1.LabelMetadataName] = name
		out[name] = ns
	}
	if s.Values != nil {
		for _, n := range s.Values.NamespaceSelectors {
			add(n.Name, n.Labels)
		}
		for _, n := range s.Values.Namespaces {
			add(n.Name, n.Labels)
			out[n.Name].Annotations = n.Annotations
		}
	}
	for i := range s.Resources {
		if ns := s.Resources[i].Object.GetNamespace(); ns != "" {
			if _, ok := out[ns]; !ok {
				add(ns, nil)
			}
		}
	}
	return out
}

// clusterNamespaces are the namespaces of the test's cluster, for the VAP
// path and a replay: namespaces, with the context file's Namespaces,
// which Kyverno's resource library reads; their labels and annotations
// join the values' (a cluster has one Namespace of each name).
func (s *Suite) clusterNamespaces() map[string]*corev1.Namespace {
	out := s.namespaces()
	for _, obj := range s.contextNamespaces() {
		ns, ok := out[obj.GetName()]
		if !ok {
			ns = &corev1.Namespace{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
				ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Labels: map[string]string{corev1.LabelMetadataName: obj.GetName()}},
			}
			out[obj.GetName()] = ns
		}
		for k, v := range obj.GetLabels() {
			ns.Labels[k] = v
		}
		if a := obj.GetAnnotations(); len(a) > 0 {
			if ns.Annotations == nil {
				ns.Annotations = map[string]string{}
			}
			for k, v := range a {
				ns.Annotations[k] = v
			}
		}
	}
	return out
}

// contextNamespaces are the Namespace objects of the test's context file.
func (s *Suite) contextNamespaces() []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, obj := range s.ContextResources {
		if obj.GetAPIVersion() == "v1" && obj.GetKind() == "Namespace" && obj.GetName() != "" {
			out = append(out, obj)
		}
	}
	return out
}

// NamespaceMissing reports whether the test's cluster has no namespace
// name: its context file lists Namespaces (the objects Kyverno's resource
// library reads), and not this one. An API server refuses a request in a
// namespace that does not exist before any admission policy
// (NamespaceLifecycle), while Kyverno's CLI reads the namespace as
// missing (null).
func (s *Suite) NamespaceMissing(name string) bool {
	listed := s.contextNamespaces()
	if name == "" || len(listed) == 0 {
		return false
	}
	for _, obj := range listed {
		if obj.GetName() == name {
			return false
		}
	}
	return true
}

// Namespaces are the namespaces a replay of the test needs: those of the
// values (with their labels) and those the resources use, each labelled
// kubernetes.io/metadata.name, sorted by name.
func (s *Suite) Namespaces() []corev1.Namespace { return sortedNamespaces(s.namespaces()) }

// AdmissionRequest is the request Run evaluates for a policy, a resource of
// the suite and a test result's operation (empty: the values' operation,
// else CREATE). Notes explain approximations (an unknown kind's resource).
func (s *Suite) AdmissionRequest(policy string, r *Resource, operation string) (req *admissionv1.AdmissionRequest, notes []string, err error) {
	b := requestBuilder{suite: s, resolver: kyverno.NewStaticResolver(s.CRDs...)}
	return b.admissionRequest(s.requestFor(policy, r, operation))
}

// sortedNamespaces lists the namespaces by name.
func sortedNamespaces(m map[string]*corev1.Namespace) []corev1.Namespace {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]corev1.Namespace, 0, len(names))
	for _, n := range names {
		out = append(out, *m[n])
	}
	return out
}

// requestNamespace is the Namespace object of a request's namespace, nil
// for cluster-scoped requests and Namespaces themselves.
func requestNamespace(req *admissionv1.AdmissionRequest, all map[string]*corev1.Namespace) *corev1.Namespace {
	if req.Namespace == "" || (req.Kind.Group == "" && req.Kind.Kind == "Namespace") {
		return nil
	}
	return all[req.Namespace]
}

// unstructuredObjects copies the objects.
func unstructuredObjects(in []unstructured.Unstructured) []unstructured.Unstructured {
	out := make([]unstructured.Unstructured, len(in))
	for i := range in {
		out[i] = *in[i].DeepCopy()
	}
	return out
}

// nameLabel sets a Namespace object's kubernetes.io/metadata.name label to
// its name.
func nameLabel(obj map[string]any) {
	u := unstructured.Unstructured{Object: obj}
	if u.GetName() == "" {
		return
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelMetadataName] = u.GetName()
	u.SetLabels(labels)
}

// PolicyValues are the values of a policy (by name) for a resource (by
// name), without the global ones: what Kyverno's CLI gives a ClusterPolicy
// and not a ValidatingPolicy, whose request it shapes from the result's
// operation and the global values alone (processor/operation.go).
func (s *Suite) PolicyValues(policy, resource string) map[string]any {
	if s.Values == nil {
		return nil
	}
	out := map[string]any{}
	for _, p := range s.Values.Policies {
		if p.Name != policy {
			continue
		}
		for _, r := range p.Resources {
			if r.Name == resource {
				for k, v := range r.Values {
					out[k] = v
				}
			}
		}
	}
	return out
}

// ResourcesNamed are the test's resources a result's resource reference
// ("name" or "namespace/name") selects, as Kyverno's CLI selects them.
func (s *Suite) ResourcesNamed(ref string) []*Resource {
	ns, name, hasNS := strings.Cut(ref, "/")
	if !hasNS {
		name = ref
	}
	var out []*Resource
	for i := range s.Resources {
		obj := &s.Resources[i].Object
		if name == obj.GetName() && (!hasNS || ns == obj.GetNamespace()) {
			out = append(out, &s.Resources[i])
		}
	}
	return out
}
