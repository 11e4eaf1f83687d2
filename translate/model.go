// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/kyverno/cellib"
	"github.com/kyvap/kyvap/model"
	"github.com/kyvap/kyvap/translate/libforms"
	"github.com/kyvap/kyvap/vap"
)

// Labels and annotations that tell which kind of policy generated an
// object (set on what is generated from the policy model; ClusterPolicy
// objects carry neither, for compatibility with what is deployed).
const (
	// AnnotationPolicyKind is the source policy's kind.
	AnnotationPolicyKind = "kyvap.io/policy-kind"
	// LabelPolicyKind is the source policy's kind, as a label for cleanup.
	LabelPolicyKind = "kyvap.io/policy-kind"
	// LabelPolicyNamespace is the namespace of a namespaced source policy:
	// its objects carry no owner reference (a cluster-scoped object cannot
	// be owned by a namespaced one) and are cleaned up by these labels.
	LabelPolicyNamespace = "kyvap.io/policy-namespace"
	// AnnotationPolicyNamespace is the full namespace of a namespaced source.
	AnnotationPolicyNamespace = "kyvap.io/policy-namespace"
)

// Condition names kyvap adds to policy-model VAPs.
const (
	conditionModelExceptions = "kyvap-exceptions"
)

// TranslatePolicy translates a policy of the policy model (a
// ValidatingPolicy or NamespacedValidatingPolicy, lowered) into VAPs and
// bindings, one VAP per rule, and says for every rule where it is enforced.
// Like Translate it is pure and deterministic, and waits for one of the
// slots that bound the translations running at once.
func TranslatePolicy(p model.Policy, resolver kyverno.KindResolver, opts Options) Plan {
	release, _ := acquireSlot(context.Background()) // never ends: no error
	defer release()
	v, err := vap.CompatibilityVersion(opts.CompatibilityVersion)
	plan := Plan{Policy: p.Source.Name}
	if err != nil {
		plan.Warnings = append(plan.Warnings, err.Error()+"; using "+vap.NewestCompatibilityVersion.String())
		v = vap.NewestCompatibilityVersion
	}
	t := &translation{resolver: resolver, opts: opts, version: v}
	if t.resolver == nil {
		t.resolver = kyverno.NewStaticResolver()
	}
	for i := range p.Rules {
		plan.Rules = append(plan.Rules, t.modelRule(&plan, &p.Source, &p.Rules[i]))
	}
	if len(p.Rules) > 0 {
		plan.Warnings = append(plan.Warnings, resourceWarnings(t.resolver, &p.Source, &p.Rules[0])...)
	}
	sort.Slice(plan.ValidatingAdmissionPolicies, func(i, j int) bool {
		return plan.ValidatingAdmissionPolicies[i].Name < plan.ValidatingAdmissionPolicies[j].Name
	})
	sort.Slice(plan.Bindings, func(i, j int) bool { return plan.Bindings[i].Name < plan.Bindings[j].Name })
	return plan
}

// libraryUsers says which parts of a rule call Kyverno's libraries, per
// validation: " (validations[1]: hash; variables.x: resource)", or "" when
// there is one part only. At most maxLibraryUsers parts are named.
func libraryUsers(r *model.Rule) string {
	var parts []string
	add := func(name string, expressions ...string) {
		if libs := cellib.Used(expressions...); len(libs) > 0 {
			parts = append(parts, name+": "+strings.Join(libs, ", "))
		}
	}
	for _, mc := range r.MatchConditions {
		add("matchConditions."+mc.Name, mc.Expression)
	}
	for _, v := range r.Variables {
		add("variables."+v.Name, v.Expression)
	}
	for i, v := range r.Validations {
		add(fmt.Sprintf("validations[%d]", i), v.Expression, v.MessageExpression)
	}
	for _, a := range r.AuditAnnotations {
		add("auditAnnotations."+a.Key, a.ValueExpression)
	}
	if len(parts) <= 1 && len(r.Validations) <= 1 {
		return ""
	}
	more := ""
	if len(parts) > maxLibraryUsers {
		more = fmt.Sprintf(" and %d more", len(parts)-maxLibraryUsers)
		parts = parts[:maxLibraryUsers]
	}
	return " (" + strings.Join(parts, "; ") + more + ")"
}

