// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/kyverno"
)

// Suite is one Test document with everything it references loaded.
type Suite struct {
	// Name is the test's metadata.name, or its directory when unnamed.
	Name string `json:"name"`
	// Path is the test file; Document the 1-based YAML document in it.
	Path     string `json:"path"`
	Document int    `json:"document"`
	// Dir is the directory relative paths are resolved against.
	Dir  string `json:"-"`
	Test Test   `json:"-"`

	// Policies are the ClusterPolicies kyvap translates, in file order.
	Policies []kyvernov1.ClusterPolicy `json:"-"`
	// ValidatingPolicies are the policies.kyverno.io ValidatingPolicies and
	// NamespacedValidatingPolicies, in file order.
	ValidatingPolicies []ValidatingPolicy `json:"-"`
	// Ignored are the policies of the test kyvap does not translate.
	Ignored []IgnoredPolicy `json:"-"`
	// Exceptions are the test's Kyverno PolicyExceptions.
	Exceptions []kyvernov2.PolicyException `json:"-"`
	// CELExceptions are the test's policies.kyverno.io PolicyExceptions
	// (any served version), which apply to ValidatingPolicies.
	CELExceptions []policiesv1.PolicyException `json:"-"`
	// Resources are the objects the test evaluates, deduplicated as Kyverno
	// does (first of each group/kind/namespace/name), with their namespace
	// defaulted to "default" unless the kind is cluster-scoped.
	Resources []Resource `json:"-"`
	// Params are the objects parameter references resolve against: the
	// resources, paramResources and ClusterResource resources, like the
	// fake cluster of Kyverno's CLI.
	Params []unstructured.Unstructured `json:"-"`
	// ContextResources are the objects of the test's context file, which
	// Kyverno's resource library reads.
	ContextResources []unstructured.Unstructured `json:"-"`
	// CRDs resolve custom kinds; they come from any file of the test and
	// from ClusterResource files.
	CRDs []apiextensionsv1.CustomResourceDefinition `json:"-"`
	// Values and UserInfo are nil when the test gives none.
	Values   *ValuesSpec  `json:"-"`
	UserInfo *RequestInfo `json:"-"`
	// Warnings are things the user should know that do not stop the test.
	Warnings []string `json:"warnings,omitempty"`
}

// Resource is one resource of a test and where it was read.
type Resource struct {
	Object unstructured.Unstructured
	File   string
	Line   int
}

// Key is "apiVersion/kind/namespace/name" (namespace empty when
// cluster-scoped), the way reports name the resource.
func (r *Resource) Key() string {
	return strings.Join([]string{r.Object.GetAPIVersion(), r.Object.GetKind(), r.Object.GetNamespace(), r.Object.GetName()}, "/")
}

