// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"fmt"
	"slices"
	"strings"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Kyverno's exclusions (pkg/pss ApplyPodSecurityExclusion), as compiled
// here. Kyverno evaluates the checks a second time, on a copy of the pod
// (an "exclusion pod"), and each field error of an excluded control's
// check in that copy that qualifies (its index-normalised field is the
// exclusion's restrictedField, or that is empty; each of its bad values
// matches a pattern of values, or values is empty) removes one error of
// the same field from the pod's own errors. A check whose errors are all
// removed passes. So, per check and per field, a pod fails where it has
// more errors than the qualifying errors of all exclusions together.
//
// The exclusion pod:
//   - without images, the pod with one empty container named "fake" and
//     no init or ephemeral containers. A pod-level control's errors there
//     are the pod's own, so each qualifying one removes itself.
//   - with images, a pod with only the containers whose image matches, and
//     no other field. A container-level error there removes an error of
//     the same field of the container of the same name.
//
// Compiled: every control but AppArmor, with each check's errors as the
// fork writes them, in the pod and in each copy. Refused by name:
// AppArmor, exclusions with and without images of a control whose
// container errors depend on the pod's fields, and what Kyverno's policy
// validation rejects.

// controlChecks are the checks of each control (pkg/pss/utils
// PSS_control_name_to_ids).
var controlChecks = map[string][]string{
	"Capabilities":             {"capabilities_baseline", "capabilities_restricted"},
	"Seccomp":                  {"seccompProfile_baseline", "seccompProfile_restricted"},
	"Privileged Containers":    {"privileged"},
	"Host Ports":               {"hostPorts"},
	"/proc Mount Type":         {"procMount"},
	"HostProcess":              {"windowsHostProcess"},
	"SELinux":                  {"seLinuxOptions"},
	"Host Namespaces":          {"hostNamespaces"},
	"HostPath Volumes":         {"hostPathVolumes"},
	"Sysctls":                  {"sysctls"},
	"AppArmor":                 {"appArmorProfile"},
	"Privilege Escalation":     {"allowPrivilegeEscalation"},
	"Running as Non-root":      {"runAsNonRoot"},
	"Running as Non-root user": {"runAsUser"},
	"Volume Types":             {"restrictedVolumes"},
}

// Kyverno's policy validation (api/kyverno/v1 PodSecurityStandard.Validate
// and Rule.ValidatePSaControlNames): a container-level control needs
// images, a pod-level one must have none, and a restricted control is
// invalid at baseline (but for Capabilities and Seccomp, which have a
// baseline check).
var (
	podLevelControls       = []string{"Host Namespaces", "HostPath Volumes", "Sysctls", "Volume Types"}
	containerLevelControls = []string{"Capabilities", "Privileged Containers", "Host Ports", "/proc Mount Type", "Privilege Escalation"}
	restrictedControls     = []string{"Volume Types", "Privilege Escalation", "Running as Non-root", "Running as Non-root user"}
)

// checkExclusions refuses what kyvap does not compile, and what Kyverno's
// policy validation rejects (a policy Kyverno does not admit has no
// verdicts to keep), naming the exclusion.
func checkExclusions(level string, excludes []exclusion) *model.Refusal {
	for _, e := range excludes {
		where := func(format string, args ...any) *model.Refusal {
			return model.Refuse(model.ReasonPodSecurityNotExpressible, "%s (control %q): "+format, append([]any{e.name(), e.ControlName}, args...)...)
		}
		switch {
		case controlChecks[e.ControlName] == nil:
			return where("no such control (Kyverno's CRD names 15)")
		case slices.Contains(containerLevelControls, e.ControlName) && len(e.Images) == 0:
			return where("a container-level control needs images (Kyverno's policy validation rejects it)")
		case slices.Contains(podLevelControls, e.ControlName) && len(e.Images) > 0:
			return where("a pod-level control takes no images (Kyverno's policy validation rejects it)")
		case e.RestrictedField != "" && len(e.Values) == 0:
			return where("restrictedField without values (Kyverno's policy validation rejects it)")
		case e.RestrictedField == "" && len(e.Values) > 0:
			return where("values without restrictedField (Kyverno's policy validation rejects it)")
		case e.exception == "" && level == LevelBaseline && slices.Contains(restrictedControls, e.ControlName):
			// An exception's is valid, and excludes nothing: no check
			// of the control runs at baseline.
			return where("a restricted control at level baseline (Kyverno's policy validation rejects it)")
		case e.ControlName == "AppArmor":
			return where("its errors name annotations, whose keys Kyverno's field normalisation rewrites (digits become *): not compiled yet")
		}
		if field, ok := contextControls[e.ControlName]; ok && len(e.Images) == 0 && fieldSelected(e, "spec.containers[*]."+field) {
			for _, other := range excludes {
				if other.ControlName == e.ControlName && len(other.Images) > 0 && !removesEveryContainerError(other, field) {
					return where("with %s, exclusions with images and without of a control whose container errors depend on the pod's fields, both selecting spec.containers[*].%s: Kyverno removes such errors one by one, by field without images and by container with, in an order that decides the verdict; not compiled", other.name(), field)
				}
			}
		}
	}
	return nil
}

