// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kyvernochart reads how Kyverno's own Helm chart, with its default
// values, configures Kyverno's admission controller and reports controller,
// so that a benchmark can run Kyverno out of cluster with the flags,
// environment and configuration a real installation gets, rather than with
// hand-picked ones that drift from upstream.
package kyvernochart

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kyvap/kyvap/test/controlplane"
)

const (
	// releaseName and namespace are the ones Kyverno's documentation
	// installs with; the chart derives its object, Service and Secret names
	// from them, and Kyverno's flags carry those names.
	releaseName = "kyverno"
	namespace   = "kyverno"

	admissionDeployment = "kyverno-admission-controller"
	admissionContainer  = "kyverno"
	reportsDeployment   = "kyverno-reports-controller"
	reportsContainer    = "controller"
	configMapName       = "kyverno"
	metricsConfigMap    = "kyverno-metrics"
)

// Container is what the chart gives one of Kyverno's containers, in the form
// a process started out of cluster can use.
type Container struct {
	// Args are the container's args, in the chart's order: Kyverno parses
	// them with Go's flag package, where the last occurrence of a flag wins.
	Args []string
	// Env holds the variables with a literal value, and those the kubelet
	// would fill from the container's memory or CPU limit (as the integer
	// the kubelet writes: bytes, or cores rounded up, unless the reference
	// has a divisor). Other valueFrom variables (the pod's name and
	// namespace, ...) only make sense in a pod and are left out.
	Env map[string]string
	// Resources lets the benchmark hold the process to the chart's limits
	// (GOMEMLIMIT, GOMAXPROCS) and report them next to its results.
	Resources corev1.ResourceRequirements
}

// Config is how Kyverno's chart, with its default values, runs a controller.
type Config struct {
	// AdmissionController is Deployment kyverno-admission-controller's
	// container "kyverno".
	AdmissionController Container
	// ReportsController is Deployment kyverno-reports-controller's
	// container "controller".
	ReportsController Container
	// ConfigMap is the data of ConfigMap "kyverno", which Kyverno reads at
	// run time (resource filters, excluded groups, webhooks, ...): the
	// benchmark has to create it for Kyverno to behave as installed.
	ConfigMap map[string]string
	// MetricsConfigMap is the data of ConfigMap "kyverno-metrics", which
	// Kyverno also watches at run time.
	MetricsConfigMap map[string]string
}

// Render renders the chart of the Kyverno version the tests pin, from the Go
// module cache, so the benchmark and the chart cannot disagree on the
// version.
func Render() (*Config, error) {
	dir, err := controlplane.KyvernoModuleDir()
	if err != nil {
		return nil, err
	}
	return RenderDir(filepath.Join(dir, "charts", "kyverno"))
}

// RenderDir renders the Kyverno chart in chartDir with its default values, as
// helm template does, and extracts the controllers' configuration.
func RenderDir(chartDir string) (*Config, error) {
	objects, err := render(chartDir)
	if err != nil {
		return nil, err
	}
	find := func(kind, name string) (*unstructured.Unstructured, error) {
		for _, o := range objects {
			if o.GetKind() == kind && o.GetName() == name && o.GetNamespace() == namespace {
				return o, nil
			}
		}
		return nil, fmt.Errorf("the Kyverno chart in %s renders no %s %s/%s", chartDir, kind, namespace, name)
	}
	container := func(deployment, name string) (Container, error) {
		u, err := find("Deployment", deployment)
		if err != nil {
			return Container{}, err
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			return Container{}, fmt.Errorf("reading Deployment %s: %w", deployment, err)
		}
		c, err := extractContainer(&d.Spec.Template.Spec, name)
		if err != nil {
			return Container{}, fmt.Errorf("the Kyverno chart in %s, Deployment %s/%s: %w", chartDir, namespace, deployment, err)
		}
		return c, nil
	}
	configMap := func(name string) (map[string]string, error) {
		u, err := find("ConfigMap", name)
		if err != nil {
			return nil, err
		}
		var cm corev1.ConfigMap
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
			return nil, fmt.Errorf("reading ConfigMap %s: %w", name, err)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		return cm.Data, nil
	}

	var c Config
	if c.AdmissionController, err = container(admissionDeployment, admissionContainer); err != nil {
		return nil, err
	}
	if c.ReportsController, err = container(reportsDeployment, reportsContainer); err != nil {
		return nil, err
	}
	if c.ConfigMap, err = configMap(configMapName); err != nil {
		return nil, err
	}
	if c.MetricsConfigMap, err = configMap(metricsConfigMap); err != nil {
		return nil, err
	}
	return &c, nil
}