// IgnoredPolicy is a policy of the test kyvap does not translate, and why.
type IgnoredPolicy struct {
	// Name is "name", or "namespace/name" for a namespaced policy.
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// ValidatingPolicy is a policies.kyverno.io ValidatingPolicy or
// NamespacedValidatingPolicy of a test, decoded into the v1 type whatever
// its served version (the spec is the same Go type in v1alpha1, v1beta1
// and v1).
type ValidatingPolicy struct {
	// Kind is ValidatingPolicy or NamespacedValidatingPolicy.
	Kind       string
	APIVersion string
	// Cluster is set for a ValidatingPolicy, Namespaced for a
	// NamespacedValidatingPolicy.
	Cluster    *policiesv1.ValidatingPolicy
	Namespaced *policiesv1.NamespacedValidatingPolicy
	File       string
	// Raw is the document as written, in JSON: kyvap test --cluster
	// creates the policy from it, as kubectl would (the Go types drop
	// empty lists, such as autogen.podControllers.controllers: [], that
	// mean something).
	Raw []byte
}

// Name is the policy's name; Namespace its namespace (empty for a
// ValidatingPolicy).
func (v *ValidatingPolicy) Name() string {
	if v.Namespaced != nil {
		return v.Namespaced.Name
	}
	return v.Cluster.Name
}

// Namespace is a NamespacedValidatingPolicy's namespace, else "".
func (v *ValidatingPolicy) Namespace() string {
	if v.Namespaced != nil {
		return v.Namespaced.Namespace
	}
	return ""
}

// Spec is the policy's spec.
func (v *ValidatingPolicy) Spec() *policiesv1.ValidatingPolicySpec {
	if v.Namespaced != nil {
		return &v.Namespaced.Spec
	}
	return &v.Cluster.Spec
}

// Key is "name", or "namespace/name" for a NamespacedValidatingPolicy.
func (v *ValidatingPolicy) Key() string {
	if ns := v.Namespace(); ns != "" {
		return ns + "/" + v.Name()
	}
	return v.Name()
}

// Load finds every file named DefaultFileName under path (recursively, in
// lexical order) and loads its tests. path may also name a test file.
func Load(path string) ([]Suite, error) {
	return LoadNamed(path, DefaultFileName)
}

// LoadNamed is Load with another test file name (Kyverno's --file-name).
// Suites that load are returned even when others fail; the error joins
// every failure, each naming the file and, where possible, the line.
func LoadNamed(path, fileName string) ([]Suite, error) {
	files, err := findTestFiles(path, fileName)
	if err != nil {
		return nil, err
	}
	var suites []Suite
	var errs []error
	for _, file := range files {
		s, err := LoadFile(file)
		suites = append(suites, s...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return suites, errors.Join(errs...)
}

// findTestFiles lists the test files under path.
func findTestFiles(path, fileName string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, &manifest.Error{File: path, Err: unwrapPathError(err)}
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return &manifest.Error{File: p, Err: unwrapPathError(err)}
		}
		if !d.IsDir() && d.Name() == fileName {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil // WalkDir walks in lexical order, as Kyverno's ReadDir recursion
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// LoadFile loads every Test document of one test file.
func LoadFile(file string) ([]Suite, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &manifest.Error{File: file, Err: unwrapPathError(err)}
	}
	var suites []Suite
	var errs []error
	for _, doc := range splitDocuments(data) {
		raw, err := toJSON(file, doc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if isNull(raw) {
			continue
		}
		var test Test
		if err := decodeStrict(file, doc, raw, &test); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := checkTest(file, doc, &test); err != nil {
			errs = append(errs, err)
			continue
		}
		s, err := loadSuite(file, doc.Index, test)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		suites = append(suites, s)
	}
	return suites, errors.Join(errs...)
}

func isNull(raw []byte) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// The results a test may expect (Kyverno's openreports results).
var validResults = map[string]bool{"pass": true, "fail": true, "skip": true, "warn": true, "error": true}

// checkTest refuses what Kyverno's CLI refuses: the deprecated schema
// (no apiVersion/kind, or the top-level name) and invalid results.
func checkTest(file string, doc document, t *Test) error {
	fail := func(key string, format string, args ...any) error {
		return &manifest.Error{File: file, Line: keyLine(doc, key), Document: doc.Index, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case t.APIVersion == "" || t.Kind == "":
		return fail("apiVersion", "apiVersion and kind are required (Kyverno's CLI refuses the deprecated schema): want %s Test", APIVersion)
	case t.APIVersion != APIVersion || t.Kind != "Test":
		return fail("kind", "unsupported kind %s %s: want %s Test", t.APIVersion, t.Kind, APIVersion)
	case t.Name != "":
		return fail("name", "the top-level name is Kyverno's deprecated schema: use metadata.name")
	}
	for i, r := range t.Results {
		where := fmt.Sprintf("results[%d] (policy %q, rule %q)", i, r.Policy, r.Rule)
		switch {
		case r.Policy == "":
			return fail("results", "%s: policy is required", where)
		case !validResults[r.Result]:
			return fail("result", "%s: result %q: want pass, fail, skip, warn or error", where, r.Result)
		}
		switch r.Operation {
		case "", "CREATE", "UPDATE", "DELETE":
		default:
			return fail("operation", "%s: operation %q: want CREATE, UPDATE or DELETE", where, r.Operation)
		}
		if r.Operation != "" && r.IsDeletingPolicy {
			return fail("operation", "%s: operation is not supported for deleting policies", where)
		}
	}
	return nil
}

// loadSuite reads the files a Test references.
func loadSuite(file string, index int, t Test) (Suite, error) {
	dir := filepath.Dir(file)
	s := Suite{Name: t.Name, Path: file, Document: index, Dir: dir, Test: t}
	if s.Name == "" {
		s.Name = t.GetName()
	}
	if s.Name == "" || s.Name == DefaultFileName {
		s.Name = filepath.Base(dir)
	}
	for _, p := range dedupe(t.Policies) {
		if err := s.readPolicies(resolve(dir, p)); err != nil {
			return s, err
		}
	}
	for _, p := range t.PolicyExceptions {
		if err := s.readExceptions(resolve(dir, p)); err != nil {
			return s, err
		}
	}
	var resources []Resource
	for _, p := range dedupe(t.Resources) {
		rs, err := s.readObjects(resolve(dir, p), "resource")
		if err != nil {
			return s, err
		}
		resources = append(resources, rs...)
	}
	var params []Resource
	for _, p := range t.ParamResources {
		rs, err := s.readObjects(resolve(dir, p), "parameter resource")
		if err != nil {
			return s, err
		}
		params = append(params, rs...)
	}
	for _, p := range t.ClusterResources {
		rs, err := s.readClusterResource(dir, resolve(dir, p))
		if err != nil {
			return s, err
		}
		params = append(params, rs...)
	}
	if err := s.readValues(dir); err != nil {
		return s, err
	}
	if t.Context != "" {
		objs, err := s.readContext(resolve(dir, t.Context))
		if err != nil {
			return s, err
		}
		s.ContextResources = objs
	}
	if t.UserInfo != "" {
		info, err := readUserInfo(resolve(dir, t.UserInfo))
		if err != nil {
			return s, err
		}
		s.UserInfo = info
	}
	s.Resources = s.dedupeResources(s.defaultNamespaces(resources))
	for _, r := range s.Resources {
		s.Params = append(s.Params, r.Object)
	}
	for _, r := range s.defaultNamespaces(params) {
		s.Params = append(s.Params, r.Object)
	}
	s.warnUnsupported()
	return s, nil
}

// resolve makes a test-relative path absolute (as Kyverno's path.GetFullPath).
func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// dedupe drops repeated paths, as Kyverno's cleanTest does for policies and
// resources.
func dedupe(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// warnUnsupported notes the test fields kyvap does not evaluate.
func (s *Suite) warnUnsupported() {
	t := &s.Test
	note := func(field string, set bool) {
		if set {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s is not evaluated: kyvap runs admission requests for ClusterPolicy CEL rules only", field))
		}
	}
	note("jsonPayload(s)", t.JSONPayload != "" || len(t.JSONPayloads) > 0)
	note("httpPayloads", len(t.HTTPPayloads) > 0)
	note("envoyPayloads", len(t.EnvoyPayloads) > 0)
	note("targetResources", len(t.TargetResources) > 0)
	note("apiCallResponses", len(t.APICallResponses) > 0)
	note("globalContextEntries", len(t.GlobalContextEntries) > 0)
	for i, r := range t.Results {
		if r.PatchedResources != "" || r.GeneratedResource != "" || len(r.GeneratedResources) > 0 || r.CloneSourceResource != "" {
			s.Warnings = append(s.Warnings, fmt.Sprintf("results[%d]: patched/generated resources are not compared: kyvap only validates", i))
		}
	}
}

// readDocuments calls fn for every non-empty document of a file or of the
// manifest files of a directory (recursively, in lexical order).
func readDocuments(path string, fn func(file string, doc document, raw []byte, meta metav1.TypeMeta) error) error {
	info, err := os.Stat(path)
	if err != nil {
		return &manifest.Error{File: path, Err: unwrapPathError(err)}
	}
	files := []string{path}
	if info.IsDir() {
		files = nil
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, p)
				}
			}
			return nil
		})
		if err != nil {
			return &manifest.Error{File: path, Err: unwrapPathError(err)}
		}
		sort.Strings(files)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return &manifest.Error{File: file, Err: unwrapPathError(err)}
		}
		for _, doc := range splitDocuments(data) {
			raw, err := toJSON(file, doc)
			if err != nil {
				return err
			}
			if isNull(raw) {
				continue
			}
			var meta metav1.TypeMeta
			if err := json.Unmarshal(raw, &meta); err != nil {
				return &manifest.Error{File: file, Line: doc.FirstLine, Document: doc.Index, Err: fmt.Errorf("not a Kubernetes object: %w", err)}
			}
			if meta.APIVersion == "" || meta.Kind == "" {
				return &manifest.Error{File: file, Line: doc.FirstLine, Document: doc.Index, Err: errors.New("apiVersion and kind are required")}
			}
			if err := fn(file, doc, raw, meta); err != nil {
				var me *manifest.Error
				if errors.As(err, &me) {
					return err
				}
				return &manifest.Error{File: file, Line: doc.FirstLine, Document: doc.Index, Err: err}
			}
		}
	}
	return nil
}

