#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# build.sh BUILD_DIR: builds the chart renderer (main.go) as BUILD_DIR/tests/deploy-render and
# prints its path. Offline and in GOPATH mode against Debian's Go packages
# (golang-github-masterminds-sprig-dev and its dependencies, golang-gopkg-yaml.v2-dev under
# /usr/share/gocode). Does nothing when main.go, this script and the Go and package versions are
# unchanged since the last build, so calling it for every test session is cheap. Go's build cache
# is BUILD_DIR/deploy-render-go/cache unless GOCACHE is set.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
mkdir -p "$1/tests"
build=$(cd "$1" && pwd)
work=$build/deploy-render-go
out=$build/tests/deploy-render
mkdir -p "$work"

# Serialise concurrent builds into the same directory.
exec 9>"$work/.lock"
flock 9

inputs() {
    cat "$0" "$here/main.go"
    go version
    dpkg-query -W golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev 2>/dev/null || true
}
stamp=$(inputs | sha256sum)
if [ -x "$out" ] && [ "$(cat "$work/stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$out"
    exit 0
fi

cd "$here"
GOPATH="$work/gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS="" GOCACHE="${GOCACHE:-$work/cache}" \
    GOTOOLCHAIN=local CGO_ENABLED=0 go build -o "$out.tmp" .
mv "$out.tmp" "$out"
echo "$stamp" >"$work/stamp"
echo "$out"
