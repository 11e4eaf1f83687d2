// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/parser"
)

// kyvernoVariables are the variables Kyverno's ValidatingPolicy environment
// declares beyond the API server's (libraries in github.com/kyverno/sdk
// extensions/cel/libs, and the exceptions of partial PolicyExceptions),
// each named by the library that declares it.
var kyvernoVariables = map[string]string{
	"resource":      "resource",
	"http":          "http",
	"globalContext": "globalContext",
	"image":         "imagedata",
	"json":          "json",
	"yaml":          "yaml",
	"generator":     "generator",
	"exceptions":    "exceptions",
}

// kyvernoFunctions are the global and namespaced functions of Kyverno's
// libraries, by library.
var kyvernoFunctions = map[string]string{
	"gzip.compress": "gzip", "gzip.decompress": "gzip",
	"hash.md5": "hash", "hash.sha1": "hash", "hash.sha256": "hash", "md5": "hash", "sha1": "hash", "sha256": "hash",
	"random": "random", "random.random": "random",
	"time.now": "time", "time.toCron": "time", "time.truncate": "time",
	"listObjToMap": "transform", "transform.listObjToMap": "transform",
	"parseServiceAccount": "user", "user.parseServiceAccount": "user",
	"math.round":  "math",
	"x509.decode": "x509",
	"image":       "image", "parseImageReference": "image", "isImage": "image",
	// kyvap's own: Kyverno's JMESPath functions (jmespathLib).
	"jmespath.regex_match": "jmespath", "jmespath.pattern_match": "jmespath",
	"jmespath.parse_json": "jmespath", "jmespath.parse_json_valid": "jmespath",
	"jmespath.parse_yaml": "jmespath", "jmespath.parse_yaml_valid": "jmespath",
	"jmespath.base64_decode": "jmespath", "jmespath.base64_valid": "jmespath",
	"jmespath.path_canonicalize": "jmespath", "jmespath.regex_replace_all": "jmespath",
	"jmespath.to_string": "jmespath", "jmespath.to_string_valid": "jmespath", "jmespath.to_number": "jmespath",
	"jmespath.max": "jmespath", "jmespath.max_valid": "jmespath",
}

// Used returns the Kyverno CEL libraries the expressions use,
// sorted, by parsing them (an expression that does not parse uses none:
// the compiler reports it). A variable shadowed by a comprehension's own
// variable of the same name is still counted: better a rule sent to
// Kyverno's engine than a VAP the API server refuses.
func Used(expressions ...string) []string {
	p, err := parser.NewParser(parser.Macros(parser.AllMacros...), parser.EnableOptionalSyntax(true))
	if err != nil {
		return nil
	}
	found := map[string]bool{}
	for _, e := range expressions {
		if e == "" {
			continue
		}
		tree, errs := p.Parse(common.NewTextSource(e))
		if errs != nil && len(errs.GetErrors()) > 0 {
			continue
		}
		ast.PostOrderVisit(tree.Expr(), ast.NewExprVisitor(func(x ast.Expr) {
			switch x.Kind() {
			case ast.IdentKind:
				if lib, ok := kyvernoVariables[x.AsIdent()]; ok {
					found[lib] = true
				}
			case ast.CallKind:
				call := x.AsCall()
				name := call.FunctionName()
				if call.IsMemberFunction() && call.Target().Kind() == ast.IdentKind {
					if lib, ok := kyvernoFunctions[call.Target().AsIdent()+"."+name]; ok {
						found[lib] = true
						return
					}
				}
				if !call.IsMemberFunction() {
					if lib, ok := kyvernoFunctions[name]; ok {
						found[lib] = true
					}
				}
			}
		}))
	}
	out := make([]string, 0, len(found))
	for lib := range found {
		out = append(out, lib)
	}
	sort.Strings(out)
	return out
}

// JMESPathFunctions are the Kyverno JMESPath functions (jmespathLib) the
// expressions call, as "regex_match()", sorted.
func JMESPathFunctions(expressions ...string) []string {
	var out []string
	for _, e := range expressions {
		for name, lib := range kyvernoFunctions {
			if lib == "jmespath" && !strings.HasSuffix(name, "_valid") && strings.Contains(e, name+"(") && !slices.Contains(out, strings.TrimPrefix(name, "jmespath.")+"()") {
				out = append(out, strings.TrimPrefix(name, "jmespath.")+"()")
			}
		}
	}
	sort.Strings(out)
	return out
}