// ignoredKinds are the policy kinds Kyverno's CLI loads and kyvap does not
// translate, with the reason reported for them.
var ignoredKinds = map[string]string{
	"ValidatingAdmissionPolicy":        "already a ValidatingAdmissionPolicy: kyvap translates Kyverno ClusterPolicies",
	"ValidatingAdmissionPolicyBinding": "a ValidatingAdmissionPolicyBinding: kyvap translates Kyverno ClusterPolicies",
	"MutatingAdmissionPolicy":          "a MutatingAdmissionPolicy: kyvap only validates",
	"MutatingAdmissionPolicyBinding":   "a MutatingAdmissionPolicyBinding: kyvap only validates",
	"ValidatingPolicy":                 "a ValidatingPolicy of a version Kyverno's CLI does not load (want policies.kyverno.io v1alpha1, v1beta1 or v1)",
	"NamespacedValidatingPolicy":       "a NamespacedValidatingPolicy of a version Kyverno's CLI does not load (want policies.kyverno.io v1beta1 or v1)",
	"ImageValidatingPolicy":            "an ImageValidatingPolicy: kyvap translates kyverno.io/v1 ClusterPolicies",
	"NamespacedImageValidatingPolicy":  "a NamespacedImageValidatingPolicy: kyvap translates kyverno.io/v1 ClusterPolicies",
	"MutatingPolicy":                   "a MutatingPolicy: kyvap only validates",
	"NamespacedMutatingPolicy":         "a NamespacedMutatingPolicy: kyvap only validates",
	"GeneratingPolicy":                 "a GeneratingPolicy: kyvap only validates",
	"NamespacedGeneratingPolicy":       "a NamespacedGeneratingPolicy: kyvap only validates",
	"DeletingPolicy":                   "a DeletingPolicy: kyvap only validates at admission",
	"NamespacedDeletingPolicy":         "a NamespacedDeletingPolicy: kyvap only validates at admission",
	"CleanupPolicy":                    "a CleanupPolicy: kyvap only validates at admission",
	"ClusterCleanupPolicy":             "a ClusterCleanupPolicy: kyvap only validates at admission",
}

