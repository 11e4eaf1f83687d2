// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"testing"
	"time"
)

func TestTime(t *testing.T) {
	obj := map[string]any{"ts": "2024-03-05T10:20:33Z"}
	runCases(t, newEnv(t, "time"), []evalCase{
		{name: "toCron", expr: "time.toCron(timestamp('2024-03-05T10:20:00Z'))", want: "20 10 5 3 2"},
		// In the timestamp's own offset, not UTC.
		{name: "toCron offset", expr: "time.toCron(timestamp('2024-03-05T10:20:00+02:00'))", want: "20 10 5 3 2"},
		{name: "toCron negative offset", expr: "time.toCron(timestamp('2024-12-29T23:59:59-08:00'))", want: "59 23 29 12 0"},
		{name: "toCron Sunday midnight", expr: "time.toCron(timestamp('2024-03-03T00:00:00Z'))", want: "0 0 3 3 0"},
		{name: "toCron from the object", expr: "time.toCron(timestamp(object.ts))", object: obj, want: "20 10 5 3 2"},
		{name: "truncate hour", expr: "string(time.truncate(timestamp('2024-03-05T10:20:33Z'), duration('1h')))", want: "2024-03-05T10:00:00Z"},
		{name: "truncate day", expr: "string(time.truncate(timestamp('2024-03-05T10:20:33Z'), duration('24h')))", want: "2024-03-05T00:00:00Z"},
		// Multiples since the zero time, whatever the offset (which stays).
		{name: "truncate offset", expr: "string(time.truncate(timestamp('2024-03-05T10:20:33+05:30'), duration('1h')))", want: "2024-03-05T09:30:00+05:30"},
		{name: "truncate millisecond", expr: "string(time.truncate(timestamp('2024-03-05T10:20:33.123456Z'), duration('1ms')))", want: "2024-03-05T10:20:33.123Z"},
		{name: "truncate zero", expr: "string(time.truncate(timestamp('2024-03-05T10:20:33Z'), duration('0s')))", want: "2024-03-05T10:20:33Z"},
		{name: "truncate negative", expr: "string(time.truncate(timestamp('2024-03-05T10:20:33Z'), duration('-1h')))", want: "2024-03-05T10:20:33Z"},
		{name: "truncate 7 minutes", expr: "string(time.truncate(timestamp('2024-03-05T10:20:33Z'), duration('7m')))", want: "2024-03-05T10:18:00Z"},
		{name: "now is recent", expr: "time.now() > timestamp('2024-01-01T00:00:00Z') && time.now() - time.now() <= duration('1s')", want: true},
		{name: "toCron dyn string", expr: "time.toCron(dyn('x'))", wantErr: "no such overload: time.toCron(string)"},
		{name: "truncate dyn int", expr: "time.truncate(time.now(), dyn(1))", wantErr: "no such overload: time.truncate(google.protobuf.Timestamp, int)"},
		{name: "toCron string", expr: "time.toCron('x')", wantNoComp: "found no matching overload for 'time.toCron' applied to '(string)'"},
		{name: "truncate int", expr: "time.truncate(time.now(), 1)", wantNoComp: "found no matching overload for 'time.truncate' applied to '(timestamp, int)'"},
		{name: "now with an argument", expr: "time.now(1)", wantNoComp: "found no matching overload for 'time.now'"},
	})
}

func TestTimeNow(t *testing.T) {
	env := newEnv(t, "time")
	before := time.Now()
	got, compileErr, err := evaluate(t, env, "time.now()", nil)
	after := time.Now()
	if compileErr != nil || err != nil {
		t.Fatal(compileErr, err)
	}
	now, ok := got.(time.Time)
	if !ok {
		t.Fatalf("time.now() = %T, want a timestamp", got)
	}
	if now.Before(before) || now.After(after) {
		t.Errorf("time.now() = %v, not between %v and %v", now, before, after)
	}
	// The process's zone, as in Kyverno: toCron(now) is in local time.
	if now.Location() != time.Local {
		t.Errorf("time.now() in %v, want the local zone", now.Location())
	}
}
