// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package manifest reads the objects `kyvap translate` works on (Kyverno
// ClusterPolicies, ValidatingPolicies, NamespacedValidatingPolicies, both
// groups' PolicyExceptions, and CustomResourceDefinitions for kind
// resolution) from YAML or JSON files, and says where a broken one is:
// file, line and document.
//
// Decoding is deliberately lenient about unknown fields: kyvap's api types
// model only the part of Kyverno's schema it reads, so rejecting unknown
// fields would reject valid policies. Syntax errors, duplicate keys, type
// errors and unsupported kinds are errors.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	policiesv1 "github.com/kyverno/api/api/policies.kyverno.io/v1"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	kyvernov2 "github.com/kyvap/kyvap/api/v2"
)

// Stdin is the path that names standard input.
const Stdin = "-"

// Set is what a number of manifests hold, in the order they were read.
type Set struct {
	// Policies are the ClusterPolicies, and the namespaced Policies
	// carried as ClusterPolicies of TypeMeta kind Policy.
	Policies   []kyvernov1.ClusterPolicy
	Exceptions []kyvernov2.PolicyException
	// ValidatingPolicies and NamespacedValidatingPolicies are read from any
	// served version of policies.kyverno.io (v1alpha1, v1beta1, v1: the
	// spec is the same).
	ValidatingPolicies           []policiesv1.ValidatingPolicy
	NamespacedValidatingPolicies []policiesv1.NamespacedValidatingPolicy
	// CELExceptions are policies.kyverno.io PolicyExceptions.
	CELExceptions []policiesv1.PolicyException
	CRDs          []apiextensionsv1.CustomResourceDefinition
}

// Accept says which kinds a read may add to the Set.
type Accept int

const (
	// AcceptAll accepts ClusterPolicies, PolicyExceptions and CRDs.
	AcceptAll Accept = iota
	// AcceptCRDsOnly accepts only CustomResourceDefinitions (the --crd files).
	AcceptCRDsOnly
)

// Error locates a problem in an input file.
type Error struct {
	// File is the path read, or "<stdin>".
	File string
	// Line is 1-based; 0 when the problem is the file itself.
	Line int
	// Document is the 1-based index of the YAML document; 0 when unknown.
	Document int
	Err      error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Document > 0 {
		fmt.Fprintf(&b, ": document %d", e.Document)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ReadPath reads a file, every *.yaml, *.yml and *.json file of a directory
// (not recursively, in name order), or stdin when path is Stdin.
func (s *Set) ReadPath(path string, stdin io.Reader, accept Accept) error {
	if path == Stdin {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return &Error{File: "<stdin>", Err: err}
		}
		return s.Read("<stdin>", data, accept)
	}
	info, err := os.Stat(path)
	if err != nil {
		return &Error{File: path, Err: unwrapPathError(err)}
	}
	if !info.IsDir() {
		return s.readFile(path, accept)
	}
	files, err := manifestFiles(path)
	if err != nil {
		return &Error{File: path, Err: unwrapPathError(err)}
	}
	if len(files) == 0 {
		return &Error{File: path, Err: errors.New("directory holds no .yaml, .yml or .json file")}
	}
	for _, f := range files {
		if err := s.readFile(f, accept); err != nil {
			return err
		}
	}
	return nil
}

// manifestFiles lists the manifest files directly in dir, sorted.
func manifestFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

func (s *Set) readFile(path string, accept Accept) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Error{File: path, Err: unwrapPathError(err)}
	}
	return s.Read(path, data, accept)
}

// unwrapPathError drops the path an *os.PathError repeats, since Error
// already names the file.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Read adds the objects of a YAML stream (or a JSON document) to the Set;
// file names the input in errors. Nothing is added when it fails.
func (s *Set) Read(file string, data []byte, accept Accept) error {
	var read Set
	for _, doc := range SplitDocuments(data) {
		if err := read.readDocument(doc, accept); err != nil {
			return &Error{File: file, Line: err.line, Document: doc.Index, Err: err.err}
		}
	}
	s.Policies = append(s.Policies, read.Policies...)
	s.Exceptions = append(s.Exceptions, read.Exceptions...)
	s.ValidatingPolicies = append(s.ValidatingPolicies, read.ValidatingPolicies...)
	s.NamespacedValidatingPolicies = append(s.NamespacedValidatingPolicies, read.NamespacedValidatingPolicies...)
	s.CELExceptions = append(s.CELExceptions, read.CELExceptions...)
	s.CRDs = append(s.CRDs, read.CRDs...)
	return nil
}