// readPolicies adds the policies of a policy file or directory.
func (s *Suite) readPolicies(path string) error {
	return readDocuments(path, func(file string, doc document, raw []byte, meta metav1.TypeMeta) error {
		return manifest.ForEachItem(raw, meta, func(raw []byte, meta metav1.TypeMeta) error {
			gv, err := schema.ParseGroupVersion(meta.APIVersion)
			if err != nil {
				return fmt.Errorf("apiVersion %q: %w", meta.APIVersion, err)
			}
			switch {
			case gv.Group == "kyverno.io" && (gv.Version == "v1" || gv.Version == "v2beta1") && meta.Kind == "ClusterPolicy":
				var p kyvernov1.ClusterPolicy
				if err := manifest.Decode(raw, &p, meta); err != nil {
					return err
				}
				if p.Name == "" {
					return errors.New("ClusterPolicy: metadata.name is required")
				}
				for _, q := range s.Policies {
					if q.Name == p.Name {
						return fmt.Errorf("two ClusterPolicies are named %q", p.Name)
					}
				}
				s.Policies = append(s.Policies, p)
				return nil
			case gv.Group == "kyverno.io" && gv.Version == "v1" && meta.Kind == "Policy":
				var p kyvernov1.Policy
				if err := manifest.Decode(raw, &p, meta); err != nil {
					return err
				}
				if p.Name == "" {
					return errors.New("a Policy needs metadata.name")
				}
				as := p.AsClusterPolicy()
				for _, q := range s.Policies {
					if q.Name == p.Name {
						return fmt.Errorf("two policies are named %q (Kyverno's CLI compares results by name)", p.Name)
					}
				}
				s.Policies = append(s.Policies, *as)
				return nil
			case gv.Group == "kyverno.io" && (gv.Version == "v2" || gv.Version == "v2beta1") && meta.Kind == "PolicyException":
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: PolicyException in a policy file is ignored, as Kyverno's CLI does: list it under exceptions", file))
				return nil
			case gv.Group == "policies.kyverno.io" && meta.Kind == "PolicyException" && celVersions[gv.Version]:
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s PolicyException in a policy file is ignored, as Kyverno's CLI does: list it under exceptions", file, meta.APIVersion))
				return nil
			case gv.Group == "policies.kyverno.io" && meta.Kind == "ValidatingPolicy" && celVersions[gv.Version],
				gv.Group == "policies.kyverno.io" && meta.Kind == "NamespacedValidatingPolicy" && (gv.Version == "v1beta1" || gv.Version == "v1"):
				return s.addValidatingPolicy(file, raw, meta)
			}
			reason, known := ignoredKinds[meta.Kind]
			known = known && (gv.Group == "kyverno.io" || gv.Group == "policies.kyverno.io" || gv.Group == "admissionregistration.k8s.io")
			if !known {
				return fmt.Errorf("unsupported kind %s %s in a policy file: want kyverno.io/v1 ClusterPolicy (or another Kyverno policy kind)", meta.APIVersion, meta.Kind)
			}
			var obj unstructured.Unstructured
			if err := obj.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("%s: %w", meta.Kind, err)
			}
			name := obj.GetName()
			if obj.GetNamespace() != "" {
				name = obj.GetNamespace() + "/" + name
			}
			s.Ignored = append(s.Ignored, IgnoredPolicy{Name: name, Kind: meta.Kind, File: file, Reason: reason})
			return nil
		})
	})
}

