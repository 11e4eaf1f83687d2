package match

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kindSelector is a parsed Kyverno kind spelling; each part may hold
// wildcards.
type kindSelector struct {
	group, version, kind, subresource string
}

// isKyvernoVersion reports whether s reads as a version in a kind spelling
// ("*", "v1", "v2beta1", ...). Kyverno's pattern, ^(v\d((alpha|beta)\d)?|\*)$,
// allows a single digit only, so "v10/Foo" is the kind "v10" with the
// subresource "Foo", not a version; we keep that.
func isKyvernoVersion(s string) bool {
	if s == "*" {
		return true
	}
	if len(s) < 2 || s[0] != 'v' || !isDigit(s[1]) {
		return false
	}
	rest := s[2:]
	if rest == "" {
		return true
	}
	for _, level := range []string{"alpha", "beta"} {
		if len(rest) == len(level)+1 && strings.HasPrefix(rest, level) && isDigit(rest[len(level)]) {
			return true
		}
	}
	return false
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// parseKind splits a kind spelling as Kyverno's ParseKindSelector
// (pkg/utils/kube/kind.go): "Kind", "version/Kind", "Kind/sub", "*/sub",
// "group/version/Kind", "version/Kind/sub", "group/version/Kind/sub", with
// '.' also separating the subresource in the last segment ("Pod.status").
// Kyverno turns a spelling it cannot parse into one that never matches; we
// report it instead, because a policy that silently selects nothing is a
// policy bug the fallback engine should surface.
func parseKind(input string) (kindSelector, error) {
	parts := strings.Split(input, "/")
	parts = append(parts[:len(parts)-1], strings.Split(parts[len(parts)-1], ".")...)
	var sel kindSelector
	switch len(parts) {
	case 1:
		sel = kindSelector{"*", "*", parts[0], ""}
	case 2:
		switch {
		case parts[0] == "*" && parts[1] == "*":
			sel = kindSelector{"*", "*", "*", "*"}
		case parts[0] == "*" && strings.ToLower(parts[1]) == parts[1]:
			// "*/scale": any kind's subresource.
			sel = kindSelector{"*", "*", "*", parts[1]}
		case isKyvernoVersion(parts[0]):
			sel = kindSelector{"*", parts[0], parts[1], ""}
		default:
			sel = kindSelector{"*", "*", parts[0], parts[1]}
		}
	case 3:
		if isKyvernoVersion(parts[0]) {
			sel = kindSelector{"*", parts[0], parts[1], parts[2]}
		} else {
			sel = kindSelector{parts[0], parts[1], parts[2], ""}
		}
	case 4:
		sel = kindSelector{parts[0], parts[1], parts[2], parts[3]}
	default:
		return kindSelector{}, fmt.Errorf("%w: kind %q has more than four segments", ErrInvalid, input)
	}
	// An empty kind or version can only match requests that have none: the
	// spelling is broken ("", "apps//Deployment").
	if sel.kind == "" || sel.version == "" {
		return sel, fmt.Errorf("%w: kind %q has an empty kind or version", ErrInvalid, input)
	}
	return sel, nil
}

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
		sel, err := parseKind(k)
		if err != nil {
			// Evaluated anyway, literally, as Kyverno does: it cannot match
			// a real request.
			errs = append(errs, err)
		}
		if matched {
			continue
		}
		if !wildcardMatch(sel.group, gvk.Group) || !wildcardMatch(sel.version, gvk.Version) || !wildcardMatch(sel.kind, gvk.Kind) {
			continue
		}
		if wildcardMatch(sel.subresource, subresource) || (gvk == podGVK && subresource == "ephemeralcontainers") {
			matched = true
		}
	}
	return matched, joinErrs(errs)
}
