#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/memory: what each gpuplane daemon costs in memory, library by library.

    bench/memory/run.py [--build DIR] [--json FILE]

Run on demand, never as a test; results go to docs/benchmarks.md ("Memory per daemon").

Each daemon runs on the mock DGX H100 (8 GPUs) doing its job, then /proc/PID is read:

  device-plugin  time-slicing with 8 replicas per GPU (64 devices, config file read at start),
                 registered with the kubelet emulator (tools/kubelet-emulator), after 1000 Allocate
                 calls from grpcio
  discover       writing the NFD features file (no NodeFeature API: no TLS), after five passes 100 ms
                 apart with a config file read at start
  exporter       dcgm-exporter's default counters, after 1000 scrapes (half of them asking for gzip)
                 and ten collections 100 ms apart
  dra-driver     against the fake API server (HTTPS, tests/integration/fakekube.py) and the DRA
                 kubelet emulator, with 100 claims prepared (8 allocated by `gpuplane allocate`, one
                 per GPU, then cloned so that several claims share a GPU, as time-sliced claims do)

Figures: VmRSS and VmHWM (/proc/PID/status), Pss and Private_Dirty (/proc/PID/smaps_rollup: the part
that cannot be shared with any other process), and a table of every mapping's Rss, Pss and
Private_Dirty, grouped by file (anonymous memory as [anon], the heap as [heap]). The mock NVML
library stands where the driver's libnvidia-ml.so.1 would be. Every process started is remembered by
PID and ended; every wait has a deadline.
"""
import argparse
import collections
import copy
import importlib.util
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))

from benchlib import describe, machine  # noqa: E402

REPLICAS = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 8
"""
TARGETS = {"device-plugin": {"VmRSS": 4096}, "dra-driver": {"VmRSS": 8192, "Pss": 6144},
           "discover": {"VmRSS": 3072}, "exporter": {"VmRSS": 5120}}


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def status_kib(pid):
    out = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[k] = int(v.split()[0])
    for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        k, _, v = line.partition(":")
        if k in ("Pss", "Private_Dirty", "Private_Clean", "Shared_Clean"):
            out[k] = int(v.split()[0])
    return out


def per_mapping(pid):
    """{name: {Rss, Pss, Private_Dirty}} in KiB, by mapped file (basename) or kind."""
    rows = collections.defaultdict(lambda: {"Rss": 0, "Pss": 0, "Private_Dirty": 0})
    name = None
    for line in pathlib.Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
            path = parts[5] if len(parts) > 5 else ""
            name = pathlib.Path(path).name if path.startswith("/") else (path or "[anon]")
        elif parts and parts[0].rstrip(":") in ("Rss", "Pss", "Private_Dirty"):
            rows[name][parts[0].rstrip(":")] += int(parts[1])
    return {k: v for k, v in rows.items() if v["Rss"] > 0}


def snapshot(pid):
    return {"status": status_kib(pid), "mappings": per_mapping(pid)}


def device_plugin(build):
    from conftest import Gpuplane
    from dp_harness import Harness
    h = Harness(Gpuplane(build))
    try:
        progress("device-plugin: dgx-h100, 8 replicas per GPU ...")
        p = h("dgx-h100", config=REPLICAS)
        ids = sorted(p.snapshot())
        for i in range(1000):
            p.allocate([ids[i % len(ids)]])
        return snapshot(p.pid)
    finally:
        h.teardown()


def discover(build):
    from conftest import Gpuplane
    from test_discover import Daemon, wait_until
    progress("discover: dgx-h100, the features file ...")
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpmem-"))
    d = None
    try:
        (work / "config.yaml").write_text(REPLICAS)
        d = Daemon(Gpuplane(build), work, "--mock", "dgx-h100", "--use-node-feature-api=false",
                   "-o", work / "gfd", "--sleep-interval", "100ms", "--config-file",
                   work / "config.yaml", "-v=2")
        wait_until(lambda: d.log().count("labels written") + d.log().count("labels unchanged") >= 5,
                   what="five passes")
        return snapshot(d.proc.pid)
    finally:
        if d:
            d.stop()
        shutil.rmtree(work, ignore_errors=True)


