// Package deps guards what the shipped binaries link.
package deps

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kyvap/kyvap/test/controlplane"
)

// TestBinariesDoNotLinkKyverno: Kyverno's API package drags in cosign, OPA and
// cloud SDKs; kyvap reads Kyverno objects through its own api/ types only.
func TestBinariesDoNotLinkKyverno(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "./cmd/...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/...: %v\n%s", err, out)
	}
	deps := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(deps) < 100 {
		t.Fatalf("go list returned only %d packages; the check is not looking at the binaries", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/kyverno/kyverno") {
			t.Errorf("the shipped binaries link %s", dep)
		}
	}
}

// TestTranslateIsPure: translate/ is a library of pure functions; it imports
// no client, no controller-runtime and no HTTP. (Packages it uses, such as the
// apiserver's CEL environment, may reach those indirectly; controller-runtime
// and Kyverno may not be reached at all.)
func TestTranslateIsPure(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	list := func(args ...string) []string {
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list %v: %v\n%s", args, err, out)
		}
		return strings.Fields(string(out))
	}
	banned := func(dep string, prefixes ...string) bool {
		for _, p := range prefixes {
			if dep == p || strings.HasPrefix(dep, p+"/") {
				return true
			}
		}
		return false
	}
	for _, imp := range list("-f", `{{join .Imports " "}}`, "./translate/...") {
		if banned(imp, "sigs.k8s.io/controller-runtime", "k8s.io/client-go", "net/http") {
			t.Errorf("translate/ imports %s", imp)
		}
	}
	for _, dep := range list("-deps", "./translate/...") {
		if banned(dep, "sigs.k8s.io/controller-runtime", "github.com/kyverno/kyverno") {
			t.Errorf("translate/ depends on %s", dep)
		}
	}
}
