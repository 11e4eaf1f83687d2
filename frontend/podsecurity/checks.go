// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

// The checks of Kyverno's fork of k8s.io/pod-security-admission
// (github.com/kyverno/pod-security-admission, policy/check_*.go), in the
// order it registers them (its files' order), each version a CEL
// predicate that holds where the check does not allow the pod.

type check struct {
	id, level, reason string
	versions          []version
}

type version struct {
	minor    int
	violated func(bound) string
}

func only(minor int, violated func(bound) string) []version {
	return []version{{minor: minor, violated: violated}}
}

// exceptOnWindows is a check's v1.25 form: pods whose spec.os.name is
// windows are allowed.
func exceptOnWindows(violated func(bound) string) func(bound) string {
	return func(p bound) string {
		return "(!" + p.windows() + " && " + violated(p) + ")"
	}
}

// securityContext is a field of container c's securityContext.
func securityContext(path ...string) field {
	return of("c", append([]string{"securityContext"}, path...)...)
}

var catalogue = []check{
	{id: "allowPrivilegeEscalation", level: LevelRestricted, reason: "allowPrivilegeEscalation != false", versions: []version{
		{minor: 8, violated: allowPrivilegeEscalation},
		{minor: 25, violated: exceptOnWindows(allowPrivilegeEscalation)},
	}},
	{id: "appArmorProfile", level: LevelBaseline, reason: "forbidden AppArmor profile", versions: only(0, appArmorProfile)},
	{id: "capabilities_baseline", level: LevelBaseline, reason: "non-default capabilities", versions: only(0, capabilitiesBaseline)},
	{id: "capabilities_restricted", level: LevelRestricted, reason: "unrestricted capabilities", versions: []version{
		{minor: 22, violated: capabilitiesRestricted},
		{minor: 25, violated: exceptOnWindows(capabilitiesRestricted)},
	}},
	{id: "hostNamespaces", level: LevelBaseline, reason: "host namespaces", versions: only(0, hostNamespaces)},
	{id: "hostPathVolumes", level: LevelBaseline, reason: "hostPath volumes", versions: only(0, hostPathVolumes)},
	{id: "hostPorts", level: LevelBaseline, reason: "hostPort", versions: only(0, hostPorts)},
	{id: "hostProbesAndHostLifecycle", level: LevelBaseline, reason: "probe or lifecycle host", versions: only(34, hostProbesAndHostLifecycle)},
	{id: "privileged", level: LevelBaseline, reason: "privileged", versions: only(0, privileged)},
	{id: "procMount", level: LevelBaseline, reason: "procMount", versions: only(0, procMount)},
	{id: "restrictedVolumes", level: LevelRestricted, reason: "restricted volume types", versions: only(0, restrictedVolumes)},
	{id: "runAsNonRoot", level: LevelRestricted, reason: "runAsNonRoot != true", versions: only(0, runAsNonRoot)},
	{id: "runAsUser", level: LevelRestricted, reason: "runAsUser=0", versions: only(23, runAsUser)},
	{id: "seLinuxOptions", level: LevelBaseline, reason: "seLinuxOptions", versions: []version{
		{minor: 0, violated: seLinuxOptions(seLinuxTypesV1Dot0)},
		{minor: 31, violated: seLinuxOptions(append(append([]string(nil), seLinuxTypesV1Dot0...), "container_engine_t"))},
	}},
	// The fork's v1.0 form reads seccomp annotations; Kyverno's versions
	// start at v1.19 (ParseProfile), where the fields are read.
	{id: "seccompProfile_baseline", level: LevelBaseline, reason: "seccompProfile", versions: []version{
		{minor: 19, violated: seccompProfileBaseline},
	}},
	{id: "seccompProfile_restricted", level: LevelRestricted, reason: "seccompProfile", versions: []version{
		{minor: 19, violated: seccompProfileRestricted},
		{minor: 25, violated: exceptOnWindows(seccompProfileRestricted)},
	}},
	{id: "sysctls", level: LevelBaseline, reason: "forbidden sysctls", versions: []version{
		{minor: 0, violated: sysctls(sysctlsV1Dot0)},
		{minor: 27, violated: sysctls(sysctlsV1Dot27)},
		{minor: 29, violated: sysctls(sysctlsV1Dot29)},
		{minor: 32, violated: sysctls(sysctlsV1Dot32)},
	}},
	{id: "windowsHostProcess", level: LevelBaseline, reason: "hostProcess", versions: only(0, windowsHostProcess)},
}