def exporter(build, scrapes=1000):
    import http.client
    from conftest import Gpuplane
    from test_exporter import Exporter
    progress(f"exporter: dgx-h100, {scrapes} scrapes ...")
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpmem-"))
    e = None
    try:
        e = Exporter(Gpuplane(build), work, "--mock", "dgx-h100", "-c", "100")
        conn = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10)
        for i in range(scrapes):
            conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"} if i % 2 else {})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200
        conn.close()
        time.sleep(1.0)  # ten collections more
        assert e.proc.poll() is None, e.log()
        return snapshot(e.proc.pid)
    finally:
        if e:
            e.stop()
        shutil.rmtree(work, ignore_errors=True)


def load_dra_bench():
    path = ROOT / "bench" / "dra-driver" / "run.py"
    spec = importlib.util.spec_from_file_location("dra_driver_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def clone_claims(node, base, n):
    """n claims that share base's allocations round-robin, stored with reservedFor."""
    out = []
    for i in range(n):
        c = copy.deepcopy(base[i % len(base)])
        meta = c["metadata"]
        c["metadata"] = {"name": f"mem-{i}", "namespace": meta["namespace"]}
        c["status"]["reservedFor"] = [{"resource": "pods", "name": f"pod-mem-{i}",
                                       "uid": str(uuid.uuid4())}]
        out.append(node.fk.put(c))
    return out


def dra_driver(build, n_claims=100):
    bench = load_dra_bench()
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpmem-", dir="/tmp"))
    node = client = None
    try:
        progress(f"dra-driver: dgx-h100, {n_claims} claims prepared ...")
        node = bench.Node(build / "gpuplane", "dgx-h100", work, 1000.0)
        claims = clone_claims(node, node.claims(8), n_claims)
        client = bench.Client(node)
        for i in range(0, len(claims), 10):
            client.prepare(claims[i:i + 10])
        return snapshot(node.proc.pid)
    finally:
        if client:
            client.close()
        if node:
            node.close()
        shutil.rmtree(work, ignore_errors=True)


def summary_table(results):
    lines = ["| daemon | VmRSS KiB | VmHWM KiB | Pss KiB | Private_Dirty KiB | RssAnon KiB | "
             "RssFile KiB | target |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        s = r["status"]
        target = ", ".join(f"{k} <= {v} KiB {'met' if s[k] <= v else 'MISSED'}"
                           for k, v in TARGETS.get(name, {}).items())
        lines.append(f"| {name} | {s['VmRSS']} | {s['VmHWM']} | {s['Pss']} | {s['Private_Dirty']} | "
                     f"{s['RssAnon']} | {s['RssFile']} | {target} |")
    return "\n".join(lines)


def mapping_table(name, r):
    lines = [f"{name}:", "", "| mapping | Rss KiB | Pss KiB | Private_Dirty KiB |", "|---|---|---|---|"]
    rows = sorted(r["mappings"].items(), key=lambda kv: -kv[1]["Rss"])
    for k, v in rows:
        lines.append(f"| {k} | {v['Rss']} | {v['Pss']} | {v['Private_Dirty']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("GPUPLANE_BUILD", str(ROOT / "build")),
                    help="the build directory holding gpuplane (default build/)")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    ap.add_argument("--claims", type=int, default=100, help="claims the DRA driver prepares (100)")
    args = ap.parse_args()
    build = pathlib.Path(args.build).resolve()
    if not (build / "gpuplane").exists():
        raise SystemExit(f"run.py: {build / 'gpuplane'} is not built (make build)")
    os.environ["GPUPLANE_BUILD"] = str(build)
    results = {"device-plugin": device_plugin(build), "discover": discover(build),
               "exporter": exporter(build), "dra-driver": dra_driver(build, args.claims)}
    head = describe(machine())
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"machine": head, **results}, indent=2) + "\n")
    print(f"machine: {head}\n")
    print(summary_table(results) + "\n")
    for name, r in results.items():
        print(mapping_table(name, r) + "\n")


if __name__ == "__main__":
    main()
