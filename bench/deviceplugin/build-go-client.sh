#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# build-go-client.sh BUILD_DIR: builds bench/deviceplugin's grpc-go programs: the client as
# BUILD_DIR/bench/dp-bench and the minimal grpc-go device plugin gpuplane is compared with as
# BUILD_DIR/bench/dp-peer.
# The approach of tests/interop/build-go-peer.sh: offline, GOPATH mode, Debian's Go packages
# (golang-google-grpc-dev, golang-google-protobuf-dev under /usr/share/gocode);
# proto/deviceplugin/v1beta1/api.proto is compiled with protoc-gen-go and protoc-gen-go-grpc into a
# GOPATH tree under BUILD_DIR/dp-bench-go, then `go build` for each. Does nothing when the inputs
# are unchanged since the last build. The "proto" codec for Debian's grpc-go is the interop peers'
# (tests/interop/go/grpccodec, copied into the tree as gpuplane/grpccodec). Prints the two
# binaries' paths, one a line: dp-bench, then dp-peer. GOCACHE defaults to BUILD_DIR/interop-go/cache, the Go peer's, so grpc-go is compiled once
# for both.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
mkdir -p "$1/bench"
build=$(cd "$1" && pwd)
gopath=$build/dp-bench-go
out=$build/bench/dp-bench
peer=$build/bench/dp-peer
proto=$root/proto/deviceplugin/v1beta1/api.proto
mkdir -p "$gopath"

exec 9>"$gopath/.lock"
flock 9

codec=$root/tests/interop/go/grpccodec
stamp=$( (cat "$proto" "$here"/go/dp-bench/*.go "$here"/go/dp-peer/*.go "$codec"/*.go "$0"
    go version; protoc --version; dpkg-query -W protoc-gen-go protoc-gen-go-grpc \
    golang-google-grpc-dev golang-google-protobuf-dev 2>/dev/null || true) | sha256sum)
if [ -x "$out" ] && [ -x "$peer" ] && [ "$(cat "$gopath/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$out"
    echo "$peer"
    exit 0
fi

pkg=gpuplane/deviceplugin/v1beta1
m=Mdeviceplugin/v1beta1/api.proto=$pkg
rm -rf "$gopath/src/$pkg"
mkdir -p "$gopath/src/$pkg"
protoc -I"$root/proto" --go_out="$gopath/src" --go_opt="$m" \
    --go-grpc_out="$gopath/src" --go-grpc_opt="$m" "$proto"
rm -rf "$gopath/src/gpuplane/grpccodec"
mkdir -p "$gopath/src/gpuplane/grpccodec"
cp "$codec"/*.go "$gopath/src/gpuplane/grpccodec/"

for prog in dp-bench dp-peer; do
    (cd "$here/go/$prog" &&
        GOPATH="$gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS='' \
            GOCACHE="${GOCACHE:-$build/interop-go/cache}" GOTOOLCHAIN=local CGO_ENABLED=0 \
            go build -o "$build/bench/$prog.tmp" .)
    mv "$build/bench/$prog.tmp" "$build/bench/$prog"
done
echo "$stamp" >"$gopath/stamp"
echo "$out"
echo "$peer"
