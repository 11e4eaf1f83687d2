package clitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/cmd/kyvap/manifest"
)

// document is one YAML document of a file.
type document struct {
	// index is 1-based; firstLine is the 1-based line its content starts on.
	index, firstLine int
	data             []byte
}

// splitDocuments cuts a YAML stream at its "---" lines, remembering where
// each document starts so that errors name absolute lines. Documents with
// nothing but whitespace or comments are dropped later, when they decode to
// null; the index still counts them, as an editor does.
func splitDocuments(data []byte) []document {
	var docs []document
	current := document{index: 1, firstLine: 1}
	flush := func() {
		if len(bytes.TrimSpace(current.data)) > 0 {
			docs = append(docs, current)
		}
	}
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if isDocumentSeparator(line) {
			if i > 0 {
				flush()
				current = document{index: current.index + 1}
			}
			current.firstLine = i + 2
			continue
		}
		current.data = append(current.data, line...)
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

// yamlLine finds the line a YAML parser error names.
var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// toJSON converts a document to JSON, refusing duplicate keys. JSON input is
// taken as is (YAML parsers refuse the tabs JSON tools indent with). null
// means the document holds only comments.
func toJSON(file string, doc document) ([]byte, error) {
	if trimmed := bytes.TrimSpace(doc.data); bytes.HasPrefix(trimmed, []byte("{")) && json.Valid(trimmed) {
		return trimmed, nil
	}
	raw, err := yaml.YAMLToJSONStrict(doc.data)
	if err == nil {
		return raw, nil
	}
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			return nil, &manifest.Error{File: file, Line: doc.firstLine + n - 1, Document: doc.index, Err: errors.New("invalid YAML: " + m[2])}
		}
	}
	return nil, &manifest.Error{File: file, Line: doc.firstLine, Document: doc.index, Err: errors.New("invalid YAML: " + msg)}
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
			File: file, Line: keyLine(doc, strings.Split(typeErr.Field, ".")...), Document: doc.index,
			Err: fmt.Errorf("field %s: cannot use a JSON %s as %s", typeErr.Field, typeErr.Value, typeErr.Type),
		}
	case unknownField.MatchString(err.Error()):
		name := unknownField.FindStringSubmatch(err.Error())[1]
		return &manifest.Error{File: file, Line: keyLine(doc, name), Document: doc.index, Err: fmt.Errorf("unknown field %q", name)}
	default:
		return &manifest.Error{File: file, Line: doc.firstLine, Document: doc.index, Err: err}
	}
}

// keyLine is the absolute line of a key in the document: the first "key:"
// line, or for a path (results, resources) the first line of the last key
// after the lines of the keys before it. It is the document's first line
// when the key cannot be found.
func keyLine(doc document, path ...string) int {
	lines := bytes.Split(doc.data, []byte("\n"))
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
		return doc.firstLine
	}
	return doc.firstLine + found
}
