#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/operator: `gpuplane operator` against the test API server (tests/integration/fakekube.py,
in this process) with N nodes.

    bench/operator/run.py [--build DIR] [--nodes 3,1000] [--idle 60] [--qps 20,200] [--json FILE]

Run on demand, never as a test; results go to docs/benchmarks.md ("GPU operator").

For each node count and client rate (--kube-api-qps, burst 1.5x): a fresh API server with the
ClusterPolicy CRD, N GPU nodes carrying an NFD-like label set (40 labels, as nfd-worker and GFD
write them) and the DaemonSet emulator making pods available at once; the operator is started
(without leader election), its caches sync, then the ClusterPolicy (examples/operator/
clusterpolicy.yaml) is created. Measured:
- time from the ClusterPolicy's creation to: every node labelled; every state's objects applied
  (the last DaemonSet created); the ClusterPolicy ready (DaemonSets available, status written);
- the operator's VmRSS and VmHWM before the ClusterPolicy (caches synced) and once ready;
- API writes during --idle seconds once ready (the issue's target: 0 per minute), and the passes
  run meanwhile; then the same window with --leader-elect (its only writes are the Lease's
  renewals, one per retry period).
Every process started is remembered by PID and ended; every wait has a deadline.
"""
import argparse
import functools
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from benchlib import describe, machine, memory, wait_until  # noqa: E402
from fakekube import FakeKube  # noqa: E402
import operator_harness as oh  # noqa: E402

# Polled every 0.1 s, not on every change: with 1,000 nodes the API server's changes come faster
# than a check of them.
wait = functools.partial(wait_until, every=0.1)


def nfd_labels(i):
    """What a GPU node carries before the operator: NFD's PCI, CPU, kernel and OS labels."""
    labels = dict(oh.GPU_LABELS)
    for k in ("cpuid.AVX", "cpuid.AVX2", "cpuid.AVX512F", "cpuid.FMA3", "cpuid.SHA", "cpuid.VAES",
              "cpuid.AMXBF16", "cpuid.AMXINT8", "cpuid.ADX", "cpuid.AESNI", "cpuid.VMX",
              "hardware_multithreading", "power.sst_bf.enabled", "pstate.status",
              "rdt.RDTMON", "rdt.RDTL3CA"):
        labels[f"feature.node.kubernetes.io/cpu-{k}"] = "true"
    for k in ("pci-0302_10de.present", "pci-0200_15b3.present", "pci-0300_1a03.present",
              "storage-nonrotationaldisk", "network-sriov.capable", "memory-numa",
              "kernel-config.NO_HZ", "kernel-config.NO_HZ_IDLE", "kernel-selinux.enabled"):
        labels[f"feature.node.kubernetes.io/{k}"] = "true"
    labels["feature.node.kubernetes.io/kernel-version.full"] = "5.15.0-131-generic"
    labels["feature.node.kubernetes.io/kernel-version.major"] = "5"
    labels["feature.node.kubernetes.io/cpu-model.vendor_id"] = "Intel"
    labels["feature.node.kubernetes.io/cpu-model.family"] = "6"
    labels["feature.node.kubernetes.io/cpu-model.id"] = "143"
    labels["node.kubernetes.io/instance-type"] = "p5.48xlarge"
    labels["topology.kubernetes.io/zone"] = f"zone-{i % 3}"
    labels["topology.kubernetes.io/region"] = "region-1"
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    labels["nvidia.com/gpu.count"] = "8"
    labels["nvidia.com/gpu.memory"] = "81559"
    labels["nvidia.com/cuda.driver-version.full"] = "595.91.07"
    labels["nvidia.com/mig.capable"] = "true"
    return labels


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def start_operator(build, fk, work, name, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPLANE_")}
    env.update(OPERATOR_NAMESPACE=oh.NAMESPACE, GPUPLANE_IMAGE=oh.IMAGE)
    log = work / f"{name}.log"
    p = subprocess.Popen([str(build / "gpuplane"), "operator", f"--kubeconfig={fk.kubeconfig}",
                          "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=0",
                          *args], stderr=open(log, "w"), env=env)

    def port():
        m = re.search(r'"serving /metrics".* port=(\d+)', log.read_text())
        return m and int(m.group(1))
    return p, wait(port, 20, "the operator's metrics port"), log


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def labelled(fk, n):
    """Every node has its deploy labels (read in place: no copy of 1,000 nodes per check)."""
    with fk.store.cond:
        return sum(1 for k, node in fk.store.objects.items() if k[1] == "nodes" and
                   node["metadata"].get("labels", {}).get("nvidia.com/gpu.deploy.driver") == "true") == n


def run_one(build, n, qps, idle):
    out = {"nodes": n, "qps": qps}
    with tempfile.TemporaryDirectory(prefix="gpop-bench-") as tmp:
        work = pathlib.Path(tmp)
        fk = FakeKube(work / "api", bookmark_interval=5.0, history=20000).start()
        procs = []
        try:
            fk.apply_crd(oh.CRD)
            fk.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": oh.NAMESPACE}})
            t = time.monotonic()
            for i in range(n):
                fk.add_node(f"gpu-{i:04d}", labels=nfd_labels(i), allocatable={"nvidia.com/gpu": "8"})
            out["setup_s"] = round(time.monotonic() - t, 1)
            burst = int(qps * 1.5)
            p, port, log = start_operator(build, fk, work, "operator", f"--kube-api-qps={qps}",
                                          f"--kube-api-burst={burst}")
            procs.append(p)
            wait(lambda: metric(port, "gpuplane_operator_caches_synced") == 1, 120, "synced")
            time.sleep(1)
            out["rss_synced_kib"] = memory(p.pid)["VmRSS"]
            cp = oh.yaml_objects(ROOT / "examples" / "operator" / "clusterpolicy.yaml")[0]
            t0 = time.monotonic()
            fk.create(cp)
            wait(lambda: labelled(fk, n), 900, "every node labelled")
            out["labelled_s"] = round(time.monotonic() - t0, 2)
            wait(lambda: len(fk.objects("daemonsets", oh.NAMESPACE)) == len(oh.DAEMONSETS), 900,
                 "every DaemonSet")
            out["applied_s"] = round(time.monotonic() - t0, 2)
            wait(lambda: oh.daemonsets_ready(fk) and
                 (oh.condition(oh.status(fk), "Ready") or {}).get("reason") == "Reconciled", 900,
                 "ready")
            out["ready_s"] = round(time.monotonic() - t0, 2)
            time.sleep(2)
            mem = memory(p.pid)
            out["rss_ready_kib"], out["hwm_kib"] = mem["VmRSS"], mem["VmHWM"]
            passes = metric(port, "gpu_operator_reconciliation_total")
            since = time.time()
            time.sleep(idle)
            out["idle_writes"] = len(fk.writes(since=since))
            out["idle_passes"] = metric(port, "gpu_operator_reconciliation_total") - passes
            out["idle_rss_kib"] = memory(p.pid)["VmRSS"]
            stop(p)
            # the same with leader election: the Lease's renewals are its only writes
            p, port, log = start_operator(build, fk, work, "operator-le", "--leader-elect",
                                          f"--kube-api-qps={qps}", f"--kube-api-burst={burst}")
            procs.append(p)
            wait(lambda: metric(port, "gpuplane_operator_leader") == 1, 60, "leader")
            wait(lambda: metric(port, "gpu_operator_reconciliation_status") == 1, 300, "ready")
            time.sleep(2)
            since = time.time()
            time.sleep(idle)
            writes = fk.writes(since=since)
            out["idle_writes_le"] = len(writes)
            out["idle_writes_le_other"] = len([w for w in writes if w["resource"] != "leases.coordination.k8s.io"])
        finally:
            for p in procs:
                stop(p)
            fk.stop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--nodes", default="3,1000")
    ap.add_argument("--qps", default="20,200")
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    build = pathlib.Path(args.build).resolve()
    m = machine()
    print(f"# {describe(m)}", flush=True)
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        for qps in (float(x) for x in args.qps.split(",")):
            if n <= 10 and qps != float(args.qps.split(",")[0]):
                continue  # a small cluster is not rate-bound
            r = run_one(build, n, qps, args.idle)
            results.append(r)
            print(json.dumps(r), flush=True)
    print()
    print("| nodes | qps | labelled s | applied s | ready s | RSS synced MiB | RSS ready MiB | HWM MiB |"
          f" writes in {args.idle:.0f} s idle | passes | with --leader-elect (Lease / other) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['nodes']} | {r['qps']:.0f} | {r['labelled_s']} | {r['applied_s']} | {r['ready_s']} |"
              f" {r['rss_synced_kib'] / 1024:.1f} | {r['rss_ready_kib'] / 1024:.1f} |"
              f" {r['hwm_kib'] / 1024:.1f} | {r['idle_writes']} | {r['idle_passes']:.0f} |"
              f" {r['idle_writes_le'] - r['idle_writes_le_other']} / {r['idle_writes_le_other']} |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"machine": m, "results": results}, indent=1))


if __name__ == "__main__":
    main()
