// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package validatingpolicy

import (
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kyvap/kyvap/model"
)

// podController is a controller Kyverno's ValidatingPolicy autogen knows
// (pkg/cel/autogen in Kyverno v1.19.1: the built-in targets, rewritten at
// compile time).
type podController struct {
	group, version, resource, kind string
	// config is the variant the controller belongs to: "defaults" (pod
	// template at spec.template) or "cronjobs" (spec.jobTemplate.spec.template).
	config string
}

var podControllers = map[string]podController{
	"daemonsets":   {"apps", "v1", "daemonsets", "DaemonSet", "defaults"},
	"deployments":  {"apps", "v1", "deployments", "Deployment", "defaults"},
	"replicasets":  {"apps", "v1", "replicasets", "ReplicaSet", "defaults"},
	"statefulsets": {"apps", "v1", "statefulsets", "StatefulSet", "defaults"},
	"jobs":         {"batch", "v1", "jobs", "Job", "defaults"},
	"cronjobs":     {"batch", "v1", "cronjobs", "CronJob", "cronjobs"},
}

// templatePaths says where each variant finds the pod's spec and metadata.
var templatePaths = map[string]struct{ spec, metadata string }{
	"defaults": {"spec.template.spec", "spec.template.metadata"},
	"cronjobs": {"spec.jobTemplate.spec.template.spec", "spec.jobTemplate.spec.template.metadata"},
}

