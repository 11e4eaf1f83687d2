// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package vap is what a ValidatingAdmissionPolicy is to the API server, the
// target every front-end lowers toward: its CEL environments by
// compatibility version and the compile check of a VAP's expressions
// (cel.go, celsplit.go), the rules of its fields that Kyverno does not
// enforce (fields.go), the defaults the API server applies when it stores
// one (defaults.go), and the guard variable in which kyvap evaluates what a
// match condition cannot see (guard.go).
//
// It sits on the ground floor, beside package kyverno: front-ends check the
// rules they lower with it, back-ends build VAPs with it. It is pure: no
// client, no network, no clock.
package vap
