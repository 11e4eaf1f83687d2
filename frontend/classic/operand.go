// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyvap/kyvap/kyverno"
	"github.com/kyvap/kyvap/model"
)

// Kyverno compares a value with a value string's operand
// (pkg/engine/pattern validateString) as a Go duration when both parse as
// one, else as a resource.Quantity when both parse as one, else as a
// string (equality and inequality only: the ordering operators are false
// on strings). The value is read as a string for the first two: null as
// "0", a string as it is, an int in decimal, a double as "%f"; a bool, a
// map or a list is neither.

// goDurationUnits are time.ParseDuration's units, in nanoseconds.
var goDurationUnits = map[string]uint64{
	"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 6e10, "h": 36e11,
}

// goDurationSyntax is ParseDuration's grammar: a sign, then "0" or
// components of digits (with a fraction) and a unit, a unit being the
// longest run of characters that are neither digits nor '.'.
const (
	goDurationUnit      = `(ns|us|µs|μs|ms|s|m|h)`
	goDurationComponent = `([0-9]+[.]?[0-9]*|[.][0-9]+)` + goDurationUnit
	goDurationSyntax    = `^[-+]?(0|(` + goDurationComponent + `)+)$`
)

// goDurationScales are the successive values of ParseDuration's fraction
// scale (leadingFraction multiplies a float64 by 10 per digit it keeps),
// rounded as Go rounds them.
var goDurationScales = func() []string {
	var out []string
	scale := 1.0
	for range 41 {
		out = append(out, celDouble(scale))
		scale *= 10
	}
	return out
}()

// goDuration compiles time.ParseDuration of the CEL string s (a
// variable): where it parses, onValue of its value in nanoseconds (a CEL
// int); elsewhere onInvalid. It never fails to evaluate where they do not.
func (c *compiler) goDuration(s string, onValue func(value string) string, onInvalid string) string {
	return goDuration(c.variable, s, onValue, onInvalid)
}

// kyvernoDuration is goDuration of the CEL string s (a variable) as
// Kyverno's parseDuration reads an operand: "0" is no duration there.
// onInvalid is written once.
func kyvernoDuration(fresh func() string, s string, onValue func(value string) string, onInvalid string) string {
	t := fresh()
	// The empty string is no duration either.
	return "[" + s + " == '0' ? '' : " + s + "].all(" + t + ", " + goDuration(fresh, t, onValue, onInvalid) + ")"
}

