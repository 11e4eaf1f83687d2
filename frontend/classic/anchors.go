// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Conditional (k) and global <(k) anchors make Kyverno's pattern
// validation three-valued: a condition that does not hold skips the rule.
// Where a pattern has them, it is compiled to the outcome of Kyverno's
// validateResourceElement as a CEL int, one of these codes
// (pkg/engine/validate/validate.go):
const (
	// codePass: no error.
	codePass = "0"
	// codeFail: an error that is no skip (a value, a structure or a
	// negation anchor that does not match); Kyverno tells a negation
	// error apart only at the root, where both are fail.
	codeFail = "1"
	// codeError: a failure Kyverno reports as an error: a list's element
	// that is no map fails after elements that lacked a conditional
	// anchor's key, and none had it (AnchorMap.KeysAreMissing).
	codeError = "2"
	// codeAnchorSkip: a conditional or global anchor's own error
	// (validateAnchorError), which makes its siblings' errors ignored.
	codeAnchorSkip = "3"
	// codeSkip: a PatternError that skips (a map or a list all of whose
	// elements skipped).
	codeSkip = "4"
)

// Verdict is a compiled pattern's verdict on a resource: two CEL
// predicates that never fail to evaluate and never hold together.
type Verdict struct {
	// Passes holds where Kyverno's verdict is pass.
	Passes string
	// Skips holds where it is skip (a conditional or global anchor did
	// not hold); "false" for a pattern without such anchors.
	Skips string
	// Fails holds where Kyverno's verdict is error ("false" when it never
	// is); Passes fails to evaluate there. Where none of the three holds
	// the verdict is fail.
	Fails string
	// Violates holds where the verdict is fail.
	Violates string
	// code, for a single pattern with conditional or global anchors, is
	// its outcome code (a CEL int, never failing) that the predicates
	// above read; "" otherwise.
	code string
}

// PatternVerdict compiles a validate.pattern, as its JSON, into Kyverno's
// verdict on resource (a CEL expression, such as "object"). Patterns
// without conditional or global anchors compile as Pattern; the others to
// Kyverno's outcome codes, where they are exact (checkAnchors).
func PatternVerdict(raw []byte, resource string) (Verdict, *model.Refusal) {
	return patternVerdict(raw, resource, nil)
}

// patternVerdict is PatternVerdict with the pattern values that are one
// variable bound to CEL variables (compiler.runtime).
func patternVerdict(raw []byte, resource string, runtime map[string]string) (Verdict, *model.Refusal) {
	// As Kyverno reads it (kyvernov1.FromJSON): integers are int64.
	pattern, err := decodeTyped(raw)
	if err != nil {
		return Verdict{}, model.Refuse(model.ReasonPatternNotExpressible, "the pattern is not JSON: %v", err)
	}
	c := &compiler{runtime: runtime}
	if fl := c.measure(pattern, 1); fl != nil {
		return Verdict{}, fl
	}
	return c.verdict(resource, pattern, "/")
}

// AnyPatternVerdict compiles a validate.anyPattern, as its JSON, into
// Kyverno's verdict on resource (validate_resource.go validatePatterns):
// pass when one pattern passes; skip when none passes and every one
// skips; fail otherwise (and pass when there is no pattern).
func AnyPatternVerdict(raw []byte, resource string) (Verdict, *model.Refusal) {
	return anyPatternVerdict(raw, resource, nil)
}

