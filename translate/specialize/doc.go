// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package specialize is a back-end pass of translate: it rewrites the CEL
// of a ValidatingAdmissionPolicy for the objects the API server hands it.
//
// A rule compiled from Kyverno's classic language reads JSON whose types
// it cannot know (Kyverno matches patterns against any document), so its
// general form tests every value's type before reading it. The API server
// decodes a built-in resource into its Go type before admission and hands
// a VAP that type converted to unstructured (k8s.io/apiserver's
// SchemalessTypedToVal, equivalent to runtime.DefaultUnstructuredConverter):
// there, most of those tests are decided. This package derives each
// built-in type's shape from its Go type by the converter's own rules
// (shape.go), adds what the API server's validation requires of a pod
// spec (admitted.go), folds the type, presence and null tests the shape
// decides where their operand is known to evaluate (specialize.go),
// evaluates the one-element bindings the compiler uses (inline.go), and
// prunes the branches all that decided (prune.go).
//
// The result is exact on every object the API server admits for those
// resources, not on arbitrary JSON: `kyvap test`, whose resources are
// files, evaluates the general form. TestShapesHoldForConvertedObjects
// checks the shapes on random objects of every type; test/classic's
// TestTypedFormsAgreeWithGeneralForms compares both forms on the corpus.
// It is pure: no client, no network.
package specialize