// goDuration is (*compiler).goDuration with the comprehension variables
// named by fresh.
func goDuration(fresh func() string, s string, onValue func(value string) string, onInvalid string) string {
	units := make([]string, 0, len(goDurationUnits))
	for _, u := range []string{"ns", "us", "µs", "μs", "ms", "s", "m", "h"} {
		units = append(units, kyverno.CELString(u)+": "+strconv.FormatUint(goDurationUnits[u], 10)+"u")
	}
	const twoTo63 = "9223372036854775808u"
	const overflowed = "18446744073709551615u"
	comp, parts, z, g, k, f, t, ns, sum := fresh(), fresh(), fresh(), fresh(), fresh(), fresh(), fresh(), fresh(), fresh()
	bind := func(value, name, body string) string { return "[" + value + "].map(" + name + ", " + body + ")[0]" }
	// parts: the integer digits without leading zeros, the fraction's
	// digits, the unit in nanoseconds.
	integer, fraction, unit := parts+"[0]", parts+"[1]", parts+"[2]"
	partsOf := "[dyn(" + comp + ".find('^[0-9]*').find('[1-9][0-9]*')), dyn(" + comp + ".find('[.][0-9]*') == '' ? '' : " + comp + ".find('[.][0-9]*').substring(1)), dyn({" + strings.Join(units, ", ") + "}[" + comp + ".find('[^0-9.]+')])]"
	// leadingInt overflows past 2^63.
	intOverflow := "(size(" + integer + ") > 19 || (size(" + integer + ") == 19 && " + integer + " > '9223372036854775808'))"
	v := "(" + integer + " == '' ? 0u : uint(" + integer + "))"
	// leadingFraction keeps the leading zeros (z) and up to 18
	// significant digits (g), or 19 while the value stays at most 2^63:
	// k digits kept, f their value, the scale 10 per digit kept.
	kept := "(size(" + g + ") <= 18 ? size(" + g + ") : (uint(" + g + ".substring(0, 18)) < 922337203685477580u || (uint(" + g + ".substring(0, 18)) == 922337203685477580u && " + g + ".substring(18, 19) <= '8')) ? 19 : 18)"
	value := "(" + k + " == 0 ? 0u : uint(" + g + ".substring(0, " + k + ")))"
	scales := "[" + strings.Join(goDurationScales, ", ") + "]"
	// Past the table the fraction adds nothing: it has 21 leading zeros
	// or more, so its value times the unit is below 1.
	fracNs := "(" + f + " == 0u || " + z + " + " + k + " >= " + strconv.Itoa(len(goDurationScales)) + " ? 0u : uint(double(" + f + ") * (double(" + unit + ") / " + scales + "[" + z + " + " + k + "])))"
	total := bind(v+" * "+unit+" + "+fracNs, t, t+" > "+twoTo63+" ? "+overflowed+" : "+t)
	component := bind(partsOf, parts,
		"("+intOverflow+" ? "+overflowed+" : "+v+" > "+twoTo63+" / "+unit+" ? "+overflowed+" : "+
			bind("size("+fraction+".find('^0*'))", z, bind(fraction+".substring("+z+")", g, bind(kept, k, bind(value, f, total))))+")")
	neg := s + ".startsWith('-')"
	signed := neg + " ? (" + sum + " == " + twoTo63 + " ? -9223372036854775807 - 1 : -int(" + sum + ")) : int(" + sum + ")"
	// The sum overflows past 2^63 (ParseDuration checks each partial sum;
	// the components are not negative); a double sum tells first whether
	// the exact one fits in a uint.
	components := s + ".findAll('" + goDurationComponent + "').map(" + comp + ", " + component + ")"
	// The parse as a list: [] where it fails, [nanoseconds] where it
	// does; onValue and onInvalid are written once.
	summed := bind(components, ns, ns+".map(x, double(x)).sum() < 1.8e19 ? "+
		bind(ns+".sum()", sum, "("+sum+" < "+twoTo63+" || ("+sum+" == "+twoTo63+" && "+neg+")) ? ["+signed+"] : []")+" : []")
	parsed := "(" + s + ".matches('" + goDurationSyntax + "') ? (" + s + ".matches('^[-+]?0$') ? [0] : " + summed + ") : [])"
	p, d := fresh(), fresh()
	return bind(parsed, p, "size("+p+") == 0 ? "+onInvalid+" : "+bind(p+"[0]", d, onValue(d)))
}

// operandCompare is Kyverno's validateString of the value x (a CEL
// expression that never fails to evaluate) against one operand with the
// operator op, for the ordering operators and for equality with an
// operand that is a duration or a quantity.
func (c *compiler) operandCompare(x, op, operand, path string) (string, *model.Refusal) {
	d, durationErr := time.ParseDuration(operand)
	q, quantityErr := resource.ParseQuantity(operand)
	isDuration, isQuantity := durationErr == nil, quantityErr == nil
	ordering := op != opEqual && op != opNotEqual
	if !isDuration && !isQuantity && !ordering {
		return "", nil // compareString: the caller compiles it
	}
	compareInt := func(v string, against int64) string {
		return v + " " + celOperator(op) + " " + strconv.FormatInt(against, 10)
	}
	// As compareString reads a value: false for every ordering operator.
	onString := func(v string) (string, *model.Refusal) {
		if ordering {
			return "false", nil
		}
		return compareString(v, op, operand, path)
	}
	// Static verdicts on a value string known when compiling.
	static := func(value string) string {
		if isDuration {
			if vd, err := time.ParseDuration(value); err == nil {
				return strconv.FormatBool(compareOrdered(op, int64(vd), int64(d)))
			}
		}
		if isQuantity {
			if vq, err := resource.ParseQuantity(value); err == nil {
				return strconv.FormatBool(compareOrdered(op, int64(vq.Cmp(q)), 0))
			}
		}
		return ""
	}
	var terms []string
	// A string.
	s := c.variable()
	stringCase, fl := onString(s)
	if fl != nil {
		return "", fl
	}
	if isQuantity {
		stringCase = "(isQuantity(" + s + ") ? " + compareQuantity(op, "quantity("+s+")", operand) + " : " + stringCase + ")"
	}
	if isDuration {
		stringCase = c.goDuration(s, func(value string) string { return compareInt(value, int64(d)) }, stringCase)
	}
	terms = append(terms, "(type("+x+") == string && ["+x+"].all("+s+", "+stringCase+"))")
	// null: "0" for the first two, and compareString's false.
	if verdict := static("0"); verdict == "true" {
		terms = append(terms, x+" == null")
	}
	// An int: "0" parses as a duration; any int as a quantity.
	intCase, fl := onString("string(" + x + ")")
	if fl != nil {
		return "", fl
	}
	if isQuantity {
		intCase = compareQuantity(op, "quantity(string("+x+"))", operand)
	}
	if isDuration {
		intCase = "(" + x + " == 0 ? " + static("0") + " : " + intCase + ")"
	}
	terms = append(terms, "(type("+x+") == int && "+intCase+")")
	// A double: "%f" is never a duration; it is a quantity, whose order
	// is that of the double around a threshold found when compiling.
	if isQuantity {
		threshold, fl := doubleThreshold(op, q, path)
		if fl != nil {
			return "", fl
		}
		if threshold != "false" {
			terms = append(terms, "(type("+x+") == double && "+strings.ReplaceAll(threshold, "$", "double("+x+")")+")")
		}
	} else if !ordering {
		doubleCase, fl := compareString("dyn("+x+")", op, operand, path)
		if fl != nil {
			return "", fl
		}
		terms = append(terms, "(type("+x+") == double && "+doubleCase+")")
	}
	// A bool is no number: compareString.
	if !ordering {
		boolCase, fl := compareString("dyn("+x+")", op, operand, path)
		if fl != nil {
			return "", fl
		}
		terms = append(terms, "(type("+x+") == bool && "+boolCase+")")
	}
	return "(" + strings.Join(terms, " || ") + ")", nil
}