// Document is one YAML document of a stream.
type Document struct {
	// Index is 1-based; FirstLine is the 1-based line its content starts on.
	Index, FirstLine int
	Data             []byte
}

// SplitDocuments cuts a YAML stream at its "---" separator lines, keeping
// where each document starts so errors can name absolute lines. Documents
// with nothing but whitespace are dropped; the index still counts them so
// that it matches what an editor shows.
func SplitDocuments(data []byte) []Document {
	var docs []Document
	current := Document{Index: 1, FirstLine: 1}
	flush := func() {
		if len(bytes.TrimSpace(current.Data)) > 0 {
			docs = append(docs, current)
		}
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		if isDocumentSeparator(line) {
			if i > 0 {
				flush()
				current = Document{Index: current.Index + 1}
			}
			current.FirstLine = i + 2
			continue
		}
		current.Data = append(current.Data, line...)
	}
	flush()
	return docs
}

// isDocumentSeparator reports a "---" line, possibly followed by a comment.
func isDocumentSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("---"))
	if !ok {
		return false
	}
	rest = bytes.TrimLeft(rest, " \t")
	return len(rest) == 0 || rest[0] == '#'
}

// documentError is a problem in a document at an absolute line.
type documentError struct {
	line int
	err  error
}

// yamlLine finds the line a YAML parser error names.
var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// readDocument decodes one document: an object or a v1 List of objects.
func (s *Set) readDocument(doc Document, accept Accept) *documentError {
	raw, err := toJSON(doc.Data)
	if err != nil {
		return syntaxError(doc, err)
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil // only comments
	}
	if err := s.addObject(raw, accept); err != nil {
		return &documentError{line: doc.FirstLine, err: err}
	}
	return nil
}

// toJSON converts a document to JSON. JSON input is taken as is: YAML
// parsers refuse the tab indentation JSON tools often write.
func toJSON(data []byte) ([]byte, error) {
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("{")) && json.Valid(trimmed) {
		return trimmed, nil
	}
	// Strict conversion only rejects duplicate keys (unknown fields are a
	// decoding matter), which kubectl and the API server refuse too.
	return yaml.YAMLToJSONStrict(data)
}

// syntaxError turns a parser error's relative line into an absolute one.
func syntaxError(doc Document, err error) *documentError {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			return &documentError{line: doc.FirstLine + n - 1, err: errors.New("invalid YAML: " + m[2])}
		}
	}
	return &documentError{line: doc.FirstLine, err: errors.New("invalid YAML: " + strings.TrimPrefix(msg, "yaml: "))}
}

