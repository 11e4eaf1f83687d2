// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/frontend/podsecurity"
	"github.com/kyvap/kyvap/test/celtest"
)

// exclusionCases are podSecurity subrules with exclusions, each form
// kyvap compiles: the pod-level controls without images, the
// container-level ones with images; a restrictedField and values that
// select some errors and not others; several exclusions of one control;
// several controls.
func exclusionCases() []kyvernov1.PodSecurity {
	type std = kyvernov1.PodSecurityStandard
	all := []string{"*"}
	byLevel := func(level string, excludes ...std) kyvernov1.PodSecurity {
		return kyvernov1.PodSecurity{Level: level, Version: "latest", Exclude: excludes}
	}
	var out []kyvernov1.PodSecurity
	for _, level := range []string{podsecurity.LevelBaseline, podsecurity.LevelRestricted} {
		out = append(out,
			byLevel(level, std{ControlName: "Host Namespaces"}),
			byLevel(level, std{ControlName: "Host Namespaces", RestrictedField: "spec.hostNetwork", Values: []string{"true"}}),
			byLevel(level, std{ControlName: "Host Namespaces", RestrictedField: "spec.hostPID", Values: []string{"false"}}),
			byLevel(level, std{ControlName: "HostPath Volumes"}),
			byLevel(level, std{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log*", "/e?c"}}),
			byLevel(level,
				std{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log*"}},
				std{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/data", "/var/log/pods"}}),
			byLevel(level, std{ControlName: "Sysctls"}),
			byLevel(level, std{ControlName: "Sysctls", RestrictedField: "spec.securityContext.sysctls[*].name", Values: []string{"kernel.*", "net.core.somaxconn"}}),
			byLevel(level, std{ControlName: "Privileged Containers", Images: all}),
			byLevel(level, std{ControlName: "Privileged Containers", Images: []string{"app-1*", "init-*"}}),
			byLevel(level, std{ControlName: "Privileged Containers", Images: all, RestrictedField: "spec.containers[*].securityContext.privileged", Values: []string{"true"}}),
			byLevel(level, std{ControlName: "Privileged Containers", Images: all, RestrictedField: "spec.initContainers[*].securityContext.privileged", Values: []string{"false"}}),
			byLevel(level, std{ControlName: "Host Ports", Images: all}),
			byLevel(level, std{ControlName: "Host Ports", Images: []string{"app-?:*"}, RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"8?", "9*"}}),
			byLevel(level,
				std{ControlName: "Host Ports", Images: all, RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"80"}},
				std{ControlName: "Host Ports", Images: []string{"app-2*"}, RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"80", "8080"}}),
			byLevel(level, std{ControlName: "/proc Mount Type", Images: all}),
			byLevel(level, std{ControlName: "/proc Mount Type", Images: all, RestrictedField: "spec.containers[*].securityContext.procMount", Values: []string{"Unmasked"}}),
			byLevel(level, std{ControlName: "Capabilities", Images: all}),
			byLevel(level, std{ControlName: "Capabilities", Images: []string{"app-*"}, RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_RAW", "SYS_*"}}),
			byLevel(level,
				std{ControlName: "Host Namespaces"},
				std{ControlName: "Privileged Containers", Images: all},
				std{ControlName: "Capabilities", Images: all},
				std{ControlName: "HostPath Volumes"}),
		)
	}
	for _, level := range []string{podsecurity.LevelBaseline, podsecurity.LevelRestricted} {
		out = append(out,
			byLevel(level, std{ControlName: "Seccomp"}),
			byLevel(level, std{ControlName: "Seccomp", RestrictedField: "spec.securityContext.seccompProfile.type", Values: []string{"Unconfined"}}),
			byLevel(level, std{ControlName: "Seccomp", RestrictedField: "spec.containers[*].securityContext.seccompProfile.type", Values: []string{"Unconfined"}}),
			byLevel(level, std{ControlName: "Seccomp", Images: []string{"app-1*"}}),
			byLevel(level, std{ControlName: "Seccomp", Images: all, RestrictedField: "spec.containers[*].securityContext.seccompProfile.type", Values: []string{"Unconfined"}}),
			byLevel(level, std{ControlName: "SELinux"}),
			byLevel(level, std{ControlName: "SELinux", Images: all}),
			byLevel(level, std{ControlName: "SELinux", Images: all, RestrictedField: "spec.containers[*].securityContext.seLinuxOptions.type", Values: []string{"spc_t"}}),
			byLevel(level, std{ControlName: "SELinux", RestrictedField: "spec.securityContext.seLinuxOptions.user", Values: []string{"u*"}}, std{ControlName: "SELinux", Images: []string{"app-2*"}}),
			byLevel(level, std{ControlName: "HostProcess"}),
			byLevel(level, std{ControlName: "HostProcess", Images: all}),
		)
	}
	restricted := func(excludes ...std) kyvernov1.PodSecurity {
		return byLevel(podsecurity.LevelRestricted, excludes...)
	}
	out = append(out,
		restricted(std{ControlName: "Volume Types"}),
		restricted(std{ControlName: "Volume Types", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"x"}}),
		restricted(std{ControlName: "Volume Types", RestrictedField: "spec.volumes[*].unknown", Values: []string{"x"}}),
		restricted(std{ControlName: "Volume Types", RestrictedField: "spec.volumes[*].nfs", Values: []string{"x"}},
			std{ControlName: "HostPath Volumes"}),
		restricted(std{ControlName: "Capabilities", Images: all, RestrictedField: "spec.containers[*].securityContext.capabilities.drop", Values: []string{"NET_RAW"}}),
		restricted(std{ControlName: "Capabilities", Images: all, RestrictedField: "spec.initContainers[*].securityContext.capabilities.drop", Values: []string{"*"}}),
		restricted(std{ControlName: "Privilege Escalation", Images: all}),
		restricted(std{ControlName: "Privilege Escalation", Images: []string{"app-1*"}, RestrictedField: "spec.containers[*].securityContext.allowPrivilegeEscalation", Values: []string{"nil"}}),
		restricted(std{ControlName: "Privilege Escalation", Images: all, RestrictedField: "spec.containers[*].securityContext.allowPrivilegeEscalation", Values: []string{"true"}}),
		restricted(std{ControlName: "Running as Non-root"}),
		restricted(std{ControlName: "Running as Non-root", RestrictedField: "spec.containers[*].securityContext.runAsNonRoot", Values: []string{"false"}}),
		restricted(std{ControlName: "Running as Non-root"}, std{ControlName: "Running as Non-root", RestrictedField: "spec.securityContext.runAsNonRoot", Values: []string{"false"}}),
		restricted(std{ControlName: "Running as Non-root", Images: []string{"app-2*"}}),
		restricted(std{ControlName: "Running as Non-root", Images: all, RestrictedField: "spec.containers[*].securityContext.runAsNonRoot", Values: []string{"false"}}),
		restricted(std{ControlName: "Running as Non-root user"}),
		restricted(std{ControlName: "Running as Non-root user", Images: all}),
		restricted(std{ControlName: "Running as Non-root user", RestrictedField: "spec.securityContext.runAsUser", Values: []string{"0"}}),
		restricted(std{ControlName: "Seccomp"}, std{ControlName: "Running as Non-root"}, std{ControlName: "Capabilities", Images: all}, std{ControlName: "Privilege Escalation", Images: all}),
		restricted(std{ControlName: "Seccomp"}, std{ControlName: "Seccomp", Images: all}),
		restricted(std{ControlName: "Seccomp", Images: all}, std{ControlName: "Seccomp", RestrictedField: "spec.securityContext.seccompProfile.type", Values: []string{"Unconfined"}}),
		restricted(std{ControlName: "Volume Types"}, std{ControlName: "Seccomp"}, std{ControlName: "Seccomp", Images: all}, std{ControlName: "Capabilities", Images: all}),
		restricted(std{ControlName: "Running as Non-root", RestrictedField: "spec.securityContext.runAsNonRoot", Values: []string{"false"}},
			std{ControlName: "Running as Non-root", Images: []string{"app-1*"}, RestrictedField: "spec.containers[*].securityContext.runAsNonRoot", Values: []string{"false"}}),
		restricted(std{ControlName: "Running as Non-root", Images: all}, std{ControlName: "Running as Non-root"}),
		kyvernov1.PodSecurity{Level: podsecurity.LevelRestricted, Version: "v1.24", Exclude: []std{{ControlName: "Seccomp", Images: all}}},
		kyvernov1.PodSecurity{Level: podsecurity.LevelBaseline, Version: "v1.30", Exclude: []std{{ControlName: "SELinux", Images: all}}},
		kyvernov1.PodSecurity{Level: podsecurity.LevelRestricted, Version: "v1.24", Exclude: []std{{ControlName: "Privilege Escalation", Images: all}, {ControlName: "Capabilities", Images: all}}},
		kyvernov1.PodSecurity{Level: podsecurity.LevelBaseline, Version: "v1.26", Exclude: []std{{ControlName: "Sysctls", RestrictedField: "spec.securityContext.sysctls[*].name", Values: []string{"net.ipv4.ip_local_reserved_ports"}}}},
	)
	return out
}

// exclusionPods are pods whose fields the exclusions select and miss:
// containers of distinct images (app-1, app-2, init-1, debug-1), hostPorts
// several per container, hostPath volumes of several paths, other volume
// types, sysctls, capabilities, procMount, privilege escalation, seccomp
// profiles and runAsNonRoot of the pod and of containers (valid, invalid,
// unset), SELinux options, runAsUser 0 and hostProcess.
func exclusionPods() []map[string]any {
	container := func(name, image string, fields map[string]any) map[string]any {
		c := map[string]any{"name": name, "image": image}
		for k, v := range fields {
			c[k] = v
		}
		return c
	}
	ports := func(hostPorts ...int) map[string]any {
		var out []any
		for i, p := range hostPorts {
			out = append(out, map[string]any{"containerPort": 1000 + i, "hostPort": p})
		}
		return map[string]any{"ports": out}
	}
	sc := func(fields map[string]any) map[string]any { return map[string]any{"securityContext": fields} }
	restrictedOK := map[string]any{"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	with := func(base map[string]any, extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	pod := func(name string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name}, "spec": spec}
	}
	hostPath := func(name, path string) map[string]any {
		return map[string]any{"name": name, "hostPath": map[string]any{"path": path}}
	}
	var pods []map[string]any
	containerSets := map[string][]any{
		"ports-one":      {container("a", "app-1:v1", ports(80)), container("b", "app-2:v2", ports(8080, 80))},
		"ports-many":     {container("a", "app-1:v1", ports(80, 81, 9000)), container("b", "app-2:v2", ports(8080))},
		"ports-outside":  {container("a", "app-1:v1", ports(80)), container("c", "other:v1", ports(85))},
		"privileged":     {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"privileged": true}))), container("b", "app-2:v2", sc(restrictedOK))},
		"privileged-2":   {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"privileged": true}))), container("b", "app-2:v2", sc(with(restrictedOK, map[string]any{"privileged": true})))},
		"procmount":      {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"procMount": "Unmasked"}))), container("b", "app-2:v2", sc(with(restrictedOK, map[string]any{"procMount": ""})))},
		"capabilities":   {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"capabilities": map[string]any{"add": []any{"NET_RAW", "SYS_TIME"}, "drop": []any{"ALL"}}}))), container("b", "app-2:v2", sc(with(restrictedOK, map[string]any{"capabilities": map[string]any{"add": []any{"NET_ADMIN"}, "drop": []any{"NET_RAW"}}})))},
		"drops":          {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"capabilities": map[string]any{"drop": []any{"NET_RAW"}}}))), container("b", "app-2:v2", sc(with(restrictedOK, map[string]any{"capabilities": map[string]any{}})))},
		"escalation":     {container("a", "app-1:v1", sc(map[string]any{"runAsNonRoot": true})), container("b", "app-2:v2", sc(with(restrictedOK, map[string]any{"allowPrivilegeEscalation": true}))), container("c", "other:v1", nil)},
		"escalation-one": {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"allowPrivilegeEscalation": nil})))},
		"restricted":     {container("a", "app-1:v1", sc(restrictedOK)), container("b", "app-2:v2", sc(restrictedOK))},
		"seccomp-mixed":  {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"seccompProfile": map[string]any{"type": "Unconfined"}}))), container("b", "app-2:v2", sc(map[string]any{"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": map[string]any{"drop": []any{"ALL"}}}))},
		"seccomp-unset":  {container("a", "app-1:v1", sc(map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}})), container("b", "app-2:v2", nil)},
		"nonroot-mixed":  {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"runAsNonRoot": false}))), container("b", "app-2:v2", sc(map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}))},
		"selinux":        {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"seLinuxOptions": map[string]any{"type": "spc_t"}}))), container("b", "app-2:v2", sc(with(restrictedOK, map[string]any{"seLinuxOptions": map[string]any{"role": "r", "type": "container_t"}})))},
		"runasuser":      {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"runAsUser": 0}))), container("b", "app-2:v2", sc(with(restrictedOK, map[string]any{"runAsUser": 1000})))},
		"hostprocess":    {container("a", "app-1:v1", sc(with(restrictedOK, map[string]any{"windowsOptions": map[string]any{"hostProcess": true}}))), container("b", "app-2:v2", sc(restrictedOK))},
	}
	initSets := map[string][]any{
		"none":       nil,
		"privileged": {container("i", "init-1:v1", sc(with(restrictedOK, map[string]any{"privileged": true, "capabilities": map[string]any{"drop": []any{"NET_RAW"}}})))},
		"ports":      {container("i", "init-1:v1", ports(80))},
	}
	podLevel := map[string]map[string]any{
		"plain":           {},
		"host-namespaces": {"hostNetwork": true, "hostPID": true},
		"host-network":    {"hostNetwork": true},
		"hostpaths":       {"volumes": []any{hostPath("logs", "/var/log"), hostPath("pods", "/var/log/pods"), hostPath("etc", "/etc")}},
		"hostpath-data":   {"volumes": []any{hostPath("data", "/data"), hostPath("logs", "/var/log/x")}},
		"hostpath-empty":  {"volumes": []any{map[string]any{"name": "e", "hostPath": map[string]any{"path": ""}}}},
		"volumes":         {"volumes": []any{map[string]any{"name": "n", "nfs": map[string]any{"server": "s", "path": "/"}}, map[string]any{"name": "g", "gitRepo": map[string]any{"repository": "r"}}}},
		"volume-unknown":  {"volumes": []any{map[string]any{"name": "u"}}},
		"sysctls":         {"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}, "sysctls": []any{map[string]any{"name": "kernel.msgmax", "value": "1"}, map[string]any{"name": "net.core.somaxconn", "value": "1"}}}},
		"sysctls-other":   {"securityContext": map[string]any{"sysctls": []any{map[string]any{"name": "kernel.msgmax", "value": "1"}, map[string]any{"name": "vm.swappiness", "value": "1"}, map[string]any{"name": "net.ipv4.ip_local_reserved_ports", "value": "1"}}}},
		"restricted-pod":  {"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}},
		"seccomp-pod-bad": {"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "Unconfined"}}},
		"seccomp-pod-nil": {"securityContext": map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{}}},
		"nonroot-false":   {"securityContext": map[string]any{"runAsNonRoot": false, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}},
		"selinux-pod":     {"securityContext": map[string]any{"seLinuxOptions": map[string]any{"type": "spc_t", "user": "u1"}}},
		"runasuser-pod":   {"securityContext": map[string]any{"runAsUser": 0, "runAsNonRoot": true}},
		"hostprocess-pod": {"securityContext": map[string]any{"windowsOptions": map[string]any{"hostProcess": true}}},
	}
	for _, p := range slices.Sorted(maps.Keys(podLevel)) {
		for _, c := range slices.Sorted(maps.Keys(containerSets)) {
			for _, i := range slices.Sorted(maps.Keys(initSets)) {
				spec := map[string]any{}
				for k, v := range podLevel[p] {
					spec[k] = v
				}
				spec["containers"] = containerSets[c]
				if initSets[i] != nil {
					spec["initContainers"] = initSets[i]
				}
				pods = append(pods, deepCopy(pod(p+"-"+c+"-"+i, spec)))
			}
		}
	}
	return pods
}

func deepCopy(v map[string]any) map[string]any {
	text, _ := json.Marshal(v)
	var out map[string]any
	_ = utiljson.Unmarshal(text, &out)
	return out
}

// withImages is the fixture pod with its containers given the images the
// exclusions select (app-1, app-2, ..., init-1, ...).
func withImages(pod map[string]any) map[string]any {
	out := deepCopy(pod)
	spec, _ := out["spec"].(map[string]any)
	for key, prefix := range map[string]string{"initContainers": "init-", "containers": "app-", "ephemeralContainers": "debug-"} {
		containers, _ := spec[key].([]any)
		for i, c := range containers {
			if m, ok := c.(map[string]any); ok {
				m["image"] = fmt.Sprintf("%s%d:v%d", prefix, i+1, i+1)
			}
		}
	}
	return out
}

// TestExclusionsAgreeWithKyverno judges pods made for the exclusions and
// the fixture pods (with images the exclusions select, and their
// variants) under every exclusion case, as Pods, Deployments and
// CronJobs: the compiled CEL and Kyverno's engine must agree.
func TestExclusionsAgreeWithKyverno(t *testing.T) {
	pods := exclusionPods()
	fixturePods := fixtures(t)
	for i, pod := range fixturePods {
		if !full && i%sliceEvery != 0 {
			continue
		}
		imaged := withImages(pod)
		pods = append(pods, imaged)
		for _, v := range variants(imaged) {
			pods = append(pods, withImages(v))
		}
	}
	cases := exclusionCases()
	oracle := buildOracle(t)
	env := celtest.Env(t, "object")
	name := func(i int, kind string) string {
		base := fmt.Sprintf("exclusions-%d", i)
		switch kind {
		case "Deployment":
			return "autogen-" + base
		case "CronJob":
			return "autogen-cronjob-" + base
		}
		return base
	}
	rules := make([]any, len(cases))
	for i, c := range cases {
		rules[i] = map[string]any{
			"name":     name(i, "Pod"),
			"match":    map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"Pod"}}}}},
			"validate": map[string]any{"failureAction": "Audit", "podSecurity": c},
		}
	}
	policy := map[string]any{
		"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
		"metadata": map[string]any{"name": "pod-security-exclusions"},
		"spec":     map[string]any{"background": false, "rules": rules},
	}
	var tally tally
	failedBy := make([]int, len(cases))
	for _, kind := range []string{"Pod", "Deployment", "CronJob"} {
		objects := asKindAll(pods, kind)
		want := askKyverno(t, oracle, policy, kind, objects, len(cases))
		place, _ := podsecurity.PodOf("object", kind)
		for c := range cases {
			compiled, fl := podsecurity.Compile(&cases[c], place)
			if fl != nil {
				t.Fatalf("case %d: %s", c, fl.Message)
			}
			program := celtest.Program(t, env, compiled.Violates)
			excludes, _ := json.Marshal(cases[c])
			for i, object := range objects {
				if tally.judge(t, program, object, want[i][name(c, kind)], fmt.Sprintf("case %d %s (%s)", c, kind, excludes)) {
					failedBy[c]++
				}
			}
		}
	}
	judged, failed, disagreements := tally.judged, tally.failed, tally.disagreements
	t.Logf("%d verdicts on %d pods under %d exclusion cases, as Pods, Deployments and CronJobs: %d fail, %d disagreements", judged, len(pods), len(cases), failed, disagreements)
	for c, n := range failedBy {
		if n == 0 || n == 3*len(pods) {
			excludes, _ := json.Marshal(cases[c])
			t.Errorf("case %d (%s) failed %d of %d pods: it decides nothing", c, excludes, n, 3*len(pods))
		}
	}
}
