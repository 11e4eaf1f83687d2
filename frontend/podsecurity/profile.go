// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package podsecurity

import (
	"strconv"
	"strings"

	"github.com/kyvap/kyvap/model"
)

// The levels of the Pod Security Standards, as a podSecurity rule names
// them.
const (
	LevelPrivileged = "privileged"
	LevelBaseline   = "baseline"
	LevelRestricted = "restricted"
)

// latestMinor stands for the version "latest", newer than every other.
const latestMinor = 1 << 30

// Profile is a podSecurity rule's level and version, parsed.
type Profile struct {
	// Level is LevelPrivileged, LevelBaseline or LevelRestricted.
	Level string
	// Minor is the version's minor (1.Minor); latestMinor for "latest".
	Minor int
}

// String is the profile as Kyverno writes it in its messages
// ("baseline:latest", "restricted:v1.29").
func (p Profile) String() string {
	return p.Level + ":" + p.Version()
}

// Version is the profile's version as a rule writes it ("latest",
// "v1.29").
func (p Profile) Version() string {
	if p.Minor == latestMinor {
		return "latest"
	}
	return "v1." + strconv.Itoa(p.Minor)
}

// Kyverno's CRD accepts the versions v1.19 to v1.32 and latest (an empty
// version is latest); below v1.19 the fork's seccomp check reads
// annotations, which kyvap does not compile.
const (
	oldestMinor = 19
	newestMinor = 32
)

// ParseProfile parses a podSecurity rule's level and version as Kyverno's
// CRD admits them (pss.ParseVersion reads them).
func ParseProfile(level, version string) (Profile, *model.Refusal) {
	switch level {
	case LevelPrivileged, LevelBaseline, LevelRestricted:
	default:
		return Profile{}, model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity level %q is none of privileged, baseline, restricted", level)
	}
	if version == "" || version == "latest" {
		return Profile{Level: level, Minor: latestMinor}, nil
	}
	minor, err := strconv.Atoi(strings.TrimPrefix(version, "v1."))
	if !strings.HasPrefix(version, "v1.") || err != nil || minor < oldestMinor || minor > newestMinor || strconv.Itoa(minor) != strings.TrimPrefix(version, "v1.") {
		return Profile{}, model.Refuse(model.ReasonPodSecurityNotExpressible, "podSecurity version %q is none of v1.%d to v1.%d or latest (Kyverno's CRD)", version, oldestMinor, newestMinor)
	}
	return Profile{Level: level, Minor: minor}, nil
}

// Selected is a check as Kyverno runs it at a profile: its version chosen.
type Selected struct {
	// ID is the check's ID (privileged, hostPorts, ...), as Kyverno's
	// messages and its PolicyExceptions' controls name it.
	ID string
	// Level is the level the check belongs to.
	Level string
	// Minor is the minimum version of the check's version Kyverno runs.
	Minor int
	// Reason is the check's forbidden reason (the fork's
	// ForbiddenReason, as Kyverno's messages quote it).
	Reason   string
	violated func(bound) string
}

// Violated is the CEL predicate that holds where the check fails the pod.
func (s Selected) Violated(pod Pod) string {
	return pod.bind(s.violated(bound{}))
}

// Checks are the checks Kyverno runs at the profile, in the fork's order
// (evaluatePSS): at baseline the baseline checks, at any other level every
// check; of each, the newest version whose minimum is at or below the
// profile's version, or the first.
func Checks(p Profile) []Selected {
	var out []Selected
	for _, c := range catalogue {
		if p.Level == LevelBaseline && c.level != LevelBaseline {
			continue
		}
		chosen := c.versions[0]
		for _, v := range c.versions[1:] {
			if p.Minor >= v.minor && chosen.minor < v.minor {
				chosen = v
			}
		}
		out = append(out, Selected{ID: c.id, Level: c.level, Minor: chosen.minor, Reason: c.reason, violated: chosen.violated})
	}
	return out
}