// maxLibraryUsers bounds the parts libraryUsers names.
const maxLibraryUsers = 5

// ModelRuleNotEnforced says why kyvap's fallback engine cannot evaluate a
// rule of the policy model, or "" when it can. It is the one answer the
// translator (which hands the rule to the webhook or says it is not
// enforced) and the engine (which compiles it or not) share.
func ModelRuleNotEnforced(r *model.Rule) string {
	return ModelRuleNotEnforcedWith(r, EngineCapabilities{})
}

// MaxPartialExceptions bounds the PolicyExceptions with images or
// allowedValues that may name a rule reading the `exceptions` variable:
// kyvap's engine compiles the rule once per subset of them.
const MaxPartialExceptions = 4

// EngineCapabilities are what an engine can evaluate beyond Kyverno's pure
// CEL libraries.
type EngineCapabilities struct {
	// Resources: the engine reads objects for Kyverno's resource library
	// (kyvap test with a test's context file; the operator with
	// --resource-library-reads).
	Resources bool
}

// ModelRuleNotEnforcedWith is ModelRuleNotEnforced for an engine with caps.
func ModelRuleNotEnforcedWith(r *model.Rule, caps EngineCapabilities) string {
	var missing []string
	partial := 0
	for _, ex := range r.Exceptions {
		if !ex.Full() {
			partial++
		}
	}
	for _, lib := range r.Libraries {
		switch {
		case cellib.Supported(lib), lib == "resource" && caps.Resources:
		case lib == "exceptions":
			// The engine binds the variable per subset of the partial
			// exceptions that match (engine/model.go).
			if partial > MaxPartialExceptions {
				return fmt.Sprintf("the policy reads the exceptions variable and %d PolicyExceptions with images or allowedValues name it; kyvap's engine handles at most %d", partial, MaxPartialExceptions)
			}
		default:
			missing = append(missing, lib)
		}
	}
	switch {
	case r.Unsupported != "":
		return r.Unsupported
	case r.Mode == model.ModeJSON:
		return "evaluation.mode JSON validates JSON payloads, which kyvap does not evaluate"
	case len(missing) > 0:
		msg := fmt.Sprintf("kyvap's engine does not implement Kyverno's CEL %s %s", plural(len(missing), "library", "libraries"), strings.Join(missing, ", "))
		for _, lib := range missing {
			if readsOutside[lib] {
				return msg + " (" + lib + " reads the cluster or the network)"
			}
		}
		return msg
	}
	return ""
}

// readsOutside are the Kyverno CEL libraries whose results depend on more
// than the request: the cluster's objects, its global context, a registry
// or an HTTP endpoint.
var readsOutside = map[string]bool{"resource": true, "http": true, "globalContext": true, "imagedata": true, "generator": true}

// toWebhook is the result for a rule that is no VAP: kyvap's webhook
// enforces it when its engine can evaluate it (Fallback.NotEnforced says
// why not, otherwise).
func (t *translation) toWebhook(rule *model.Rule, reason model.Reason, message string) RuleResult {
	return RuleResult{Rule: rule.ID, Verdict: VerdictFallback, Reason: reason, Message: message,
		Fallback: &FallbackRule{Reason: reason, Message: message, NotEnforced: ModelRuleNotEnforcedWith(rule, t.opts.Engine), WebhookExempt: modelWebhookProtectedCovered(rule)}}
}