// allowPrivilegeEscalation: every container sets
// securityContext.allowPrivilegeEscalation to false.
func allowPrivilegeEscalation(p bound) string {
	return p.anyContainer("!" + securityContext("allowPrivilegeEscalation").is("== false"))
}

// appArmorProfile: the pod's and each container's appArmorProfile, where
// set, has type RuntimeDefault or Localhost (an unset type is ""), and
// every annotation container.apparmor.security.beta.kubernetes.io/* is
// empty, runtime/default or localhost/*.
func appArmorProfile(p bound) string {
	allowedType := func(profile field) string {
		return "(" + profile.set() + " && !(" + field{profile.base, append(append([]string(nil), profile.path...), "type")}.stringOr() + " in ['RuntimeDefault', 'Localhost']))"
	}
	annotations := p.metadata("annotations")
	return anyOf(
		allowedType(p.spec("securityContext", "appArmorProfile")),
		p.anyContainer(allowedType(securityContext("appArmorProfile"))),
		"("+annotations.set()+" && "+annotations.expr()+".exists(k, k.startsWith('container.apparmor.security.beta.kubernetes.io/') && "+
			"!(string("+annotations.expr()+"[k]) == '' || string("+annotations.expr()+"[k]) == 'runtime/default' || string("+annotations.expr()+"[k]).startsWith('localhost/'))))",
	)
}

var capabilitiesAllowedV1Dot0 = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// capabilitiesBaseline: no container adds a capability outside the
// baseline's defaults.
func capabilitiesBaseline(p bound) string {
	add := securityContext("capabilities", "add")
	return p.anyContainer(add.set() + " && " + add.expr() + ".exists(a, !(a in " + quotedSet(capabilitiesAllowedV1Dot0...) + "))")
}

// capabilitiesRestricted: every container has securityContext.capabilities,
// drops ALL and adds nothing but NET_BIND_SERVICE.
func capabilitiesRestricted(p bound) string {
	capabilities := securityContext("capabilities")
	drop, add := securityContext("capabilities", "drop"), securityContext("capabilities", "add")
	return p.anyContainer("(!" + capabilities.set() +
		" || !(" + drop.set() + " && " + drop.expr() + ".exists(d, d == 'ALL'))" +
		" || (" + add.set() + " && " + add.expr() + ".exists(a, a != 'NET_BIND_SERVICE')))")
}

// hostNamespaces: hostNetwork, hostPID and hostIPC are not true.
func hostNamespaces(p bound) string {
	return anyOf(p.spec("hostNetwork").is("== true"), p.spec("hostPID").is("== true"), p.spec("hostIPC").is("== true"))
}

// hostPathVolumes: no volume is a hostPath.
func hostPathVolumes(p bound) string {
	return p.spec("volumes").list() + ".exists(v, " + of("v", "hostPath").set() + ")"
}

// hostPorts: no container port has a hostPort other than 0.
func hostPorts(p bound) string {
	return p.anyContainer(of("c", "ports").list() + ".exists(port, " + of("port", "hostPort").is("!= 0") + ")")
}

// hostProbesAndHostLifecycle: no probe (liveness, readiness, startup) and
// no lifecycle handler (postStart, preStop) of any container names a
// host in its httpGet or tcpSocket.
func hostProbesAndHostLifecycle(p bound) string {
	names := func(handler ...string) string {
		return anyOf(
			of("c", append(append([]string(nil), handler...), "httpGet", "host")...).is("!= ''"),
			of("c", append(append([]string(nil), handler...), "tcpSocket", "host")...).is("!= ''"),
		)
	}
	return p.anyContainer(anyOf(
		names("livenessProbe"), names("readinessProbe"), names("startupProbe"),
		names("lifecycle", "postStart"), names("lifecycle", "preStop"),
	))
}

// privileged: no container sets securityContext.privileged to true.
func privileged(p bound) string {
	return p.anyContainer(securityContext("privileged").is("== true"))
}

// procMount: no container sets securityContext.procMount to anything but
// Default (the fork has no relaxation for hostUsers: false).
func procMount(p bound) string {
	return p.anyContainer(securityContext("procMount").is("!= 'Default'"))
}

// restrictedVolumeSources are the volume sources the restricted level
// allows (the fork's list has image volumes).
var restrictedVolumeSources = []string{
	"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret",
}

