// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Config is the part of Kyverno's global configuration (its `kyverno`
// ConfigMap, read by pkg/config/config.go) that decides which admission
// requests Kyverno evaluates at all. Kyverno answers "allowed" without
// looking at any policy when a request is excluded by its user, group or
// role, or is named by a resource filter; its webhooks never receive
// requests outside the namespace and object selectors or the match
// conditions.
//
// The zero Config excludes nothing: it is what `kyverno test` and
// `kyverno apply` run with.
type Config struct {
	// ResourceFilters are the parsed `resourceFilters`.
	ResourceFilters []ResourceFilter
	// Exclude and Include are `excludeGroups`, `excludeUsernames`,
	// `excludeRoles` and `excludeClusterRoles`; entries starting with "!"
	// are inclusions, which win over every exclusion.
	Exclude, Include Subjects
	// NamespaceSelector and ObjectSelector are `webhooks`: Kyverno puts them
	// on its resource webhooks.
	NamespaceSelector *metav1.LabelSelector
	ObjectSelector    *metav1.LabelSelector
	// MatchConditions are `matchConditions`, also put on its webhooks.
	MatchConditions []admissionregistrationv1.MatchCondition
}

// ResourceFilter is one `[kind,namespace,name]` entry of resourceFilters,
// with its kind split as Kyverno's ParseKindSelector splits it. Every field
// is a Kyverno wildcard pattern; an empty pattern matches only the empty
// string.
type ResourceFilter struct {
	Group, Version, Kind, Subresource string
	Namespace, Name                   string
}

// Subjects are user names, groups, Roles ("namespace:name") and
// ClusterRoles, each a list of Kyverno wildcard patterns.
type Subjects struct {
	Usernames, Groups, Roles, ClusterRoles []string
}

// IsEmpty reports whether no pattern is set.
func (s Subjects) IsEmpty() bool {
	return len(s.Usernames)+len(s.Groups)+len(s.Roles)+len(s.ClusterRoles) == 0
}

// matches is Kyverno's config.go match.matches: any pattern of any list
// matching the request's user.
func (s Subjects) matches(username string, groups, roles, clusterRoles []string) bool {
	return CheckPatterns(s.Usernames, username) || CheckPatterns(s.Groups, groups...) ||
		CheckPatterns(s.Roles, roles...) || CheckPatterns(s.ClusterRoles, clusterRoles...)
}

// NeedsRoles reports whether deciding IsExcluded needs the requester's
// Roles and ClusterRoles, which only the cluster's RBAC bindings tell (a
// ValidatingAdmissionPolicy cannot see them).
func (c Config) NeedsRoles() bool {
	return len(c.Exclude.Roles)+len(c.Exclude.ClusterRoles)+len(c.Include.Roles)+len(c.Include.ClusterRoles) > 0
}

// IsExcluded reports whether Kyverno skips a request for its user, as
// config.go IsExcluded: an inclusion wins, else any exclusion excludes.
func (c Config) IsExcluded(username string, groups, roles, clusterRoles []string) bool {
	if c.Include.matches(username, groups, roles, clusterRoles) {
		return false
	}
	return c.Exclude.matches(username, groups, roles, clusterRoles)
}

// IsFiltered reports whether a resource filter names the request, as
// config.go ToFilter: group, version and kind are those of the request's
// resource without its subresource (Pod for pods/exec, as Kyverno's
// withTopLevelGVK computes them); a filter's namespace pattern also
// matches the name of a v1 Namespace itself.
func (c Config) IsFiltered(group, version, kind, subresource, namespace, name string) bool {
	for _, f := range c.ResourceFilters {
		if !f.MatchesKind(group, version, kind, subresource) {
			continue
		}
		if WildcardMatch(f.Namespace, namespace) && WildcardMatch(f.Name, name) {
			return true
		}
		if IsNamespaceKind(group, version, kind) && WildcardMatch(f.Namespace, name) {
			return true
		}
	}
	return false
}

// MatchesKind reports whether the filter's kind part names the resource.
func (f ResourceFilter) MatchesKind(group, version, kind, subresource string) bool {
	return WildcardMatch(f.Group, group) && WildcardMatch(f.Version, version) &&
		WildcardMatch(f.Kind, kind) && WildcardMatch(f.Subresource, subresource)
}

// IsNamespaceKind reports whether group/version/kind is the core v1
// Namespace, whose own name resource filters also compare with their
// namespace pattern.
func IsNamespaceKind(group, version, kind string) bool {
	return group == "" && version == "v1" && kind == "Namespace"
}

// String renders the filter as it is written in the ConfigMap.
func (f ResourceFilter) String() string {
	kind := f.Kind
	switch {
	case f.Group != "*":
		kind = f.Group + "/" + f.Version + "/" + kind
	case f.Version != "*":
		kind = f.Version + "/" + kind
	}
	if f.Subresource != "" {
		kind += "/" + f.Subresource
	}
	return "[" + kind + "," + f.Namespace + "," + f.Name + "]"
}

// The keys of Kyverno's ConfigMap that Config reads (pkg/config/config.go).
const (
	keyResourceFilters     = "resourceFilters"
	keyExcludeGroups       = "excludeGroups"
	keyExcludeUsernames    = "excludeUsernames"
	keyExcludeRoles        = "excludeRoles"
	keyExcludeClusterRoles = "excludeClusterRoles"
	keyWebhooks            = "webhooks"
	keyMatchConditions     = "matchConditions"
)

// filterEntry is one bracketed entry of resourceFilters, as Kyverno's
// types.go parseKinds finds them.
var filterEntry = regexp.MustCompile(`\[([^\[\]]*)\]`)

