#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Installs the Debian 12 packages that building, testing and the demo need. Idempotent: packages that are
# already installed are skipped, and the package lists are refreshed only when something is missing.
# Needs root (run with sudo as a user).
set -eu

PACKAGES="
build-essential cmake ninja-build pkg-config clang clang-format lld libclang-rt-14-dev
libjansson-dev libfyaml-dev libcmocka-dev libnghttp2-dev libprotobuf-c-dev libpcre2-dev
libssl-dev openssl
protobuf-c-compiler protobuf-compiler
valgrind python3 python3-pytest python3-yaml python3-jsonschema python3-cryptography
python3-grpcio python3-grpc-tools python3-protobuf
golang-go golang-google-grpc-dev golang-google-protobuf-dev protoc-gen-go protoc-gen-go-grpc
golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev
podman runc busybox-static
prometheus
"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
