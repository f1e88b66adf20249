#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# build-image.sh [EXTRA_TAG...]: builds the gpuplane image from deploy/Dockerfile with podman or
# buildah (Debian packages: `apt-get install podman` or `apt-get install buildah`) and tags it
# gpuplane:<version> (the project version in CMakeLists.txt) and every EXTRA_TAG, e.g.
#   scripts/build-image.sh ghcr.io/gpuplane/gpuplane:0.1.0
# The build pulls debian:12 and debian:12-slim and installs Debian packages in them: it needs a
# registry and Debian's mirrors. Push the result with `podman push` and point the chart at it
# (--set operator.repository=...,operator.version=...).
set -eu
cd "$(dirname "$0")/.."

version=$(sed -n 's/^project(gpuplane VERSION \([0-9][0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || { echo "build-image: no project version in CMakeLists.txt" >&2; exit 1; }

if command -v podman >/dev/null 2>&1; then
    build="podman build"
elif command -v buildah >/dev/null 2>&1; then
    build="buildah bud"
else
    echo "build-image: neither podman nor buildah is installed; install one (apt-get install podman)" >&2
    exit 1
fi

# The arguments become: -t gpuplane:VERSION -t EXTRA_TAG...
n=$#
set -- "$@" -t "gpuplane:$version"
while [ "$n" -gt 0 ]; do
    set -- "$@" -t "$1"
    shift
    n=$((n - 1))
done
echo "build-image: $build -f deploy/Dockerfile $* ."
# shellcheck disable=SC2086
exec $build -f deploy/Dockerfile "$@" .
