// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scan evaluates the rules kyvap enforces on resources that already
// exist, as Kyverno's background controller does (issue 15): each resource
// is judged as a CREATE without user information, by kyvap's engine, whose
// verdicts equal the VAPs' on the conformance corpus (`kyvap test` checks
// both), so a translated rule is reported as its VAP would judge it.
package scan

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/engine"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/reports"
	"github.com/kyvap/kyvap/translate"
)

// Process is the `process` property of background results, as Kyverno
// writes it.
const Process = reports.ProcessBackground

// Scanner holds the rules to scan with, per policy.
type Scanner struct {
	engine   *engine.Engine
	mu       sync.RWMutex
	policies map[string]*metav1.ObjectMeta
	rules    map[string][]translate.FallbackRule
	// models are the scanned policies of the policy model, by the name
	// their results carry (ReportName).
	models map[string]*scannedModel
}

// scannedModel is a policy of the policy model as it is scanned.
type scannedModel struct {
	meta  *metav1.ObjectMeta
	rules []model.Rule
}

// SetResourceReader lets the scans evaluate Kyverno's resource library
// (engine.SetResourceReader); set it before any policy.
func (s *Scanner) SetResourceReader(r cellib.ResourceReader) { s.engine.SetResourceReader(r) }

// Capabilities are the scanning engine's (engine.Capabilities).
func (s *Scanner) Capabilities() translate.EngineCapabilities { return s.engine.Capabilities() }

// New returns a Scanner without rules.
func New() *Scanner {
	return &Scanner{engine: engine.New(), policies: map[string]*metav1.ObjectMeta{}, rules: map[string][]translate.FallbackRule{}, models: map[string]*scannedModel{}}
}

// ReportName is the policy name the results of a policy of the policy
// model carry, as Kyverno writes it (its cache key): name, or
// namespace/name for a namespaced policy.
func ReportName(src model.Source) string {
	if src.Namespace == "" {
		return src.Name
	}
	return src.Namespace + "/" + src.Name
}

// ModelRulesToScan returns the rules of a lowered policy that kyvap scans:
// those with background scans on (evaluation.background) that its engine
// evaluates, admission or not; none when Kyverno runs and the policy is not
// marked generated (Kyverno scans it then), as RulesToScan.
func ModelRulesToScan(p *model.Policy, generated, kyvernoRunning bool, caps translate.EngineCapabilities) []model.Rule {
	if kyvernoRunning && !generated {
		return nil
	}
	var out []model.Rule
	for _, r := range p.Rules {
		if r.Background && translate.ModelRuleNotEnforcedWith(&r, caps) == "" {
			// Scanned as Kyverno's background scan evaluates it, whether
			// or not it applies at admission.
			r.Admission = true
			out = append(out, r)
		}
	}
	return out
}

// SetModelPolicy is SetPolicy for a policy of the policy model: meta is its
// metadata (its annotations set the results' category, severity, scoring).
func (s *Scanner) SetModelPolicy(source model.Source, meta *metav1.ObjectMeta, rules []model.Rule) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := ReportName(source)
	previous, scanned := s.models[name]
	changed := scanned != (len(rules) > 0) || (scanned && (!equality.Semantic.DeepEqual(previous.rules, rules) || !sameReportedAnnotations(previous.meta.Annotations, meta.Annotations)))
	if len(rules) == 0 {
		delete(s.models, name)
	} else {
		s.models[name] = &scannedModel{meta: meta.DeepCopy(), rules: rules}
	}
	if changed {
		s.engine.SetModelRules(source, rules)
	}
	return changed
}

// Background reports whether Kyverno scans the policy in the background:
// spec.background, true unless set to false.
func Background(policy *kyvernov1.ClusterPolicy) bool {
	return policy.Spec.BackgroundEnabled()
}

// UserDependent says where a policy with background scans on selects
// requests by their user, or "" when it does not. Kyverno refuses such a
// policy in background mode, so it has no background results: kyvap scans
// none of it either (its webhook and VAPs still enforce it at admission).
func UserDependent(policy *kyvernov1.ClusterPolicy) string {
	for i := range policy.Spec.Rules {
		if path := kyverno.BackgroundUserInfoPath(&policy.Spec.Rules[i]); path != "" {
			return fmt.Sprintf("spec/rules[%d]/%s", i, path)
		}
	}
	return ""
}

