#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/rpc: unary gRPC round trip over a unix socket, gpuplane's server (src/rpc) against grpc-go's.

    bench/rpc/run.py [BUILD_DIR] [--calls N] [--parallel-calls N] [--repeat R] [--json FILE]

Run on demand, never as a test; results go to docs/benchmarks.md ("gRPC unary round trip").

Builds what it needs (the rpc-peer target, the Go peer via tests/interop/build-go-peer.sh), then for
each server -- ours (`rpc-peer serve`) and, as the reference in the same run, the Go peer's
`serve` (grpc-go) -- on a socket in a temporary directory:

- idle RSS, then RSS with 10 open connections (the Go peer's `hold`: 10 connections, one Echo each,
  kept open), VmRSS and VmHWM from /proc/PID/status;
- for each client, grpc-go (`interop-peer bench`) and grpcio (`peer.py bench`): a closed loop of
  sequential Echo calls with a 64-byte payload on one connection, and the same on 4 connections at
  once (throughput), each after a warm-up, every call timed on the monotonic clock; R runs each,
  the run with the median calls/s is reported; the server's CPU time per call comes from
  /proc/PID/stat around each run;
- ours only: RSS after 10 000 calls on one connection, then after each of two rounds of 100 000
  on 4 connections, on a fresh server (leak check: it must level off);
- the floor: pingpong.c, the same byte counts round-tripped over a bare socket pair (no gRPC);
- the grpc-go client on the server's CPU ("same CPU"), which has no cross-CPU wake-ups.

With taskset and at least 2 CPUs the servers run on CPU 0 and the clients on CPU 1 (so the Go
server has GOMAXPROCS 1, like our single-threaded loop). Every process is remembered by PID and
killed at the end; every wait has a deadline.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "bench"))
from benchlib import machine  # noqa: E402
from rpcpeers import LineReader  # noqa: E402

PYTHON = "/usr/bin/python3"
PAYLOAD = 64
HOLD_CONNECTIONS = 10
TOTAL_LIMIT_S = 900  # the whole run


class Runner:
    def __init__(self, build, tmp, go_peer, deadline):
        self.build = build
        self.tmp = tmp
        self.go_peer = go_peer
        self.deadline = deadline
        self.procs = []
        self.env = dict(os.environ, GPUPLANE_BUILD=str(build))
        two = shutil.which("taskset") and (os.cpu_count() or 1) >= 2
        self.server_cpu = ["taskset", "-c", "0"] if two else []
        self.client_cpu = ["taskset", "-c", "1"] if two else []
        self.same_cpu = False  # clients on the servers' CPU

    def left(self, cap):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("bench/rpc: total time limit reached")
        return min(cap, left)

    def start(self, argv, stdin=subprocess.DEVNULL, log="proc"):
        err = open(self.tmp / f"{log}-{len(self.procs)}.stderr", "wb")
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=stdin, stderr=err, env=self.env)
        err.close()
        p.reader = LineReader(p.stdout)
        p.log = self.tmp / f"{log}-{len(self.procs)}.stderr"
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            os.kill(p.pid, sig)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        p.stdout.close()

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass

    def server_argv(self, server, socket):
        if server == "gpuplane":
            return self.server_cpu + [str(self.build / "tests" / "rpc-peer"), "serve", "--socket",
                                      str(socket)]
        return self.server_cpu + [str(self.go_peer), "serve", "--socket", str(socket)]

    def client_argv(self, client, mode, socket, *args):
        if client == "go":
            cmd = [str(self.go_peer)]
        else:
            cmd = [PYTHON, str(ROOT / "tests" / "interop" / "peer.py")]
        cpu = self.server_cpu if self.same_cpu else self.client_cpu
        return cpu + cmd + [mode, "--socket", str(socket)] + [str(a) for a in args]

    def serve(self, server):
        socket = self.tmp / f"{server}.sock"
        p = self.start(self.server_argv(server, socket), log=f"{server}-server")
        line = p.reader.readline(self.left(20))
        if line != "ready":
            raise RuntimeError(f"{server} server not ready ({line!r}): {p.log.read_text()}")
        p.socket = socket
        return p

    def client(self, client, mode, socket, *args, timeout=180):
        """Runs a client to completion; returns its last JSON line."""
        limit = self.left(timeout)
        p = self.start(self.client_argv(client, mode, socket, *args, "--time-limit-s",
                                        int(limit)), log=f"{client}-{mode}")
        lines = []
        end = time.monotonic() + limit + 5
        while (line := p.reader.readline(max(end - time.monotonic(), 0.1))) is not None:
            lines.append(json.loads(line))
        rc = p.wait(timeout=max(end - time.monotonic(), 1))
        if rc != 0 or not lines:
            raise RuntimeError(f"{client} {mode} exited {rc}: {p.log.read_text()}")
        p.stdout.close()
        return lines[-1]

    def hold(self, socket, n):
        """Opens n connections from the Go peer, one Echo each; returns the process (kept open
        until release())."""
        p = self.start(self.client_argv("go", "hold", socket, "--connections", n,
                                        "--time-limit-s", int(self.left(60))),
                       stdin=subprocess.PIPE, log="go-hold")
        line = p.reader.readline(self.left(30))
        if line is None or json.loads(line).get("ok") != n:
            raise RuntimeError(f"hold: {line!r}: {p.log.read_text()}")
        return p

    def release(self, p):
        p.stdin.close()
        p.wait(timeout=self.left(15))
        p.stdout.close()


