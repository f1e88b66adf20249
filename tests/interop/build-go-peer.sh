#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# build-go-peer.sh BUILD_DIR [PEER]: builds a Go test peer under BUILD_DIR/tests and prints its path.
#   interop-peer (the default)  BUILD_DIR/tests/interop-go-peer, from interop.proto
#   dra-kubelet                 BUILD_DIR/tests/dra-kubelet-go, from the project's kubelet protos
#                               (proto/pluginregistration/v1, proto/dra/v1, proto/dra/v1beta1)
# Offline and in GOPATH mode against Debian's Go packages (golang-google-grpc-dev,
# golang-google-protobuf-dev under /usr/share/gocode): the .proto files are compiled with
# protoc-gen-go and protoc-gen-go-grpc into a GOPATH tree under BUILD_DIR/interop-go, go/grpccodec
# is copied there as gpuplane/grpccodec, then `go build`. Does nothing when the inputs (sources,
# script, plugin and Go versions) are unchanged since the last build of that peer, so calling it
# for every test session is cheap. Go's build cache is BUILD_DIR/interop-go/cache unless GOCACHE is
# set (a shared cache makes a fresh build directory fast: a cold build of grpc-go takes 10-20 s;
# both peers share it).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
protos=$(cd "$here/../../proto" && pwd)
[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR [interop-peer|dra-kubelet]" >&2; exit 2; }
peer=${2:-interop-peer}
case $peer in
interop-peer) out_name=interop-go-peer ;;
dra-kubelet) out_name=dra-kubelet-go ;;
*) echo "$0: unknown peer $peer" >&2; exit 2 ;;
esac
mkdir -p "$1/tests"
build=$(cd "$1" && pwd)
gopath=$build/interop-go
out=$build/tests/$out_name
mkdir -p "$gopath"

# Serialise concurrent builds of the same tree.
exec 9>"$gopath/.lock"
flock 9

# The kubelet protos have no go_package option: -M maps each file to a package of the GOPATH tree.
kubelet_protos="pluginregistration/v1/api.proto=gpuplane/kubeletpb/registration
dra/v1/api.proto=gpuplane/kubeletpb/drav1
dra/v1beta1/api.proto=gpuplane/kubeletpb/drav1beta1"

inputs() {
    cat "$0" "$here"/go/grpccodec/*.go "$here/go/$peer"/*.go
    if [ "$peer" = interop-peer ]; then
        cat "$here/interop.proto"
    else
        for m in $kubelet_protos; do cat "$protos/${m%%=*}"; done
    fi
    go version
    protoc --version
    dpkg-query -W protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev \
        golang-google-protobuf-dev 2>/dev/null || true
}
stamp=$(inputs | sha256sum)
if [ -x "$out" ] && [ "$(cat "$gopath/stamp-$peer" 2>/dev/null)" = "$stamp" ]; then
    echo "$out"
    exit 0
fi

rm -rf "$gopath/src/gpuplane/grpccodec"
mkdir -p "$gopath/src/gpuplane/grpccodec"
cp "$here"/go/grpccodec/*.go "$gopath/src/gpuplane/grpccodec/"

if [ "$peer" = interop-peer ]; then
    pkg=gpuplane/interoppb
    rm -rf "$gopath/src/$pkg"
    mkdir -p "$gopath/src/$pkg"
    protoc -I"$here" --go_out="$gopath/src" --go_opt=Minterop.proto=$pkg \
        --go-grpc_out="$gopath/src" --go-grpc_opt=Minterop.proto=$pkg "$here/interop.proto"
else
    rm -rf "$gopath/src/gpuplane/kubeletpb"
    mkdir -p "$gopath/src/gpuplane/kubeletpb"
    set --
    for m in $kubelet_protos; do
        set -- "$@" "--go_opt=M$m" "--go-grpc_opt=M$m"
    done
    for m in $kubelet_protos; do
        set -- "$@" "$protos/${m%%=*}"
    done
    protoc -I"$protos" --go_out="$gopath/src" --go-grpc_out="$gopath/src" "$@"
fi

cd "$here/go/$peer"
GOPATH="$gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS="" GOCACHE="${GOCACHE:-$gopath/cache}" \
    GOTOOLCHAIN=local CGO_ENABLED=0 go build -o "$out.tmp" .
mv "$out.tmp" "$out"
echo "$stamp" >"$gopath/stamp-$peer"
echo "$out"