// ParseConfig reads the data of Kyverno's ConfigMap as Kyverno v1.19.1
// does. Kyverno logs and ignores a value it cannot parse; ParseConfig does
// the same and returns one problem per such value, so that callers can
// report it. Keys Config does not use are ignored.
func ParseConfig(data map[string]string) (Config, []string) {
	var c Config
	var problems []string
	for _, entry := range filterEntry.FindAllString(data[keyResourceFilters], -1) {
		f, problem := parseResourceFilter(strings.Trim(entry, "[]"))
		if problem != "" {
			problems = append(problems, fmt.Sprintf("%s: %s %s", keyResourceFilters, entry, problem))
		}
		c.ResourceFilters = append(c.ResourceFilters, f)
	}
	c.Exclude.Groups, c.Include.Groups = parseExclusions(data[keyExcludeGroups])
	c.Exclude.Usernames, c.Include.Usernames = parseExclusions(data[keyExcludeUsernames])
	c.Exclude.Roles, c.Include.Roles = parseExclusions(data[keyExcludeRoles])
	c.Exclude.ClusterRoles, c.Include.ClusterRoles = parseExclusions(data[keyExcludeClusterRoles])
	if raw, ok := data[keyWebhooks]; ok {
		var webhooks struct {
			NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
			ObjectSelector    *metav1.LabelSelector `json:"objectSelector,omitempty"`
		}
		if err := json.Unmarshal([]byte(raw), &webhooks); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v (Kyverno ignores the value)", keyWebhooks, err))
		} else {
			c.NamespaceSelector, c.ObjectSelector = webhooks.NamespaceSelector, webhooks.ObjectSelector
		}
	}
	if raw, ok := data[keyMatchConditions]; ok {
		var conditions []admissionregistrationv1.MatchCondition
		if err := json.Unmarshal([]byte(raw), &conditions); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v (Kyverno ignores the value)", keyMatchConditions, err))
		} else {
			c.MatchConditions = conditions
		}
	}
	return c, problems
}

// parseResourceFilter is Kyverno's types.go newFilter over one entry:
// "kind", "kind,namespace" or "kind,namespace,name"; an empty kind, or more
// than three parts, gives a filter whose every pattern is empty (Kyverno's
// zero filter, which names only a request with all of them empty).
func parseResourceFilter(entry string) (ResourceFilter, string) {
	parts := strings.Split(entry, ",")
	if len(parts) > 3 || parts[0] == "" {
		return ResourceFilter{}, "is not [kind,namespace,name]; Kyverno reads it as a filter that names nothing"
	}
	parts = append(parts, "", "")
	sel, err := ParseKindSelector(parts[0])
	problem := ""
	if err != nil {
		problem = "has an invalid kind: " + err.Error()
	}
	return ResourceFilter{
		Group: sel.Group, Version: sel.Version, Kind: sel.Kind, Subresource: sel.Subresource,
		Namespace: parts[1], Name: parts[2],
	}, problem
}

// parseExclusions is Kyverno's types.go parseExclusions: a comma-separated
// list, spaces trimmed, "!" marking an inclusion.
func parseExclusions(in string) (exclusions, inclusions []string) {
	for _, item := range strings.Split(in, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(item, "!"); ok {
			if rest = strings.TrimSpace(rest); rest != "" {
				inclusions = append(inclusions, rest)
			}
			continue
		}
		exclusions = append(exclusions, item)
	}
	return exclusions, inclusions
}

//go:embed chartdefaults.yaml
var chartDefaultsYAML []byte

// ChartDefaultsConfigMap returns Kyverno v1.19.1's `kyverno` ConfigMap as
// its Helm chart installs it with default values (release "kyverno" in the
// namespace "kyverno").
func ChartDefaultsConfigMap() *corev1.ConfigMap {
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(chartDefaultsYAML, &cm); err != nil {
		panic(fmt.Sprintf("kyverno: chartdefaults.yaml: %v", err)) // a build defect, caught by its test
	}
	return &cm
}

// ChartDefaults is the Config of ChartDefaultsConfigMap.
func ChartDefaults() Config {
	c, _ := ParseConfig(ChartDefaultsConfigMap().Data)
	return c
}

// Equal reports whether two configurations decide every request alike
// field by field (used to skip re-translation when nothing changed).
func (c Config) Equal(o Config) bool {
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}

// Summary is a short, bounded description for logs and status messages.
func (c Config) Summary() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%d resource filters", len(c.ResourceFilters)))
	if !c.Exclude.IsEmpty() {
		parts = append(parts, "excluded "+subjectsSummary(c.Exclude))
	}
	if !c.Include.IsEmpty() {
		parts = append(parts, "included "+subjectsSummary(c.Include))
	}
	if c.NamespaceSelector != nil {
		parts = append(parts, "a webhook namespace selector")
	}
	if c.ObjectSelector != nil {
		parts = append(parts, "a webhook object selector")
	}
	if n := len(c.MatchConditions); n > 0 {
		parts = append(parts, fmt.Sprintf("%d match conditions", n))
	}
	return strings.Join(parts, ", ")
}

func subjectsSummary(s Subjects) string {
	var parts []string
	for _, l := range []struct {
		name  string
		items []string
	}{{"usernames", s.Usernames}, {"groups", s.Groups}, {"roles", s.Roles}, {"clusterRoles", s.ClusterRoles}} {
		if len(l.items) > 0 {
			items := slices.Clone(l.items)
			if len(items) > 5 {
				items = append(items[:5], fmt.Sprintf("%d more", len(l.items)-5))
			}
			parts = append(parts, l.name+" "+strings.Join(items, ","))
		}
	}
	return strings.Join(parts, "; ")
}
