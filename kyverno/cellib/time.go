// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"strconv"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// timeLib is Kyverno's kyverno.time: time.now(), time.toCron(timestamp)
// (the cron schedule "minute hour day month weekday" of that instant, in the
// timestamp's own offset) and time.truncate(timestamp, duration) (rounded
// down to a multiple of the duration since the zero time, as Go's
// time.Time.Truncate).
type timeLib struct{}

func (*timeLib) LibraryName() string { return "kyverno.time" }

func (*timeLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("time.now",
			cel.Overload("time_now", []*cel.Type{}, cel.TimestampType,
				cel.FunctionBinding(func(...ref.Val) ref.Val {
					// The process's local time, not UTC: Kyverno's choice
					// (the zone shows in time.toCron(time.now())).
					return types.Timestamp{Time: time.Now()}
				}))),
		cel.Function("time.truncate",
			cel.Overload("time_truncate", []*cel.Type{cel.TimestampType, cel.DurationType}, cel.TimestampType,
				cel.BinaryBinding(func(arg1, arg2 ref.Val) ref.Val {
					ts, err := convertToNative[time.Time](arg1)
					if err != nil {
						return types.WrapErr(err)
					}
					d, err := convertToNative[time.Duration](arg2)
					if err != nil {
						return types.WrapErr(err)
					}
					return types.Timestamp{Time: ts.Truncate(d)}
				}))),
		cel.Function("time.toCron",
			cel.Overload("time_to_cron", []*cel.Type{cel.TimestampType}, cel.StringType,
				cel.UnaryBinding(func(arg ref.Val) ref.Val {
					ts, err := convertToNative[time.Time](arg)
					if err != nil {
						return types.WrapErr(err)
					}
					return types.String(strconv.Itoa(ts.Minute()) + " " +
						strconv.Itoa(ts.Hour()) + " " +
						strconv.Itoa(ts.Day()) + " " +
						strconv.Itoa(int(ts.Month())) + " " +
						strconv.Itoa(int(ts.Weekday())))
				}))),
	}
}

func (*timeLib) ProgramOptions() []cel.ProgramOption { return nil }
