package translate

import (
	"regexp"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// kyvernoVersionPattern recognises the version part of a Kyverno kind
// spelling, as Kyverno's kind parser does.
var kyvernoVersionPattern = regexp.MustCompile(`^(v\d((alpha|beta)\d)?|\*)$`)

// kindSelector is a parsed Kyverno kind spelling; every part may hold
// Kyverno wildcards ('*', '?').
type kindSelector struct {
	Group, Version, Kind, Subresource string
}

// parseKindSelector splits a Kyverno kind spelling the way Kyverno's engine
// does: "Kind", "version/Kind", "Kind/sub", "group/version/Kind",
// "version/Kind/sub", "group/version/Kind/sub" ('.' also separates the
// subresource in the last part). ok is false for unparseable spellings.
func parseKindSelector(input string) (sel kindSelector, ok bool) {
	parts := strings.Split(input, "/")
	last := strings.Split(parts[len(parts)-1], ".")
	parts = append(parts[:len(parts)-1], last...)
	switch len(parts) {
	case 1:
		return kindSelector{"*", "*", parts[0], ""}, parts[0] != ""
	case 2:
		if parts[0] == "*" && parts[1] == "*" {
			return kindSelector{"*", "*", "*", "*"}, true
		}
		if parts[0] == "*" && strings.ToLower(parts[1]) == parts[1] {
			return kindSelector{"*", "*", "*", parts[1]}, true
		}
		if kyvernoVersionPattern.MatchString(parts[0]) {
			return kindSelector{"*", parts[0], parts[1], ""}, parts[1] != ""
		}
		return kindSelector{"*", "*", parts[0], parts[1]}, parts[0] != ""
	case 3:
		if kyvernoVersionPattern.MatchString(parts[0]) {
			return kindSelector{"*", parts[0], parts[1], parts[2]}, parts[1] != ""
		}
		return kindSelector{parts[0], parts[1], parts[2], ""}, parts[2] != ""
	case 4:
		return kindSelector{parts[0], parts[1], parts[2], parts[3]}, parts[2] != ""
	default:
		return kindSelector{}, false
	}
}

// wildcardMatch reports whether name matches a Kyverno wildcard pattern
// ('*' any run of characters, '?' exactly one), as Kyverno's ext/wildcard.
func wildcardMatch(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// Classic two-pointer glob matching with backtracking to the last '*'.
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// hasWildcard reports whether s uses Kyverno wildcard characters.
func hasWildcard(s string) bool { return strings.ContainsAny(s, "*?") }

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
	sel, ok := parseKindSelector(kind)
	if !ok {
		return nil, nil
	}
	var out []Resource
	for _, s := range r.resources {
		if !wildcardMatch(sel.Group, s.Group) || !wildcardMatch(sel.Version, s.Version) || !wildcardMatch(sel.Kind, s.Kind) {
			continue
		}
		base := Resource{Group: s.Group, Version: s.Version, Resource: s.Resource, Kind: s.Kind, Namespaced: s.Namespaced}
		if wildcardMatch(sel.Subresource, "") {
			out = append(out, base)
		}
		for _, sub := range s.Subresources {
			if sel.Subresource != "" && wildcardMatch(sel.Subresource, sub) {
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