// celVersions are the served versions of the policies.kyverno.io kinds
// kyvap reads (one Go type in all of them).
var celVersions = map[string]bool{"v1alpha1": true, "v1beta1": true, "v1": true}

// addValidatingPolicy decodes a ValidatingPolicy or
// NamespacedValidatingPolicy. Like Kyverno's CLI (policy/load.go), a
// ValidatingPolicy in Envoy or HTTP mode is not an admission policy: it is
// ignored with the reason.
func (s *Suite) addValidatingPolicy(file string, raw []byte, meta metav1.TypeMeta) error {
	vp := ValidatingPolicy{Kind: meta.Kind, APIVersion: meta.APIVersion, File: file, Raw: raw}
	if meta.Kind == "NamespacedValidatingPolicy" {
		vp.Namespaced = &policiesv1.NamespacedValidatingPolicy{}
		if err := manifest.Decode(raw, vp.Namespaced, meta); err != nil {
			return err
		}
		if vp.Namespaced.Namespace == "" {
			// Kyverno's CLI reads it as it is: a namespaced object without a
			// namespace, in "default" once applied.
			vp.Namespaced.Namespace = "default"
		}
	} else {
		vp.Cluster = &policiesv1.ValidatingPolicy{}
		if err := manifest.Decode(raw, vp.Cluster, meta); err != nil {
			return err
		}
	}
	if vp.Name() == "" {
		return fmt.Errorf("%s: metadata.name is required", meta.Kind)
	}
	switch mode := vp.Spec().EvaluationMode(); mode {
	case "Envoy", "HTTP":
		s.Ignored = append(s.Ignored, IgnoredPolicy{Name: vp.Key(), Kind: meta.Kind, File: file,
			Reason: fmt.Sprintf("a ValidatingPolicy in %s mode authorizes %s requests, not admission requests", mode, mode)})
		return nil
	}
	for i := range s.ValidatingPolicies {
		if q := &s.ValidatingPolicies[i]; q.Kind == vp.Kind && q.Key() == vp.Key() {
			return fmt.Errorf("two %ss are named %q", vp.Kind, vp.Key())
		}
	}
	s.ValidatingPolicies = append(s.ValidatingPolicies, vp)
	return nil
}