// RulesToScan returns, for a policy that is scanned, the rules kyvap
// enforces in the form its engine evaluates: the plan's translated rules
// (their VAPs' semantics) and its fallback rules, unless Kyverno enforces
// those; nothing for a policy with background: false. With Kyverno
// running, a policy not marked generated is Kyverno's to scan, every rule
// of it (its CanBackgroundProcess skips only generated policies): kyvap
// scans nothing of it, so that no result is reported twice.
func RulesToScan(policy *kyvernov1.ClusterPolicy, plan, engineForm *translate.Plan, kyvernoRunning bool) []translate.FallbackRule {
	if !Background(policy) || (kyvernoRunning && !policy.Status.ValidatingAdmissionPolicy.Generated) || UserDependent(policy) != "" {
		return nil
	}
	enforced := map[string]bool{}
	for _, r := range plan.Rules {
		switch {
		case r.Verdict == translate.VerdictTranslated:
			enforced[r.Rule] = true
		case r.Fallback != nil && r.Fallback.NotEnforced == "" && !kyvernoRunning:
			enforced[r.Rule] = true
		}
	}
	var out []translate.FallbackRule
	for _, r := range engineForm.Rules {
		if r.Fallback != nil && r.Fallback.NotEnforced == "" && enforced[r.Rule] {
			out = append(out, *r.Fallback)
		}
	}
	return out
}

// SetPolicy replaces the rules the policy is scanned with; none stops
// scanning it. It reports whether results can change: the rules or the
// annotations results carry (category, severity, scoring) changed.
func (s *Scanner) SetPolicy(policy *kyvernov1.ClusterPolicy, rules []translate.FallbackRule) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	previous, scanned := s.policies[policy.Name]
	changed := scanned != (len(rules) > 0) || !equality.Semantic.DeepEqual(s.rules[policy.Name], rules) ||
		(scanned && !sameReportedAnnotations(previous.Annotations, policy.Annotations))
	if len(rules) == 0 {
		delete(s.policies, policy.Name)
		delete(s.rules, policy.Name)
	} else {
		s.policies[policy.Name] = policy.ObjectMeta.DeepCopy()
		s.rules[policy.Name] = rules
	}
	if changed {
		s.engine.SetFallbackRules(policy.Name, rules)
	}
	return changed
}

// Scans reports whether the policy is scanned in the background.
func (s *Scanner) Scans(policy string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.policies[policy]
	_, model := s.models[policy]
	return ok || model
}

func sameReportedAnnotations(a, b map[string]string) bool {
	for _, k := range []string{reports.AnnotationCategory, reports.AnnotationSeverity, reports.AnnotationScored} {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// Object is a resource to scan.
type Object struct {
	Resource *unstructured.Unstructured
	// GVR is the resource's resource (plural), as the API server serves it.
	GVR schema.GroupVersionResource
	// Namespace is the resource's namespace object, for namespace
	// selectors; nil for cluster-scoped resources.
	Namespace *corev1.Namespace
	// Params answers parameter look-ups.
	Params engine.ParamSource
}

// Scan evaluates every scanned rule that matches the resource and returns
// its results, stamped now.
func (s *Scanner) Scan(ctx context.Context, obj Object, now time.Time) ([]reports.Result, error) {
	raw, err := json.Marshal(obj.Resource.Object)
	if err != nil {
		return nil, err
	}
	gvk := obj.Resource.GroupVersionKind()
	req := &admissionv1.AdmissionRequest{
		UID:       "background-scan",
		Operation: admissionv1.Create,
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: obj.GVR.Group, Version: obj.GVR.Version, Resource: obj.GVR.Resource},
		Namespace: obj.Resource.GetNamespace(),
		Name:      obj.Resource.GetName(),
		Object:    runtime.RawExtension{Raw: raw},
	}
	outcomes, err := s.engine.Evaluate(ctx, engine.Request{Admission: req, Namespace: obj.Namespace, Params: obj.Params})
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	results := make([]reports.Result, 0, len(outcomes))
	for _, o := range outcomes {
		if o.Kind != "" {
			name := ReportName(model.Source{Namespace: o.Namespace, Name: o.Policy})
			m := s.models[name]
			if m == nil {
				continue // removed since Evaluate took its snapshot
			}
			res := reports.ResultFor(m.meta, o.Rule, reports.Status(o.Result), o.Message, Process, now)
			res.Policy = name
			results = append(results, res)
			continue
		}
		policy := s.policies[o.Policy]
		if policy == nil {
			continue // removed since Evaluate took its snapshot
		}
		results = append(results, reports.ResultFor(policy, o.Rule, reports.Status(o.Result), o.Message, Process, now))
	}
	return results, nil
}
