// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package cellib

import (
	"bytes"
	"compress/gzip"
	"io"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// gzipLib is Kyverno's kyverno.gzip: gzip.compress(string) to bytes and
// gzip.decompress(bytes) to a string.
type gzipLib struct{}

func (*gzipLib) LibraryName() string { return "kyverno.gzip" }

func (*gzipLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("gzip.decompress",
			cel.Overload("decompress_bytes_string", []*cel.Type{cel.BytesType}, cel.StringType,
				cel.UnaryBinding(gzipDecompress))),
		// Declared on dyn, as in Kyverno: anything but a string compiles and
		// fails at run time.
		cel.Function("gzip.compress",
			cel.Overload("compress_any_bytes", []*cel.Type{cel.DynType}, cel.BytesType,
				cel.UnaryBinding(gzipCompress))),
	}
}

func (*gzipLib) ProgramOptions() []cel.ProgramOption { return nil }

func gzipDecompress(arg ref.Val) ref.Val {
	data, err := convertToNative[[]byte](arg)
	if err != nil {
		return types.WrapErr(err)
	}
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return types.WrapErr(err)
	}
	defer r.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		return types.WrapErr(err)
	}
	return types.String(out)
}

func gzipCompress(arg ref.Val) ref.Val {
	text, err := convertToNative[string](arg)
	if err != nil {
		return types.WrapErr(err)
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	// A fixed modification time makes the output, hence any comparison
	// with it, deterministic (Kyverno's choice too).
	w.ModTime = time.Unix(0, 0)
	if _, err := w.Write([]byte(text)); err != nil {
		return types.WrapErr(err)
	}
	if err := w.Close(); err != nil {
		return types.WrapErr(err)
	}
	return types.Bytes(buf.Bytes())
}