// compareOrdered applies op to a and b.
func compareOrdered(op string, a, b int64) bool {
	switch op {
	case opEqual:
		return a == b
	case opNotEqual:
		return a != b
	case opMore:
		return a > b
	case opLess:
		return a < b
	case opMoreEqual:
		return a >= b
	case opLessEqual:
		return a <= b
	}
	return false
}

// celOperator is op as a CEL comparison.
func celOperator(op string) string {
	switch op {
	case opEqual:
		return "=="
	case opNotEqual:
		return "!="
	}
	return op
}

// compareQuantity compares the CEL quantity v with the operand.
func compareQuantity(op, v, operand string) string {
	return v + ".compareTo(quantity(" + kyverno.CELString(operand) + ")) " + celOperator(op) + " 0"
}

// doubleThreshold is the comparison, as CEL over "$" (a double), that
// holds exactly where Kyverno's compareQuantity holds for a double value
// (read as strconv's "%f", rounded to 6 decimals), or "false": Kyverno's
// verdict is monotonic in the value, so the doubles where it holds are
// those past one threshold, which a binary search over the doubles finds
// with Kyverno's own arithmetic.
func doubleThreshold(op string, q resource.Quantity, path string) (string, *model.Refusal) {
	holds := func(v float64) bool {
		vq, err := resource.ParseQuantity(fmt.Sprintf("%f", v))
		return err == nil && compareOrdered(op, int64(vq.Cmp(q)), 0)
	}
	switch op {
	case opEqual, opNotEqual:
		// The doubles that print as the quantity: an interval.
		low, ok1 := firstDouble(func(v float64) bool { return holdsCmp(v, q) >= 0 })
		high, ok2 := firstDouble(func(v float64) bool { return holdsCmp(v, q) > 0 })
		var inside string
		switch {
		case !ok1:
			inside = "false"
		case !ok2:
			inside = "$ >= " + celDouble(low)
		default:
			inside = "($ >= " + celDouble(low) + " && $ < " + celDouble(high) + ")"
		}
		if op == opEqual {
			return inside, nil
		}
		if inside == "false" {
			return "true", nil
		}
		return "!" + inside, nil
	case opMore, opMoreEqual:
		first, ok := firstDouble(holds)
		if !ok {
			return "false", nil
		}
		if !holds(math.MaxFloat64) {
			return "", model.Refuse(model.ReasonPatternNotExpressible, "the operand of %q at %s against a double (Kyverno's verdict is not monotonic there)", op, path)
		}
		return "$ >= " + celDouble(first), nil
	case opLess, opLessEqual:
		first, ok := firstDouble(func(v float64) bool { return !holds(v) })
		if !ok {
			return "true", nil
		}
		if holds(math.MaxFloat64) {
			return "", model.Refuse(model.ReasonPatternNotExpressible, "the operand of %q at %s against a double (Kyverno's verdict is not monotonic there)", op, path)
		}
		return "$ < " + celDouble(first), nil
	}
	return "false", nil
}

