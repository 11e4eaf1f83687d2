// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times: USER_HZ, 100 on
// every Linux architecture the tests run on.
const clockTicks = 100

// ProcessCPU is the CPU time (user + system) the process has used so far,
// read from /proc: the benchmarks charge each process its own share.
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'.
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[end+1:]))
	// utime and stime are fields 14 and 15; fields[0] is field 3.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// ProcessRSS is the process's resident set size in bytes (VmRSS).
func ProcessRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// APIServerPid finds the kube-apiserver process serving this control plane
// (by its --secure-port) among the machine's processes.
func (cp *ControlPlane) APIServerPid() (int, error) {
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		return 0, err
	}
	want := "--secure-port=" + u.Port()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	for _, path := range dirs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(string(data), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range args[1:] {
			if a == want {
				return strconv.Atoi(filepath.Base(filepath.Dir(path)))
			}
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with %s", want)
}

// APIServerHeap is the API server's live Go heap in bytes just after a
// garbage collection (its pprof heap endpoint with gc=1): unlike its RSS,
// it goes down when objects go, so differences measure what a change
// costs the API server.
func (cp *ControlPlane) APIServerHeap(ctx context.Context) (int64, error) {
	data, err := cp.apiServerHeapProfile(ctx, true)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the API server's heap profile")
}

// SaveAPIServerHeapProfile writes the API server's heap profile, after a
// garbage collection, to path (for go tool pprof).
func (cp *ControlPlane) SaveAPIServerHeapProfile(ctx context.Context, path string) error {
	data, err := cp.apiServerHeapProfile(ctx, false)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func (cp *ControlPlane) apiServerHeapProfile(ctx context.Context, text bool) ([]byte, error) {
	clientset, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	req := clientset.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1")
	if text {
		req = req.Param("debug", "1")
	}
	data, err := req.DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the API server's heap profile: %w", err)
	}
	return data, nil
}