// exclusion is an exclusion as the checks read it: one of the rule's own,
// or one of a PolicyException's podSecurity controls, which removes errors
// only where the exception matches the request (applies).
type exclusion struct {
	kyvernov1.PodSecurityStandard
	// exception names the PolicyException (namespace/name); "" for the
	// rule's own.
	exception string
	// index is its index in the rule's exclude or the exception's
	// podSecurity.
	index int
	// applies is the CEL predicate where the exclusion applies: "" for
	// always (the rule's own).
	applies string
}

// name names the exclusion in refusals.
func (e exclusion) name() string {
	if e.exception == "" {
		return fmt.Sprintf("podSecurity exclude[%d]", e.index)
	}
	return fmt.Sprintf("PolicyException %s podSecurity[%d]", e.exception, e.index)
}

// when is the predicate "the exclusion applies and predicate holds".
func (e exclusion) when(predicate string) string {
	switch {
	case e.applies == "" || predicate == "false":
		return predicate
	case predicate == "true":
		return e.applies
	}
	return "(" + e.applies + " && " + predicate + ")"
}

// counted is the CEL int n where the exclusion applies, else 0.
func (e exclusion) counted(n string) string {
	if e.applies == "" || n == "0" {
		return n
	}
	return "(" + e.applies + " ? " + n + " : 0)"
}

// contextControls are the controls whose container errors depend on the
// pod's own fields, with the field of those errors.
var contextControls = map[string]string{
	"Running as Non-root": "securityContext.runAsNonRoot",
	"Seccomp":             "securityContext.seccompProfile.type",
}

// removesEveryContainerError: an exclusion with images removes every
// error of the field of every container, whatever other exclusions
// removed first, where its images include "*" and it selects every bad
// value: its copy of the pod has every container, and a container's error
// in the pod is its error in the copy too (the copy has no pod-level
// field, so no pod-level value that spares a container).
func removesEveryContainerError(e exclusion, field string) bool {
	return slices.Contains(e.Images, "*") && len(e.Values) == 0 && e.RestrictedField == ""
}

// exclusionsOf are the exclusions of the check's control.
func exclusionsOf(checkID string, excludes []exclusion) []exclusion {
	var out []exclusion
	for _, e := range excludes {
		if slices.Contains(controlChecks[e.ControlName], checkID) {
			out = append(out, e)
		}
	}
	return out
}

// excludedCheck is the CEL predicate that holds where a check with
// exclusions fails the pod, for the check's version (its minimum minor).
// ok is false for a check without such a form.
func excludedCheck(checkID string, minor int, excludes []exclusion) (func(bound) string, bool) {
	exceptOnWindowsFrom25 := func(f func(bound) string) func(bound) string {
		if minor >= 25 {
			return exceptOnWindows(f)
		}
		return f
	}
	switch checkID {
	case "hostNamespaces":
		return func(p bound) string { return hostNamespacesExcluded(p, excludes) }, true
	case "hostPathVolumes":
		return func(p bound) string { return hostPathVolumesExcluded(p, excludes) }, true
	case "sysctls":
		return func(p bound) string { return sysctlsExcluded(p, sysctlsAt(minor), excludes) }, true
	case "restrictedVolumes":
		return func(p bound) string { return restrictedVolumesExcluded(p, excludes) }, true
	case "privileged":
		return func(p bound) string { return perContainer(p, excludes, privilegedErrors) }, true
	case "hostPorts":
		return func(p bound) string { return perContainer(p, excludes, hostPortsErrors) }, true
	case "procMount":
		return func(p bound) string { return perContainer(p, excludes, procMountErrors) }, true
	case "capabilities_baseline":
		return func(p bound) string { return perContainer(p, excludes, capabilitiesBaselineErrors) }, true
	case "capabilities_restricted":
		return exceptOnWindowsFrom25(func(p bound) string { return perContainer(p, excludes, capabilitiesRestrictedErrors) }), true
	case "allowPrivilegeEscalation":
		return exceptOnWindowsFrom25(func(p bound) string { return perContainer(p, excludes, allowPrivilegeEscalationErrors) }), true
	case "runAsUser":
		return func(p bound) string { return runAsUserExcluded(p, excludes) }, true
	case "windowsHostProcess":
		return func(p bound) string { return windowsHostProcessExcluded(p, excludes) }, true
	case "seLinuxOptions":
		allowed := seLinuxTypesV1Dot0
		if minor >= 31 {
			allowed = append(append([]string(nil), seLinuxTypesV1Dot0...), "container_engine_t")
		}
		return func(p bound) string { return seLinuxOptionsExcluded(p, allowed, excludes) }, true
	case "seccompProfile_baseline":
		return func(p bound) string { return seccompProfileBaselineExcluded(p, excludes) }, true
	case "seccompProfile_restricted":
		return exceptOnWindowsFrom25(func(p bound) string { return seccompProfileRestrictedExcluded(p, excludes) }), true
	case "runAsNonRoot":
		return func(p bound) string { return runAsNonRootExcluded(p, excludes) }, true
	}
	return nil, false
}