func (t *translation) modelRule(plan *Plan, src *model.Source, rule *model.Rule) RuleResult {
	// Calls of Kyverno's libraries that have an exact form in the API
	// server's CEL are written in it, for the VAP (kyvap's engine
	// evaluates the rule as written).
	libraryForms := ""
	if len(rule.Libraries) > 0 && libforms.Writable(rule.Libraries) {
		opts := t.libraryOptions(rule)
		opts.PolicyNamespace = src.Namespace
		if written, err := libforms.Rule(rule, opts); err != nil {
			libraryForms = " (" + err.Error() + ")"
		} else {
			rule = written
		}
	}
	switch {
	case rule.Mode == model.ModeJSON:
		return RuleResult{Rule: rule.ID, Verdict: VerdictNotHandled, Reason: model.ReasonEvaluationModeJSON, Message: "evaluation.mode is JSON: the policy validates JSON payloads, not admission requests"}
	case !rule.Admission:
		return RuleResult{Rule: rule.ID, Verdict: VerdictNotHandled, Reason: model.ReasonAdmissionDisabled, Message: "evaluation.admission.enabled is false: the policy is not applied at admission (background scans only)"}
	case t.opts.KyvernoGeneratesVAPs && rule.KyvernoGenerates:
		return RuleResult{Rule: rule.ID, Verdict: VerdictNotHandled, Reason: model.ReasonKyvernoGeneratesVAP, Message: "spec.autogen.validatingAdmissionPolicy.enabled: Kyverno's own generator makes this policy's ValidatingAdmissionPolicy (vpol-" + src.Name + ")"}
	case len(rule.MatchConstraints.ResourceRules) == 0:
		return RuleResult{Rule: rule.ID, Verdict: VerdictInvalid, Reason: model.ReasonNoMatchConstraints, Message: "spec.matchConstraints has no resourceRules; Kyverno refuses such a policy"}
	case rule.Unsupported != "":
		return t.toWebhook(rule, model.ReasonAutogenExtraction, rule.Unsupported)
	case len(rule.Libraries) > 0:
		return t.toWebhook(rule, model.ReasonKyvernoLibrary, fmt.Sprintf("uses Kyverno's CEL %s %s, which the API server does not have%s%s", plural(len(rule.Libraries), "library", "libraries"), strings.Join(rule.Libraries, ", "), libraryUsers(rule), libraryForms))
	case !t.opts.GenerateValidatingAdmissionPolicy:
		return t.toWebhook(rule, model.ReasonGenerationDisabled, "ValidatingAdmissionPolicy generation is disabled")
	}
	var exceptionConditions []string
	for _, ex := range rule.Exceptions {
		if !ex.Full() {
			continue // feeds `exceptions`, which the rule does not read (Libraries)
		}
		if len(ex.MatchConditions) == 0 {
			return RuleResult{Rule: rule.ID, Verdict: VerdictTranslated, Reason: model.ReasonExemptedByException, Message: fmt.Sprintf("PolicyException %s has no matchConditions: Kyverno exempts every request from the policy", ex.Key())}
		}
		parts := make([]string, len(ex.MatchConditions))
		for i, mc := range ex.MatchConditions {
			parts[i] = "(" + mc.Expression + "\n)"
		}
		exceptionConditions = append(exceptionConditions, "("+strings.Join(parts, " && ")+")")
	}

	spec := admissionregistrationv1.ValidatingAdmissionPolicySpec{
		ParamKind:        rule.ParamKind.DeepCopy(),
		MatchConstraints: rule.MatchConstraints.DeepCopy(),
		Validations:      copyList(rule.Validations),
		Variables:        copyList(rule.Variables),
		AuditAnnotations: copyList(rule.AuditAnnotations),
	}
	failurePolicy := rule.FailurePolicy
	spec.FailurePolicy = &failurePolicy
	if changed := vap.JoinMessageLines(spec.Validations); len(changed) > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("%s: the message of validations %v has line breaks, which a ValidatingAdmissionPolicy refuses; the VAP's message has the lines joined by spaces", ruleLabel(src, rule), changed))
	}
	// Kyverno's global configuration filters every request before any
	// policy, ValidatingPolicies included; only the filters that can name
	// a resource the rule matches are kept (the API server evaluates the
	// condition on every request the VAP matches).
	kinds := []kyverno.KindSet{matchedResources(&rule.MatchConstraints)}
	global, fl := kyverno.ConfigConditions(t.opts.KyvernoConfig, t.resolver, kinds, kyverno.ConfinedNamespaces(kinds, rule.MatchConstraints.NamespaceSelector))
	if fl != nil {
		return t.toWebhook(rule, fl.Reason, fl.Message)
	}
	ours := map[string]bool{}
	var conditions []admissionregistrationv1.MatchCondition
	for _, mc := range global {
		ours[mc.Name] = !strings.HasPrefix(mc.Name, kyverno.ConditionKyvernoConfigPrefix)
		conditions = append(conditions, mc)
	}
	if rule.Namespace != "" {
		// request.namespace is the Namespace's own name for a Namespace
		// object, as in Kyverno's webhook, which selects namespaced
		// policies by the request's namespace.
		conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: vap.ConditionPolicyNamespace, Expression: "request.namespace == " + strconv.Quote(rule.Namespace)})
		ours[vap.ConditionPolicyNamespace] = true
	}
	if len(exceptionConditions) > 0 {
		conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: conditionModelExceptions, Expression: "!(" + strings.Join(exceptionConditions, " || ") + ")"})
		ours[conditionModelExceptions] = true
	}
	for _, mc := range rule.MatchConditions {
		if ours[mc.Name] || (global != nil && strings.HasPrefix(mc.Name, kyverno.ConditionKyvernoConfigPrefix)) {
			return RuleResult{Rule: rule.ID, Verdict: VerdictInvalid, Reason: model.ReasonVAPFieldInvalid, Message: fmt.Sprintf("matchCondition name %q collides with a name kyvap generates", mc.Name)}
		}
		conditions = append(conditions, *mc.DeepCopy())
	}
	spec.MatchConditions = conditions
	if len(spec.MatchConditions) > vap.MaxMatchConditions {
		return t.toWebhook(rule, model.ReasonMatchNotExpressible, fmt.Sprintf("%d match conditions exceed the API server's limit of %d", len(spec.MatchConditions), vap.MaxMatchConditions))
	}
	if fl := vap.CheckFields(&spec); fl != nil {
		return RuleResult{Rule: rule.ID, Verdict: VerdictInvalid, Reason: fl.Reason, Message: fl.Message}
	}
	if kyverno.RewriteOrValueInSpec(&spec, ours) {
		plan.Warnings = append(plan.Warnings, kyverno.OrValueWarning(ruleLabel(src, rule)))
	}
	// Kyverno compiles ValidatingPolicies in the API server's stored
	// expressions environment (every library), so the cluster's
	// compatibility version is the only bar.
	if user, generated := vap.CheckExpressions(&spec, t.version, ours); len(generated) > 0 {
		return t.toWebhook(rule, model.ReasonGeneratedCELError, vap.ProblemsMessage(generated))
	} else if len(user) > 0 {
		if newest, _ := vap.CheckExpressions(&spec, vap.NewestCompatibilityVersion, ours); len(newest) == 0 {
			return t.toWebhook(rule, model.ReasonCELNotAtCompatibilityVersion, fmt.Sprintf("does not compile at CEL compatibility version %s: %s", t.version, vap.ProblemsMessage(user)))
		}
		return RuleResult{Rule: rule.ID, Verdict: VerdictInvalid, Reason: model.ReasonCELCompileError, Message: vap.ProblemsMessage(user)}
	}
	// Kyverno's ValidatingPolicy engine gives match conditions (the
	// policy's and its exceptions') the namespace object; the API server's
	// matchConditions have none: conditions that read it are checked in
	// the guard variable instead, as for a ClusterPolicy's namespace
	// selection.
	movable := map[string]bool{}
	for name, v := range ours {
		movable[name] = v
	}
	for _, mc := range rule.MatchConditions {
		if strings.Contains(mc.Expression, vap.NamespaceObjectIdent) {
			movable[mc.Name] = true
		}
	}
	if fl := vap.GuardNamespacePredicates(&spec, movable); fl != nil {
		return RuleResult{Rule: rule.ID, Verdict: VerdictInvalid, Reason: fl.Reason, Message: fl.Message}
	}
	if vap.IsGuarded(&spec) {
		if user, generated := vap.CheckExpressions(&spec, t.version, ours); len(user)+len(generated) > 0 {
			return t.toWebhook(rule, model.ReasonGeneratedCELError, vap.ProblemsMessage(append(user, generated...)))
		}
	}

	name := modelVAPName(src, rule.ID)
	meta := modelObjectMeta(src, rule, name)
	vap := admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: meta,
		Spec:       spec,
	}
	var scope *admissionregistrationv1.MatchResources
	if rule.Namespace != "" {
		scope = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{rule.Namespace}}},
		}}
	}
	bindingMeta := modelObjectMeta(src, rule, name+"-0")
	binding := admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: bindingMeta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ParamRef:          rule.ParamRef.DeepCopy(),
			MatchResources:    t.withKyvernoSelectors(scope),
			ValidationActions: append([]admissionregistrationv1.ValidationAction(nil), rule.Actions...),
		},
	}
	plan.ValidatingAdmissionPolicies = append(plan.ValidatingAdmissionPolicies, *vap.DeepCopy())
	plan.Bindings = append(plan.Bindings, binding)
	return RuleResult{Rule: rule.ID, Verdict: VerdictTranslated, ValidatingAdmissionPolicies: []string{name}}
}

