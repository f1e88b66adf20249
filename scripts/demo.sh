#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# `make demo`: gpuplane on a simulated DGX H100 (the mock NVML library with examples/nodes/dgx-h100.yaml):
# the node's GPUs, then `gpuplane device-plugin` against the kubelet emulator (tools/kubelet-emulator):
# registration, the device list, a preferred allocation of 4 GPUs and its Allocate response, an XID 79
# taking one GPU out and the recovery bringing it back; the node's labels as NVIDIA's GPU Feature
# Discovery writes them (`gpuplane discover`); the metrics dcgm-exporter would serve (`gpuplane
# exporter`); then `gpuplane dra-driver` against the test API
# server and the DRA kubelet emulator (slices published, a claim allocated by `gpuplane allocate`,
# prepared with its CDI spec, unprepared), the GPU operator reconciling a ClusterPolicy on the test API
# server (`gpuplane operator`: states in order, node labels, status) and a DRA scheduling simulation
# (`gpuplane schedule`). No GPU, no kubelet and no cluster are needed; it takes about 10 seconds. The
# daemons' own logs go to files.
set -euo pipefail
bin=${1:-build/gpuplane}
cd "$(dirname "$0")/.."
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
[ -x "$bin" ] || { echo "demo: $bin is not built (make build)" >&2; exit 1; }
export GPUPLANE_BUILD=${GPUPLANE_BUILD:-$(dirname "$bin")} # where the emulator generates its protobuf code

title() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {
    printf '\n\033[1m$ %s\033[0m\n' "$*"
    "$@"
}

title "The node: a simulated DGX H100"
show "$bin" version
printf '\n\033[1m$ %s\033[0m\n' "$bin info --mock dgx-h100   # (the topology matrix left out)"
"$bin" info --mock dgx-h100 | sed '/^Topology/,$d'

# Short paths: unix socket names are limited to 107 bytes.
work=$(mktemp -d /tmp/gpuplane-demo.XXXXXX)
dir=$work/device-plugins
events=$work/faults.jsonl
mkdir -p "$dir"
: >"$events"
trap 'rm -rf "$dir" "$events" "$work/kubelet_internal_checkpoint" "$work/features.d"' EXIT

title "gpuplane device-plugin against the kubelet emulator"
cat <<EOF
The kubelet emulator serves $dir/kubelet.sock; the plugin registers
nvidia.com/gpu there. Faults are injected by appending JSON lines to $events
(read by the mock NVML library). Config: examples/device-plugin/demo.yaml (recovery window 4 s).
EOF
echo

status=0
MOCK_NVML_EVENTS=$events tools/kubelet-emulator/kubelet-emu run --dir "$dir" --log-dir "$work" \
    "spawn:$bin device-plugin --mock dgx-h100 --kubelet-socket $dir/kubelet.sock --config-file examples/device-plugin/demo.yaml" \
    wait-registered:nvidia.com/gpu:20 \
    "say:--- The resource and its devices (ListAndWatch: ids, health, NUMA node)" \
    show devices:nvidia.com/gpu \
    "say:--- A pod asks for 4 GPUs: GetPreferredAllocation picks 4 on one NUMA node, then Allocate" \
    allocate:nvidia.com/gpu=4:training \
    "say:--- XID 79 (GPU fallen off the bus) on GPU 6: capacity stays 8, allocatable drops to 7" \
    "sh:echo '{\"gpu\": 6, \"type\": \"xid\", \"xid\": 79}' >> $events" \
    wait:nvidia.com/gpu:allocatable=7:10 show \
    "say:--- GPU 6 still answers NVML: 4 s after the XID it is healthy again" \
    wait:nvidia.com/gpu:allocatable=8:20 show devices:nvidia.com/gpu \
    "say:--- SIGTERM: the plugin ends its ListAndWatch stream (OK) and removes only its own socket" \
    kill ||
    status=$?

title "Logs"
echo "The daemon's log (klog): $work/spawn-1.log"
grep -E 'registered with|device unhealthy|healthy again' "$work/spawn-1.log" | sed 's/^/  /' || true