// anyPatternVerdict is AnyPatternVerdict with the pattern values that are
// one variable bound to CEL variables (compiler.runtime).
func anyPatternVerdict(raw []byte, resource string, runtime map[string]string) (Verdict, *model.Refusal) {
	patterns, err := decodePatternList(raw)
	if err != nil {
		return Verdict{}, model.Refuse(model.ReasonPatternNotExpressible, "anyPattern is not a list of patterns: %v", err)
	}
	if len(patterns) == 0 {
		return Verdict{Passes: "true", Skips: "false", Fails: "false", Violates: "false"}, nil
	}
	c := &compiler{runtime: runtime}
	if fl := c.measure(patterns, 0); fl != nil {
		return Verdict{}, fl
	}
	var passes, skips []string
	for i, p := range patterns {
		v, fl := c.verdict(resource, p, fmt.Sprintf("anyPattern[%d]/", i))
		if fl != nil {
			return Verdict{}, fl
		}
		if v.Fails != "false" {
			// Kyverno counts a pattern's error among the failed ones.
			v.Passes = "!" + v.Fails + " && " + v.Passes
		}
		passes, skips = append(passes, v.Passes), append(skips, v.Skips)
	}
	out := Verdict{Passes: joinTerms(passes, " || ", "false"), Skips: joinTerms(skips, " && ", "true"), Fails: "false"}
	if out.Skips != "false" {
		// Every pattern skipped: none passed, since a skip is no pass.
		out.Skips = "(" + out.Skips + ")"
		out.Violates = "(!" + out.Skips + " && !" + out.Passes + ")"
	} else {
		out.Violates = "!" + out.Passes
	}
	return out, nil
}

// joinTerms joins predicates with op, simplifying constants: empty is
// unit; a term equal to the absorbing element of op decides.
func joinTerms(terms []string, op, unit string) string {
	absorbing := "true"
	if op == " && " {
		absorbing = "false"
	}
	var kept []string
	for _, t := range terms {
		switch t {
		case absorbing:
			return absorbing
		case unit:
			continue
		}
		kept = append(kept, t)
	}
	switch len(kept) {
	case 0:
		return unit
	case 1:
		return kept[0]
	}
	return "(" + strings.Join(kept, op) + ")"
}

// verdict compiles one pattern.
func (c *compiler) verdict(resource string, pattern any, path string) (Verdict, *model.Refusal) {
	if !hasSkippingAnchors(pattern) {
		check, fl := c.element(resource, pattern, path)
		return Verdict{Passes: check, Skips: "false", Fails: "false", Violates: "!" + check}, fl
	}
	if fl := checkAnchors(pattern, path, anchorPath{}); fl != nil {
		return Verdict{}, fl
	}
	if fl := checkConditionalKeys(pattern, path, map[string]string{}); fl != nil {
		return Verdict{}, fl
	}
	code, fl := c.code(resource, pattern, path)
	if fl != nil {
		return Verdict{}, fl
	}
	v := c.variable()
	// At the root a skip of either kind is the rule's skip (MatchPattern
	// skip()); codeError is an error; any other is fail.
	out := Verdict{
		Passes:   bindInt(code, v, v+" == "+codePass),
		Skips:    bindInt(code, v, v+" >= "+codeAnchorSkip),
		Fails:    "false",
		Violates: bindInt(code, v, v+" == "+codeFail),
		code:     code,
	}
	if c.mayError {
		out.Passes = bindInt(code, v, "("+v+" == "+codeError+" ? "+failure("a pattern's conditional anchor key is missing from every element (Kyverno's error)")+" == 0 : "+v+" == "+codePass+")")
		out.Fails = bindInt(code, v, v+" == "+codeError)
	}
	return out, nil
}

// checkConditionalKeys refuses a conditional anchor that two maps of the
// pattern have: Kyverno tracks which anchor keys it found by the key's
// text across the whole pattern (AnchorMap), so one map's element can
// decide the other's verdict, in the order Kyverno visits them.
func checkConditionalKeys(p any, path string, seen map[string]string) *model.Refusal {
	switch typed := p.(type) {
	case map[string]any:
		keys := patternKeys(typed)
		for _, k := range keys {
			if m := anchorKey.FindStringSubmatch(k); m != nil && m[1] == "" {
				if first, ok := seen[k]; ok {
					return model.Refuse(model.ReasonPatternNotExpressible, "the conditional anchor %q at %s and at %s (Kyverno tracks anchor keys by name across the pattern: whether it reports fail or error depends on the order it visits them in)", k, first, path)
				}
				seen[k] = path
			}
		}
		for _, k := range keys {
			key := k
			if m := anchorKey.FindStringSubmatch(k); m != nil {
				key = m[2]
			}
			if fl := checkConditionalKeys(typed[k], path+key+"/", seen); fl != nil {
				return fl
			}
		}
	case []any:
		if len(typed) > 0 {
			return checkConditionalKeys(typed[0], path+"0/", seen)
		}
	}
	return nil
}

