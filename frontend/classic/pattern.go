// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Bounds on what Pattern compiles: a pattern past them is refused, so that
// hostile input costs bounded time and gives a bounded expression.
const (
	// MaxPatternNodes is the most maps, lists and values a pattern may hold.
	MaxPatternNodes = 2000
	// MaxPatternDepth is the deepest a pattern may nest.
	MaxPatternDepth = 32
)

// anchorKey is Kyverno's anchor syntax (pkg/engine/anchor/anchor.go):
// an optional modifier, then the key in parentheses; but for the
// add-if-not-present modifier +, a mutation anchor: Kyverno's validation
// reads a key +(k) as the literal key "+(k)" (CreateElementHandler's
// default handler), and counts it among no anchors.
var anchorKey = regexp.MustCompile(`^([<=X^])?\((.+)\)$`)

// Pattern compiles a validate.pattern, as its JSON, into a CEL predicate
// over resource (a CEL expression for the resource, such as "object") that
// holds exactly when Kyverno's pattern validation (pkg/engine/validate
// MatchPattern) passes. The forms it compiles never skip and never error;
// any other form is refused with the construct named.
func Pattern(raw []byte, resource string) (string, *model.Refusal) {
	// As Kyverno reads it (kyvernov1.FromJSON): integers are int64.
	pattern, err := decodeTyped(raw)
	if err != nil {
		return "", model.Refuse(model.ReasonPatternNotExpressible, "the pattern is not JSON: %v", err)
	}
	c := &compiler{}
	if fl := c.measure(pattern, 1); fl != nil {
		return "", fl
	}
	return c.element(resource, pattern, "/")
}

// AnyPattern compiles a validate.anyPattern, as its JSON, into a CEL
// predicate over resource that holds exactly when Kyverno's anyPattern
// validation passes (validate_resource.go validatePatterns): when one of
// the patterns passes, or when there is none. The patterns are compiled
// as Pattern compiles one; since none of them can skip or error, the rule
// fails exactly when every pattern fails.
func AnyPattern(raw []byte, resource string) (string, *model.Refusal) {
	patterns, err := decodePatternList(raw)
	if err != nil {
		return "", model.Refuse(model.ReasonPatternNotExpressible, "anyPattern is not a list of patterns: %v", err)
	}
	if len(patterns) == 0 {
		return "true", nil // Kyverno passes a rule with no pattern to try
	}
	c := &compiler{}
	if fl := c.measure(patterns, 0); fl != nil {
		return "", fl
	}
	alternatives := make([]string, len(patterns))
	for i, p := range patterns {
		check, fl := c.element(resource, p, fmt.Sprintf("anyPattern[%d]/", i))
		if fl != nil {
			return "", fl
		}
		alternatives[i] = check
	}
	if len(alternatives) == 1 {
		return alternatives[0], nil
	}
	return "(" + strings.Join(alternatives, " || ") + ")", nil
}

// maxInlinedCheck is the length past which a scalar's check is not
// written twice (for a list's elements and for a value that is no list).
const maxInlinedCheck = 1000

// compiler is the state of one Pattern or AnyPattern call.
type compiler struct {
	nodes int
	// vars numbers the comprehension variables, so that nested ones never
	// shadow each other.
	vars int
	// mayError: the pattern compiled so far has Kyverno's error verdict
	// (codeError).
	mayError bool
	// runtime maps each pattern value that is one variable to the CEL
	// variable its substituted value is bound to (runtime.go); nil
	// refuses such values.
	runtime map[string]string
}

