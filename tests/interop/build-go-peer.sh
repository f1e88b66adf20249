#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# build-go-peer.sh BUILD_DIR: builds the Go interop peer as BUILD_DIR/tests/interop-go-peer.
# Offline and in GOPATH mode against Debian's Go packages (golang-google-grpc-dev,
# golang-google-protobuf-dev under /usr/share/gocode): interop.proto is compiled with protoc-gen-go
# and protoc-gen-go-grpc into a GOPATH tree under BUILD_DIR/interop-go, then `go build`. Does
# nothing when the inputs (sources, script, plugin and Go versions) are unchanged since the last
# build, so calling it for every test session is cheap. Prints the binary's path. Go's build cache
# is BUILD_DIR/interop-go/cache unless GOCACHE is set (a shared cache makes a fresh build directory
# fast: a cold build of grpc-go takes 10-20 s).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
mkdir -p "$1/tests"
build=$(cd "$1" && pwd)
gopath=$build/interop-go
out=$build/tests/interop-go-peer
mkdir -p "$gopath"

# Serialise concurrent builds of the same tree.
exec 9>"$gopath/.lock"
flock 9

stamp=$( (cat "$here/interop.proto" "$here"/go/interop-peer/*.go "$0"
    go version; protoc --version; dpkg-query -W protoc-gen-go protoc-gen-go-grpc \
    golang-google-grpc-dev golang-google-protobuf-dev 2>/dev/null || true) | sha256sum)
if [ -x "$out" ] && [ "$(cat "$gopath/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$out"
    exit 0
fi

pkg=gpuplane/interoppb
rm -rf "$gopath/src/$pkg"
mkdir -p "$gopath/src/$pkg"
protoc -I"$here" --go_out="$gopath/src" --go_opt=Minterop.proto=$pkg \
    --go-grpc_out="$gopath/src" --go-grpc_opt=Minterop.proto=$pkg "$here/interop.proto"

cd "$here/go/interop-peer"
GOPATH="$gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS= GOCACHE="${GOCACHE:-$gopath/cache}" \
    GOTOOLCHAIN=local CGO_ENABLED=0 go build -o "$out.tmp" .
mv "$out.tmp" "$out"
echo "$stamp" >"$gopath/stamp"
echo "$out"