// readExceptions adds the PolicyExceptions of an exceptions file.
func (s *Suite) readExceptions(path string) error {
	return readDocuments(path, func(file string, doc document, raw []byte, meta metav1.TypeMeta) error {
		return manifest.ForEachItem(raw, meta, func(raw []byte, meta metav1.TypeMeta) error {
			switch {
			case (meta.APIVersion == "kyverno.io/v2" || meta.APIVersion == "kyverno.io/v2beta1") && meta.Kind == "PolicyException":
				var ex kyvernov2.PolicyException
				if err := manifest.Decode(raw, &ex, meta); err != nil {
					return err
				}
				s.Exceptions = append(s.Exceptions, ex)
				return nil
			case strings.HasPrefix(meta.APIVersion, "policies.kyverno.io/") && celVersions[strings.TrimPrefix(meta.APIVersion, "policies.kyverno.io/")] && meta.Kind == "PolicyException":
				var ex policiesv1.PolicyException
				if err := manifest.Decode(raw, &ex, meta); err != nil {
					return err
				}
				s.CELExceptions = append(s.CELExceptions, ex)
				return nil
			default:
				return fmt.Errorf("unsupported kind %s %s in an exceptions file: want kyverno.io/v2 or policies.kyverno.io/v1 PolicyException", meta.APIVersion, meta.Kind)
			}
		})
	})
}

// readObjects reads the objects of a resource file; CRDs among them also
// resolve kinds.
func (s *Suite) readObjects(path, what string) ([]Resource, error) {
	var out []Resource
	err := readDocuments(path, func(file string, doc document, raw []byte, meta metav1.TypeMeta) error {
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s %s %s: %w", what, meta.APIVersion, meta.Kind, err)
		}
		if obj.GetName() == "" && obj.GetGenerateName() == "" {
			return fmt.Errorf("%s %s %s: metadata.name is required", what, meta.APIVersion, meta.Kind)
		}
		if meta.APIVersion == "apiextensions.k8s.io/v1" && meta.Kind == "CustomResourceDefinition" {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := manifest.Decode(raw, &crd, meta); err != nil {
				return err
			}
			s.CRDs = append(s.CRDs, crd)
		}
		out = append(out, Resource{Object: obj, File: file, Line: doc.FirstLine})
		return nil
	})
	return out, err
}

