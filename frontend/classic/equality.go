// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package classic

// equalsAny compiles Kyverno's EqualHandler.Evaluate (pkg/engine/
// variables/operator/equal.go) of the key k and the value v, both known
// at run time (bound CEL variables, never failing; k not null, which
// both Equals and NotEquals judge false). NotEqualHandler is its
// negation for every such key.
//
// A bool, map or list key equals a value of its type that is equal; a
// number key, a number or a string strconv.ParseFloat reads as it; a
// string key is read in Kyverno's order: a duration (but "0") against a
// duration string or a number of seconds, then a quantity against a
// quantity string, then a wildcard match of the value as the pattern.
func equalsAny(fresh func() string, k, v string) string {
	ks, vs, ns, f := fresh(), fresh(), fresh(), fresh()
	wildcard := "(type(" + v + ") == string && " + ks + ".matches(" + runtimeWildcardRegex("string("+v+")") + "))"
	quantity := "(isQuantity(" + ks + ") ? (type(" + v + ") == string && [string(" + v + ")].all(" + vs + ", isQuantity(" + vs + ") && quantity(" + ks + ").compareTo(quantity(" + vs + ")) == 0)) : " + wildcard + ")"
	// parseDuration: the key a duration; the value a duration string or a
	// number of seconds, else on to the quantity.
	keySeconds := celSeconds(ns)
	valueString := "[string(" + v + ")].all(" + vs + ", " + kyvernoDuration(fresh, vs, func(valueNs string) string {
		return keySeconds + " == " + celSeconds(valueNs)
	}, quantity) + ")"
	onCPU := "(" + keySeconds + " == 0.0 || " + keySeconds + " == -1.0 ? " + CPUDependent + " : false)"
	valueNumber := durationOfFloat(fresh, "double("+v+")", func(seconds string) string {
		return keySeconds + " == " + seconds
	}, onCPU)
	keyDuration := func(keyNs string) string {
		return "[" + keyNs + "].all(" + ns + ", type(" + v + ") == string ? " + valueString + " : " + isNumber(v) + " ? " + valueNumber + " : " + quantity + ")"
	}
	onString := "[string(" + k + ")].all(" + ks + ", " + kyvernoDuration(fresh, ks, keyDuration, quantity) + ")"
	// A number key: a string value read by ParseFloat (a hexadecimal
	// string past 2^1000, undecided, equals no number below 1e299).
	undecided := "(double(" + k + ") < 1e299 && double(" + k + ") > -1e299 ? false : " + failure("a hexadecimal number string too large to compare exactly") + ")"
	onNumber := "(" + isNumber(v) + " ? double(" + k + ") == double(" + v + ") : type(" + v + ") == string && [string(" + v + ")].all(" + vs + ", " +
		goParseFloat(fresh, vs, func(value string) string { return "[" + value + "].all(" + f + ", " + f + " == double(" + k + "))" }, "false", undecided) + "))"
	return "(type(" + k + ") == string ? " + onString + " : " + isNumber(k) + " ? " + onNumber +
		" : type(" + k + ") == bool || type(" + k + ") == map || type(" + k + ") == list ? (type(" + v + ") == type(" + k + ") && " + k + " == " + v + ") : false)"
}
