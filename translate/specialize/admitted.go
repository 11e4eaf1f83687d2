// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package specialize

import (
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podSpecs are the built-in resources whose objects hold a pod spec, by
// the path to it.
var podSpecs = map[schema.GroupResource]string{
	{Resource: "pods"}:                        "spec",
	{Resource: "podtemplates"}:                "template.spec",
	{Resource: "replicationcontrollers"}:      "spec.template.spec",
	{Group: "apps", Resource: "deployments"}:  "spec.template.spec",
	{Group: "apps", Resource: "replicasets"}:  "spec.template.spec",
	{Group: "apps", Resource: "statefulsets"}: "spec.template.spec",
	{Group: "apps", Resource: "daemonsets"}:   "spec.template.spec",
	{Group: "batch", Resource: "jobs"}:        "spec.template.spec",
	{Group: "batch", Resource: "cronjobs"}:    "spec.jobTemplate.spec.template.spec",
}

// podSpecFacts are what the API server's validation of a pod spec
// requires (ValidatePodSpec, for a Pod and for every pod template): its
// containers, and a name and an image for each container and init
// container. "[]" is every element of a list, "[0]" its first (the list
// has one).
var podSpecFacts = []string{
	"containers",
	"containers[0]",
	"containers[].name",
	"containers[].image",
	"initContainers[].name",
	"initContainers[].image",
}

// AdmittedFacts are the paths present and not null in every object of a
// built-in resource that the API server hands a ValidatingAdmissionPolicy
// as `object` on CREATE and UPDATE: the API server validates an object
// (its registry strategy) before validating admission runs, and rejects
// it without one of these. The shapes the Go types give say less (a nil
// slice is written as null, an omitempty field may be absent); these
// facts are added to them. test/translate's
// TestAPIServerRequiresAdmittedFacts creates objects without each of
// them on the real API server, which must refuse every one. `oldObject`
// gets none of them: it was validated when it was stored, by whatever
// rules held then.
//
// A fact is a path ("a.b[].c": every element of the list b) that is
// present and not null, a list that has an element ("a.b[0]"), or a map
// whose every value is a label value ("metadata.labels{}": letters,
// digits, '-', '_' and '.' only, as ValidateLabels requires of the
// object's labels and of its pod template's).
func AdmittedFacts(group, resource string) []string {
	prefix, ok := podSpecs[schema.GroupResource{Group: group, Resource: resource}]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(podSpecFacts)+2)
	for _, fact := range podSpecFacts {
		out = append(out, prefix+"."+fact)
	}
	out = append(out, "metadata.labels{}")
	if template := strings.TrimSuffix(prefix, "spec") + "metadata"; template != "metadata" {
		out = append(out, template+".labels{}")
	}
	sort.Strings(out)
	return out
}

// IsLabelValueCharacter reports whether r may be in a label value.
func IsLabelValueCharacter(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
}

// admitted is s with the facts of the paths added: each is present and
// not null, and so is each value on the way to it. The shapes along the
// paths are copied (the type's shape is shared).
func admitted(s *shape, paths []string) *shape {
	for _, p := range paths {
		s = refine(s, splitPath(p))
	}
	return s
}

// splitPath splits "a.b[].c" into "a", "b", "[]", "c"; "a[0]" into "a",
// "[0]"; "a{}" into "a", "{}".
func splitPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		if name, ok := strings.CutSuffix(part, "[]"); ok {
			out = append(out, name, "[]")
			continue
		}
		if name, ok := strings.CutSuffix(part, "[0]"); ok {
			out = append(out, name, "[0]")
			continue
		}
		if name, ok := strings.CutSuffix(part, "{}"); ok {
			out = append(out, name, "{}")
			continue
		}
		out = append(out, part)
	}
	return out
}

// refine is s where the value at path is present and not null. A path
// through the elements of a list ("[]") or the values of a map ("{}")
// says nothing of the list or the map itself: only the segments after
// its last "[]" are required on the way.
func refine(s *shape, path []string) *shape {
	c := *s
	if len(path) == 0 {
		c.kinds &^= kNull
		if c.kinds == 0 {
			return s // nothing is known of it: nothing to add
		}
		return &c
	}
	if path[0] == "[]" {
		if c.elem == nil {
			return s
		}
		c.elem = refine(c.elem, path[1:])
		return &c
	}
	if path[0] == "{}" {
		// Every value of the map is a label value.
		if c.elem == nil || c.elem.kinds != kString || len(path) > 1 {
			return s
		}
		e := *c.elem
		e.labelValue = true
		c.elem = &e
		return &c
	}
	if path[0] == "[0]" {
		// The list has a first element: it is a non-empty list.
		if c.kinds&kList == 0 || len(path) > 1 {
			return s
		}
		c.kinds = kList
		c.nonEmpty = true
		return &c
	}
	f, ok := c.fields[path[0]]
	if !ok {
		return s
	}
	c.fields = make(map[string]*shape, len(s.fields))
	for k, v := range s.fields {
		c.fields[k] = v
	}
	c.fields[path[0]] = refine(f, path[1:])
	if !slices.Contains(path[1:], "[]") && !slices.Contains(path[1:], "{}") {
		// The field and the map holding it are present and not null.
		c.always = make(map[string]bool, len(s.always)+1)
		for k, v := range s.always {
			c.always[k] = v
		}
		c.always[path[0]] = true
		c.kinds &^= kNull
		if c.kinds == 0 {
			return s
		}
	}
	return &c
}

// AdmittedResources are the built-in resources (group/resource) that have
// AdmittedFacts, sorted.
func AdmittedResources() []schema.GroupResource {
	out := make([]schema.GroupResource, 0, len(podSpecs))
	for gr := range podSpecs {
		out = append(out, gr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