// conditionalKeys are the keys of p's own conditional anchors, sorted.
func conditionalKeys(p map[string]any) []string {
	var keys []string
	for k := range p {
		if m := anchorKey.FindStringSubmatch(k); m != nil && m[1] == "" {
			keys = append(keys, m[2])
		}
	}
	sort.Strings(keys)
	return keys
}

// bindInt binds value to name around body.
func bindInt(value, name, body string) string {
	return "[" + value + "].all(" + name + ", " + body + ")"
}

// hasSkippingAnchors reports a conditional or global anchor in p.
func hasSkippingAnchors(p any) bool {
	return hasKey(p, func(k string) bool {
		m := anchorKey.FindStringSubmatch(k)
		return m != nil && (m[1] == "" || m[1] == "<")
	})
}

// hasKey reports a key of p's maps, at any depth, that holds.
func hasKey(p any, holds func(key string) bool) bool {
	switch typed := p.(type) {
	case map[string]any:
		for k, v := range typed {
			if holds(k) || hasKey(v, holds) {
				return true
			}
		}
	case []any:
		for _, v := range typed {
			if hasKey(v, holds) {
				return true
			}
		}
	}
	return false
}

// anchorPath is what lies between the pattern's root and a map: how many
// lists, whether the map is the nearest list's element itself, and
// whether an equality anchor with sibling anchors leads to it.
type anchorPath struct {
	lists         int
	listElement   bool
	underEquality bool
}

// checkAnchors refuses the conditional anchors whose verdicts depend on
// Kyverno's AnchorMap: where an anchor's key was missing from every map
// Kyverno visited, a failure elsewhere is reported as an error, not a
// fail (MatchPattern, KeysAreMissing), and which maps it visited depends
// on the order it evaluates them in. A map with a conditional anchor
// skips, wherever such a key is missing; the skip reaches the root (the
// rule skips, the order is moot) unless something absorbs it: a list one
// of whose elements applied (which, when the map is that element, had
// every key), or an equality anchor's map, where another anchor applied.
// So conditional anchors compile on a map under no equality anchor that
// has sibling anchors, and under no list or as the element of the one
// list above it.
func checkAnchors(p any, path string, at anchorPath) *model.Refusal {
	switch typed := p.(type) {
	case map[string]any:
		keys := patternKeys(typed)
		for _, k := range keys {
			m := anchorKey.FindStringSubmatch(k)
			if m == nil || m[1] != "" {
				continue
			}
			switch {
			case at.underEquality:
				return model.Refuse(model.ReasonPatternNotExpressible, "the conditional anchor %q at %s under an equality anchor (whether Kyverno reports fail or error depends on the order it visits maps in)", k, path)
			case at.lists > 1:
				return model.Refuse(model.ReasonPatternNotExpressible, "the conditional anchor %q at %s under nested lists (whether Kyverno reports fail or error depends on the order it visits maps in)", k, path)
			case at.lists == 1 && !at.listElement:
				return model.Refuse(model.ReasonPatternNotExpressible, "the conditional anchor %q at %s below a list's element (whether Kyverno reports fail or error depends on the order it visits maps in)", k, path)
			}
		}
		// The anchors of this map's anchor phase (all but global ones): a
		// skip an equality anchor's value returns is absorbed here only
		// where another of them applied.
		anchors := 0
		for _, k := range keys {
			if m := anchorKey.FindStringSubmatch(k); m != nil && m[1] != "<" {
				anchors++
			}
		}
		for _, k := range keys {
			next := at
			next.listElement = false
			key := k
			if m := anchorKey.FindStringSubmatch(k); m != nil {
				key = m[2]
				if m[1] == "=" && anchors > 1 {
					next.underEquality = true
				}
			}
			if fl := checkAnchors(typed[k], path+key+"/", next); fl != nil {
				return fl
			}
		}
	case []any:
		if len(typed) > 0 {
			next := at
			next.lists++
			next.listElement = true
			return checkAnchors(typed[0], path+"0/", next)
		}
	}
	return nil
}

