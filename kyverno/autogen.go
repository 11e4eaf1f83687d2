// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package kyverno

// maxRuleName is the length Kyverno truncates generated rule names to.
const maxRuleName = 63

// AutogenRuleName is the name Kyverno gives a rule's variant for the pod
// controllers with a pod template at spec.template (Deployment, DaemonSet,
// ...). Exceptions, reports and messages name the variant by it, so both the
// translator and the fallback engine must use the same. Kyverno truncates
// it to 63 bytes (pkg/autogen/v1/rule.go getAutogenRuleName, with the
// prefix "autogen").
func AutogenRuleName(rule string) string {
	return autogenName("autogen", rule)
}

// AutogenCronJobRuleName is the name of a rule's CronJob variant (prefix
// "autogen-cronjob"); see AutogenRuleName.
func AutogenCronJobRuleName(rule string) string {
	return autogenName("autogen-cronjob", rule)
}

// autogenName is pkg/autogen/v1/rule.go getAutogenRuleName: the bytes are
// cut, even inside a multi-byte character, as Kyverno does.
func autogenName(prefix, rule string) string {
	name := prefix + "-" + rule
	if len(name) > maxRuleName {
		name = name[:maxRuleName]
	}
	return name
}
