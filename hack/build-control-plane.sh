#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, kube-controller-manager, etcd)
# from the Go module proxy, because setup-envtest's binary download is not
# reachable from our build machines. Binaries land in bin/k8s/<version>/ and are
# reused when already present. Prints the asset directory on stdout.
#
# Usage: hack/build-control-plane.sh [--print-dir]
# Env:   KUBE_VERSION (default 1.37.1), ETCD_VERSION (default 3.6.5),
#        KUBEBUILDER_ASSETS (when set and complete, it is used as is).
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-3.6.5}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BINARIES=(kube-apiserver kube-controller-manager etcd)

complete() {
	local dir="$1" b
	for b in "${BINARIES[@]}"; do [[ -x "$dir/$b" ]] || return 1; done
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]] && complete "$KUBEBUILDER_ASSETS"; then
	echo "$KUBEBUILDER_ASSETS"
	exit 0
fi

OUT="$ROOT/bin/k8s/$KUBE_VERSION"
if complete "$OUT"; then
	echo "$OUT"
	exit 0
fi

WORK="$ROOT/bin/.build/control-plane-$KUBE_VERSION"
mkdir -p "$OUT" "$WORK/kube" "$WORK/etcd"
log() { echo "build-control-plane: $*" >&2; }
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off

# kube-apiserver and kube-controller-manager. k8s.io/kubernetes requires its
# staging modules at v0.0.0 and replaces them with ./staging paths, which a
# dependent module cannot see; point every one at the published v0.X.Y.
STAGING_VERSION="v0.${KUBE_VERSION#*.}"
if [[ ! -x "$OUT/kube-apiserver" || ! -x "$OUT/kube-controller-manager" ]]; then
	log "building kube-apiserver and kube-controller-manager v$KUBE_VERSION (about 15 minutes on 2 cores)"
	cd "$WORK/kube"
	modfile="$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
	{
		echo "module kyvap.local/controlplane"
		echo
		echo "go 1.26.0"
		echo
		echo "require k8s.io/kubernetes v$KUBE_VERSION"
		echo
		echo "replace ("
		sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$modfile"
		echo ")"
	} >go.mod
	go get "k8s.io/kubernetes/cmd/kube-apiserver@v$KUBE_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@v$KUBE_VERSION" >&2
	ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=${KUBE_VERSION%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
	go build -trimpath -ldflags "$ldflags" -o "$WORK/kube/out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager >&2
	mv "$WORK/kube/out/kube-apiserver" "$WORK/kube/out/kube-controller-manager" "$OUT/"
fi

# etcd: the server module's root package is its main package.
if [[ ! -x "$OUT/etcd" ]]; then
	log "building etcd v$ETCD_VERSION"
	cd "$WORK/etcd"
	printf 'module kyvap.local/etcd\n\ngo 1.26.0\n' >go.mod
	go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" "go.etcd.io/etcd/api/v3@v$ETCD_VERSION" \
		"go.etcd.io/etcd/client/pkg/v3@v$ETCD_VERSION" "go.etcd.io/etcd/client/v3@v$ETCD_VERSION" \
		"go.etcd.io/etcd/pkg/v3@v$ETCD_VERSION" >&2
	go build -trimpath -ldflags "-s -w" -o "$WORK/etcd/etcd" go.etcd.io/etcd/server/v3 >&2
	mv "$WORK/etcd/etcd" "$OUT/etcd"
fi

log "control plane ready in $OUT"
echo "$OUT"