// measure refuses a pattern past the bounds.
func (c *compiler) measure(p any, depth int) *model.Refusal {
	c.nodes++
	switch {
	case c.nodes > MaxPatternNodes:
		return model.Refuse(model.ReasonPatternNotExpressible, "the pattern has more than %d maps, lists and values", MaxPatternNodes)
	case depth > MaxPatternDepth:
		return model.Refuse(model.ReasonPatternNotExpressible, "the pattern nests deeper than %d levels", MaxPatternDepth)
	}
	switch typed := p.(type) {
	case map[string]any:
		for _, v := range typed {
			if fl := c.measure(v, depth+1); fl != nil {
				return fl
			}
		}
	case []any:
		for _, v := range typed {
			if fl := c.measure(v, depth+1); fl != nil {
				return fl
			}
		}
	}
	return nil
}

func (c *compiler) variable() string {
	c.vars++
	return fmt.Sprintf("e%d", c.vars)
}

// element is Kyverno's validateResourceElement: x against pattern p at
// path. x is a CEL expression that never fails to evaluate (it may be
// null).
func (c *compiler) element(x string, p any, path string) (string, *model.Refusal) {
	switch typed := p.(type) {
	case map[string]any:
		body, fl := c.mapping(x, typed, path)
		if fl != nil {
			return "", fl
		}
		return "(type(" + x + ") == map && " + body + ")", nil
	case []any:
		body, fl := c.list(x, typed, path)
		if fl != nil {
			return "", fl
		}
		return "(type(" + x + ") == list && " + body + ")", nil
	}
	if v, ok := c.runtimeLeaf(p); ok {
		// Substituted with anything but a string, the pattern may be no
		// scalar: it fails to evaluate before any list is looked at.
		check, fl := c.scalarElement(x, p, path)
		return "(type(" + v + ") == string ? " + check + " : " + SubstitutedNonString + " == true)", fl
	}
	return c.scalarElement(x, p, path)
}

// scalarElement is element of a scalar pattern p.
func (c *compiler) scalarElement(x string, p any, path string) (string, *model.Refusal) {
	// A scalar pattern: against a list, every element must match it; a
	// value that is no list is judged as the one element of one.
	e := c.variable()
	check, fl := c.scalar(e, p, path)
	if fl != nil {
		return "", fl
	}
	if len(check) > maxInlinedCheck {
		// A long check (a duration parsed) is written once, the value
		// that is no list judged as a list of one.
		return "(type(" + x + ") == list ? dyn(" + x + ") : [dyn(" + x + ")]).all(" + e + ", " + check + ")", nil
	}
	onValue, fl := c.scalar("dyn("+x+")", p, path)
	if fl != nil {
		return "", fl
	}
	// dyn(): the API server type-checks the expression against the
	// kind's schema, where the branches must agree (a bool field and a
	// list of it); at run time the value is judged as it is. The value
	// that is no list is judged in place (no one-element list to build).
	return "(type(" + x + ") == list ? dyn(" + x + ").all(" + e + ", " + check + ") : " + onValue + ")", nil
}

// mapping is Kyverno's validateMap for the forms compiled: plain keys,
// equality anchors =(key) and negation anchors X(key). The anchors'
// evaluation order (anchors first) changes no verdict here: none of them
// skips.
func (c *compiler) mapping(m string, p map[string]any, path string) (string, *model.Refusal) {
	keys := patternKeys(p)
	terms := make([]string, 0, len(keys))
	for _, k := range keys {
		modifier, key, at, fl := patternKey(k, path)
		if fl != nil {
			return "", fl
		}
		present, value := presence(m, key), field(m, key)
		switch modifier {
		case "":
			if s, ok := p[k].(string); ok && s == "*" {
				// Kyverno's defaultHandler: "*" asks for a value that is not
				// null, whatever its type.
				terms = append(terms, "("+present+" && dyn("+value+") != null)")
				continue
			}
			if v, ok := c.runtimeLeaf(p[k]); ok {
				// The substituted value may be "*"; a missing key is
				// validated as null.
				e := c.variable()
				check, fl := c.element(e, p[k], at)
				if fl != nil {
					return "", fl
				}
				terms = append(terms, "("+v+" == '*' ? ("+present+" && dyn("+value+") != null) : ["+present+" ? dyn("+value+") : null].all("+e+", "+check+"))")
				continue
			}
			check, fl := c.element(value, p[k], at)
			if fl != nil {
				return "", fl
			}
			// A missing key is validated as null.
			if onNull(p[k]) {
				terms = append(terms, "(!("+present+") || "+check+")")
			} else {
				terms = append(terms, "("+present+" && "+check+")")
			}
		case "=":
			check, fl := c.element(value, p[k], at)
			if fl != nil {
				return "", fl
			}
			terms = append(terms, "(!("+present+") || "+check+")")
		case "X":
			terms = append(terms, "!("+present+")")
		default:
			return "", model.Refuse(model.ReasonPatternNotExpressible, "%s anchor %q at %s", anchorName(modifier), k, path)
		}
	}
	if len(terms) == 0 {
		return "true", nil
	}
	return strings.Join(terms, " && "), nil
}

