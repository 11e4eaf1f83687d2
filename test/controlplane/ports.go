// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports handed to processes the suites start (a manager's webhook and
// metrics, Kyverno's controllers) are chosen below the kernel's ephemeral
// range. A port found by binding ":0" and closing it comes from that
// range, which every process binding ":0" and every outgoing connection
// draw from too: between the check and the process's own bind, an API
// server, a controller or a client connection could take it, and the
// process died with "bind: address already in use" (make bench-compare
// lost a 20-minute run to it). Below the range only another suite's
// explicit choice can collide, and each process starts at a random offset
// and never hands out a port twice.

// portsFloor is the lowest port handed out (above the usual service ports).
const portsFloor = 10240

// minPortRange is the smallest span below the ephemeral range worth using;
// with less, ports come from ":0" as before.
const minPortRange = 4096

var ports struct {
	mu          sync.Mutex
	initialised bool
	low, high   int // [low, high)
	next        int
}

// ephemeralLow reads the start of the kernel's ephemeral port range
// (Linux); 0 when unknown.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}

// freeTCPPort returns a port on 127.0.0.1 that nobody listens on, below
// the ephemeral range where the machine has one (see above).
func freeTCPPort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if !ports.initialised {
		ports.initialised = true
		if low := ephemeralLow(); low-portsFloor >= minPortRange {
			ports.low, ports.high = portsFloor, low
			ports.next = ports.low + rand.IntN(ports.high-ports.low)
		}
	}
	if ports.high == 0 {
		return anyFreePort()
	}
	for tries := 0; tries < ports.high-ports.low; tries++ {
		port := ports.next
		ports.next++
		if ports.next >= ports.high {
			ports.next = ports.low
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		if err := l.Close(); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free TCP port in [%d, %d)", ports.low, ports.high)
}

// anyFreePort asks the kernel for a port.
func anyFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