// withImages and withoutImages split a control's exclusions by their
// copy of the pod.
func withImages(excludes []exclusion) []exclusion {
	var out []exclusion
	for _, e := range excludes {
		if len(e.Images) > 0 {
			out = append(out, e)
		}
	}
	return out
}

func withoutImages(excludes []exclusion) []exclusion {
	var out []exclusion
	for _, e := range excludes {
		if len(e.Images) == 0 {
			out = append(out, e)
		}
	}
	return out
}

// podError is a pod-level error: where it holds, its field and what makes
// an exclusion's bad values qualify.
type podError struct {
	holds, field string
	qualifies    func(e exclusion) string
}

// constantBadValue qualifies by a constant bad value.
func constantBadValue(badValue string) func(exclusion) string {
	return func(e exclusion) string {
		if constantQualifies(e, badValue) {
			return "true"
		}
		return "false"
	}
}

// stringBadValue qualifies by a string bad value read from the pod.
func stringBadValue(value string) func(exclusion) string {
	return func(e exclusion) string { return stringQualifies(e, value) }
}

// podErrorsRemain holds where a pod-level error remains: the copy without
// images has the pod's own pod-level fields, so its same error, where it
// qualifies, removes it; the copy with images has no pod-level field and
// no pod-level error.
func podErrorsRemain(errors []podError, excludes []exclusion) string {
	var remain []string
	for _, pe := range errors {
		var removed []string
		for _, e := range withoutImages(excludes) {
			if !fieldSelected(e, pe.field) {
				continue
			}
			if q := e.when(pe.qualifies(e)); q != "false" {
				removed = append(removed, q)
			}
		}
		switch {
		case len(removed) == 0:
			remain = append(remain, pe.holds)
		case !slices.Contains(removed, "true"):
			remain = append(remain, "("+pe.holds+" && !"+anyOf(removed...)+")")
		}
	}
	if len(remain) == 0 {
		return "false"
	}
	return anyOf(remain...)
}

// runAsUserExcluded: the pod's and each container's runAsUser 0 (bad
// value 0); a container's error does not depend on the pod's fields, and
// the empty container of the copy without images has none.
func runAsUserExcluded(p bound, excludes []exclusion) string {
	return anyOf(
		podErrorsRemain([]podError{{holds: p.spec("securityContext", "runAsUser").is("== 0"), field: "spec.securityContext.runAsUser", qualifies: constantBadValue("0")}}, excludes),
		perContainer(p, withImages(excludes), func() []containerErrors {
			return []containerErrors{constantContainerError("securityContext.runAsUser", "== 0", "0")}
		}),
	)
}

// windowsHostProcessExcluded: the pod's and each container's
// windowsOptions.hostProcess true (bad value true).
func windowsHostProcessExcluded(p bound, excludes []exclusion) string {
	return anyOf(
		podErrorsRemain([]podError{{holds: p.spec("securityContext", "windowsOptions", "hostProcess").is("== true"), field: "spec.securityContext.windowsOptions.hostProcess", qualifies: constantBadValue("true")}}, excludes),
		perContainer(p, withImages(excludes), func() []containerErrors {
			return []containerErrors{constantContainerError("securityContext.windowsOptions.hostProcess", "== true", "true")}
		}),
	)
}