// celIdentifier matches the keys CEL can select with a dot.
var celIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// celReserved are CEL's reserved words, which a dot cannot select.
var celReserved = map[string]bool{
	"as": true, "break": true, "const": true, "continue": true, "else": true, "false": true, "for": true, "function": true,
	"if": true, "import": true, "in": true, "let": true, "loop": true, "namespace": true, "null": true, "package": true,
	"return": true, "true": true, "var": true, "void": true, "while": true,
}

// field is the CEL for key of the map m: m.key where CEL allows it (the
// form a person writes), m["key"] otherwise.
func field(m, key string) string {
	if celIdentifier.MatchString(key) && !celReserved[key] {
		return m + "." + key
	}
	return m + "[" + kyverno.CELString(key) + "]"
}

// presence is the CEL test that the map m has key.
func presence(m, key string) string {
	if celIdentifier.MatchString(key) && !celReserved[key] {
		return "has(" + m + "." + key + ")"
	}
	return kyverno.CELString(key) + " in " + m
}

// patternKeys are a pattern map's keys, sorted (the order Kyverno sorts
// anchors and plain keys in).
func patternKeys(p map[string]any) []string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// patternKey reads a pattern's key at path: its anchor's modifier ("(" for
// a conditional anchor, "" for a plain key), the key it names, and the
// path below it; keys Kyverno reads otherwise are refused (plainKey).
func patternKey(k, path string) (modifier, key, at string, fl *model.Refusal) {
	key = k
	if match := anchorKey.FindStringSubmatch(k); match != nil {
		modifier, key = match[1], match[2]
		if modifier == "" {
			modifier = "("
		}
	}
	at = path + key + "/"
	return modifier, key, at, plainKey(key, at)
}

// plainKey refuses the keys compiled differently by Kyverno: wildcard
// keys (expanded under labels and annotations) and variables.
func plainKey(key, at string) *model.Refusal {
	switch {
	case strings.ContainsAny(key, "*?"):
		return model.Refuse(model.ReasonPatternNotExpressible, "a wildcard key at %s", at)
	case strings.Contains(key, "{{") || strings.Contains(key, "$("):
		return model.Refuse(model.ReasonPatternNotExpressible, "a variable in the key at %s", at)
	}
	return nil
}

func anchorName(modifier string) string {
	switch modifier {
	case "(":
		return "the conditional"
	case "<":
		return "the global"
	case "^":
		return "the existence"
	}
	return "the " + modifier
}

// list is Kyverno's validateArray: only the pattern's first element counts,
// applied to every element of the resource's list.
func (c *compiler) list(l string, p []any, path string) (string, *model.Refusal) {
	if len(p) == 0 {
		return "false", nil // "pattern Array empty"
	}
	switch p[0].(type) {
	case map[string]any:
		e := c.variable()
		check, fl := c.element(e, p[0], path+"0/")
		if fl != nil {
			return "", fl
		}
		return "dyn(" + l + ").all(" + e + ", " + check + ")", nil
	case []any:
		return "", model.Refuse(model.ReasonPatternNotExpressible, "a list of lists at %s", path)
	}
	e := c.variable()
	check, fl := c.scalar(e, p[0], path+"0/")
	if fl != nil {
		return "", fl
	}
	return "dyn(" + l + ").all(" + e + ", " + check + ")", nil
}

