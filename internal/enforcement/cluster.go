// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package enforcement

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kyvap/kyvap/translate"
)

// policyKinds are the kinds kyvap status reads.
var policyKinds = []struct {
	kind string
	gvr  schema.GroupVersionResource
	// conditions is where the kind keeps its status conditions.
	conditions []string
}{
	{"ClusterPolicy", schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}, []string{"status", "conditions"}},
	{"Policy", schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "policies"}, []string{"status", "conditions"}},
	{"ValidatingPolicy", schema.GroupVersionResource{Group: "policies.kyverno.io", Version: "v1", Resource: "validatingpolicies"}, []string{"status", "conditionStatus", "conditions"}},
	{"NamespacedValidatingPolicy", schema.GroupVersionResource{Group: "policies.kyverno.io", Version: "v1", Resource: "namespacedvalidatingpolicies"}, []string{"status", "conditionStatus", "conditions"}},
}

// PolicyStatus is one policy in kyvap status's output.
type PolicyStatus struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Processed: kyvap's condition reflects the policy's current generation.
	Processed bool   `json:"processed"`
	Reason    string `json:"reason,omitempty"`
	// Rules are the policy's rules and who enforces them.
	Rules []Rule `json:"rules"`
	// UnlistedRules were left out of the bounded status message.
	UnlistedRules int `json:"unlistedRules,omitempty"`
}

// ClusterStatus reads every policy of the kinds kyvap reads (a kind whose
// CRD is not installed is skipped), kyvap's condition on each and kyvap's
// VAPs, sorted by kind, namespace and name.
func ClusterStatus(ctx context.Context, cfg *rest.Config) ([]PolicyStatus, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{} // kyverno.io/v1 is deprecated: every read would warn
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	vaps, err := client.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}).
		List(ctx, metav1.ListOptions{LabelSelector: translate.LabelManagedBy + "=" + translate.ManagedByValue})
	if err != nil {
		return nil, fmt.Errorf("listing kyvap's ValidatingAdmissionPolicies: %w", err)
	}
	// kind/namespace/name -> rule -> VAP names
	byPolicy := map[string]map[string][]string{}
	for _, v := range vaps.Items {
		a := v.GetAnnotations()
		kind := a[translate.AnnotationPolicyKind]
		if kind == "" {
			kind = "ClusterPolicy"
		}
		key := kind + "/" + a[translate.AnnotationPolicyNamespace] + "/" + a[translate.AnnotationPolicy]
		if byPolicy[key] == nil {
			byPolicy[key] = map[string][]string{}
		}
		byPolicy[key][a[translate.AnnotationRule]] = append(byPolicy[key][a[translate.AnnotationRule]], v.GetName())
	}
	var out []PolicyStatus
	for _, k := range policyKinds {
		list, err := client.Resource(k.gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // the CRD is not installed
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.gvr.Resource, err)
		}
		for i := range list.Items {
			out = append(out, policyStatus(k.kind, k.conditions, &list.Items[i], byPolicy))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

func policyStatus(kind string, path []string, obj *unstructured.Unstructured, vaps map[string]map[string][]string) PolicyStatus {
	p := PolicyStatus{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Rules: []Rule{}}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, path...)
	var message string
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "kyvap.io/Enforced" {
			continue
		}
		observed, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		p.Processed = observed == obj.GetGeneration()
		p.Reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
	}
	if !p.Processed {
		p.Reason = strings.TrimSpace("not processed by kyvap yet " + p.Reason)
	}
	p.Rules, p.UnlistedRules = Parse(message, vaps[kind+"/"+obj.GetNamespace()+"/"+obj.GetName()])
	return p
}

// Write prints the policies: a table (text, or wide with each rule's VAPs
// and detail), JSON or YAML.
func Write(w io.Writer, output string, policies []PolicyStatus) error {
	switch output {
	case "json":
		data, err := json.MarshalIndent(policies, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(data, '\n'))
		return err
	case "yaml":
		data, err := yaml.Marshal(policies)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	wide := output == "wide"
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "KIND\tNAMESPACE\tPOLICY\tRULE\tENFORCED BY"
	if wide {
		header += "\tVAPS\tDETAIL"
	}
	fmt.Fprintln(tw, header)
	nobody := 0
	for _, p := range policies {
		rows := p.Rules
		if len(rows) == 0 {
			rows = []Rule{{Name: "-", By: "-", Detail: p.Reason}}
		}
		if !p.Processed {
			rows = []Rule{{Name: "-", By: "pending", Detail: p.Reason}}
		}
		for _, r := range rows {
			if r.By == ByNobody {
				nobody++
			}
			line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Kind, orDash(p.Namespace), p.Name, r.Name, r.By)
			if wide {
				line += fmt.Sprintf("\t%s\t%s", orDash(strings.Join(r.VAPs, ",")), orDash(r.Detail))
			}
			fmt.Fprintln(tw, line)
		}
		if p.UnlistedRules > 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t(%d more rules)\t-\n", p.Kind, orDash(p.Namespace), p.Name, p.UnlistedRules)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d policies, %d rules enforced by nobody\n", len(policies), nobody)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Unenforced reports whether some rule is enforced by nobody, or some
// policy's current generation is not processed by kyvap yet (kyvap status
// exits 1: a CI gate).
func Unenforced(policies []PolicyStatus) bool {
	for _, p := range policies {
		if !p.Processed {
			return true
		}
		for _, r := range p.Rules {
			if r.By == ByNobody {
				return true
			}
		}
	}
	return false
}
