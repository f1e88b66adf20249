#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gpuplane operator end to end on one machine: the test API server (tests/integration/fakekube.py)
# with the ClusterPolicy CRD of the chart, the operator namespace, two simulated GPU nodes (NFD's
# PCI label for an NVIDIA device) and a CPU node, and its DaemonSet emulator making each operand's
# pods available a little later than the one before (as the validations chain them on a real node:
# driver, toolkit, validator, then the rest). `gpuplane operator` runs against it with leader
# election; the script prints the objects in the order they were created, each state as it turns
# ready, the node labels, the ClusterPolicy's status and a few metrics.
# Usage: run-local.sh [BUILD_DIR]   (default: build/ of the source tree)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
work=$(mktemp -d /tmp/gpop-example-XXXXXX)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$src" "$build" "$work" <<'PY'
import os, pathlib, re, signal, subprocess, sys, time, urllib.request
src, build, work = (pathlib.Path(a) for a in sys.argv[1:4])
sys.path[:0] = [str(src / "tests" / "integration")]
from fakekube import FakeKube
import operator_harness as oh

# When each operand's pods become available, in seconds after they start.
AVAILABLE_AFTER = {"nvidia-driver-daemonset": 0.6, "nvidia-container-toolkit-daemonset": 1.2,
                   "nvidia-operator-validator": 1.8, "nvidia-device-plugin-daemonset": 2.4,
                   "nvidia-dcgm-exporter": 2.4, "gpu-feature-discovery": 2.4}

with FakeKube(work / "api", bookmark_interval=1.0) as api:
    oh.install(api, gpu_nodes=("gpu-node-1", "gpu-node-2"), cpu_nodes=("cpu-node-1",))
    for ds, after in AVAILABLE_AFTER.items():
        api.daemonset_available(ds, after=after)
    print("cluster: nodes gpu-node-1, gpu-node-2 (feature.node.kubernetes.io/pci-10de.present=true)"
          " and cpu-node-1; namespace gpu-operator")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPLANE_")}
    env.update(OPERATOR_NAMESPACE=oh.NAMESPACE, GPUPLANE_IMAGE=oh.IMAGE)
    log = open(work / "operator.log", "w")
    op = subprocess.Popen([str(build / "gpuplane"), "operator", f"--kubeconfig={api.kubeconfig}",
                           "--leader-elect", "--metrics-bind-address=127.0.0.1:0",
                           "--health-probe-bind-address=0", "--requeue-after=1s",
                           "--kube-api-qps=100", "--kube-api-burst=200"],
                          stderr=log, env=env)
    ok = False
    try:
        def metrics_port():
            m = re.search(r'"serving /metrics".* port=(\d+)', (work / "operator.log").read_text())
            return m and int(m.group(1))
        port = api.wait_for(metrics_port, what="the operator's metrics")

        def metrics():
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
            return dict(l.rsplit(" ", 1) for l in text.splitlines() if l and not l.startswith("#"))

        lease = api.wait_for(lambda: api.get("leases", "53822513.nvidia.com", oh.NAMESPACE),
                             what="the leader lease")
        print(f"$ gpuplane operator --leader-elect   (lease 53822513.nvidia.com held by "
              f"{lease['spec']['holderIdentity']})")
        start = time.monotonic()
        api.create(oh.yaml_objects(src / "examples" / "operator" / "clusterpolicy.yaml")[0])
        print("ClusterPolicy cluster-policy created (examples/operator/clusterpolicy.yaml)\n")
        print("states (as the operator reports them, gpuplane_operator_state_ready):")
        seen = {}
        while time.monotonic() - start < 25:
            m = metrics()
            for state, _ in oh.STATES:
                v = m.get(f'gpuplane_operator_state_ready{{state="{state}"}}')
                if v is not None and seen.get(state) != v:
                    seen[state] = v
                    word = {"1": "ready", "0": "not ready", "-1": "disabled"}[v]
                    print(f"  {time.monotonic() - start:5.1f} s  {state:28} {word}")
            if oh.status(api).get("state") == "ready" and oh.daemonsets_ready(api) and \
                    all(v != "0" for v in seen.values()) and len(seen) == len(oh.STATES):
                break
            time.sleep(0.1)
        print("\nobjects, in the order they were created:")
        for res, ns, name in oh.creations(api):
            if res in ("nodes", "namespaces", "customresourcedefinitions", "clusterpolicies",
                       "leases", "events"):
                continue
            print(f"  {res:22} {ns + '/' if ns else ''}{name}")
        print("\nnode labels (nvidia.com/):")
        for n in ("gpu-node-1", "gpu-node-2", "cpu-node-1"):
            labels = oh.node_labels(api, n)
            print(f"  {n}: " + (", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "(none)"))
        st = oh.status(api)
        print(f"\nClusterPolicy status: state={st.get('state')} namespace={st.get('namespace')}")
        for c in st.get("conditions", []):
            print(f"  {c['type']}={c['status']} reason={c['reason']}: {c['message']}")
        m = metrics()
        print("\nmetrics: " + ", ".join(f"{k} {m[k]}" for k in (
            "gpu_operator_reconciliation_status", "gpu_operator_gpu_nodes_total",
            "gpuplane_operator_leader")))
        ok = st.get("state") == "ready"
    finally:
        op.send_signal(signal.SIGTERM)
        op.wait(15)
sys.exit(0 if ok else 1)
PY
