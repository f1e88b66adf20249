#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# `make demo`: gpuplane on the embedded default node, a simulated DGX H100 (the mock NVML library with
# examples/nodes/dgx-h100.yaml), then the other bundled nodes: a MIG-partitioned A100 node and a node
# with a GPU that fell off the bus. No GPU is needed.
set -euo pipefail
bin=${1:-build/gpuplane}
cd "$(dirname "$0")/.."

show() {
    printf '\n\033[1m$ %s\033[0m\n' "$*"
    "$@"
}

show "$bin" version
show "$bin" info --mock dgx-h100
show "$bin" info --mock a100-mig
show "$bin" info --mock lost-gpu
printf '\nThe same inventory as JSON for machines: %s info --mock dgx-h100 --json\n' "$bin"
