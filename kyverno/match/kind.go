// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kyvap/kyvap/kyverno"
)

// podGVK is the only kind whose ephemeralcontainers subresource Kyverno
// matches without being asked to.
var podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// matchKinds reports whether one of the kind spellings selects gvk and
// subresource, as Kyverno's CheckKind with allowEphemeralContainers (the
// setting both the rule matcher and the exception matcher use): a plain
// "Pod" also matches pods/ephemeralcontainers, for backward compatibility.
// Unparsable spellings never match (as in Kyverno) and are reported.
func matchKinds(kinds []string, gvk schema.GroupVersionKind, subresource string) (bool, error) {
	var errs []error
	matched := false
	for _, k := range kinds {
		sel, err := kyverno.ParseKindSelector(k)
		if err != nil {
			// Evaluated anyway, literally, as Kyverno does: it cannot match
			// a real request. Reported, because a policy that silently
			// selects nothing is a policy bug the fallback engine surfaces.
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err))
		}
		if matched {
			continue
		}
		if !kyverno.WildcardMatch(sel.Group, gvk.Group) || !kyverno.WildcardMatch(sel.Version, gvk.Version) || !kyverno.WildcardMatch(sel.Kind, gvk.Kind) {
			continue
		}
		if kyverno.WildcardMatch(sel.Subresource, subresource) || (gvk == podGVK && subresource == "ephemeralcontainers") {
			matched = true
		}
	}
	return matched, joinErrs(errs)
}