// readClusterResource reads a ClusterResource file: its CRDs resolve kinds,
// its resources are parameters (they exist in Kyverno's fake cluster).
// readContext reads a test's context file: the objects Kyverno's resource
// library sees (and only them, in Kyverno's CLI).
func (s *Suite) readContext(path string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	err := readDocuments(path, func(file string, doc document, raw []byte, meta metav1.TypeMeta) error {
		if meta.APIVersion != APIVersion || meta.Kind != "Context" {
			return fmt.Errorf("unsupported kind %s %s: want %s Context", meta.APIVersion, meta.Kind, APIVersion)
		}
		var c contextFile
		if err := decodeStrict(file, doc, raw, &c); err != nil {
			return err
		}
		if len(c.Spec.Images) > 0 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: spec.images is not evaluated: kyvap does not implement Kyverno's image data library", file))
		}
		for i, r := range c.Spec.Resources {
			var obj unstructured.Unstructured
			if err := obj.UnmarshalJSON(r); err != nil {
				return fmt.Errorf("%s: spec.resources[%d]: %w", file, i, err)
			}
			out = append(out, obj)
		}
		return nil
	})
	return out, err
}

func (s *Suite) readClusterResource(dir, path string) ([]Resource, error) {
	var out []Resource
	err := readDocuments(path, func(file string, doc document, raw []byte, meta metav1.TypeMeta) error {
		if meta.APIVersion != APIVersion || meta.Kind != "ClusterResource" {
			return fmt.Errorf("unsupported kind %s %s: want %s ClusterResource", meta.APIVersion, meta.Kind, APIVersion)
		}
		var cr clusterResource
		if err := decodeStrict(file, doc, raw, &cr); err != nil {
			return err
		}
		for _, p := range cr.Spec.CRDs {
			objs, err := s.readObjects(resolve(dir, p), "CRD")
			if err != nil {
				return err
			}
			for _, o := range objs {
				if o.Object.GetKind() != "CustomResourceDefinition" {
					return fmt.Errorf("%s: %s %s is not a CustomResourceDefinition", p, o.Object.GetAPIVersion(), o.Object.GetKind())
				}
			}
		}
		for i, r := range cr.Spec.Resources {
			var obj unstructured.Unstructured
			if err := obj.UnmarshalJSON(r); err != nil {
				return fmt.Errorf("spec.resources[%d]: %w", i, err)
			}
			out = append(out, Resource{Object: obj, File: file, Line: doc.FirstLine})
		}
		return nil
	})
	return out, err
}

