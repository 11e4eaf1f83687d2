// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"math"
	"strconv"
	"time"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// This file is Kyverno's NumericOperatorHandler (pkg/engine/variables/
// operator/numeric.go) for a key of any type, known at run time, and a
// literal value. A string key is read, in this order, as a Go duration,
// a resource.Quantity, a float (strconv.ParseFloat) and a semantic
// version (blang/semver, which the API server's semver library parses
// with too); a number key is a float; anything else compares false.

// numericOnAnyKey compiles NumericOperatorHandler.Evaluate of the key k
// (a bound CEL variable, never failing) and the literal v.
func numericOnAnyKey(fresh func() string, op, k string, v any, at string) (string, *model.Refusal) {
	f, s := fresh(), fresh()
	number := "[double(" + k + ")].all(" + f + ", " + numericOnFloat(fresh, op, f, v) + ")"
	onString, fl := numericOnString(fresh, op, s, v, at)
	if fl != nil {
		return "", fl
	}
	return "(type(" + k + ") == string ? [string(" + k + ")].all(" + s + ", " + onString + ") : " + isNumber(k) + " ? " + number + " : false)", nil
}

// numericOnString is validateValueWithStringPattern of the CEL string s
// (a variable) and the literal v.
func numericOnString(fresh func() string, op, s string, v any, at string) (string, *model.Refusal) {
	cmp := numericCELOperator[op]
	// The last reading: a semantic version, against a value that is one.
	version := "false"
	if text, ok := v.(string); ok {
		if _, err := semver.Parse(text); err == nil {
			version = "(isSemver(" + s + ") && semver(" + s + ").compareTo(semver(" + kyverno.CELString(text) + ")) " + cmp + " 0)"
		}
	}
	// The float reading, whose syntax no version has; a float too large
	// for goParseFloat to tell from an overflow is left undecided.
	float := version
	if numericOnFloat(fresh, op, "0.0", v) != "false" {
		f := fresh()
		// A hexadecimal float string past 2^1000 may be finite (and
		// compare) or overflow (a parse error: false); where the two
		// differ, Kyverno's verdict is left undecided.
		large := func(negative bool) string {
			if numericOnLargeFloat(op, v, negative) {
				return "false"
			}
			return failure("a hexadecimal number string too large to compare exactly, as Kyverno's " + op)
		}
		float = goParseFloat(fresh, s, func(value string) string {
			return "[" + value + "].all(" + f + ", " + numericOnFloat(fresh, op, f, v) + ")"
		}, version, "("+s+".startsWith('-') ? "+large(true)+" : "+large(false)+")")
	}
	// The quantity reading: both a quantity.
	rest := float
	if text, ok := v.(string); ok {
		if _, err := resource.ParseQuantity(text); err == nil {
			rest = "(isQuantity(" + s + ") ? quantity(" + s + ").compareTo(quantity(" + kyverno.CELString(text) + ")) " + cmp + " 0 : " + float + ")"
		}
	}
	// The duration reading (parseDuration): the key a duration (but "0"),
	// the value a duration string or a number of seconds.
	seconds, ok, fl := literalDurationSeconds(v, at)
	if fl != nil {
		return "", fl
	}
	if !ok {
		return rest, nil
	}
	return kyvernoDuration(fresh, s, func(ns string) string {
		return celSeconds(ns) + " " + cmp + " " + celDouble(seconds)
	}, rest), nil
}

// numericOnFloat is validateValueWithFloatPattern of the CEL double f
// (an expression that never fails) and the literal v: a number compared
// as it is; a duration string against time.Duration(f)*time.Second; a
// string strconv.ParseFloat reads, as that float.
func numericOnFloat(fresh func() string, op, f string, v any) string {
	cmp := numericCELOperator[op]
	switch typed := v.(type) {
	case float64:
		// CEL refuses to order NaN; Go's comparison is false.
		return "(" + f + " == " + f + " && " + f + " " + cmp + " " + celDouble(typed) + ")"
	case string:
		if isDuration(typed) {
			d, _ := time.ParseDuration(typed)
			return durationOfFloatCompare(fresh, op, f, d.Seconds())
		}
		if parsed, err := strconv.ParseFloat(typed, 64); err == nil {
			if math.IsNaN(parsed) {
				return "false" // no float compares with NaN
			}
			return "(" + f + " == " + f + " && " + f + " " + cmp + " " + celDouble(parsed) + ")"
		}
	}
	return "false"
}

// numericOnLargeFloat says whether validateValueWithFloatPattern of
// every float of at least maxFloatOperand in magnitude (of the sign
// given) and the literal v is false, as an overflowing string is.
func numericOnLargeFloat(op string, v any, negative bool) bool {
	holds := func(a, b float64) bool { return compareFloats(op, a, b) }
	huge := math.Inf(1)
	if negative {
		huge = math.Inf(-1)
	}
	switch typed := v.(type) {
	case float64:
		return math.Abs(typed) < maxFloatOperand && !holds(huge, typed)
	case string:
		if isDuration(typed) {
			d, _ := time.ParseDuration(typed)
			// Past 2^63 a float is 0s or -1s; below -2^63, 0s.
			return !holds(0, d.Seconds()) && (negative || !holds(-1, d.Seconds()))
		}
		if parsed, err := strconv.ParseFloat(typed, 64); err == nil {
			return math.IsNaN(parsed) || math.Abs(parsed) < maxFloatOperand && !holds(huge, parsed)
		}
	}
	return true
}

