#!/usr/bin/env bash
# Builds a Kyverno component, its admission controller by default
# (github.com/kyverno/kyverno/cmd/kyverno; the argument reports-controller
# builds cmd/reports-controller, its background scans and PolicyReports;
# pattern-oracle builds hack/kyverno-pattern-oracle, Kyverno's pattern
# matcher behind a small command, for test/classic),
# at KYVERNO_VERSION from its Go module, in a scratch module outside kyvap's
# own (so kyvap's go.mod and binaries never depend on it), into
# bin/kyverno/<version>/<component>, and prints that path. Reused when
# present. The first build takes 10-20 minutes on 2 cores; the second
# component then about half a minute (shared packages).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ver=${KYVERNO_VERSION:-v1.19.1}
component=${1:-kyverno}
case "$component" in
  kyverno|reports-controller|pattern-oracle) ;;
  *) echo "build-kyverno: unknown component $component (kyverno, reports-controller, pattern-oracle)" >&2; exit 2 ;;
esac
out=$root/bin/kyverno/$ver
exe=$out/$component
if [ -x "$exe" ] && { [ "$component" != pattern-oracle ] || [ "$exe" -nt "$root/hack/kyverno-pattern-oracle/main.go" ]; }; then
  echo "$exe"
  exit 0
fi
if [ "$component" = pattern-oracle ]; then
  # Its own scratch module: the oracle links a few of Kyverno's packages
  # only, and builds beside the components' without sharing their files.
  src=$out/pattern-oracle-src
  mkdir -p "$src"
  cd "$src"
  dir=$(go mod download -json "github.com/kyverno/kyverno@$ver" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -n "$dir" ] || { echo "build-kyverno: cannot download github.com/kyverno/kyverno@$ver" >&2; exit 2; }
  goline=$(sed -n 's/^go \(.*\)/\1/p' "$dir/go.mod" | head -1)
  if [ ! -f go.mod ]; then
    {
      echo "module kyvappatternoracle"; echo; echo "go $goline"; echo
      echo "require github.com/kyverno/kyverno $ver"; echo
      awk '/^replace \(/{f=1;next} f&&/^\)/{f=0} f{print "replace " $0} /^replace [^(]/{print}' "$dir/go.mod"
    } > go.mod
  fi
  # The source carries "//go:build ignore" so that kyvap's own go mod tidy
  # never reads it; here it is built without the constraint.
  sed '1{/^\/\/go:build ignore$/d}' "$root/hack/kyverno-pattern-oracle/main.go" > main.go
  echo "build-kyverno: building Kyverno's pattern matcher $ver..." >&2
  GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
  GOFLAGS=-mod=mod go build -o "$exe.tmp" .
  mv "$exe.tmp" "$exe"
  echo "$exe"
  exit 0
fi
mkdir -p "$out/src"
cd "$out/src"
if [ -f go.mod ] && [ -f go.sum ]; then
  # The scratch module of an earlier build: its go.sum covers both commands.
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "github.com/kyverno/kyverno/cmd/kyverno"\n\t_ "github.com/kyverno/kyverno/cmd/reports-controller"\n)\n' > tools.go
  echo "build-kyverno: building Kyverno's $component $ver..." >&2
  GOFLAGS=-mod=mod go build -o "$exe.tmp" "github.com/kyverno/kyverno/cmd/$component"
  mv "$exe.tmp" "$exe"
  echo "$exe"
  exit 0
fi
dir=$(go mod download -json "github.com/kyverno/kyverno@$ver" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[ -n "$dir" ] || { echo "build-kyverno: cannot download github.com/kyverno/kyverno@$ver" >&2; exit 2; }
goline=$(sed -n 's/^go \(.*\)/\1/p' "$dir/go.mod" | head -1)
{
  echo "module kyvapkyvernobuild"; echo; echo "go $goline"; echo
  echo "require github.com/kyverno/kyverno $ver"; echo
  # Kyverno's own replace directives, so that its module builds as upstream.
  awk '/^replace \(/{f=1;next} f&&/^\)/{f=0} f{print "replace " $0} /^replace [^(]/{print}' "$dir/go.mod"
} > go.mod
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "github.com/kyverno/kyverno/cmd/kyverno"\n\t_ "github.com/kyverno/kyverno/cmd/reports-controller"\n)\n' > tools.go
echo "build-kyverno: building Kyverno's $component $ver..." >&2
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
GOFLAGS=-mod=mod go build -o "$exe.tmp" "github.com/kyverno/kyverno/cmd/$component"
mv "$exe.tmp" "$exe"
echo "$exe"
