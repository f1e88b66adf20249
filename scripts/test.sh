#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# Everything CI runs, in order, stopping at the first failure:
#   1. the clang-format check;
#   2. the default GCC build with -Werror: unit tests, the same unit tests under valgrind, and the
#      integration tests against the real binary;
#   3. the ASan+UBSan build: unit and integration tests again;
#   4. a Clang build with -Werror, ASan and libFuzzer coverage: its unit tests and the replay of every
#      fuzz corpus;
#   5. a plain optimised Clang build (RelWithDebInfo, -O2, no sanitizers) and its unit tests: the
#      sanitizer builds change what the optimiser does, and clang 14 -O2 has miscompiled code that
#      every other build ran correctly (by_domain() in src/cel/cel-dra.c).
# Each runner prints its own summary line; a final line sums up the stages.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=/usr/bin/python3
JOBS=$(nproc)
stage() { printf '\n==> %s\n' "$*"; }

configure_build() { # dir, extra cmake args...
    local dir=$1
    shift
    cmake -S . -B "$dir" -G Ninja -DGP_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

unit() { # dir, label
    ctest --test-dir "$1" -L "$2" -j "$JOBS" --output-on-failure
}

integration() { # dir
    GPUPLANE_BUILD="$PWD/$1" "$PY" -m pytest -q -p no:cacheprovider tests/integration
}

stage "format"
scripts/format.sh check

stage "gcc build"
configure_build build
stage "gcc unit tests"
unit build unit
stage "gcc unit tests under valgrind"
unit build valgrind
stage "gcc integration tests"
integration build

stage "asan+ubsan build"
configure_build build-asan -DGP_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
stage "asan+ubsan unit tests"
unit build-asan unit
stage "asan+ubsan integration tests"
integration build-asan
unset ASAN_OPTIONS UBSAN_OPTIONS

stage "clang build (with fuzz targets)"
CC=clang configure_build build-clang -DGP_FUZZ=ON
stage "clang unit tests and fuzz corpus replay"
unit build-clang unit

stage "clang -O2 build"
CC=clang configure_build build-clang-o2 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGP_VALGRIND_TESTS=OFF
stage "clang -O2 unit tests"
unit build-clang-o2 unit

printf '\nall stages passed: format, gcc (unit, valgrind, integration), asan (unit, integration), clang (unit, fuzz corpora), clang -O2 (unit)\n'
