// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/kyvap/kyvap/api/v1"
	"github.com/kyvap/kyvap/controllers"
	"github.com/kyvap/kyvap/test/controlplane"
	"github.com/kyvap/kyvap/translate"
	"github.com/kyvap/kyvap/webhook/certs"
)

// balancer is a TCP load balancer in front of the webhook replicas, as the
// webhook's Service is in a cluster: each connection goes to the next
// replica that accepts it.
type balancer struct {
	listener net.Listener
	backends []string
	// ready says whether a backend takes new connections (a Service's
	// endpoints: a replica that reports not ready is left out).
	ready func(i int) bool
	next  atomic.Uint64
}

func startBalancer(b *testing.B, backends ...string) *balancer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	lb := &balancer{listener: l, backends: backends}
	b.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go lb.serve(conn)
		}
	}()
	return lb
}

func (lb *balancer) serve(conn net.Conn) {
	defer conn.Close()
	start := lb.next.Add(1)
	var backend net.Conn
	for i := range lb.backends {
		n := (int(start) + i) % len(lb.backends)
		if lb.ready != nil && !lb.ready(n) {
			continue
		}
		c, err := net.DialTimeout("tcp", lb.backends[n], time.Second)
		if err == nil {
			backend = c
			break
		}
	}
	if backend == nil {
		return // every replica is down: the API server sees a failed call
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, backend); done <- struct{}{} }()
	<-done
}

func (lb *balancer) url() string { return "https://" + lb.listener.Addr().String() }

// skewedClock is time.Now moved ahead by skew.
type skewedClock struct{ skew atomic.Int64 }

func (c *skewedClock) now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

// soakResult counts what the clients saw.
type soakResult struct {
	mu             sync.Mutex
	latencies      []time.Duration
	wrongN, errorN int
	wrong, errs    []string // the first 20 of each, for the log
}

func (r *soakResult) record(d time.Duration, wrong, errMsg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latencies = append(r.latencies, d)
	if wrong != "" {
		r.wrongN++
		if len(r.wrong) < 20 {
			r.wrong = append(r.wrong, wrong)
		}
	}
	if errMsg != "" {
		r.errorN++
		if len(r.errs) < 20 {
			r.errs = append(r.errs, errMsg)
		}
	}
}

// BenchmarkWebhookSoak runs two webhook replicas behind a load balancer,
// keeps admission requests flowing through the API server for a bounded
// time (KYVAP_SOAK_SECONDS, default 30) from 8 clients, half of which must
// be denied by a fallback rule, and meanwhile stops the leader (as a pod
// deletion does) and then rotates the webhook's CA. It reports
// requests answered wrongly (goal 0), requests that failed (goal 0), and
// the p50/p99 latency.
func BenchmarkWebhookSoak(b *testing.B) {
	seconds := 30
	if v, err := strconv.Atoi(os.Getenv("KYVAP_SOAK_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	duration := time.Duration(seconds) * time.Second
	const ns = "soak"
	ctx := context.Background()
	cp.EnsureNamespace(b, ns, nil)
	election := ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              "kyvap-soak",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true, // as cmd/manager: a deleted pod steps down
		LeaseDuration:                 ptr.To(4 * time.Second),
		RenewDeadline:                 ptr.To(3 * time.Second),
		RetryPeriod:                   ptr.To(500 * time.Millisecond),
	}
	ports := []int{controlplane.FreePort(b), controlplane.FreePort(b)}
	lb := startBalancer(b, fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]))
	off := translate.Options{GenerateValidatingAdmissionPolicy: false}
	// Certificates whose CA becomes due when the replicas' clock moves 45
	// minutes ahead: a CA valid 90 minutes (backdated an hour for clock
	// skew) has less than a third of its 150-minute lifetime left then, and
	// what is issued then is valid for the API server's real clock.
	clock := &skewedClock{}
	certOpts := certs.Options{
		Now: clock.now, CAValidity: 90 * time.Minute, ServingValidity: 80 * time.Minute,
		CheckInterval: 2 * time.Second, PendingCheckInterval: time.Second,
	}
	cp.DeleteWebhookSecret(b)
	leader := cp.StartWebhookReplica(b, off, ports[0], lb.url(), election, certOpts)
	// lb.ready is set once both replicas exist; until then every backend is tried.
	select {
	case <-leader.Elected:
	case <-time.After(30 * time.Second):
		b.Fatal("the first replica was never elected")
	}
	follower := cp.StartWebhookReplica(b, off, ports[1], lb.url(), election, certOpts)
	replicas := []*controlplane.Operator{leader, follower}
	lb.ready = func(i int) bool { return !replicas[i].Draining() }
	policy := controlplane.ClusterPolicy("soak", kyvernov1.Enforce,
		controlplane.CELRule("no-deny", "ConfigMap", "!object.metadata.name.startsWith('deny-')", "soak: denied"))
	cp.CreatePolicy(b, policy, controllers.ReasonGenerationDisabled)
	cp.WaitForDenial(b, controlplane.ConfigMap(ns, "deny-warmup", nil), "soak: denied")

	for b.Loop() {
		result := &soakResult{}
		deadline := time.Now().Add(duration)
		var wg sync.WaitGroup
		for worker := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					deny := (worker+i)%2 == 0
					name := fmt.Sprintf("ok-%d-%d", worker, i)
					if deny {
						name = fmt.Sprintf("deny-%d-%d", worker, i)
					}
					start := time.Now()
					err := cp.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.DryRunAll)
					d := time.Since(start)
					switch {
					case err == nil && deny:
						result.record(d, name+" admitted", "")
					case err == nil:
						result.record(d, "", "")
					case strings.Contains(err.Error(), "soak: denied") && deny:
						result.record(d, "", "")
					case strings.Contains(err.Error(), "soak: denied"):
						result.record(d, name+" denied", "")
					default:
						result.record(d, "", name+": "+err.Error())
					}
				}
			}()
		}
		// The leader stops a third of the way in; two thirds in, the CA
		// becomes due and is rotated, in two phases, by the replica left.
		time.Sleep(duration / 3)
		leader.Stop()
		time.Sleep(duration / 3)
		before := cp.WebhookSecretCA(b)
		clock.skew.Store(int64(45 * time.Minute))
		wg.Wait()
		if after := cp.WebhookSecretCA(b); after == before {
			b.Error("the CA was not rotated during the soak")
		}
		select {
		case <-follower.Elected:
		default:
			b.Error("the follower never took over")
		}
		report(b, result)
	}
}

func report(b *testing.B, r *soakResult) {
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	b.ReportMetric(float64(len(r.latencies)), "requests")
	b.ReportMetric(float64(r.wrongN), "wrong")
	b.ReportMetric(float64(r.errorN), "errors")
	b.ReportMetric(float64(percentile(r.latencies, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(r.latencies, 0.99).Microseconds()), "p99-µs")
	for _, w := range r.wrong {
		b.Log("wrong:", w)
	}
	for _, e := range r.errs {
		b.Log("error:", e)
	}
	if r.wrongN+r.errorN > 0 {
		b.Error(errors.New("requests were answered wrongly or failed"))
	}
}
