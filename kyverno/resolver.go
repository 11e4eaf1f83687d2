// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Resource is one served API resource a Kyverno kind resolves to.
type Resource struct {
	Group   string
	Version string
	// Resource is the plural resource name, e.g. "pods".
	Resource string
	// Subresource is e.g. "exec" or "ephemeralcontainers"; empty for the resource itself.
	Subresource string
	Kind        string
	Namespaced  bool
}

// KindResolver maps a Kyverno kind spelling ("Pod", "v1/Pod",
// "apps/v1/Deployment", "Pod/exec", "*", "Dep*", a CRD kind...) to the
// resources the cluster serves. The operator backs it with discovery, the CLI
// with a built-in table of core kinds plus the CRDs the user passes.
// An unknown kind resolves to no resources and no error.
type KindResolver interface {
	Resolve(kind string) ([]Resource, error)
}

// servedResource is one entry of StaticResolver's table.
type servedResource struct {
	Group, Version, Resource, Kind string
	Namespaced                     bool
	Subresources                   []string
}

// StaticResolver is a pure KindResolver over a built-in table of the core
// Kubernetes kinds (as served by Kubernetes 1.37) plus the CRDs it was given.
// It is what the CLI and the golden tests use; the operator uses discovery.
type StaticResolver struct {
	resources []servedResource
}

// NewStaticResolver returns a resolver over the built-in table plus the
// served versions of the given CRDs.
func NewStaticResolver(crds ...apiextensionsv1.CustomResourceDefinition) *StaticResolver {
	table := append([]servedResource(nil), builtinResources...)
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			entry := servedResource{
				Group:      crd.Spec.Group,
				Version:    v.Name,
				Resource:   crd.Spec.Names.Plural,
				Kind:       crd.Spec.Names.Kind,
				Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			}
			if v.Subresources != nil {
				if v.Subresources.Scale != nil {
					entry.Subresources = append(entry.Subresources, "scale")
				}
				if v.Subresources.Status != nil {
					entry.Subresources = append(entry.Subresources, "status")
				}
			}
			table = append(table, entry)
		}
	}
	return &StaticResolver{resources: table}
}

// Resolve implements KindResolver with Kyverno's kind matching: every part
// of the spelling is a wildcard pattern over group, version, kind and
// subresource. The result is sorted; unknown kinds resolve to nothing.
func (r *StaticResolver) Resolve(kind string) ([]Resource, error) {
	sel, err := ParseKindSelector(kind)
	if err != nil {
		// Selects nothing, as in Kyverno.
		return nil, nil
	}
	var out []Resource
	for _, s := range r.resources {
		if !WildcardMatch(sel.Group, s.Group) || !WildcardMatch(sel.Version, s.Version) || !WildcardMatch(sel.Kind, s.Kind) {
			continue
		}
		base := Resource{Group: s.Group, Version: s.Version, Resource: s.Resource, Kind: s.Kind, Namespaced: s.Namespaced}
		if WildcardMatch(sel.Subresource, "") {
			out = append(out, base)
		}
		for _, sub := range s.Subresources {
			if sel.Subresource != "" && WildcardMatch(sel.Subresource, sub) {
				withSub := base
				withSub.Subresource = sub
				out = append(out, withSub)
			}
		}
	}
	sortResources(out)
	return out, nil
}

// sortResources orders resources by group, version, resource, subresource.
func sortResources(rs []Resource) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return a.Subresource < b.Subresource
	})
}