// constantContainerError is a container error where the field compares
// as given, with a constant bad value.
func constantContainerError(path, comparison, badValue string) containerErrors {
	at := func(y string) field { return of(y, strings.Split(path, ".")...) }
	return containerErrors{
		field:  path,
		errors: func(y string) string { return count(at(y).is(comparison)) },
		qualifying: func(y string, e exclusion) string {
			if !constantQualifies(e, badValue) {
				return "0"
			}
			return count(at(y).is(comparison))
		},
	}
}

// seLinuxOptionsExcluded: of the pod's and each container's set
// seLinuxOptions, a type outside the allowed ones, a user and a role are
// an error each, of its own field, the value as bad value.
func seLinuxOptionsExcluded(p bound, allowedTypes []string, excludes []exclusion) string {
	errorsOf := func(options field) []podError {
		child := func(name string) field {
			return field{options.base, append(append([]string(nil), options.path...), name)}
		}
		return []podError{
			{holds: "(" + options.set() + " && !(" + child("type").stringOr() + " in " + quotedSet(allowedTypes...) + "))", field: "type", qualifies: stringBadValue(child("type").stringOr())},
			{holds: "(" + options.set() + " && " + child("user").stringOr() + " != '')", field: "user", qualifies: stringBadValue(child("user").stringOr())},
			{holds: "(" + options.set() + " && " + child("role").stringOr() + " != '')", field: "role", qualifies: stringBadValue(child("role").stringOr())},
		}
	}
	pod := errorsOf(p.spec("securityContext", "seLinuxOptions"))
	for i := range pod {
		pod[i].field = "spec.securityContext.seLinuxOptions." + pod[i].field
	}
	containers := func() []containerErrors {
		var out []containerErrors
		for _, name := range []string{"type", "user", "role"} {
			out = append(out, containerErrors{
				field: "securityContext.seLinuxOptions." + name,
				errors: func(y string) string {
					for _, pe := range errorsOf(containerSecurityContext(y, "seLinuxOptions")) {
						if pe.field == name {
							return count(pe.holds)
						}
					}
					return "0"
				},
				qualifying: func(y string, e exclusion) string {
					for _, pe := range errorsOf(containerSecurityContext(y, "seLinuxOptions")) {
						if pe.field == name {
							return count(pe.holds + " && " + pe.qualifies(e))
						}
					}
					return "0"
				},
			})
		}
		return out
	}
	return anyOf(podErrorsRemain(pod, excludes), perContainer(p, withImages(excludes), containers))
}

// seccompType is a seccompProfile's type, "" where unset.
func seccompType(profile field) string {
	return field{profile.base, append(append([]string(nil), profile.path...), "type")}.stringOr()
}

// seccompProfileBaselineExcluded: the pod's and each container's set
// seccompProfile with a type other than RuntimeDefault and Localhost, the
// type as bad value (none where empty).
func seccompProfileBaselineExcluded(p bound, excludes []exclusion) string {
	pod := p.spec("securityContext", "seccompProfile")
	invalid := func(profile field) string { return "(" + profile.set() + " && !" + validSeccomp(profile) + ")" }
	return anyOf(
		podErrorsRemain([]podError{{holds: invalid(pod), field: "spec.securityContext.seccompProfile.type", qualifies: stringBadValue(seccompType(pod))}}, excludes),
		perContainer(p, withImages(excludes), func() []containerErrors {
			return []containerErrors{{
				field:  "securityContext.seccompProfile.type",
				errors: func(y string) string { return count(invalid(containerSecurityContext(y, "seccompProfile"))) },
				qualifying: func(y string, e exclusion) string {
					profile := containerSecurityContext(y, "seccompProfile")
					return count(invalid(profile) + " && " + stringQualifies(e, seccompType(profile)))
				},
			}}
		}),
	)
}