// holdsCmp is the comparison of a double's "%f" quantity with q (-2 when
// it is no quantity).
func holdsCmp(v float64, q resource.Quantity) int {
	vq, err := resource.ParseQuantity(fmt.Sprintf("%f", v))
	if err != nil {
		return -2
	}
	return vq.Cmp(q)
}

// firstDouble is the least finite double where the monotonic predicate
// holds, if any.
func firstDouble(holds func(float64) bool) (float64, bool) {
	// Doubles in order as integers: the sign bit flipped for positive
	// ones, all bits for negative ones.
	key := func(v float64) uint64 {
		b := math.Float64bits(v)
		if b>>63 == 1 {
			return ^b
		}
		return b | 1<<63
	}
	value := func(k uint64) float64 {
		if k>>63 == 1 {
			return math.Float64frombits(k &^ (1 << 63))
		}
		return math.Float64frombits(^k)
	}
	lo, hi := key(-math.MaxFloat64), key(math.MaxFloat64)
	if !holds(value(hi)) {
		return 0, false
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if holds(value(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return value(lo), true
}

// nilMatches is Kyverno's validateStringPatterns of nil against the value
// string s: nil is "0" to a duration or a quantity operand, and matches
// no string.
func nilMatches(s string) bool {
	for _, alternative := range strings.Split(s, "|") {
		all := true
		for _, condition := range strings.Split(strings.Trim(alternative, " "), "&") {
			all = all && nilMatchesCondition(strings.Trim(condition, " "))
		}
		if all {
			return true
		}
	}
	return false
}

func nilMatchesCondition(condition string) bool {
	op := operatorOf(condition)
	switch op {
	case opInRange, opNotInRange:
		re, join := inRange, "&"
		if op == opNotInRange {
			re, join = notInRange, "|"
		}
		m := re.FindStringSubmatch(condition)
		if m == nil {
			return false
		}
		if join == "&" {
			return nilMatchesCondition(">= "+m[1]) && nilMatchesCondition("<= "+m[2])
		}
		return nilMatchesCondition("< "+m[1]) || nilMatchesCondition("> "+m[2])
	}
	operand := strings.TrimSpace(condition[len(op):])
	if d, err := time.ParseDuration(operand); err == nil {
		return compareOrdered(op, 0, int64(d))
	}
	if q, err := resource.ParseQuantity(operand); err == nil {
		zero := resource.MustParse("0")
		return compareOrdered(op, int64(zero.Cmp(q)), 0)
	}
	return false
}

// strconv.ParseFloat's grammar (readFloat, underscoreOK, special): a
// decimal or hexadecimal mantissa with underscores between digits (after
// a base prefix too), an exponent (required in hexadecimal), or
// infinities and NaN in any case.
const (
	goFloatDecimal = `[0-9](_?[0-9])*`
	goFloatHex     = `[0-9a-fA-F](_?[0-9a-fA-F])*`
	goFloatSyntax  = `^([+-]?((` + goFloatDecimal + `([.](` + goFloatDecimal + `)?)?|[.]` + goFloatDecimal + `)([eE][+-]?` + goFloatDecimal + `)?` +
		`|0[xX](_?` + goFloatHex + `([.](` + goFloatHex + `)?)?|[.]` + goFloatHex + `)[pP][+-]?` + goFloatDecimal +
		`|[iI][nN][fF]([iI][nN][iI][tT][yY])?)|[nN][aA][nN])$`
)

// maxFloatOperand bounds the numbers compared with ParseFloat's result,
// so that a hexadecimal string past 2^1000 (undecided) equals none.
const maxFloatOperand = 1e299

// goParseFloat compiles strconv.ParseFloat(s, 64) of the CEL string s (a
// variable): where it parses, onValue of it (a CEL double); where it does
// not (a syntax error, an overflow), onInvalid. It never fails to
// evaluate where they do not.
func (c *compiler) goParseFloat(s string, onValue func(value string) string, onInvalid string) string {
	return goParseFloat(c.variable, s, onValue, onInvalid, onInvalid)
}

// goParseFloat is (*compiler).goParseFloat with the comprehension
// variables named by fresh, and onUndecided for a hexadecimal number past
// 2^1000, which may or may not overflow (the compiler's callers compare
// with numbers below maxFloatOperand, which none of those equals).
func goParseFloat(fresh func() string, s string, onValue func(value string) string, onInvalid, onUndecided string) string {
	// The order of magnitude, from the text: digits of the integer part
	// (or minus the fraction's leading zeros) plus the exponent, in
	// decimal digits or hexadecimal bits. Past 300 (or 1000 bits) the
	// value is at least 1e299 and may overflow, which CEL's double()
	// reports as an error.
	t, m, e := fresh(), fresh(), fresh()
	bind := func(value, name, body string) string { return "[" + value + "].map(" + name + ", " + body + ")[0]" }
	exponent := func(digits string) string {
		// A signed exponent, its magnitude capped: past 15 digits it is
		// huge either way.
		magnitude := digits + ".find('[0-9]+').find('[1-9][0-9]*')"
		value := "(size(" + magnitude + ") > 15 ? 1000000000000000 : " + magnitude + " == '' ? 0 : int(" + magnitude + "))"
		return "(" + digits + ".find('[-+]?[0-9]+').startsWith('-') ? -" + value + " : " + value + ")"
	}
	order := func(mantissa, exp string, digitsPerDigit string) string {
		integer := mantissa + ".find('^[0-9a-fA-F]*').find('[1-9a-fA-F][0-9a-fA-F]*')"
		zeros := "size(" + mantissa + ".find('[.]0*').substring(" + mantissa + ".find('[.]0*') == '' ? 0 : 1))"
		return "((size(" + integer + ") > 0 ? size(" + integer + ") : -" + zeros + ") * " + digitsPerDigit + " + " + exp + ")"
	}
	// t: the text without its sign and underscores.
	// A mantissa of zeros is zero, whatever the exponent. A decimal
	// number of order 309 is compared, digit by digit, with the least one
	// ParseFloat rounds to infinity (maxDecimalDigits): it overflows from
	// there.
	c := fresh()
	decimal := bind(t+".find('^[0-9.]*')", m, bind("("+t+".find('[eE][-+]?[0-9]+$'))", e,
		"(!"+m+".matches('[1-9]') ? 0 : "+bind(order(m, exponent(e), "1"), c,
			c+" <= 308 ? 0 : "+c+" > 309 ? 1 : "+m+".replace('.', '').find('[1-9]([0-9]*[1-9])?') >= '"+overflowDigits+"' ? 1 : 0")+")"))
	// A hexadecimal number of order past 1000 bits is left undecided.
	hex := bind(t+".substring(2).find('^[0-9a-fA-F.]*')", m, bind(t+".find('[pP][-+]?[0-9]+$')", e,
		"(!"+m+".matches('[1-9a-fA-F]') || "+order(m, exponent(e), "4")+" <= 1000 ? 0 : 2)"))
	class := bind(s+".replace('_', '').find('[^+-].*')", t,
		"("+t+".matches('^[iInN]') ? 0 : "+t+".matches('^0[xX]') ? "+hex+" : "+decimal+")")
	return bind("("+s+".matches('"+goFloatSyntax+"') ? "+class+" : 1)", c, c+" == 0 ? "+onValue("double("+s+")")+" : "+c+" == 1 ? "+onInvalid+" : "+onUndecided)
}

// overflowDigits are the significant digits of 2^1024 - 2^970, the
// least number strconv.ParseFloat rounds to infinity (half way between
// the largest float64 and 2^1024, rounded to even).
var overflowDigits = func() string {
	t := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 1024), new(big.Int).Lsh(big.NewInt(1), 970))
	return strings.TrimRight(t.String(), "0")
}()

// numberPattern is Kyverno's validateFloatPattern of the value x against
// the number p (a pattern's numbers are float64): an int equal to it (p
// integral), a double equal to it, a string ParseFloat reads as it.
func (c *compiler) numberPattern(x string, p float64, path string) (string, *model.Refusal) {
	if math.Abs(p) >= maxFloatOperand || math.Abs(p) >= 1<<63 {
		return "", model.Refuse(model.ReasonPatternNotExpressible, "the number %v at %s (too large to compare exactly)", p, path)
	}
	terms := []string{"(type(" + x + ") == double && " + x + " == " + celDouble(p) + ")"}
	if p == math.Trunc(p) {
		terms = append(terms, "(type("+x+") == int && "+x+" == "+strconv.FormatInt(int64(p), 10)+")")
	}
	s := c.variable()
	terms = append(terms, "(type("+x+") == string && ["+x+"].all("+s+", "+c.goParseFloat(s, func(v string) string { return v + " == " + celDouble(p) }, "false")+"))")
	return "(" + strings.Join(terms, " || ") + ")", nil
}