func copyList[T any, PT interface {
	*T
	DeepCopy() *T
}](in []T) []T {
	if len(in) == 0 {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		out[i] = *PT(&in[i]).DeepCopy()
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func ruleLabel(src *model.Source, rule *model.Rule) string {
	return src.String() + " (" + rule.ID + ")"
}

// modelVAPName names the VAP of a policy-model rule: always the hashed form
// kyvap-<policy'>.<kind-rule>.<hash>, the hash over the kind, namespace,
// name and rule ID, so that it never equals a ClusterPolicy's VAP name
// (those hash only policy and rule) nor another kind's.
func modelVAPName(src *model.Source, ruleID string) string {
	policy := src.Name
	if src.Namespace != "" {
		policy = src.Namespace + "-" + src.Name
	}
	short := map[model.Kind]string{
		model.KindValidatingPolicy:           "vpol",
		model.KindNamespacedValidatingPolicy: "nvpol",
		model.KindClusterPolicy:              "cpol",
		model.KindPolicy:                     "pol",
	}[src.Kind]
	readable := short + "-" + sanitizeLabel(ruleID)
	return hashedName(policy, ruleID, readable, nameHash(string(src.Kind), src.Namespace, src.Name, ruleID))
}

// modelObjectMeta is the metadata of an object generated from a policy-model
// rule: kyvap's labels and annotations naming the source, and a controller
// owner reference when the source is cluster-scoped (a namespaced source
// cannot own a cluster-scoped object: its objects are found by labels).
func modelObjectMeta(src *model.Source, rule *model.Rule, name string) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			LabelManagedBy:  ManagedByValue,
			LabelPolicy:     labelValue(src.Name),
			LabelRule:       labelValue(rule.ID),
			LabelPolicyKind: string(src.Kind),
		},
		Annotations: map[string]string{
			AnnotationPolicy:     src.Name,
			AnnotationRule:       rule.ID,
			AnnotationPolicyKind: string(src.Kind),
		},
	}
	if rule.FailuresAreErrors {
		meta.Annotations[AnnotationEvaluationFailures] = "error"
	}
	if src.Namespace != "" {
		meta.Labels[LabelPolicyNamespace] = labelValue(src.Namespace)
		meta.Annotations[AnnotationPolicyNamespace] = src.Namespace
		return meta
	}
	controller := true
	meta.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: src.APIVersion, Kind: string(src.Kind), Name: src.Name, UID: src.UID, Controller: &controller,
	}}
	return meta
}