// seccompProfileRestrictedExcluded: as the baseline's ("explicit"
// errors), and a container without a seccompProfile where the pod has no
// valid one ("implicit": drop required, no bad value). The check's errors
// are its explicit ones where it has any, else its implicit ones: in the
// pod and in each copy. The copy without images keeps the pod's fields
// and has one empty container (an implicit error of containers[*] where
// the pod's profile is not valid); the copy with images has the matching
// containers and no pod profile. Exclusions of both kinds of one control
// are refused (checkExclusions).
func seccompProfileRestrictedExcluded(p bound, excludes []exclusion) string {
	pod := p.spec("securityContext", "seccompProfile")
	podInvalid := "(" + pod.set() + " && !" + validSeccomp(pod) + ")"
	podValid := "(" + pod.set() + " && " + validSeccomp(pod) + ")"
	profile := func(y string) field { return containerSecurityContext(y, "seccompProfile") }
	explicit := func(y string) string { return "(" + profile(y).set() + " && !" + validSeccomp(profile(y)) + ")" }
	unset := func(y string) string { return "!" + profile(y).set() }
	var anyExplicit []string
	for _, kind := range containerKinds {
		anyExplicit = append(anyExplicit, p.spec(kind).list()+".exists(x, "+explicit("x")+")")
	}
	hasExplicit := anyOf(append([]string{podInvalid}, anyExplicit...)...)
	podPart := podErrorsRemain([]podError{{holds: podInvalid, field: "spec.securityContext.seccompProfile.type", qualifies: stringBadValue(seccompType(pod))}}, excludes)
	images := withImages(excludes)
	if len(images) > 0 {
		explicitContainers := perContainer(p, images, func() []containerErrors {
			return []containerErrors{{
				field:  "securityContext.seccompProfile.type",
				errors: func(y string) string { return count(explicit(y)) },
				qualifying: func(y string, e exclusion) string {
					return count(explicit(y) + " && " + stringQualifies(e, seccompType(profile(y))))
				},
			}}
		})
		implicitContainers := perContainer(p, images, func() []containerErrors {
			return []containerErrors{{
				field:      "securityContext.seccompProfile.type",
				errors:     func(y string) string { return count("(" + unset(y) + " && !" + podValid + ")") },
				qualifying: func(y string, _ exclusion) string { return count(unset(y)) },
			}}
		})
		return "(" + hasExplicit + " ? " + anyOf(podPart, explicitContainers) + " : " + implicitContainers + ")"
	}
	// Without images, the copy's errors are the pod's error where the
	// pod's profile is invalid, else the fake's implicit one where the pod
	// has no valid profile: it removes one container error of either kind
	// (the same field).
	without := withoutImages(excludes)
	explicitContainers := fakeContainerRemoves(p, without, "securityContext.seccompProfile.type", explicit, "!"+pod.set())
	implicitContainers := fakeContainerRemoves(p, without, "securityContext.seccompProfile.type", func(y string) string {
		return "(" + unset(y) + " && !" + podValid + ")"
	}, "!"+podValid)
	return "(" + hasExplicit + " ? " + anyOf(podPart, explicitContainers) + " : " + implicitContainers + ")"
}

// fakeContainerRemoves holds where a container error remains, for the
// exclusions without images: each container of a list with the error
// counts one (whatever its name: such an exclusion matches by field
// only), and the copy's empty container "fake", a regular container, has
// the error where fakeHas holds, with no bad value, so each exclusion
// selecting containers[*]'s field removes one then.
func fakeContainerRemoves(p bound, excludes []exclusion, path string, has func(y string) string, fakeHas string) string {
	var failing []string
	for _, kind := range containerKinds {
		list := p.spec(kind).list()
		var removed []string
		if kind == "containers" {
			for _, e := range excludes {
				if fieldSelected(e, "spec.containers[*]."+path) {
					removed = append(removed, e.counted("1"))
				}
			}
		}
		if len(removed) == 0 {
			failing = append(failing, list+".exists(x, "+has("x")+")")
			continue
		}
		failing = append(failing, "("+list+".filter(x, "+has("x")+").size() > ("+fakeHas+" ? "+sum(removed)+" : 0))")
	}
	return anyOf(failing...)
}

// runAsNonRootExcluded: the pod's runAsNonRoot false (bad value false);
// a container's false (bad value false), or unset where the pod's is not
// true (required, no bad value). The copy without images keeps the pod's
// field and has one empty container; the copy with images has no pod
// field, so its matching unset containers have the required error.
func runAsNonRootExcluded(p bound, excludes []exclusion) string {
	podField := p.spec("securityContext", "runAsNonRoot")
	podTrue := podField.is("== true")
	at := func(y string) field { return containerSecurityContext(y, "runAsNonRoot") }
	explicitFalse := func(y string) string { return at(y).is("== false") }
	unset := func(y string) string { return "!" + at(y).set() }
	podPart := podErrorsRemain([]podError{{holds: podField.is("== false"), field: "spec.securityContext.runAsNonRoot", qualifies: constantBadValue("false")}}, excludes)
	images := withImages(excludes)
	if len(images) > 0 {
		return anyOf(podPart, perContainer(p, images, func() []containerErrors {
			return []containerErrors{{
				field: "securityContext.runAsNonRoot",
				errors: func(y string) string {
					return count("(" + explicitFalse(y) + " || (" + unset(y) + " && !" + podTrue + "))")
				},
				qualifying: func(y string, e exclusion) string {
					onFalse := "false"
					if constantQualifies(e, "false") {
						onFalse = "true"
					}
					return count("((" + explicitFalse(y) + " && " + onFalse + ") || " + unset(y) + ")")
				},
			}}
		}))
	}
	// Without images, the fake's error (where the pod is not true) removes
	// one container error, explicit or implicit (the same field).
	has := func(y string) string { return "(" + explicitFalse(y) + " || (" + unset(y) + " && !" + podTrue + "))" }
	return anyOf(podPart, fakeContainerRemoves(p, withoutImages(excludes), "securityContext.runAsNonRoot", has, "!"+podTrue))
}

