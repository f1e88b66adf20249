#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Checks (check) or applies (fix) the house clang-format style on every tracked C source and header.
set -eu
cd "$(dirname "$0")/.."
mode=${1:-check}
files=$(git ls-files '*.c' '*.h')
if [ "$mode" = fix ]; then
    # shellcheck disable=SC2086
    clang-format -i $files
    exit 0
fi
bad=""
for f in $files; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
    echo "format: not clang-formatted (run 'make format'):$bad" >&2
    exit 1
fi
echo "format: $(echo "$files" | wc -w) files clean"
