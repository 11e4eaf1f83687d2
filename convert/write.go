// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// YAML writes the converted policies of a result as a YAML stream a user
// would commit: each document preceded by a comment naming its source, the
// rules left behind listed as comments first. Fields are in a stable order
// and empty ones are left out.
func YAML(res Result) ([]byte, error) {
	var buf bytes.Buffer
	for _, u := range res.Unconverted {
		fmt.Fprintf(&buf, "# NOT CONVERTED: %s, rule %s: %s\n", res.Source, u.Rule, oneLine(u.Reason))
	}
	for i := range res.Policies {
		c := &res.Policies[i]
		doc, err := document(c)
		if err != nil {
			return nil, fmt.Errorf("%s, rule %s: %w", res.Source, c.Rule, err)
		}
		buf.WriteString("---\n")
		fmt.Fprintf(&buf, "# Converted by kyvap convert from %s, rule %s", res.Source, c.Rule)
		if len(c.Variants) > 0 {
			fmt.Fprintf(&buf, ",\n# with its pod-controller variants (%s) as spec.autogen", strings.Join(c.Variants, ", "))
		}
		if len(c.Exceptions) > 0 {
			fmt.Fprintf(&buf, ",\n# with the podSecurity controls of PolicyExceptions %s folded in", strings.Join(c.Exceptions, ", "))
		}
		buf.WriteString(".\n")
		buf.Write(doc)
	}
	return buf.Bytes(), nil
}

// document is one converted policy as YAML, without status and
// creationTimestamp, with `controllers: []` kept where autogen is off.
func document(c *Converted) ([]byte, error) {
	var obj any = c.ValidatingPolicy
	if c.NamespacedValidatingPolicy != nil {
		obj = c.NamespacedValidatingPolicy
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if c.NoAutogen {
		spec := m["spec"].(map[string]any)
		spec["autogen"] = map[string]any{"podControllers": map[string]any{"controllers": []any{}}}
	}
	return yaml.Marshal(m)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