// fieldSelected: the exclusion's restrictedField selects the
// index-normalised field (or it is empty).
func fieldSelected(e exclusion, normalised string) bool {
	return e.RestrictedField == "" || e.RestrictedField == normalised
}

// constantQualifies: a constant bad value ("true", "nil") matches a
// pattern of values (or values is empty), decided now.
func constantQualifies(e exclusion, badValue string) bool {
	if len(e.Values) == 0 {
		return true
	}
	for _, pattern := range e.Values {
		if kyverno.WildcardMatch(pattern, badValue) {
			return true
		}
	}
	return false
}

// stringQualifies is the CEL predicate "the string bad value qualifies":
// Kyverno keeps no bad value for an empty string, so it qualifies then.
func stringQualifies(e exclusion, value string) string {
	if len(e.Values) == 0 {
		return "true"
	}
	return "(" + value + " == '' || " + kyverno.CELPatternMatch(value, e.Values) + ")"
}

// listQualifies is the CEL predicate "each bad value of the list
// qualifies" (a list's empty strings are kept).
func listQualifies(e exclusion, list string) string {
	if len(e.Values) == 0 {
		return "true"
	}
	return list + ".all(bad, " + kyverno.CELPatternMatch("bad", e.Values) + ")"
}

// count is the CEL int 1 where the predicate holds, else 0.
func count(predicate string) string {
	if predicate == "false" {
		return "0"
	}
	return "(" + predicate + " ? 1 : 0)"
}

// sum is the CEL sum of int terms ("0" for none).
func sum(terms []string) string {
	if len(terms) == 0 {
		return "0"
	}
	return "(" + strings.Join(terms, " + ") + ")"
}

// hostNamespacesExcluded: each of hostNetwork, hostPID and hostIPC that
// is true is an error of its own field with the bad value true, which an
// exclusion selecting the field, with true among its values, removes.
func hostNamespacesExcluded(p bound, excludes []exclusion) string {
	var failing []string
	for _, name := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		var removed []string
		for _, e := range excludes {
			if fieldSelected(e, "spec."+name) && constantQualifies(e, "true") {
				removed = append(removed, e.when("true"))
			}
		}
		switch {
		case len(removed) == 0:
			failing = append(failing, p.spec(name).is("== true"))
		case !slices.Contains(removed, "true"):
			failing = append(failing, "("+p.spec(name).is("== true")+" && !"+anyOf(removed...)+")")
		}
	}
	if len(failing) == 0 {
		return "false"
	}
	return anyOf(failing...)
}

// hostPathVolumesExcluded: each hostPath volume is an error of the field
// spec.volumes[*].hostPath with its path as bad value.
func hostPathVolumesExcluded(p bound, excludes []exclusion) string {
	volumes := p.spec("volumes").list()
	hostPath := of("v", "hostPath")
	var removed []string
	for _, e := range excludes {
		if fieldSelected(e, "spec.volumes[*].hostPath") {
			removed = append(removed, e.counted(volumes+".filter(v, "+hostPath.set()+" && "+stringQualifies(e, of("v", "hostPath", "path").stringOr())+").size()"))
		}
	}
	return "(" + volumes + ".filter(v, " + hostPath.set() + ").size() > " + sum(removed) + ")"
}

// sysctlsAt is the sysctls the check's version allows.
func sysctlsAt(minor int) []string {
	switch {
	case minor >= 32:
		return sysctlsV1Dot32
	case minor >= 29:
		return sysctlsV1Dot29
	case minor >= 27:
		return sysctlsV1Dot27
	}
	return sysctlsV1Dot0
}