// readValues reads the inline values or the variables file. Inline values
// win, as in Kyverno's variables.New.
func (s *Suite) readValues(dir string) error {
	file, doc := s.Path, document{}
	if s.Test.Values != nil {
		s.Values = s.Test.Values
	} else if s.Test.Variables != "" {
		file = resolve(dir, s.Test.Variables)
		var values *Values
		err := readDocuments(file, func(f string, d document, raw []byte, meta metav1.TypeMeta) error {
			if values != nil {
				return errors.New("a values file holds one Values document")
			}
			// Any apiVersion and kind: Kyverno's CLI reads the document as
			// values whatever it declares.
			values, doc = &Values{}, d
			return decodeStrict(f, d, raw, values)
		})
		if err != nil {
			return err
		}
		if values == nil {
			return &manifest.Error{File: file, Err: errors.New("empty values file")}
		}
		s.Values = &values.ValuesSpec
	}
	if s.Values == nil {
		return nil
	}
	check := func(where string, v any) error {
		fail := func(format string, args ...any) error {
			e := &manifest.Error{File: file, Err: fmt.Errorf(where+": "+format, args...)}
			if doc.Data != nil {
				e.Line, e.Document = keyLine(doc, valueOperation), doc.Index
			}
			return e
		}
		op, ok := v.(string)
		if !ok {
			return fail("%s must be a string", valueOperation)
		}
		switch op {
		case "", "CREATE", "UPDATE", "DELETE", "CONNECT":
			return nil
		}
		return fail("invalid %s value %q, must be one of CREATE, UPDATE, DELETE, CONNECT", valueOperation, op)
	}
	if v, ok := s.Values.GlobalValues[valueOperation]; ok {
		if err := check("globalValues", v); err != nil {
			return err
		}
	}
	for _, p := range s.Values.Policies {
		for _, r := range p.Resources {
			if v, ok := r.Values[valueOperation]; ok {
				if err := check(fmt.Sprintf("policy %s, resource %s", p.Name, r.Name), v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// readUserInfo reads a user-info file.
func readUserInfo(path string) (*RequestInfo, error) {
	var info *UserInfo
	err := readDocuments(path, func(file string, doc document, raw []byte, meta metav1.TypeMeta) error {
		if info != nil {
			return errors.New("a user-info file holds one UserInfo document")
		}
		if meta.APIVersion != APIVersion || meta.Kind != "UserInfo" {
			return fmt.Errorf("unsupported kind %s %s: want %s UserInfo", meta.APIVersion, meta.Kind, APIVersion)
		}
		info = &UserInfo{}
		return decodeStrict(file, doc, raw, info)
	})
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, &manifest.Error{File: path, Err: errors.New("empty user-info file")}
	}
	for _, r := range info.Roles {
		if !strings.Contains(r, ":") {
			return nil, &manifest.Error{File: path, Err: fmt.Errorf("role %q: want namespace:name", r)}
		}
	}
	return &info.RequestInfo, nil
}

// defaultNamespaces gives namespaced resources without a namespace the
// namespace "default", as Kyverno's CLI does when it reads resources: every
// kind it does not know to be cluster-scoped gets it.
func (s *Suite) defaultNamespaces(rs []Resource) []Resource {
	resolver := kyverno.NewStaticResolver(s.CRDs...)
	for i := range rs {
		obj := &rs[i].Object
		if obj.GetNamespace() != "" {
			continue
		}
		if res, ok := resolveObject(resolver, obj.GroupVersionKind()); ok && !res.Namespaced {
			continue
		}
		obj.SetNamespace("default")
	}
	return rs
}

// dedupeResources keeps the first resource of each group, kind, namespace
// and name, as Kyverno's RemoveDuplicates (which warns about the others).
func (s *Suite) dedupeResources(rs []Resource) []Resource {
	type key struct {
		gk              schema.GroupKind
		namespace, name string
	}
	seen := map[key]bool{}
	var out []Resource
	for _, r := range rs {
		k := key{r.Object.GroupVersionKind().GroupKind(), r.Object.GetNamespace(), r.Object.GetName()}
		if seen[k] {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: duplicated resource %s %s/%s is ignored", r.File, r.Line, r.Object.GetKind(), r.Object.GetNamespace(), r.Object.GetName()))
			continue
		}
		seen[k] = true
		out = append(out, r)
	}
	return out
}

// resolveObject finds the served resource of an exact group/version/kind.
func resolveObject(resolver kyverno.KindResolver, gvk schema.GroupVersionKind) (kyverno.Resource, bool) {
	spelling := gvk.Version + "/" + gvk.Kind
	if gvk.Group != "" {
		spelling = gvk.Group + "/" + spelling
	}
	if strings.ContainsAny(spelling, "*?") {
		return kyverno.Resource{}, false
	}
	rs, err := resolver.Resolve(spelling)
	if err != nil {
		return kyverno.Resource{}, false
	}
	for _, r := range rs {
		if r.Subresource == "" && r.Group == gvk.Group && r.Version == gvk.Version && r.Kind == gvk.Kind {
			return r, true
		}
	}
	return kyverno.Resource{}, false
}