def status_kib(pid):
    """VmRSS, VmHWM, RssAnon, RssFile (/proc/PID/status) and Pss (smaps_rollup), in KiB."""
    out = {}
    for name in ("status", "smaps_rollup"):
        for line in pathlib.Path(f"/proc/{pid}/{name}").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Pss"):
                out[key] = int(value.split()[0])
    return out


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle_rss(pid, wait=0.3):
    time.sleep(wait)
    return status_kib(pid)


def repeat(r, args, what, fn):
    """Runs fn() args.repeat times; the run with the median calls/s, with the spread."""
    runs = sorted((fn() for _ in range(args.repeat)), key=lambda x: x["calls_per_s"])
    med = dict(runs[len(runs) // 2])
    med.update(runs=runs, spread_calls_per_s=[round(x["calls_per_s"]) for x in runs],
               placement="same CPU" if r.same_cpu else "2 CPUs")
    print(f"  {what}: p50 {med['p50_us']:.0f} us, p99 {med['p99_us']:.0f} us, "
          f"{med['calls_per_s']:.0f} calls/s (runs {med['spread_calls_per_s']})", file=sys.stderr)
    return med


def bench_run(r, srv, client, conns, calls, args):
    """One bench client run against srv, with the server's CPU time per call."""
    cpu0 = cpu_seconds(srv.pid)
    res = r.client(client, "bench", srv.socket, "--calls", calls, "--warmup", args.warmup,
                   "--connections", conns, "--payload-size", PAYLOAD)
    cpu = cpu_seconds(srv.pid) - cpu0
    res["server_cpu_us_per_call"] = cpu * 1e6 / max(res["calls"] + args.warmup * conns, 1)
    if res["errors"]:
        raise RuntimeError(f"{client} client: {res['errors']} errors")
    return res


def bench_same_cpu(r, server, args, results):
    """The grpc-go client on the server's CPU, one connection: no cross-CPU wake-ups."""
    srv = r.serve(server)
    r.same_cpu = True
    try:
        med = repeat(r, args, f"{server:8} go     x1 same CPU",
                     lambda: bench_run(r, srv, "go", 1, args.calls, args))
        med["server"] = server
        results["rows"].append(med)
    finally:
        r.same_cpu = False
        r.stop(srv)


def floor(r, build, args, results):
    """Raw unix-socket round trips of the same sizes, no gRPC (pingpong.c)."""
    exe = build / "bench" / "rpc-pingpong"
    exe.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "bench" / "rpc" / "pingpong.c")],
                   check=True, timeout=120)
    for same in (False, True):
        r.same_cpu = same
        argv = [str(exe), str(args.calls), str(args.warmup)] + (["same"] if same else [])

        def once():
            p = subprocess.run(argv, capture_output=True, text=True, check=True,
                               timeout=r.left(120))
            return json.loads(p.stdout)

        med = repeat(r, args, f"floor    pingpong x1{' same CPU' if same else ''}", once)
        med.update(server="(none)", server_cpu_us_per_call=float("nan"))
        results["rows"].append(med)
    r.same_cpu = False