// sysctlsExcluded: each forbidden sysctl is an error of the field
// spec.securityContext.sysctls[*].name with its name as bad value.
func sysctlsExcluded(p bound, allowed []string, excludes []exclusion) string {
	list := p.spec("securityContext", "sysctls").list()
	name := of("x", "name").stringOr()
	forbidden := "!(" + name + " in " + quotedSet(allowed...) + ")"
	var removed []string
	for _, e := range excludes {
		if fieldSelected(e, "spec.securityContext.sysctls[*].name") {
			removed = append(removed, e.counted(list+".filter(x, "+forbidden+" && "+stringQualifies(e, name)+").size()"))
		}
	}
	return "(" + list + ".filter(x, " + forbidden + ").size() > " + sum(removed) + ")"
}

// restrictedVolumeTypes are the volume sources the restricted check
// names in its errors, in its order (the first a volume has names its
// error; a volume with none of them is "unknown").
var restrictedVolumeTypes = []string{
	"hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs", "rbd",
	"flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
	"photonPersistentDisk", "portworxVolume", "scaleIO", "storageos",
}

// restrictedVolumesExcluded: each volume of a restricted type is an error
// of the field spec.volumes[*].<type>, with no bad value, so that any
// exclusion selecting the field removes every such error.
func restrictedVolumesExcluded(p bound, excludes []exclusion) string {
	uncovered := func(source string) string {
		normalised := "spec.volumes[*]." + source
		var covered []string
		for _, e := range excludes {
			if fieldSelected(e, normalised) {
				covered = append(covered, e.when("true"))
			}
		}
		switch {
		case len(covered) == 0:
			return "true"
		case slices.Contains(covered, "true"):
			return "false"
		}
		return "!" + anyOf(covered...)
	}
	chain := uncovered("unknown")
	for i := len(restrictedVolumeTypes) - 1; i >= 0; i-- {
		source := restrictedVolumeTypes[i]
		if next := uncovered(source); next != chain {
			chain = "(" + of("v", source).set() + " ? " + next + " : " + chain + ")"
		}
	}
	if chain == "false" {
		return "false"
	}
	allowed := make([]string, len(restrictedVolumeSources))
	for i, source := range restrictedVolumeSources {
		allowed[i] = of("v", source).set()
	}
	return p.spec("volumes").list() + ".exists(v, !" + anyOf(allowed...) + " && " + chain + ")"
}

// containerErrors are a container-level check's errors of one field of a
// container y: their number, and the number that qualify under an
// exclusion.
type containerErrors struct {
	// field is the field under the container ("securityContext.privileged").
	field string
	// errors is the CEL int of the container's errors of the field.
	errors func(y string) string
	// qualifying is the CEL int of those that qualify under e.
	qualifying func(y string, e exclusion) string
}

// containerKinds are the pod's container lists, as the fork names them in
// its errors' fields.
var containerKinds = []string{"initContainers", "containers", "ephemeralContainers"}

// perContainer is a container-level check with image exclusions: it fails
// where, for a list, a container name and a field, the containers of the
// name have more errors than the qualifying errors of the exclusions
// whose images match those containers' images.
func perContainer(p bound, excludes []exclusion, fields func() []containerErrors) string {
	var failing []string
	for _, kind := range containerKinds {
		list := p.spec(kind).list()
		for _, f := range fields() {
			normalised := "spec." + kind + "[*]." + f.field
			var removed []string
			for _, e := range excludes {
				if !fieldSelected(e, normalised) {
					continue
				}
				q := f.qualifying("y", e)
				if q == "0" {
					continue
				}
				removed = append(removed, e.counted("("+kyverno.CELPatternMatch(of("y", "image").stringOr(), e.Images)+" ? "+q+" : 0)"))
			}
			errors := f.errors("x")
			if len(removed) == 0 {
				failing = append(failing, list+".exists(x, "+errors+" > 0)")
				continue
			}
			sameName := list + ".filter(y, " + of("y", "name").stringOr() + " == " + of("x", "name").stringOr() + ")"
			failing = append(failing, list+".exists(x, "+errors+" > 0 && "+
				sameName+".map(y, "+f.errors("y")+").sum() > "+sameName+".map(y, "+sum(removed)+").sum())")
		}
	}
	return anyOf(failing...)
}

// containerSecurityContext is a field of container y's securityContext.
func containerSecurityContext(y string, path ...string) field {
	return of(y, append([]string{"securityContext"}, path...)...)
}

// privilegedErrors: privileged true, bad value true.
func privilegedErrors() []containerErrors {
	return []containerErrors{{
		field:  "securityContext.privileged",
		errors: func(y string) string { return count(containerSecurityContext(y, "privileged").is("== true")) },
		qualifying: func(y string, e exclusion) string {
			if !constantQualifies(e, "true") {
				return "0"
			}
			return count(containerSecurityContext(y, "privileged").is("== true"))
		},
	}}
}

