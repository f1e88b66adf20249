#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/exporter: `gpuplane exporter` on the mock DGX H100 (8 GPUs), scraped from a local client.

    bench/exporter/run.py [--build DIR] [--scrapes N] [--json FILE]

Run on demand, never as a test; results go to docs/benchmarks.md ("Metrics exporter").

- Scrape latency: N scrapes of /metrics (default 1000) over one keep-alive connection from this
  process (http.client), p50/p99/max, and the same against a real Prometheus's own /metrics (Go's
  net/http serving a registry; Debian's prometheus) in the same run: the ratio is what to read on a
  shared machine, not the microseconds.
- Memory: VmRSS, Pss and private dirty of the exporter at start, after N scrapes and after 10,000
  scrapes (growth is a leak).
- CPU per collection: the exporter's user+system time (/proc/PID/stat) over 10 s at a 100 ms collect
  interval, divided by the collections in it.
Every process started is remembered by PID and ended; every wait has a deadline.
"""
import argparse
import http.client
import json
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from benchlib import describe, machine, memory, wait_until  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(p * len(s) + 0.999999) - 1))]


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def scrapes(port, n, path="/metrics"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times, size = [], 0
    try:
        for _ in range(n):
            t = time.perf_counter()
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            times.append(time.perf_counter() - t)
            if r.status != 200:
                raise SystemExit(f"run.py: {path} answered {r.status}")
            size = len(body)
    finally:
        conn.close()
    return times, size


class Proc:
    def __init__(self, argv, log, env=None):
        self.log = log
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=open(log, "w"), env=env)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def exporter(build, work, interval_ms):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "DCGM_"))}
    env["NODE_NAME"] = "bench-node"
    log = work / f"exporter-{interval_ms}.log"
    e = Proc([str(build / "gpuplane"), "exporter", "--mock", "dgx-h100", "-a", "127.0.0.1:0", "-c",
              str(interval_ms), "-v=2"], log, env)
    m = wait_until(lambda: e.p.poll() is not None or
                   re.search(r'"serving /metrics".* port=(\d+)', log.read_text()), 20, "the exporter")
    if e.p.poll() is not None:
        raise SystemExit(f"run.py: the exporter exited: {log.read_text()}")
    e.port = int(m.group(1))
    return e


def prometheus_peer(work):
    import prometheus as prom
    if prom.available():
        return None
    p = prom.Prometheus([], scrape_interval="60s")
    p.start()
    return p


def summary(times):
    us = [t * 1e6 for t in times]
    return {"n": len(us), "p50_us": round(pct(us, 0.5), 1), "p99_us": round(pct(us, 0.99), 1),
            "max_us": round(max(us), 1), "mean_us": round(statistics.mean(us), 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("GPUPLANE_BUILD", str(ROOT / "build")))
    ap.add_argument("--scrapes", type=int, default=1000)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    build = pathlib.Path(args.build).resolve()
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpexp-"))
    head = describe(machine())
    result = {"machine": head}
    e = peer = fast = None
    try:
        e = exporter(build, work, 30000)
        scrapes(e.port, 50)  # warm-up
        result["memory_start"] = memory(e.p.pid, rollup=True)
        t, size = scrapes(e.port, args.scrapes)
        result["exporter"] = dict(summary(t), bytes=size)
        result["memory_after_scrapes"] = memory(e.p.pid, rollup=True)
        peer = prometheus_peer(work)
        if peer:
            scrapes(peer.port, 50)
            t, psize = scrapes(peer.port, args.scrapes)
            result["prometheus"] = dict(summary(t), bytes=psize)
        scrapes(e.port, 10000)
        result["memory_after_10000"] = memory(e.p.pid, rollup=True)
        fast = exporter(build, work, 100)
        c0, t0 = cpu_seconds(fast.p.pid), time.monotonic()
        time.sleep(10)
        c1, t1 = cpu_seconds(fast.p.pid), time.monotonic()
        collections = (t1 - t0) / 0.1
        result["cpu_per_collection_us"] = round((c1 - c0) / collections * 1e6, 1)
    finally:
        for x in (e, fast):
            if x:
                x.stop()
        if peer:
            peer.stop()
        for f in work.iterdir():
            f.unlink()
        work.rmdir()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"machine: {head}\n")
    print("| server | scrapes | bytes | p50 µs | p99 µs | max µs |")
    print("|---|---|---|---|---|---|")
    for k in ("exporter", "prometheus"):
        if k in result:
            r = result[k]
            print(f"| {k} | {r['n']} | {r['bytes']} | {r['p50_us']} | {r['p99_us']} | {r['max_us']} |")
    if "prometheus" in result:
        print(f"\nratio exporter / Prometheus: p50 {result['exporter']['p50_us'] / result['prometheus']['p50_us']:.2f}x, "
              f"p99 {result['exporter']['p99_us'] / result['prometheus']['p99_us']:.2f}x")
    print("\n| exporter memory | VmRSS KiB | Pss KiB | Private_Dirty KiB |")
    print("|---|---|---|---|")
    for k in ("memory_start", "memory_after_scrapes", "memory_after_10000"):
        m = result[k]
        print(f"| {k.replace('memory_', '').replace('_', ' ')} | {m['VmRSS']} | {m['Pss']} | {m['Private_Dirty']} |")
    print(f"\nCPU per collection (8 GPUs, every field of the default counters): "
          f"{result['cpu_per_collection_us']} µs")


if __name__ == "__main__":
    main()