// builtinResources is the table of core kinds. Subresources are the ones
// admission sees (CONNECT and write subresources).
var builtinResources = []servedResource{
	// core/v1
	{"", "v1", "bindings", "Binding", true, nil},
	{"", "v1", "componentstatuses", "ComponentStatus", false, nil},
	{"", "v1", "configmaps", "ConfigMap", true, nil},
	{"", "v1", "endpoints", "Endpoints", true, nil},
	{"", "v1", "events", "Event", true, nil},
	{"", "v1", "limitranges", "LimitRange", true, nil},
	{"", "v1", "namespaces", "Namespace", false, []string{"finalize", "status"}},
	{"", "v1", "nodes", "Node", false, []string{"proxy", "status"}},
	{"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, []string{"status"}},
	{"", "v1", "persistentvolumes", "PersistentVolume", false, []string{"status"}},
	{"", "v1", "pods", "Pod", true, []string{"attach", "binding", "ephemeralcontainers", "eviction", "exec", "portforward", "proxy", "resize", "status"}},
	{"", "v1", "podtemplates", "PodTemplate", true, nil},
	{"", "v1", "replicationcontrollers", "ReplicationController", true, []string{"scale", "status"}},
	{"", "v1", "resourcequotas", "ResourceQuota", true, []string{"status"}},
	{"", "v1", "secrets", "Secret", true, nil},
	{"", "v1", "serviceaccounts", "ServiceAccount", true, []string{"token"}},
	{"", "v1", "services", "Service", true, []string{"proxy", "status"}},
	// admissionregistration.k8s.io
	{"admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", "MutatingAdmissionPolicy", false, nil},
	{"admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", false, nil},
	{"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false, nil},
	{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", false, []string{"status"}},
	{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", false, nil},
	{"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false, nil},
	// apiextensions.k8s.io, apiregistration.k8s.io
	{"apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false, []string{"status"}},
	{"apiregistration.k8s.io", "v1", "apiservices", "APIService", false, []string{"status"}},
	// apps/v1
	{"apps", "v1", "controllerrevisions", "ControllerRevision", true, nil},
	{"apps", "v1", "daemonsets", "DaemonSet", true, []string{"status"}},
	{"apps", "v1", "deployments", "Deployment", true, []string{"scale", "status"}},
	{"apps", "v1", "replicasets", "ReplicaSet", true, []string{"scale", "status"}},
	{"apps", "v1", "statefulsets", "StatefulSet", true, []string{"scale", "status"}},
	// authentication / authorization
	{"authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", false, nil},
	{"authentication.k8s.io", "v1", "tokenreviews", "TokenReview", false, nil},
	{"authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", true, nil},
	{"authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false, nil},
	{"authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", false, nil},
	{"authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", false, nil},
	// autoscaling
	{"autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, []string{"status"}},
	{"autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, []string{"status"}},
	// batch/v1
	{"batch", "v1", "cronjobs", "CronJob", true, []string{"status"}},
	{"batch", "v1", "jobs", "Job", true, []string{"status"}},
	// certificates, coordination, discovery, events, flowcontrol
	{"certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", false, []string{"approval", "status"}},
	{"coordination.k8s.io", "v1", "leases", "Lease", true, nil},
	{"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, nil},
	{"events.k8s.io", "v1", "events", "Event", true, nil},
	{"flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", false, []string{"status"}},
	{"flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", false, []string{"status"}},
	// networking.k8s.io/v1
	{"networking.k8s.io", "v1", "ingressclasses", "IngressClass", false, nil},
	{"networking.k8s.io", "v1", "ingresses", "Ingress", true, []string{"status"}},
	{"networking.k8s.io", "v1", "ipaddresses", "IPAddress", false, nil},
	{"networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true, nil},
	{"networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", false, []string{"status"}},
	// node, policy, rbac, resource, scheduling, storage
	{"node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", false, nil},
	{"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, []string{"status"}},
	{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, nil},
	{"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, nil},
	{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, nil},
	{"rbac.authorization.k8s.io", "v1", "roles", "Role", true, nil},
	{"resource.k8s.io", "v1", "deviceclasses", "DeviceClass", false, nil},
	{"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true, []string{"status"}},
	{"resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", true, nil},
	{"resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false, nil},
	{"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, nil},
	{"storage.k8s.io", "v1", "csidrivers", "CSIDriver", false, nil},
	{"storage.k8s.io", "v1", "csinodes", "CSINode", false, nil},
	{"storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", true, nil},
	{"storage.k8s.io", "v1", "storageclasses", "StorageClass", false, nil},
	{"storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", false, []string{"status"}},
	{"storage.k8s.io", "v1", "volumeattributesclasses", "VolumeAttributesClass", false, nil},
}