// code compiles Kyverno's validateResourceElement of x against p into its
// outcome code. x never fails to evaluate (it may be null).
func (c *compiler) code(x string, p any, path string) (string, *model.Refusal) {
	if !hasSkippingAnchors(p) {
		check, fl := c.element(x, p, path)
		if fl != nil {
			return "", fl
		}
		return "(" + check + " ? " + codePass + " : " + codeFail + ")", nil
	}
	switch typed := p.(type) {
	case map[string]any:
		body, fl := c.mappingCode(x, typed, path)
		if fl != nil {
			return "", fl
		}
		return "(type(" + x + ") == map ? " + body + " : " + codeFail + ")", nil
	case []any:
		// validateArrayOfMaps: the first element that fails decides;
		// else all skipping (and some) is a skip.
		elementPattern, ok := typed[0].(map[string]any)
		if !ok {
			return "", model.Refuse(model.ReasonPatternNotExpressible, "a list of lists at %s", path)
		}
		e, codes := c.variable(), c.variable()
		keys := conditionalKeys(elementPattern)
		if len(keys) == 0 {
			element, fl := c.code(e, elementPattern, path+"0/")
			if fl != nil {
				return "", fl
			}
			k := c.variable()
			judge := "(" + codes + ".exists(" + k + ", " + k + " == " + codeFail + ") ? " + codeFail +
				" : " + codes + ".exists(" + k + ", " + k + " >= " + codeAnchorSkip + ") && !" + codes + ".exists(" + k + ", " + k + " == " + codePass + ") ? " + codeSkip + " : " + codePass + ")"
			return "(type(" + x + ") == list ? [dyn(" + x + ").map(" + e + ", " + element + ")].map(" + codes + ", " + judge + ")[0] : " + codeFail + ")", nil
		}
		// The element's conditional keys: an element that is no map fails
		// unvisited (codeNotVisited), and where no element before it had
		// one of the keys while some element lacked it, Kyverno's verdict
		// is an error.
		body, fl := c.mappingCode(e, elementPattern, path+"0/")
		if fl != nil {
			return "", fl
		}
		const codeNotVisited = "5"
		c.mayError = true
		k, i, first, el := c.variable(), c.variable(), c.variable(), c.variable()
		failing := k + " == " + codeFail + " || " + k + " == " + codeNotVisited
		var missing []string
		for _, key := range keys {
			missing = append(missing, "!dyn("+x+").exists("+i+", "+el+", "+i+" < "+first+" && "+kyverno.CELString(key)+" in "+el+")")
		}
		onFailure := "[" + codes + ".transformList(" + i + ", " + k + ", " + failing + ", " + i + ")[0]].map(" + first + ", " +
			codes + "[" + first + "] == " + codeNotVisited + " && " + first + " > 0 && (" + strings.Join(missing, " || ") + ") ? " + codeError + " : " + codeFail + ")[0]"
		judge := "(" + codes + ".exists(" + k + ", " + failing + ") ? " + onFailure +
			" : " + codes + ".exists(" + k + ", " + k + " >= " + codeAnchorSkip + ") && !" + codes + ".exists(" + k + ", " + k + " == " + codePass + ") ? " + codeSkip + " : " + codePass + ")"
		element := "(type(" + e + ") == map ? " + body + " : " + codeNotVisited + ")"
		return "(type(" + x + ") == list ? [dyn(" + x + ").map(" + e + ", " + element + ")].map(" + codes + ", " + judge + ")[0] : " + codeFail + ")", nil
	}
	return "", model.Refuse(model.ReasonPatternNotExpressible, "a value of type %T at %s", p, path)
}