title "gpuplane discover: the node's labels (NVIDIA GPU Feature Discovery's)"
cat <<EOF
One pass written as the NFD local features file (nfd-worker turns it into node labels); in a
cluster the default is a NodeFeature object. With MIG strategy mixed, the A100 node gets a label
set per MIG profile.
EOF
show "$bin" discover --mock dgx-h100 --oneshot --use-node-feature-api=false -o "$work/features.d/gfd"
printf '\n\033[1m$ %s\033[0m\n' "cat $work/features.d/gfd"
cat "$work/features.d/gfd"
printf '\n\033[1m$ %s\033[0m\n' "$bin discover --mock a100-mig --mig-strategy mixed --print-labels | grep mig-3g"
"$bin" discover --mock a100-mig --mig-strategy mixed --print-labels | grep 'mig-3g' || status=$?

title "gpuplane exporter: the GPUs' metrics under dcgm-exporter's names"
echo "The exporter on a free port, collecting every second; one scrape, a few of its lines."
"$bin" exporter --mock dgx-h100 -a 127.0.0.1:0 -c 1000 2>"$work/exporter.log" &
exporter_pid=$!
port=""
for _ in $(seq 100); do
    port=$(sed -n 's/.*"serving \/metrics".* port=\([0-9]*\).*/\1/p' "$work/exporter.log")
    [ -n "$port" ] && break
    sleep 0.05
done
if [ -n "$port" ]; then
    printf '\n\033[1m$ %s\033[0m\n' "curl -s 127.0.0.1:$port/metrics | grep -E '^DCGM_FI_DEV_(GPU_UTIL|POWER_USAGE|FB_USED)' | head -6"
    python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" |
        grep -E '^DCGM_FI_DEV_(GPU_UTIL|POWER_USAGE|FB_USED)\{gpu="[01]"' || status=$?
else
    echo "the exporter did not start; its log: $work/exporter.log"
    status=1
fi
kill "$exporter_pid" 2>/dev/null || true
wait "$exporter_pid" 2>/dev/null || true

title "gpuplane dra-driver: the DRA kubelet driver (gpu.nvidia.com)"
cat <<'TEXT'
examples/dra/dra-driver/run-local.sh: the test API server (tests/integration/fakekube.py, HTTPS,
every body checked against the resource.k8s.io/v1 schema), the driver on the simulated DGX H100
(`gpuplane dra-driver --mock dgx-h100`, no driver root given: the simulated node makes its own in a
private directory, removed when the driver stops) registering with the DRA kubelet emulator and
publishing its ResourceSlice, a claim for 2 GPUs allocated by gpuplane allocate against that slice,
NodePrepareResources (its per-claim CDI spec, shortened here, naming that root's files) and
NodeUnprepareResources.
TEXT
echo
# The CDI spec carries every driver library mount: show its first lines only.
examples/dra/dra-driver/run-local.sh "$(dirname "$bin")" |
    awk '/^--- k8s/ { inspec = 1; n = 0 }
         inspec && /^---$/ && n > 1 { if (n > 24) printf "    ... (%d more lines)\n", n - 24; inspec = 0 }
         inspec { n++; if (n <= 24) print; next }
         { print }' || status=$?

title "gpuplane operator: a ClusterPolicy reconciled into ordered states"
cat <<'TEXT'
examples/operator/run-local.sh: the test API server with the chart's ClusterPolicy CRD, two simulated
GPU nodes and a CPU node, its DaemonSet emulator making each operand's pods available a little
after the previous one's (driver, toolkit, validator, then the rest, as the validations chain them
on a node); `gpuplane operator --leader-elect` reconciles examples/operator/clusterpolicy.yaml.
TEXT
echo
examples/operator/run-local.sh "$(dirname "$bin")" || status=$?

title "gpuplane schedule: where would these pods go?"
show "$bin" schedule -f examples/dra/deviceclasses.yaml -f examples/dra/slices-dgx-h100-0.yaml \
    -f examples/dra/slices-pcie-t4-0.yaml -f examples/dra/schedule-node-filters.yaml || true
exit $status
