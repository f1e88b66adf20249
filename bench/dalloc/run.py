#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How long `gpuplane allocate` takes where the search must prune rather than enumerate, and where
pools are gathered for one node out of a whole cluster's ResourceSlices. Each scenario is a whole
process (`gpuplane allocate --stats -o json`), run --runs times; the table gives the p50 and max
wall time and the search steps the allocator reports. Inputs are generated into a temporary
directory (standard library only).

Scenarios:
  limit-2x32      two requests each `firstAvailable: [32 devices, 16 devices]` on 64 devices: the
                  32-result limit of a claim leaves only 16 + 16 (kube-scheduler answers at once)
  limit-4x8       four requests each `[32, 16, 8]` on 128 devices: only 8 + 8 + 8 + 8 fits
  limit-mixed     `[32, 2]` then `[30, 1]` on 64 devices: 2 + 30 is the first choice that fits
  pools-5000      the node's pool among 5,000 nodes' slices (8 GPUs each), one GPU asked for

    bench/dalloc/run.py [--binary build/gpuplane] [--runs 20] [--json FILE]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import benchlib  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
GATES = ("DRAAdminAccess=true,DRAPrioritizedList=true,DRADeviceTaints=true,"
         "DRAPartitionableDevices=true,DRAConsumableCapacity=true,"
         "DRADeviceBindingConditions=true,DRAResourceClaimDeviceStatus=true")


def base():
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
             "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": "device.driver == 'a'"}}]}}]


def node_slice(node, n, pool=None):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-s"},
            "spec": {"driver": "a", "nodeName": node,
                     "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"d{i}"} for i in range(n)]}}


def claim(requests):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c1", "namespace": "default"},
            "spec": {"devices": {"requests": requests}}}


def prioritized(name, counts):
    return {"name": name, "firstAvailable": [
        {"name": f"n{c}", "deviceClassName": "gpu", "count": c} for c in counts]}


def scenarios():
    yield "limit-2x32", base() + [node_slice("n1", 64), claim(
        [prioritized("r0", [32, 16]), prioritized("r1", [32, 16])])]
    yield "limit-4x8", base() + [node_slice("n1", 128), claim(
        [prioritized(f"r{i}", [32, 16, 8]) for i in range(4)])]
    yield "limit-mixed", base() + [node_slice("n1", 64), claim(
        [prioritized("r0", [32, 2]), prioritized("r1", [30, 1])])]
    yield "pools-5000", base() + [node_slice(f"n{i}", 8) for i in range(1, 5001)] + [claim(
        [{"name": "r", "exactly": {"deviceClassName": "gpu"}}])]


def run(binary, path, runs):
    times, steps, code = [], None, None
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run([binary, "allocate", "--node", "n1", "--feature-gates", GATES,
                            "--stats", "-o", "json", "-f", path], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        code = p.returncode
        for line in p.stderr.splitlines():
            if line.startswith("stats: "):
                steps = int(line.split()[1])
    return {"exit": code, "steps": steps, "p50_ms": statistics.median(times) * 1e3,
            "max_ms": max(times) * 1e3}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "gpuplane"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    m = benchlib.machine()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, objs in scenarios():
            path = pathlib.Path(tmp) / f"{name}.json"
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
            rows.append({"scenario": name, **run(args.binary, str(path), args.runs)})
    print(f"# {benchlib.describe(m)}; {args.runs} runs each")
    print("| scenario | exit | search steps | p50 ms | max ms |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scenario']} | {r['exit']} | {r['steps']} | {r['p50_ms']:.2f} | "
              f"{r['max_ms']:.2f} |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"machine": m, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
