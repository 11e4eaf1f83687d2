// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
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
// Compiled: the pod-level controls without images and the
// container-level controls with images, those whose checks read a
// container without the pod's own fields. Refused by name: the controls
// whose checks read both (AppArmor, HostProcess, Running as Non-root,
// Running as Non-root user, Seccomp, SELinux), and what Kyverno's policy
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
func checkExclusions(level string, excludes []kyvernov1.PodSecurityStandard) *model.Refusal {
	for i, e := range excludes {
		where := func(format string, args ...any) *model.Refusal {
			return model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity exclude[%d] (control %q): "+format, append([]any{i, e.ControlName}, args...)...)
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
		case level == LevelBaseline && slices.Contains(restrictedControls, e.ControlName):
			return where("a restricted control at level baseline (Kyverno's policy validation rejects it)")
		case !slices.Contains(podLevelControls, e.ControlName) && !slices.Contains(containerLevelControls, e.ControlName):
			return where("its checks read the pod's fields and its containers' together, and Kyverno's exclusion evaluates them on a copy of the pod whose errors are not the pod's own: not compiled yet")
		}
	}
	return nil
}

// exclusionsOf are the exclusions of the check's control.
func exclusionsOf(checkID string, excludes []kyvernov1.PodSecurityStandard) []kyvernov1.PodSecurityStandard {
	var out []kyvernov1.PodSecurityStandard
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
func excludedCheck(checkID string, minor int, excludes []kyvernov1.PodSecurityStandard) (func(bound) string, bool) {
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
	}
	return nil, false
}

// fieldSelected: the exclusion's restrictedField selects the
// index-normalised field (or it is empty).
func fieldSelected(e kyvernov1.PodSecurityStandard, normalised string) bool {
	return e.RestrictedField == "" || e.RestrictedField == normalised
}

// constantQualifies: a constant bad value ("true", "nil") matches a
// pattern of values (or values is empty), decided now.
func constantQualifies(e kyvernov1.PodSecurityStandard, badValue string) bool {
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
func stringQualifies(e kyvernov1.PodSecurityStandard, value string) string {
	if len(e.Values) == 0 {
		return "true"
	}
	return "(" + value + " == '' || " + kyverno.CELPatternMatch(value, e.Values) + ")"
}

// listQualifies is the CEL predicate "each bad value of the list
// qualifies" (a list's empty strings are kept).
func listQualifies(e kyvernov1.PodSecurityStandard, list string) string {
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
func hostNamespacesExcluded(p bound, excludes []kyvernov1.PodSecurityStandard) string {
	var failing []string
	for _, name := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		removed := slices.ContainsFunc(excludes, func(e kyvernov1.PodSecurityStandard) bool {
			return fieldSelected(e, "spec."+name) && constantQualifies(e, "true")
		})
		if !removed {
			failing = append(failing, p.spec(name).is("== true"))
		}
	}
	if len(failing) == 0 {
		return "false"
	}
	return anyOf(failing...)
}

// hostPathVolumesExcluded: each hostPath volume is an error of the field
// spec.volumes[*].hostPath with its path as bad value.
func hostPathVolumesExcluded(p bound, excludes []kyvernov1.PodSecurityStandard) string {
	volumes := p.spec("volumes").list()
	hostPath := of("v", "hostPath")
	var removed []string
	for _, e := range excludes {
		if fieldSelected(e, "spec.volumes[*].hostPath") {
			removed = append(removed, volumes+".filter(v, "+hostPath.set()+" && "+stringQualifies(e, of("v", "hostPath", "path").stringOr())+").size()")
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
func sysctlsExcluded(p bound, allowed []string, excludes []kyvernov1.PodSecurityStandard) string {
	list := p.spec("securityContext", "sysctls").list()
	name := of("x", "name").stringOr()
	forbidden := "!(" + name + " in " + quotedSet(allowed...) + ")"
	var removed []string
	for _, e := range excludes {
		if fieldSelected(e, "spec.securityContext.sysctls[*].name") {
			removed = append(removed, list+".filter(x, "+forbidden+" && "+stringQualifies(e, name)+").size()")
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
func restrictedVolumesExcluded(p bound, excludes []kyvernov1.PodSecurityStandard) string {
	uncovered := func(source string) string {
		normalised := "spec.volumes[*]." + source
		if slices.ContainsFunc(excludes, func(e kyvernov1.PodSecurityStandard) bool { return fieldSelected(e, normalised) }) {
			return "false"
		}
		return "true"
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
	qualifying func(y string, e kyvernov1.PodSecurityStandard) string
}

// containerKinds are the pod's container lists, as the fork names them in
// its errors' fields.
var containerKinds = []string{"initContainers", "containers", "ephemeralContainers"}

// perContainer is a container-level check with image exclusions: it fails
// where, for a list, a container name and a field, the containers of the
// name have more errors than the qualifying errors of the exclusions
// whose images match those containers' images.
func perContainer(p bound, excludes []kyvernov1.PodSecurityStandard, fields func() []containerErrors) string {
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
				removed = append(removed, "("+kyverno.CELPatternMatch(of("y", "image").stringOr(), e.Images)+" ? "+q+" : 0)")
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
		qualifying: func(y string, e kyvernov1.PodSecurityStandard) string {
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
		field:  "ports[*].hostPort",
		errors: func(y string) string { return of(y, "ports").list() + ".filter(port, " + hostPort.is("!= 0") + ").size()" },
		qualifying: func(y string, e kyvernov1.PodSecurityStandard) string {
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
		qualifying: func(y string, e kyvernov1.PodSecurityStandard) string {
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
		qualifying: func(y string, e kyvernov1.PodSecurityStandard) string {
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
			qualifying: func(y string, e kyvernov1.PodSecurityStandard) string {
				return count(missingDropAll(y) + " && (!" + capabilities(y).set() + " || " + listQualifies(e, drop(y)) + ")")
			},
		},
		{
			field:  "securityContext.capabilities.add",
			errors: func(y string) string { return count(adding(y)) },
			qualifying: func(y string, e kyvernov1.PodSecurityStandard) string {
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
		qualifying: func(y string, e kyvernov1.PodSecurityStandard) string {
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