// mappingCode is Kyverno's validateMap of the map m: the anchors first, in
// key order, then the other keys in getSortedNestedAnchorResource's order.
func (c *compiler) mappingCode(m string, p map[string]any, path string) (string, *model.Refusal) {
	keys := patternKeys(p)
	var anchors []string
	var front, back []string // resource codes, in Kyverno's list order
	for _, k := range keys {
		modifier, key, at, fl := patternKey(k, path)
		if fl != nil {
			return "", fl
		}
		present, value := presence(m, key), field(m, key)
		child := func() (string, *model.Refusal) { return c.code(value, p[k], at) }
		switch modifier {
		case "(":
			// conditionAnchorHandler: a missing key, or any error of its
			// value, is the anchor's skip.
			v, fl := child()
			if fl != nil {
				return "", fl
			}
			anchors = append(anchors, "("+present+" ? ("+v+" == "+codePass+" ? "+codePass+" : "+codeAnchorSkip+") : "+codeAnchorSkip+")")
		case "=":
			v, fl := child()
			if fl != nil {
				return "", fl
			}
			anchors = append(anchors, "("+present+" ? "+v+" : "+codePass+")")
		case "X":
			anchors = append(anchors, "("+present+" ? "+codeFail+" : "+codePass+")")
		case "<":
			// globalAnchorHandler: a missing key passes; any error of its
			// value is the anchor's skip.
			v, fl := child()
			if fl != nil {
				return "", fl
			}
			// Kyverno pushes global anchors, and keys with anchors below,
			// to the front: the last one pushed runs first.
			front = append([]string{"(" + present + " ? (" + v + " == " + codePass + " ? " + codePass + " : " + codeAnchorSkip + ") : " + codePass + ")"}, front...)
		case "":
			var v string
			if s, ok := p[k].(string); ok && s == "*" {
				v = "(" + present + " && dyn(" + value + ") != null ? " + codePass + " : " + codeFail + ")"
			} else if rv, ok := c.runtimeLeaf(p[k]); ok {
				// As mapping: the substituted value may be "*"; a missing
				// key is validated as null.
				e := c.variable()
				check, fl := c.element(e, p[k], at)
				if fl != nil {
					return "", fl
				}
				v = "(" + rv + " == '*' ? (" + present + " && dyn(" + value + ") != null ? " + codePass + " : " + codeFail + ") : [" + present + " ? dyn(" + value + ") : null].all(" + e + ", " + check + ") ? " + codePass + " : " + codeFail + ")"
			} else {
				onValue, fl := child()
				if fl != nil {
					return "", fl
				}
				// A missing key is validated as null: a map or a list
				// pattern fails on it.
				onMissing := codeFail
				if onNull(p[k]) {
					onMissing = codePass
				}
				v = "(" + present + " ? " + onValue + " : " + onMissing + ")"
			}
			if hasAnchors(p[k]) {
				front = append([]string{v}, front...)
			} else {
				back = append(back, v)
			}
		default:
			return "", model.Refuse(model.ReasonPatternNotExpressible, "%s anchor %q at %s", anchorName(modifier), k, path)
		}
	}
	resources := firstNonZero(c, append(front, back...))
	if len(anchors) == 0 {
		return resources, nil
	}
	// The anchors' phase: an error before any anchor's own skip decides;
	// skips (none applied, or one of them the anchor's own) skip the map.
	h, k := c.variable(), c.variable()
	exists := func(cond string) string { return h + ".exists(" + k + ", " + cond + ")" }
	// An error (a fail, or Kyverno's error from a list below) before any
	// anchor's own skip decides, as it is.
	errorOrOwnSkip := k + " == " + codeFail + " || " + k + " == " + codeError + " || " + k + " == " + codeAnchorSkip
	first := h + ".filter(" + k + ", " + errorOrOwnSkip + ")[0]"
	decided := exists(errorOrOwnSkip) + " && " + first + " != " + codeAnchorSkip
	skipped := exists(k+" >= "+codeAnchorSkip) + " && (" + exists(k+" == "+codeAnchorSkip) + " || !" + exists(k+" == "+codePass) + ")"
	return "[[" + strings.Join(anchors, ", ") + "]].map(" + h + ", (" + decided + ") ? " + first + " : (" + skipped + ") ? " + codeSkip + " : " + resources + ")[0]", nil
}

// firstNonZero is the first code that is no pass, in order, or a pass.
func firstNonZero(c *compiler, codes []string) string {
	switch len(codes) {
	case 0:
		return codePass
	case 1:
		return codes[0]
	}
	r, k := c.variable(), c.variable()
	return "[[" + strings.Join(codes, ", ") + "]].map(" + r + ", " + r + ".exists(" + k + ", " + k + " != " + codePass + ") ? " + r + ".filter(" + k + ", " + k + " != " + codePass + ")[0] : " + codePass + ")[0]"
}

// hasAnchors is Kyverno's hasNestedAnchors: an anchor of any kind in p's
// maps at any depth.
func hasAnchors(p any) bool {
	return hasKey(p, anchorKey.MatchString)
}