// DefaultPodControllers are the controllers a ValidatingPolicy gets variants
// for when spec.autogen.podControllers.controllers is not set.
func DefaultPodControllers() []string {
	out := make([]string, 0, len(podControllers))
	for name := range podControllers {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// canAutogen is Kyverno's condition for pod-controller variants: the match
// constraints select exactly core v1 pods, by one rule, without names,
// exclusions or an object selector.
func canAutogen(m *admissionregistrationv1.MatchResources) bool {
	if m == nil || len(m.ResourceRules) != 1 || len(m.ExcludeResourceRules) > 0 {
		return false
	}
	if s := m.ObjectSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		return false
	}
	r := m.ResourceRules[0]
	return len(r.ResourceNames) == 0 &&
		len(r.APIGroups) == 1 && r.APIGroups[0] == "" &&
		len(r.APIVersions) == 1 && r.APIVersions[0] == "v1" &&
		len(r.Resources) == 1 && r.Resources[0] == "pods"
}

// podControllerVariants returns the variants of a Pod rule for the listed
// controllers, one per variant config ("defaults", "cronjobs"), in that
// order. Each variant matches its controllers with the Pod rule's operations
// and namespace selector, and has every `object.spec` / `object.metadata`
// (and oldObject's) rewritten to the pod template, except
// `object.metadata.namespace`, as Kyverno's autogen does.
//
// A controller given as <resource>.<version>.<group> is one Kyverno finds
// pod templates in by structural extraction at evaluation time; no VAP can
// do that, so its variant is marked Unsupported. Other unknown names are
// ignored, as Kyverno ignores them.
func podControllerVariants(rule *model.Rule, controllers []string) []model.Rule {
	if !canAutogen(&rule.MatchConstraints) {
		return nil
	}
	byConfig := map[string][]podController{}
	var extracted []string
	for _, name := range controllers {
		if c, ok := podControllers[name]; ok {
			byConfig[c.config] = append(byConfig[c.config], c)
			continue
		}
		if parts := strings.SplitN(name, ".", 3); len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "" {
			extracted = append(extracted, name)
		}
	}
	var out []model.Rule
	for _, config := range []string{"defaults", "cronjobs"} {
		targets := byConfig[config]
		if len(targets) == 0 {
			continue
		}
		out = append(out, variant(rule, config, targets))
	}
	if len(extracted) > 0 {
		sort.Strings(extracted)
		v := *rule
		v.ID = "autogen-extract"
		v.AutogenOf = rule.ID
		v.Targets = extracted
		v.Unsupported = fmt.Sprintf("pod controllers %s: Kyverno finds their pod templates by structural extraction when it evaluates, which no ValidatingAdmissionPolicy can do", strings.Join(extracted, ", "))
		out = append(out, v)
	}
	return out
}

func variant(rule *model.Rule, config string, targets []podController) model.Rule {
	sort.Slice(targets, func(i, j int) bool {
		a, b := targets[i], targets[j]
		return a.group+"/"+a.version+"/"+a.resource < b.group+"/"+b.version+"/"+b.resource
	})
	v := *rule.DeepCopy()
	v.ID = "autogen-" + config
	v.AutogenOf = rule.ID
	v.Targets = nil
	byGroupVersion := map[string][]string{}
	var gvs []string
	for _, t := range targets {
		v.Targets = append(v.Targets, t.kind)
		gv := t.group + "/" + t.version
		if _, ok := byGroupVersion[gv]; !ok {
			gvs = append(gvs, gv)
		}
		byGroupVersion[gv] = append(byGroupVersion[gv], t.resource)
	}
	sort.Strings(gvs)
	pod := rule.MatchConstraints.ResourceRules[0]
	match := admissionregistrationv1.MatchResources{NamespaceSelector: rule.MatchConstraints.NamespaceSelector.DeepCopy()}
	for _, gv := range gvs {
		group, version, _ := strings.Cut(gv, "/")
		resources := byGroupVersion[gv]
		sort.Strings(resources)
		match.ResourceRules = append(match.ResourceRules, admissionregistrationv1.NamedRuleWithOperations{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: append([]admissionregistrationv1.OperationType(nil), pod.Operations...),
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{group},
					APIVersions: []string{version},
					Resources:   resources,
				},
			},
		})
	}
	v.MatchConstraints = match
	paths := templatePaths[config]
	rewrite := func(s string) string { return RewriteToPodTemplate(s, paths.spec, paths.metadata) }
	for i := range v.MatchConditions {
		v.MatchConditions[i].Expression = rewrite(v.MatchConditions[i].Expression)
		v.MatchConditions[i].Name = rewrite(v.MatchConditions[i].Name)
	}
	for i := range v.Variables {
		v.Variables[i].Expression = rewrite(v.Variables[i].Expression)
		v.Variables[i].Name = rewrite(v.Variables[i].Name)
	}
	for i := range v.Validations {
		val := &v.Validations[i]
		val.Expression = rewrite(val.Expression)
		val.Message = rewrite(val.Message)
		val.MessageExpression = rewrite(val.MessageExpression)
	}
	for i := range v.AuditAnnotations {
		v.AuditAnnotations[i].Key = rewrite(v.AuditAnnotations[i].Key)
		v.AuditAnnotations[i].ValueExpression = rewrite(v.AuditAnnotations[i].ValueExpression)
	}
	return v
}

// RewriteToPodTemplate rewrites a string of a Pod policy for a controller
// whose pod spec and metadata live at specPath and metadataPath: every
// "object.spec" and "oldObject.spec" becomes "object.<specPath>", the same
// for metadata, except where "metadata" is followed by the path segment
// ".namespace" (the controller's own namespace is the Pod's). Kyverno does
// this on the policy's JSON, so messages are rewritten too.
func RewriteToPodTemplate(s, specPath, metadataPath string) string {
	for _, root := range []string{"object.", "oldObject."} {
		s = replaceUnprotected(s, root+"spec", root+specPath)
		s = replaceUnprotected(s, root+"metadata", root+metadataPath)
	}
	return s
}

// replaceUnprotected replaces every from by to unless what follows is the
// segment ".namespace" (ending there or followed by a non-identifier byte).
func replaceUnprotected(s, from, to string) string {
	if !strings.Contains(s, from) {
		return s
	}
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, from)
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		after := rest[i+len(from):]
		if namespaceSegment(after) {
			b.WriteString(from)
		} else {
			b.WriteString(to)
		}
		rest = after
	}
}

func namespaceSegment(after string) bool {
	const seg = ".namespace"
	if !strings.HasPrefix(after, seg) {
		return false
	}
	next := after[len(seg):]
	return next == "" || !identifierByte(next[0])
}

func identifierByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