def bench_server(r, server, clients, args, results):
    srv = r.serve(server)
    try:
        mem = {"idle": settle_rss(srv.pid)}
        held = r.hold(srv.socket, HOLD_CONNECTIONS)
        mem["conns10"] = settle_rss(srv.pid)
        r.release(held)
        results["memory"][server] = mem
        print(f"  {server}: idle RSS {mem['idle']['VmRSS']} KiB, with {HOLD_CONNECTIONS} "
              f"connections {mem['conns10']['VmRSS']} KiB (HWM {mem['conns10']['VmHWM']} KiB)",
              file=sys.stderr)
        for client in clients:
            for conns, calls in ((1, args.calls), (args.parallel, args.parallel_calls)):
                if client == "python":
                    calls = max(calls // 4, 100)  # grpcio is slow enough that fewer calls do
                med = repeat(r, args, f"{server:8} {client:6} x{conns}",
                             lambda: bench_run(r, srv, client, conns, calls, args))
                med["server"] = server
                results["rows"].append(med)
        mem["after"] = status_kib(srv.pid)
    finally:
        r.stop(srv)


def leak_check(r, args, results):
    srv = r.serve("gpuplane")
    try:
        out = {"idle": settle_rss(srv.pid)}
        r.client("go", "bench", srv.socket, "--calls", 10000, "--warmup", 0, "--connections", 1,
                 "--payload-size", PAYLOAD)
        out["calls10k"] = settle_rss(srv.pid)
        for total in (110, 210):
            r.client("go", "bench", srv.socket, "--calls", 25000, "--warmup", 0, "--connections",
                     4, "--payload-size", PAYLOAD)
            out[f"calls{total}k"] = settle_rss(srv.pid)
        results["leak"] = out
    finally:
        r.stop(srv)


def table(results):
    mem = results["memory"]
    head = ("| server   | client   | CPUs     | conns | p50 µs | p99 µs | p99.9 µs | calls/s | "
            "server CPU µs/call | VmRSS 10 conns KiB |")
    lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
    for row in results["rows"]:
        rss = ""
        if row["server"] in mem and row["connections"] == 1 and row["placement"] == "2 CPUs":
            rss = mem[row["server"]]["conns10"]["VmRSS"]
        cpu = row["server_cpu_us_per_call"]
        cpu = "" if cpu != cpu else f"{cpu:.1f}"
        lines.append(f"| {row['server']:8} | {row['client']:8} | {row['placement']:8} | "
                     f"{row['connections']:5} | {row['p50_us']:6.0f} | {row['p99_us']:6.0f} | "
                     f"{row['p999_us']:8.0f} | {row['calls_per_s']:7.0f} | {cpu:>18} | "
                     f"{rss!s:>18} |")
    return "\n".join(lines)


def memory_table(results):
    """KiB. RssAnon is the process's own memory; RssFile mostly shared library text (libc alone is
    about 1 MiB of it), counted in full in every process that maps it; Pss shares it out."""
    head = ("| server   | state          |  VmRSS |  VmHWM | RssAnon | RssFile |    Pss |")
    lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
    states = (("idle", "idle"), ("conns10", f"{HOLD_CONNECTIONS} connections"),
              ("after", "after the runs"))
    for server, m in results["memory"].items():
        for key, label in states:
            if key in m:
                x = m[key]
                lines.append(f"| {server:8} | {label:14} | {x['VmRSS']:6} | {x['VmHWM']:6} | "
                             f"{x['RssAnon']:7} | {x['RssFile']:7} | {x['Pss']:6} |")
    if "leak" in results:
        lk = results["leak"]
        lines.append("")
        lines.append(f"gpuplane leak check (fresh server, VmRSS / RssAnon): idle "
                     f"{lk['idle']['VmRSS']} / {lk['idle']['RssAnon']} KiB, after 10 000 calls "
                     f"{lk['calls10k']['VmRSS']} / {lk['calls10k']['RssAnon']} KiB, after 110 000 "
                     f"calls {lk['calls110k']['VmRSS']} / {lk['calls110k']['RssAnon']} KiB, after "
                     f"210 000 calls {lk['calls210k']['VmRSS']} / {lk['calls210k']['RssAnon']} KiB "
                     f"(VmHWM {lk['calls210k']['VmHWM']} KiB).")
    return "\n".join(lines)


def verdict(results):
    rows = {(x["server"], x["client"], x["connections"]): x for x in results["rows"]
            if x["placement"] == "2 CPUs"}
    out = []
    ours = rows.get(("gpuplane", "go", 1))
    if ours:
        out.append(f"p50 <= 50 us from grpc-go: {ours['p50_us']:.0f} us "
                   f"{'met' if ours['p50_us'] <= 50 else 'MISSED'}")
        out.append(f"p99 <= 200 us from grpc-go: {ours['p99_us']:.0f} us "
                   f"{'met' if ours['p99_us'] <= 200 else 'MISSED'}")
    m10 = results["memory"]["gpuplane"]["conns10"]
    out.append(f"server RSS <= 2 MiB with 10 connections: VmRSS {m10['VmRSS']} KiB "
               f"{'met' if m10['VmRSS'] <= 2048 else 'MISSED'} (RssAnon {m10['RssAnon']} KiB, "
               f"Pss {m10['Pss']} KiB)")
    for client in ("go", "python"):
        for conns in sorted({k[2] for k in rows}):
            a, b = rows.get(("gpuplane", client, conns)), rows.get(("grpc-go", client, conns))
            if a and b:
                ratio = a["calls_per_s"] / b["calls_per_s"]
                out.append(f"calls/s vs grpc-go server ({client} client, {conns} conns): "
                           f"{ratio:.2f}x {'met' if ratio >= 1 / 1.5 else 'MISSED'}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default=str(ROOT / "build"))
    ap.add_argument("--calls", type=int, default=20000, help="sequential calls per run (grpc-go; "
                    "grpcio makes a quarter)")
    ap.add_argument("--parallel", type=int, default=4, help="connections of the throughput runs")
    ap.add_argument("--parallel-calls", type=int, default=10000, help="calls per connection")
    ap.add_argument("--warmup", type=int, default=1000, help="untimed calls per connection")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clients", default="go,python")
    ap.add_argument("--servers", default="gpuplane,grpc-go")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()

    build = pathlib.Path(args.build).resolve()
    subprocess.run(["cmake", "--build", str(build), "--target", "rpc-peer"], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    go_peer = subprocess.run([str(ROOT / "tests" / "interop" / "build-go-peer.sh"), str(build)],
                             check=True, capture_output=True, text=True, timeout=600)
    go_peer = pathlib.Path(go_peer.stdout.strip().splitlines()[-1])

    results = {"machine": machine(), "payload_size": PAYLOAD, "rows": [], "memory": {},
               "args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="bench-rpc-") as tmp:
        r = Runner(build, pathlib.Path(tmp), go_peer, time.monotonic() + TOTAL_LIMIT_S)
        results["pinning"] = bool(r.server_cpu)
        try:
            for server in args.servers.split(","):
                bench_server(r, server, args.clients.split(","), args, results)
            if "go" in args.clients.split(","):
                for server in args.servers.split(","):
                    bench_same_cpu(r, server, args, results)
            if r.server_cpu:
                floor(r, build, args, results)
            if "gpuplane" in args.servers.split(","):
                leak_check(r, args, results)
        finally:
            r.kill_all()
    m = results["machine"]
    print(f"\nmachine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['date']}, "
          f"load {m['load1']:.2f} at the start; servers on CPU 0, clients on CPU 1 (\"2 CPUs\") "
          f"or 0 (\"same CPU\"): {results['pinning']}; {PAYLOAD}-byte Echo payload, the run "
          f"with the median calls/s of {args.repeat}\n")
    print(table(results))
    print()
    if "gpuplane" in results["memory"] and "grpc-go" in results["memory"]:
        print(memory_table(results))
        print()
        print(verdict(results))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
