package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// StaticParams is a ParamSource over a fixed set of objects, for offline
// evaluation (kyvap test). An object with a namespace is namespaced.
type StaticParams []unstructured.Unstructured

// Params implements ParamSource with the API server's paramRef semantics: a
// name selects one object, otherwise the selector selects any number; the
// namespace is paramRef.namespace, else the request's for namespaced kinds.
func (s StaticParams) Params(_ context.Context, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, namespace string) ([]runtime.Object, error) {
	if ref == nil {
		return nil, fmt.Errorf("paramKind %s %s is set but the rule has no paramRef", kind.APIVersion, kind.Kind)
	}
	gv, err := schema.ParseGroupVersion(kind.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("paramKind apiVersion %q: %w", kind.APIVersion, err)
	}
	gvk := gv.WithKind(kind.Kind)
	namespaced := false
	for i := range s {
		if s[i].GroupVersionKind() == gvk && s[i].GetNamespace() != "" {
			namespaced = true
			break
		}
	}
	ns := ""
	if !namespaced && ref.Namespace != "" && s.hasKind(gvk) {
		return nil, ErrClusterScopedParamNamespace
	}
	if namespaced {
		ns = ref.Namespace
		if ns == "" {
			ns = namespace
		}
		if ns == "" {
			return nil, fmt.Errorf("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	}
	selector := labels.Everything()
	if ref.Name == "" {
		if ref.Selector == nil {
			return nil, fmt.Errorf("paramRef has neither name nor selector")
		}
		if selector, err = metav1.LabelSelectorAsSelector(ref.Selector); err != nil {
			return nil, fmt.Errorf("paramRef selector: %w", err)
		}
	}
	var out []runtime.Object
	for i := range s {
		o := &s[i]
		if o.GroupVersionKind() != gvk || o.GetNamespace() != ns {
			continue
		}
		if ref.Name != "" && o.GetName() != ref.Name {
			continue
		}
		if !selector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		out = append(out, o.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].(*unstructured.Unstructured).GetName() < out[j].(*unstructured.Unstructured).GetName()
	})
	return out, nil
}

// hasKind reports whether some object is of kind gvk (the scope of a kind
// without objects is unknown).
func (s StaticParams) hasKind(gvk schema.GroupVersionKind) bool {
	for i := range s {
		if s[i].GroupVersionKind() == gvk {
			return true
		}
	}
	return false
}

// ErrClusterScopedParamNamespace is what parameter sources return for a
// paramRef.namespace next to a cluster-scoped paramKind: Kyverno's answer
// (pkg/admissionpolicy CollectParams), where the API server would ignore
// the namespace.
var ErrClusterScopedParamNamespace = errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
