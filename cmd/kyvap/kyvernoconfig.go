// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/frontend/manifest"
	"github.com/kyvap/kyvap/kyverno"
)

// Values of --kyverno-config that are not a file.
const (
	kyvernoConfigChartDefaults = "chart-defaults"
	kyvernoConfigNone          = "none"
)

// loadKyvernoConfig turns the value of --kyverno-config into the
// configuration translation applies: Kyverno's Helm-chart defaults (what
// the operator applies when no ConfigMap exists), none (nil, as `kyverno
// test`), or the data of the ConfigMap in a file. The problems ParseConfig
// finds (values Kyverno ignores) are returned as warnings.
func loadKyvernoConfig(value string) (cfg *kyverno.Config, warnings []string, err error) {
	switch value {
	case kyvernoConfigNone:
		return nil, nil, nil
	case kyvernoConfigChartDefaults:
		c := kyverno.ChartDefaults()
		return &c, nil, nil
	case "":
		return nil, nil, fmt.Errorf("--kyverno-config: want %s, %s or a ConfigMap file", kyvernoConfigChartDefaults, kyvernoConfigNone)
	case manifest.Stdin:
		return nil, nil, errors.New("--kyverno-config: stdin is not supported; give a ConfigMap file")
	}
	data, err := readConfigMapData(value)
	if err != nil {
		return nil, nil, fmt.Errorf("--kyverno-config %s: %w", value, err)
	}
	c, problems := kyverno.ParseConfig(data)
	for _, p := range problems {
		warnings = append(warnings, fmt.Sprintf("--kyverno-config %s: %s", value, p))
	}
	return &c, warnings, nil
}

// readConfigMapData reads a file holding one v1 ConfigMap (YAML or JSON,
// e.g. from `kubectl get configmap -o yaml`) and returns its data.
func readConfigMapData(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the caller names the file
		}
		return nil, err
	}
	docs := manifest.SplitDocuments(raw)
	var objects [][]byte
	for _, doc := range docs {
		js := bytes.TrimSpace(doc.Data)
		if !json.Valid(js) { // JSON is taken as is: YAML refuses the tabs JSON tools indent with
			js, err = yaml.YAMLToJSONStrict(doc.Data)
		}
		if err != nil {
			msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
			return nil, fmt.Errorf("document %d (from line %d): invalid YAML: %s", doc.Index, doc.FirstLine, strings.TrimPrefix(msg, "yaml: "))
		}
		if !bytes.Equal(bytes.TrimSpace(js), []byte("null")) { // not only comments
			objects = append(objects, js)
		}
	}
	if len(objects) != 1 {
		return nil, fmt.Errorf("holds %d objects, want one v1 ConfigMap", len(objects))
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(objects[0], &meta); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if meta.APIVersion != "v1" || meta.Kind != "ConfigMap" {
		return nil, fmt.Errorf("holds %s, want a v1 ConfigMap (Kyverno's kyverno ConfigMap)", describeKind(meta.APIVersion, meta.Kind))
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(objects[0], &cm); err != nil {
		return nil, fmt.Errorf("invalid ConfigMap: %w", err)
	}
	return cm.Data, nil
}

func describeKind(apiVersion, kind string) string {
	switch {
	case apiVersion == "" && kind == "":
		return "no apiVersion and kind"
	case apiVersion == "":
		return kind + " without apiVersion"
	case kind == "":
		return apiVersion + " without kind"
	}
	return apiVersion + " " + kind
}