// addObject decodes one JSON object by its apiVersion and kind.
func (s *Set) addObject(raw []byte, accept Accept) error {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if meta.Kind == "" || meta.APIVersion == "" {
		return errors.New("apiVersion and kind are required")
	}
	switch {
	case meta.APIVersion == "v1" && meta.Kind == "List":
		return s.addList(raw, accept)
	case meta.APIVersion == "apiextensions.k8s.io/v1" && meta.Kind == "CustomResourceDefinition":
		var crd apiextensionsv1.CustomResourceDefinition
		if err := Decode(raw, &crd, meta); err != nil {
			return err
		}
		s.CRDs = append(s.CRDs, crd)
		return nil
	case accept == AcceptCRDsOnly:
		return fmt.Errorf("unsupported kind %s %s: a --crd file holds apiextensions.k8s.io/v1 CustomResourceDefinitions", meta.APIVersion, meta.Kind)
	case (meta.APIVersion == "kyverno.io/v1" || meta.APIVersion == "kyverno.io/v2beta1") && meta.Kind == "ClusterPolicy":
		var policy kyvernov1.ClusterPolicy
		if err := Decode(raw, &policy, meta); err != nil {
			return err
		}
		s.Policies = append(s.Policies, policy)
		return nil
	case (meta.APIVersion == "kyverno.io/v1" || meta.APIVersion == "kyverno.io/v2beta1") && meta.Kind == "Policy":
		var policy kyvernov1.Policy
		if err := Decode(raw, &policy, meta); err != nil {
			return err
		}
		// Carried as a ClusterPolicy of kind Policy: clusterpolicy.InputFor
		// confines it to its namespace.
		s.Policies = append(s.Policies, *policy.AsClusterPolicy())
		return nil
	case (meta.APIVersion == "kyverno.io/v2" || meta.APIVersion == "kyverno.io/v2beta1") && meta.Kind == "PolicyException":
		var exception kyvernov2.PolicyException
		if err := Decode(raw, &exception, meta); err != nil {
			return err
		}
		s.Exceptions = append(s.Exceptions, exception)
		return nil
	case policiesVersion(meta.APIVersion) && meta.Kind == "ValidatingPolicy":
		var policy policiesv1.ValidatingPolicy
		if err := Decode(raw, &policy, meta); err != nil {
			return err
		}
		s.ValidatingPolicies = append(s.ValidatingPolicies, policy)
		return nil
	case policiesVersion(meta.APIVersion) && meta.Kind == "NamespacedValidatingPolicy":
		var policy policiesv1.NamespacedValidatingPolicy
		if err := Decode(raw, &policy, meta); err != nil {
			return err
		}
		if policy.Namespace == "" {
			policy.Namespace = "default" // as kubectl apply would create it
		}
		s.NamespacedValidatingPolicies = append(s.NamespacedValidatingPolicies, policy)
		return nil
	case policiesVersion(meta.APIVersion) && meta.Kind == "PolicyException":
		var exception policiesv1.PolicyException
		if err := Decode(raw, &exception, meta); err != nil {
			return err
		}
		s.CELExceptions = append(s.CELExceptions, exception)
		return nil
	default:
		return fmt.Errorf("unsupported kind %s %s: want kyverno.io/v1 ClusterPolicy or Policy, policies.kyverno.io/v1 ValidatingPolicy or NamespacedValidatingPolicy, a PolicyException (kyverno.io/v2 or policies.kyverno.io/v1) or apiextensions.k8s.io/v1 CustomResourceDefinition", meta.APIVersion, meta.Kind)
	}
}

// policiesVersion reports a served version of policies.kyverno.io.
func policiesVersion(apiVersion string) bool {
	switch apiVersion {
	case "policies.kyverno.io/v1alpha1", "policies.kyverno.io/v1beta1", "policies.kyverno.io/v1":
		return true
	}
	return false
}

// addList adds the items of a v1 List (what `kubectl get -o yaml` prints).
func (s *Set) addList(raw []byte, accept Accept) error {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("v1 List: %w", err)
	}
	for i, item := range list.Items {
		if err := s.addObject(item, accept); err != nil {
			return fmt.Errorf("v1 List items[%d]: %w", i, err)
		}
	}
	return nil
}

// Decode unmarshals an object leniently (kyvap's types model only what it
// reads), naming the object and the field in type errors.
func Decode(raw []byte, into any, meta metav1.TypeMeta) error {
	err := json.Unmarshal(raw, into)
	if err == nil {
		return nil
	}
	name := objectName(raw)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Errorf("%s %s: field %s: cannot use a JSON %s as %s", meta.Kind, name, typeErr.Field, typeErr.Value, typeErr.Type)
	}
	return fmt.Errorf("%s %s: %w", meta.Kind, name, err)
}

// ForEachItem calls fn for the object, or for each item of a v1 List (and
// of the Lists in it).
func ForEachItem(raw []byte, meta metav1.TypeMeta, fn func(raw []byte, meta metav1.TypeMeta) error) error {
	if meta.APIVersion != "v1" || meta.Kind != "List" {
		return fn(raw, meta)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("v1 List: %w", err)
	}
	for i, item := range list.Items {
		var m metav1.TypeMeta
		if err := json.Unmarshal(item, &m); err != nil {
			return fmt.Errorf("v1 List items[%d]: not a Kubernetes object: %w", i, err)
		}
		if err := ForEachItem(item, m, fn); err != nil {
			return fmt.Errorf("v1 List items[%d]: %w", i, err)
		}
	}
	return nil
}

// objectName is the object's metadata.name, quoted, for error messages.
func objectName(raw []byte) string {
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &obj) // best effort: the caller reports the real error
	return strconv.Quote(obj.Metadata.Name)
}