// resourceWarnings says which resources a policy's match constraints name
// that the cluster does not serve (such a rule never matches them), and, for
// a namespaced policy, which it names that are cluster-scoped (a namespaced
// policy never applies to them, except its own Namespace object). Wildcards
// are not checked.
func resourceWarnings(resolver kyverno.KindResolver, src *model.Source, rule *model.Rule) []string {
	served, err := resolver.Resolve("*")
	if err != nil || len(served) == 0 {
		return nil
	}
	namespaced := map[string]bool{} // group/resource -> namespaced
	for _, r := range served {
		namespaced[r.Group+"/"+r.Resource] = r.Namespaced
	}
	var unknown, clusterScoped []string
	seen := map[string]bool{}
	for _, rr := range rule.MatchConstraints.ResourceRules {
		for _, group := range rr.APIGroups {
			for _, resource := range rr.Resources {
				resource, _, _ = strings.Cut(resource, "/")
				key := group + "/" + resource
				if group == "*" || resource == "*" || seen[key] {
					continue
				}
				seen[key] = true
				isNamespaced, ok := namespaced[key]
				switch {
				case !ok:
					unknown = append(unknown, key)
				case src.Namespaced() && !isNamespaced && key != "/namespaces":
					clusterScoped = append(clusterScoped, key)
				}
			}
		}
	}
	var out []string
	if len(unknown) > 0 {
		sort.Strings(unknown)
		out = append(out, fmt.Sprintf("%s: matchConstraints name resources the cluster does not serve (%s): the policy never applies to them", src, strings.Join(unknown, ", ")))
	}
	if len(clusterScoped) > 0 {
		sort.Strings(clusterScoped)
		out = append(out, fmt.Sprintf("%s: matchConstraints name cluster-scoped resources (%s): a namespaced policy applies only to requests in its namespace, never to them", src, strings.Join(clusterScoped, ", ")))
	}
	return out
}