// restrictedVolumes: every volume has one of the allowed sources.
func restrictedVolumes(p bound) string {
	allowed := make([]string, len(restrictedVolumeSources))
	for i, source := range restrictedVolumeSources {
		allowed[i] = of("v", source).set()
	}
	return p.spec("volumes").list() + ".exists(v, !" + anyOf(allowed...) + ")"
}

// runAsNonRoot: the pod does not set runAsNonRoot false, and every
// container either sets it, to true, or inherits the pod's true.
func runAsNonRoot(p bound) string {
	pod := p.spec("securityContext", "runAsNonRoot")
	container := securityContext("runAsNonRoot")
	return anyOf(
		pod.is("== false"),
		p.anyContainer("("+container.set()+" ? "+container.expr()+" == false : !"+pod.is("== true")+")"),
	)
}

// runAsUser: neither the pod nor a container sets runAsUser 0.
func runAsUser(p bound) string {
	return anyOf(p.spec("securityContext", "runAsUser").is("== 0"), p.anyContainer(securityContext("runAsUser").is("== 0")))
}

var seLinuxTypesV1Dot0 = []string{"", "container_t", "container_init_t", "container_kvm_t"}

// seLinuxOptions: the pod's and each container's seLinuxOptions, where
// set, have an allowed type (unset is "") and no user or role.
func seLinuxOptions(allowedTypes []string) func(bound) string {
	return func(p bound) string {
		invalid := func(options field) string {
			child := func(name string) field {
				return field{options.base, append(append([]string(nil), options.path...), name)}
			}
			return "(" + options.set() + " && (!(" + child("type").stringOr() + " in " + quotedSet(allowedTypes...) + ") || " +
				child("user").stringOr() + " != '' || " + child("role").stringOr() + " != ''))"
		}
		return anyOf(invalid(p.spec("securityContext", "seLinuxOptions")), p.anyContainer(invalid(securityContext("seLinuxOptions"))))
	}
}

// validSeccomp holds where a set seccompProfile's type (unset is "") is
// RuntimeDefault or Localhost.
func validSeccomp(profile field) string {
	return "(" + field{profile.base, append(append([]string(nil), profile.path...), "type")}.stringOr() + " in ['Localhost', 'RuntimeDefault'])"
}

// seccompProfileBaseline: the pod's and each container's seccompProfile,
// where set, is RuntimeDefault or Localhost.
func seccompProfileBaseline(p bound) string {
	pod, container := p.spec("securityContext", "seccompProfile"), securityContext("seccompProfile")
	return anyOf(
		"("+pod.set()+" && !"+validSeccomp(pod)+")",
		p.anyContainer("("+container.set()+" && !"+validSeccomp(container)+")"),
	)
}

// seccompProfileRestricted: the pod's seccompProfile, where set, is valid;
// each container's is set and valid, or unset under a pod's valid one.
func seccompProfileRestricted(p bound) string {
	pod, container := p.spec("securityContext", "seccompProfile"), securityContext("seccompProfile")
	podValid := "(" + pod.set() + " && " + validSeccomp(pod) + ")"
	return anyOf(
		"("+pod.set()+" && !"+validSeccomp(pod)+")",
		p.anyContainer("("+container.set()+" ? !"+validSeccomp(container)+" : !"+podValid+")"),
	)
}

var (
	sysctlsV1Dot0 = []string{
		"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
	}
	sysctlsV1Dot27 = append(append([]string(nil), sysctlsV1Dot0...), "net.ipv4.ip_local_reserved_ports")
	sysctlsV1Dot29 = append(append([]string(nil), sysctlsV1Dot27...),
		"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes")
	sysctlsV1Dot32 = append(append([]string(nil), sysctlsV1Dot29...), "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
)

// sysctls: every pod sysctl's name (unset is "") is allowed.
func sysctls(allowed []string) func(bound) string {
	return func(p bound) string {
		return p.spec("securityContext", "sysctls").list() + ".exists(s, !(" + of("s", "name").stringOr() + " in " + quotedSet(allowed...) + "))"
	}
}

// windowsHostProcess: neither the pod nor a container sets
// windowsOptions.hostProcess true.
func windowsHostProcess(p bound) string {
	return anyOf(
		p.spec("securityContext", "windowsOptions", "hostProcess").is("== true"),
		p.anyContainer(securityContext("windowsOptions", "hostProcess").is("== true")),
	)
}