// CPUDependent is the failure of a compiled condition where Kyverno's
// verdict depends on the CPU it runs on: Go leaves the conversion of a
// float at or past 2^63 to a time.Duration to the CPU.
var CPUDependent = failure("a float past 2^63 read as a duration, which Kyverno converts as its CPU does")

// compareFloats is Kyverno's compareByCondition of two floats.
func compareFloats(op string, a, b float64) bool {
	switch op {
	case "greaterthan":
		return a > b
	case "greaterthanorequals":
		return a >= b
	case "lessthan":
		return a < b
	}
	return a <= b
}

// numericCELOperator is CEL's operator of each ordering operator.
var numericCELOperator = map[string]string{"greaterthan": ">", "greaterthanorequals": ">=", "lessthan": "<", "lessthanorequals": "<="}

// literalDurationSeconds is parseDuration's reading of the literal value
// against a key that is a duration: a duration string (but "0"), or a
// number of seconds (time.Duration(v)*time.Second, whose conversion of a
// float past 2^63 differs between CPUs: refused).
func literalDurationSeconds(v any, at string) (float64, bool, *model.Refusal) {
	switch typed := v.(type) {
	case string:
		if isDuration(typed) {
			d, _ := time.ParseDuration(typed)
			return d.Seconds(), true, nil
		}
	case float64:
		if math.Abs(typed) >= 1<<63 {
			return 0, false, model.Refuse(model.ReasonJMESPathNotExpressible, "the number %v compared with a duration at %s (Kyverno's conversion of it depends on the CPU)", typed, at)
		}
		d := time.Duration(typed) * time.Second
		return d.Seconds(), true, nil
	}
	return 0, false, nil
}

// celSeconds is time.Duration.Seconds of the CEL int ns: whole seconds
// plus the nanoseconds left, as Go adds them.
func celSeconds(ns string) string {
	return "(double(" + ns + " / 1000000000) + double(" + ns + " % 1000000000) / 1e9)"
}

// durationOfFloatCompare compares time.Duration(f)*time.Second in
// seconds with the constant against (durationOfFloat); where the two
// CPUs' verdicts differ, Kyverno has none, and the expression fails to
// evaluate.
func durationOfFloatCompare(fresh func() string, op, f string, against float64) string {
	cmp := numericCELOperator[op]
	holds := func(seconds float64) bool { return compareFloats(op, seconds, against) }
	onCPU := CPUDependent
	if holds(0) == holds(-1) {
		onCPU = strconv.FormatBool(holds(0))
	}
	return durationOfFloat(fresh, f, func(seconds string) string {
		return seconds + " " + cmp + " " + celDouble(against)
	}, onCPU)
}

// durationOfFloat is onSeconds of time.Duration(f)*time.Second in
// seconds (a CEL double), f a CEL double that never fails: the float
// truncated to an int64, times 10^9 with two's complement wrapping. Go
// leaves the conversion of a float at or past 2^63 to the CPU (0s on
// amd64, -1s on arm64, which saturates): onCPU there. NaN and floats at
// or below -2^63 are 0s on both.
func durationOfFloat(fresh func() string, f string, onSeconds func(seconds string) string, onCPU string) string {
	t, u, d := fresh(), fresh(), fresh()
	bind := func(value, name, body string) string { return "[" + value + "].map(" + name + ", " + body + ")[0]" }
	const m = "18446744073709551615u"
	// u: t as two's complement; the product times 10^9 modulo 2^64 from
	// its two 32-bit halves; back to a signed int.
	twos := "(" + t + " >= 0 ? uint(" + t + ") : uint(" + t + " + 9223372036854775807 + 1) + 9223372036854775808u)"
	hi := "((" + u + " / 4294967296u * 1000000000u) % 4294967296u * 4294967296u)"
	lo := "(" + u + " % 4294967296u * 1000000000u)"
	sum := "(" + hi + " > " + m + " - " + lo + " ? " + hi + " - (" + m + " - " + lo + ") - 1u : " + hi + " + " + lo + ")"
	signed := bind(sum, u, "("+u+" < 9223372036854775808u ? int("+u+") : "+u+" == 9223372036854775808u ? -9223372036854775807 - 1 : -int("+m+" - "+u+") - 1)")
	wrapped := bind(twos, u, signed)
	product := "(" + t + " >= -9223372036 && " + t + " <= 9223372036 ? " + t + " * 1000000000 : " + wrapped + ")"
	inRange := bind("int("+f+")", t, bind(product, d, onSeconds(celSeconds(d))))
	return "(" + f + " != " + f + " || " + f + " <= -9223372036854775808.0 ? " + onSeconds("0.0") +
		" : " + f + " >= 9223372036854775808.0 ? " + onCPU + " : " + inRange + ")"
}