// scalar is Kyverno's pattern.Validate of a value x against a scalar
// pattern.
func (c *compiler) scalar(x string, p any, path string) (string, *model.Refusal) {
	switch typed := p.(type) {
	case bool:
		return fmt.Sprintf("(type(%s) == bool && %s == %t)", x, x, typed), nil
	case nil:
		// validateNilPattern: the zero value of every scalar type.
		return nilPattern(x), nil
	case string:
		if v, ok := c.runtimeLeaf(typed); ok {
			return c.runtimeScalar(x, v), nil
		}
		return c.valueString(x, typed, path)
	case float64:
		return c.numberPattern(x, typed, path)
	case int64:
		return c.integerPattern(x, typed, path)
	}
	return "", model.Refuse(model.ReasonPatternNotExpressible, "a value of type %T at %s", p, path)
}

// nilPattern is validateNilPattern of x: the zero value of every scalar
// type.
func nilPattern(x string) string {
	return "(" + x + " == null || (type(" + x + ") == bool && !" + x + ") || (type(" + x + ") == int && " + x + " == 0) || (type(" + x + ") == double && " + x + " == 0.0) || (type(" + x + ") == string && " + x + " == ''))"
}

// decodePatternList decodes anyPattern's JSON, a list of patterns, with
// integers as int64 (decodeTyped).
func decodePatternList(raw []byte) ([]any, error) {
	v, err := decodeTyped(raw)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok && v != nil {
		return nil, fmt.Errorf("a %T", v)
	}
	return list, nil
}

// integerPattern is Kyverno's validateIntPattern of the value x against
// the integer p (a pattern's number written as an integer is an int64):
// an int equal to it; an integral double whose int64 is it (Go leaves a
// double past 2^63 to the CPU, which yields the least or the greatest
// int64: those two patterns are refused); a string strconv.ParseInt reads
// as it (base 10, a sign, no fraction, no exponent).
func (c *compiler) integerPattern(x string, p int64, path string) (string, *model.Refusal) {
	if p == math.MinInt64 || p == math.MaxInt64 {
		return "", model.Refuse(model.ReasonPatternNotExpressible, "the integer %d at %s (Kyverno's comparison of it with a large float depends on the CPU)", p, path)
	}
	n := strconv.FormatInt(p, 10)
	s, d := c.variable(), c.variable()
	// The digits without leading zeros: at most 19, and no more than
	// 2^63 (or 2^63 - 1 without a minus) at 19.
	digits := s + ".find('[0-9]+$').find('[1-9][0-9]*')"
	fits := "[" + digits + "].all(" + d + ", size(" + d + ") < 19 || (size(" + d + ") == 19 && " + d + " <= (" + s + ".startsWith('-') ? '9223372036854775808' : '9223372036854775807')))"
	onString := "[string(" + x + ")].all(" + s + ", " + s + ".matches('^[+-]?[0-9]+$') && " + fits + " && int(" + s + ") == " + n + ")"
	onDouble := "(double(" + x + ") > -9223372036854775808.0 && double(" + x + ") < 9223372036854775808.0 && double(int(double(" + x + "))) == double(" + x + ") && int(double(" + x + ")) == " + n + ")"
	return "((type(" + x + ") == int && " + x + " == " + n + ") || (type(" + x + ") == double && " + onDouble + ") || (type(" + x + ") == string && " + onString + "))", nil
}

// onNull is Kyverno's verdict for pattern p against a missing or null
// value (pattern.Validate of nil): the null pattern, and a value string
// whose conditions hold on "0" as a duration or a quantity.
func onNull(p any) bool {
	switch typed := p.(type) {
	case nil:
		return true
	case string:
		return nilMatches(typed)
	}
	return false
}