// matchedResources is the set of resources a VAP with these match
// constraints receives requests for: request.resource is the rule's
// resource that matched, also when an equivalent version was requested
// (matchPolicy Equivalent). A wildcard, or no rules, means anything.
func matchedResources(m *admissionregistrationv1.MatchResources) kyverno.KindSet {
	if m == nil || len(m.ResourceRules) == 0 {
		return kyverno.KindSet{Everything: true}
	}
	var out []kyverno.Resource
	for _, rule := range m.ResourceRules {
		for _, group := range rule.APIGroups {
			for _, version := range rule.APIVersions {
				for _, resource := range rule.Resources {
					if group == "*" || version == "*" || strings.Contains(resource, "*") {
						return kyverno.KindSet{Everything: true}
					}
					name, sub, _ := strings.Cut(resource, "/")
					out = append(out, kyverno.Resource{Group: group, Version: version, Resource: name, Subresource: sub})
				}
			}
		}
	}
	if len(out) == 0 {
		return kyverno.KindSet{Everything: true}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Group+"/"+a.Version+"/"+a.Resource+"/"+a.Subresource < b.Group+"/"+b.Version+"/"+b.Resource+"/"+b.Subresource
	})
	return kyverno.KindSet{Resources: out}
}

// libraryOptions are what the rule's requests are, for the library forms
// (libforms.Options): whether every resource it matches is namespaced (and
// none a Namespace), as the resolver knows them, and whether its object
// always carries the request's namespace.
func (t *translation) libraryOptions(rule *model.Rule) libforms.Options {
	served, err := t.resolver.Resolve("*")
	if err != nil {
		return libforms.Options{}
	}
	scope := map[string]bool{} // group/resource -> namespaced
	kinds := map[string]libforms.ServedKind{}
	for _, r := range served {
		if r.Subresource == "" {
			scope[r.Group+"/"+r.Resource] = r.Namespaced
			apiVersion := r.Version
			if r.Group != "" {
				apiVersion = r.Group + "/" + r.Version
			}
			kinds[apiVersion+"/"+r.Resource] = libforms.ServedKind{Kind: r.Kind, Namespaced: r.Namespaced}
		}
	}
	m := &rule.MatchConstraints
	if len(m.ResourceRules) == 0 {
		return libforms.Options{Kinds: kinds}
	}
	opts := libforms.Options{NamespacedOnly: true, ObjectInNamespace: true, Kinds: kinds}
	for _, rule := range m.ResourceRules {
		for _, op := range rule.Operations {
			if op != admissionregistrationv1.Create && op != admissionregistrationv1.Update {
				opts.ObjectInNamespace = false
			}
		}
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				name, sub, _ := strings.Cut(resource, "/")
				namespaced, known := scope[group+"/"+name]
				if !known || !namespaced || strings.Contains(group+resource, "*") || group == "" && name == "namespaces" {
					return libforms.Options{Kinds: kinds}
				}
				if sub != "" {
					opts.ObjectInNamespace = false
				}
			}
		}
	}
	return opts
}
