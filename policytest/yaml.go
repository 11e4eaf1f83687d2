// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package policytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/manifest"
)

// document is one YAML document of a file (shared with kyvap translate's
// loader).
type document = manifest.Document

func splitDocuments(data []byte) []document { return manifest.SplitDocuments(data) }

// yamlLine finds the line a YAML parser error names.
var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// toJSON converts a document to JSON, refusing duplicate keys. JSON input is
// taken as is (YAML parsers refuse the tabs JSON tools indent with). null
// means the document holds only comments.
func toJSON(file string, doc document) ([]byte, error) {
	if trimmed := bytes.TrimSpace(doc.Data); bytes.HasPrefix(trimmed, []byte("{")) && json.Valid(trimmed) {
		return trimmed, nil
	}
	raw, err := yaml.YAMLToJSONStrict(doc.Data)
	if err == nil {
		return raw, nil
	}
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			return nil, &manifest.Error{File: file, Line: doc.FirstLine + n - 1, Document: doc.Index, Err: errors.New("invalid YAML: " + m[2])}
		}
	}
	return nil, &manifest.Error{File: file, Line: doc.FirstLine, Document: doc.Index, Err: errors.New("invalid YAML: " + msg)}
}

// unknownField is the message of encoding/json's DisallowUnknownFields.
var unknownField = regexp.MustCompile(`^json: unknown field "([^"]*)"$`)

// decodeStrict decodes raw into v rejecting unknown fields, as Kyverno's CLI
// decodes its test, values and user-info files. Errors name the line of the
// offending key when it can be found.
func decodeStrict(file string, doc document, raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return &manifest.Error{
			File: file, Line: keyLine(doc, strings.Split(typeErr.Field, ".")...), Document: doc.Index,
			Err: fmt.Errorf("field %s: cannot use a JSON %s as %s", typeErr.Field, typeErr.Value, typeErr.Type),
		}
	case unknownField.MatchString(err.Error()):
		name := unknownField.FindStringSubmatch(err.Error())[1]
		return &manifest.Error{File: file, Line: keyLine(doc, name), Document: doc.Index, Err: fmt.Errorf("unknown field %q", name)}
	default:
		return &manifest.Error{File: file, Line: doc.FirstLine, Document: doc.Index, Err: err}
	}
}

// keyLine is the absolute line of a key in the document: the first "key:"
// line, or for a path (results, resources) the first line of the last key
// after the lines of the keys before it. It is the document's first line
// when the key cannot be found.
func keyLine(doc document, path ...string) int {
	lines := bytes.Split(doc.Data, []byte("\n"))
	at, found := 0, -1
	for _, key := range path {
		re, err := regexp.Compile(`^[\s-]*["']?` + regexp.QuoteMeta(key) + `["']?\s*:`)
		if err != nil {
			break
		}
		for i := at; i < len(lines); i++ {
			if re.Match(lines[i]) {
				at, found = i, i
				break
			}
		}
	}
	if found < 0 {
		return doc.FirstLine
	}
	return doc.FirstLine + found
}
