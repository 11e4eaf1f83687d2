// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"sort"
	"strconv"
	"strings"
)

// Pod says where Kyverno reads the pod of a request's object (pkg/engine/
// handlers/validation/validate_pss.go getSpec): its spec and its metadata,
// as paths of fields under a CEL root (object, oldObject).
type Pod struct {
	// Root is the CEL variable of the object (object, oldObject).
	Root string
	// Spec and Metadata are the field paths of the pod's spec and
	// metadata under Root.
	Spec, Metadata []string
}

// PodOf is where Kyverno reads the pod of an object of the kind: a Pod's
// own spec and metadata; a DaemonSet's, Deployment's, Job's,
// StatefulSet's, ReplicaSet's or ReplicationController's template; a
// CronJob's job template's pod template spec, with the metadata of the
// job template (not of its pod template: getSpec reads
// spec.jobTemplate.metadata). ok is false for any other kind, on which
// Kyverno's evaluation fails.
func PodOf(root, kind string) (pod Pod, ok bool) {
	switch kind {
	case "Pod":
		return Pod{Root: root, Spec: []string{"spec"}, Metadata: []string{"metadata"}}, true
	case "DaemonSet", "Deployment", "Job", "StatefulSet", "ReplicaSet", "ReplicationController":
		return Pod{Root: root, Spec: []string{"spec", "template", "spec"}, Metadata: []string{"spec", "template", "metadata"}}, true
	case "CronJob":
		return Pod{Root: root, Spec: []string{"spec", "jobTemplate", "spec", "template", "spec"}, Metadata: []string{"spec", "jobTemplate", "metadata"}}, true
	}
	return Pod{}, false
}

// field is a field of a decoded object, as CEL reads it: a base
// expression that is always a map (or an element bound by a macro) and
// the path under it.
type field struct {
	base string
	path []string
}

// bound is the pod as the checks read it, bound by Compile: its spec
// (s), its metadata (m) and its containers (cs), each present (an unset
// spec or metadata is an empty map, unset containers an empty list).
type bound struct{}

func (bound) spec(path ...string) field {
	return field{base: "s", path: path}
}

func (bound) metadata(path ...string) field {
	return field{base: "m", path: path}
}

// bind is the CEL of predicate with the pod bound as the checks read it.
func (p Pod) bind(predicate string) string {
	spec := field{base: p.Root, path: p.Spec}
	metadata := field{base: p.Root, path: p.Metadata}
	containers := make([]string, 0, 3)
	for _, name := range []string{"initContainers", "containers", "ephemeralContainers"} {
		containers = append(containers, of("s", name).list())
	}
	return "[" + spec.set() + " ? dyn(" + spec.expr() + ") : dyn({})].all(s, " +
		"[" + metadata.set() + " ? dyn(" + metadata.expr() + ") : dyn({})].all(m, " +
		"[" + strings.Join(containers, " + ") + "].all(cs, " + predicate + ")))"
}

// of is a field under a macro's element.
func of(element string, path ...string) field {
	return field{base: element, path: path}
}

// expr is the field's CEL, to read where it is set.
func (f field) expr() string {
	return f.base + "." + strings.Join(f.path, ".")
}

// set holds where the field and every field above it are present and not
// null: Kyverno decodes the object into Go's types, where a null field is
// an unset one.
func (f field) set() string {
	terms := make([]string, 0, 2*len(f.path))
	cur := f.base
	for _, name := range f.path {
		cur += "." + name
		terms = append(terms, "has("+cur+")", "dyn("+cur+") != null")
	}
	return "(" + strings.Join(terms, " && ") + ")"
}

// is holds where the field is set and its value satisfies the CEL
// comparison (e.g. "== true").
func (f field) is(comparison string) string {
	return "(" + f.set() + " && " + f.expr() + " " + comparison + ")"
}

// stringOr is the field's value, or "" where it is unset (Go's zero
// string).
func (f field) stringOr() string {
	return "(" + f.set() + " ? string(" + f.expr() + ") : '')"
}

// list is the field's elements, or none where it is unset.
func (f field) list() string {
	return "(" + f.set() + " ? dyn(" + f.expr() + ") : dyn([]))"
}

// anyContainer holds where some container of the pod, init, regular or
// ephemeral (the fork's visitContainers), satisfies the predicate on c.
func (bound) anyContainer(predicate string) string {
	return "cs.exists(c, " + predicate + ")"
}

// windows holds where the pod's spec.os.name is windows (the checks the
// fork exempts such pods from from v1.25).
func (p bound) windows() string {
	return p.spec("os", "name").is("== 'windows'")
}

// quotedSet is a CEL list of the strings, sorted.
func quotedSet(values ...string) string {
	sorted := append([]string(nil), values...)
	sort.Strings(sorted)
	quoted := make([]string, len(sorted))
	for i, v := range sorted {
		quoted[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// anyOf joins predicates with ||.
func anyOf(predicates ...string) string {
	return "(" + strings.Join(predicates, " || ") + ")"
}