// render is helm template: no cluster is contacted, so the chart's lookup
// calls see nothing, as on a fresh installation.
func render(chartDir string) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading the Kyverno chart %s: %w", chartDir, err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = releaseName, namespace
	// The Kubernetes version of the test control plane the benchmark runs
	// Kyverno against: the chart may pick API versions from it.
	kubeVersion := os.Getenv("KUBE_VERSION")
	if kubeVersion == "" {
		kubeVersion = controlplane.DefaultKubeVersion
	}
	if install.KubeVersion, err = common.ParseKubeVersion("v" + strings.TrimPrefix(kubeVersion, "v")); err != nil {
		return nil, fmt.Errorf("KUBE_VERSION: %w", err)
	}
	rel, err := install.Run(chrt, nil)
	if err != nil {
		return nil, fmt.Errorf("rendering the Kyverno chart %s: %w", chartDir, err)
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("rendering the Kyverno chart %s: unexpected release type %T", chartDir, rel)
	}
	var out []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(r.Manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding the rendered Kyverno chart: %w", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func extractContainer(pod *corev1.PodSpec, name string) (Container, error) {
	var names []string
	for _, c := range pod.Containers {
		if c.Name != name {
			names = append(names, c.Name)
			continue
		}
		out := Container{
			Args:      append([]string(nil), c.Args...),
			Env:       map[string]string{},
			Resources: *c.Resources.DeepCopy(),
		}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				out.Env[e.Name] = e.Value
			case e.ValueFrom.ResourceFieldRef != nil:
				v, ok, err := resourceFieldValue(pod, name, e.ValueFrom.ResourceFieldRef)
				if err != nil {
					return Container{}, fmt.Errorf("container %s, env %s: %w", name, e.Name, err)
				}
				if ok {
					out.Env[e.Name] = v
				}
			}
		}
		return out, nil
	}
	return Container{}, fmt.Errorf("no container %q (the pod has %q)", name, names)
}

// resourceFieldValue is what the kubelet puts in an env var from a
// resourceFieldRef on limits.memory or limits.cpu. Without a limit the
// kubelet uses the node's allocatable, which has no meaning out of cluster:
// ok is then false, as for the other references.
func resourceFieldValue(pod *corev1.PodSpec, container string, ref *corev1.ResourceFieldSelector) (value string, ok bool, err error) {
	var res corev1.ResourceName
	switch ref.Resource {
	case "limits.memory":
		res = corev1.ResourceMemory
	case "limits.cpu":
		res = corev1.ResourceCPU
	default:
		return "", false, nil
	}
	if ref.ContainerName != "" {
		container = ref.ContainerName
	}
	var limit resource.Quantity
	found := false
	for _, c := range pod.Containers {
		if c.Name == container {
			limit, found = c.Resources.Limits[res]
			break
		}
	}
	if !found {
		return "", false, nil
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	// As the kubelet does: the limit in units of the divisor, rounded up,
	// CPU counted in millicores so that 500m is 1 core.
	n := math.Ceil(float64(limit.Value()) / float64(divisor.Value()))
	if res == corev1.ResourceCPU {
		n = math.Ceil(float64(limit.MilliValue()) / float64(divisor.MilliValue()))
	}
	if n > math.MaxInt64 || n < 0 {
		return "", false, fmt.Errorf("%s limit %s out of range", res, limit.String())
	}
	return fmt.Sprint(int64(n)), true, nil
}

// Flag returns the value Kyverno's Go flag parsing would give flag name in
// args: -name=value or --name=value, the last occurrence winning; a bare
// -name or --name is a boolean flag set to "true". Kyverno's chart always
// writes the value after "=", so a value in the next arg is not looked at.
func Flag(args []string, name string) (value string, ok bool) {
	for _, a := range args {
		if v, has, match := matchFlag(a, name); match {
			value, ok = "true", true
			if has {
				value = v
			}
		}
	}
	return value, ok
}

// WithoutFlags returns a copy of args without the flags names (as
// -name=..., --name=..., -name or --name), so that the benchmark can replace
// the in-cluster-only ones (ports, Service and Secret names) with its own
// without touching the chart's args.
func WithoutFlags(args []string, names ...string) []string {
	out := make([]string, 0, len(args))
next:
	for _, a := range args {
		for _, n := range names {
			if _, _, match := matchFlag(a, n); match {
				continue next
			}
		}
		out = append(out, a)
	}
	return out
}

// matchFlag reports whether arg sets flag name, and its value if written
// after "=".
func matchFlag(arg, name string) (value string, hasValue, match bool) {
	if name == "" || !strings.HasPrefix(arg, "-") {
		return "", false, false
	}
	s := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	rest, found := strings.CutPrefix(s, name)
	if !found {
		return "", false, false
	}
	if rest == "" {
		return "", false, true
	}
	if v, ok := strings.CutPrefix(rest, "="); ok {
		return v, true, true
	}
	return "", false, false
}