// hostPortsErrors: each port with a hostPort other than 0, bad value the
// port.
func hostPortsErrors() []containerErrors {
	hostPort := of("port", "hostPort")
	return []containerErrors{{
		field: "ports[*].hostPort",
		errors: func(y string) string {
			return of(y, "ports").list() + ".filter(port, " + hostPort.is("!= 0") + ").size()"
		},
		qualifying: func(y string, e exclusion) string {
			return of(y, "ports").list() + ".filter(port, " + hostPort.is("!= 0") + " && " + stringQualifies(e, "string("+hostPort.expr()+")") + ").size()"
		},
	}}
}

// procMountErrors: a procMount other than Default, bad value the
// procMount (none when empty).
func procMountErrors() []containerErrors {
	return []containerErrors{{
		field:  "securityContext.procMount",
		errors: func(y string) string { return count(containerSecurityContext(y, "procMount").is("!= 'Default'")) },
		qualifying: func(y string, e exclusion) string {
			procMount := containerSecurityContext(y, "procMount")
			return count(procMount.is("!= 'Default'") + " && " + stringQualifies(e, procMount.stringOr()))
		},
	}}
}

// capabilitiesBaselineErrors: capabilities set, adding one outside the
// baseline's defaults; the bad values are those.
func capabilitiesBaselineErrors() []containerErrors {
	forbidden := func(y string) string {
		return containerSecurityContext(y, "capabilities", "add").list() + ".filter(a, !(a in " + quotedSet(capabilitiesAllowedV1Dot0...) + "))"
	}
	violates := func(y string) string {
		return containerSecurityContext(y, "capabilities").set() + " && " + forbidden(y) + ".size() > 0"
	}
	return []containerErrors{{
		field:  "securityContext.capabilities.add",
		errors: func(y string) string { return count(violates(y)) },
		qualifying: func(y string, e exclusion) string {
			return count(violates(y) + " && " + listQualifies(e, forbidden(y)))
		},
	}}
}

// capabilitiesRestrictedErrors: capabilities unset (drop required, no bad
// value), or not dropping ALL (bad values the dropped ones; none when
// none is dropped); and adding anything but NET_BIND_SERVICE (bad values
// those).
func capabilitiesRestrictedErrors() []containerErrors {
	capabilities := func(y string) field { return containerSecurityContext(y, "capabilities") }
	drop := func(y string) string { return containerSecurityContext(y, "capabilities", "drop").list() }
	forbiddenAdds := func(y string) string {
		return containerSecurityContext(y, "capabilities", "add").list() + ".filter(a, a != 'NET_BIND_SERVICE')"
	}
	missingDropAll := func(y string) string {
		return "(!" + capabilities(y).set() + " || !" + drop(y) + ".exists(d, d == 'ALL'))"
	}
	adding := func(y string) string {
		return "(" + capabilities(y).set() + " && " + forbiddenAdds(y) + ".size() > 0)"
	}
	return []containerErrors{
		{
			field:  "securityContext.capabilities.drop",
			errors: func(y string) string { return count(missingDropAll(y)) },
			qualifying: func(y string, e exclusion) string {
				return count(missingDropAll(y) + " && (!" + capabilities(y).set() + " || " + listQualifies(e, drop(y)) + ")")
			},
		},
		{
			field:  "securityContext.capabilities.add",
			errors: func(y string) string { return count(adding(y)) },
			qualifying: func(y string, e exclusion) string {
				return count(adding(y) + " && " + listQualifies(e, forbiddenAdds(y)))
			},
		},
	}
}

// allowPrivilegeEscalationErrors: securityContext unset (required, no bad
// value), allowPrivilegeEscalation unset (bad value "nil") or true (bad
// value true).
func allowPrivilegeEscalationErrors() []containerErrors {
	return []containerErrors{{
		field: "securityContext.allowPrivilegeEscalation",
		errors: func(y string) string {
			return count("!" + containerSecurityContext(y, "allowPrivilegeEscalation").is("== false"))
		},
		qualifying: func(y string, e exclusion) string {
			context, escalation := containerSecurityContext(y), containerSecurityContext(y, "allowPrivilegeEscalation")
			onNil, onTrue := "0", "0"
			if constantQualifies(e, "nil") {
				onNil = "1"
			}
			if constantQualifies(e, "true") {
				onTrue = "1"
			}
			return "(!" + context.set() + " ? 1 : !" + escalation.set() + " ? " + onNil + " : " + escalation.is("== true") + " ? " + onTrue + " : 0)"
		},
	}}
}
