#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/deviceplugin: `gpuplane device-plugin` against the kubelet emulator and a grpc-go client.

    bench/deviceplugin/run.py [BUILD_DIR] [--parts LIST] [--starts N] [--calls N] [--repeat R]
                              [--rounds R] [--side-calls N] [--json FILE]

Run on demand, never as a test; results go to docs/benchmarks.md ("Device plugin").

Builds what it needs (gpuplane, the mock NVML library, the grpc-go client `dp-bench` and the
grpc-go device plugin `dp-peer` via bench/deviceplugin/build-go-client.sh). The kubelet emulator
(tools/kubelet-emulator) runs in this process, a fresh one in a temporary directory for every plugin
started. Measures:

- start -> registered: time from spawning `gpuplane device-plugin --mock PROFILE` to the emulator
  receiving Register, to Register answered (the emulator has dialled back and called
  GetDevicePluginOptions), and to the first ListAndWatch snapshot, for every resource of the node;
  median of N starts (after one untimed start), dgx-h100 and a100-mig (MIG mixed: 4 resources);
- Allocate of 1 GPU, sequential calls from `dp-bench allocate` (grpc-go) after a warm-up, R runs,
  the run with the median calls/s reported, with the plugin's CPU time per call (/proc/PID/stat);
  GetDevicePluginOptions the same way as the floor (the plugin's unary round trip with no work);
- GetPreferredAllocation k of n (all available) for dgx-h100 (k=2, 4) and the 16-GPU
  bench/deviceplugin/nodes/hgx-16.yaml (k=4, 8);
- health event -> ListAndWatch update: an XID 79 line appended to the mock's events file
  (MOCK_NVML_EVENTS), timed until `dp-bench watch` (grpc-go) receives the snapshot that shows the GPU
  unhealthy. The mock applies event lines while nvmlEventSetWait waits by re-reading the file every
  20 ms, so the end-to-end figure contains 0-20 ms of mock polling; the daemon's JSON log at -v=4
  (its "NVML event received" and "ListAndWatch update queued" lines) splits it into mock polling,
  in-daemon time and delivery;
- RSS (VmRSS, VmHWM, RssAnon, Pss from /proc/PID) of dgx-h100 with time-slicing, 8 replicas per GPU
  (64 devices), after registration and after 1000 Allocate calls;
- side by side ("side"): the same grpc-go client against gpuplane (dgx-h100, registered), against
  `dp-peer`, a minimal grpc-go device plugin serving the same 8 device ids and answering Allocate
  with what NVIDIA's plugin answers for them (envvar strategy: NVIDIA_VISIBLE_DEVICES), and against
  h2-floor.c, which answers Allocate with the same bytes and does nothing else (the floor no server
  can go under with this client), all on the plugin CPU. R rounds; each round runs Allocate of 1
  GPU against the three and GetDevicePluginOptions against gpuplane and grpc-go, the order rotating
  between rounds, so all see the same load. Absolute microseconds move with the machine's load, the
  ratio to grpc-go of each round much less: the report gives the median over rounds of p50, p99,
  calls/s and server CPU per call for each, and the median (and range) of the rounds' ratios.

--parts picks what runs (comma-separated: start, calls, health, rss, side; all by default).

With taskset and at least 2 CPUs the plugin runs on CPU 0 and the Go client on CPU 1 for the latency
parts (as bench/rpc); `--nice N` also runs both at that niceness (negative needs root): a way to see
how much of a tail is preemption by other work on the machine. Every process is remembered by PID and ended; every wait has a deadline.
"""
import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = ROOT / "bench" / "deviceplugin"
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "bench"))
from benchlib import machine  # noqa: E402
sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))
from rpcpeers import LineReader  # noqa: E402

GPU = "nvidia.com/gpu"
TOTAL_LIMIT_S = 900
HGX16 = HERE / "nodes" / "hgx-16.yaml"
REPLICAS_CONFIG = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 8
"""


def pct(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    if not s:
        return float("nan")
    i = min(max(int(p * len(s) + 0.999999) - 1, 0), len(s) - 1)
    return s[i]


class Runner:
    def __init__(self, build, tmp, client, deadline, nice=None, peer=None, floor=None):
        self.build = build
        self.tmp = tmp
        self.client = client
        self.peer_bin = peer
        self.floor_bin = floor
        self.deadline = deadline
        self.procs = []
        self.env = dict(os.environ, GPUPLANE_BUILD=str(build))
        self.env.pop("MOCK_NVML_EVENTS", None)
        two = shutil.which("taskset") and (os.cpu_count() or 1) >= 2
        self.plugin_cpu = ["taskset", "-c", "0"] if two else []
        self.client_cpu = ["taskset", "-c", "1"] if two else []
        if nice is not None:
            self.plugin_cpu += ["nice", "-n", str(nice)]
            self.client_cpu += ["nice", "-n", str(nice)]
        self.seq = 0

    def left(self, cap):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("bench/deviceplugin: total time limit reached")
        return min(cap, left)

    def track(self, p):
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
        for f in (p.stdout, p.stdin):
            if f:
                f.close()

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass

    def plugin(self, kubelet, profile, *args, pin=False, events=None):
        """Starts `gpuplane device-plugin --mock PROFILE` for kubelet; returns (Popen, spawn time)."""
        self.seq += 1
        log = self.tmp / f"plugin-{self.seq}.log"
        env = dict(self.env)
        if events:
            env["MOCK_NVML_EVENTS"] = str(events)
        argv = (self.plugin_cpu if pin else []) + [
            str(self.build / "gpuplane"), "device-plugin", "--mock", str(profile),
            "--kubelet-socket", str(kubelet.socket)] + [str(a) for a in args]
        with open(log, "wb") as err:
            t0 = time.monotonic()
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err, env=env)
        p.log = log
        return self.track(p), t0

    def serve_ready(self, name, argv):
        """Starts a server that prints "ready" once it listens (dp-peer, h2-floor), on the plugin
        CPU; returns its Popen after that line."""
        self.seq += 1
        log = self.tmp / f"{name}-{self.seq}.log"
        with open(log, "wb") as err:
            p = self.track(subprocess.Popen(self.plugin_cpu + [str(a) for a in argv],
                                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=err, env=self.env))
        p.log = log
        try:
            line = LineReader(p.stdout).readline(self.left(20))
        except TimeoutError:
            line = None
        if line != "ready":
            self.stop(p)
            raise RuntimeError(f"{name}: {line!r}: {log.read_text()[-2000:]}")
        return p

    def go(self, mode, socket, *args, timeout=300):
        """Runs dp-bench to completion; returns its last JSON line."""
        limit = self.left(timeout)
        argv = self.client_cpu + [str(self.client), mode, "--socket", str(socket)] + \
            [str(a) for a in args] + ["--time-limit-s", str(int(limit))]
        p = self.track(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=self.env))
        try:
            out, err = p.communicate(timeout=limit + 10)
        except subprocess.TimeoutExpired:
            self.stop(p, signal.SIGKILL)
            raise
        lines = out.decode().splitlines()
        if p.returncode != 0 or not lines:
            raise RuntimeError(f"dp-bench {mode} exited {p.returncode}: {err.decode()}")
        res = json.loads(lines[-1])
        if res.get("errors"):
            raise RuntimeError(f"dp-bench {mode}: {res['errors']} errors: {res['first_error']}")
        return res

    def watch(self, socket):
        """Starts `dp-bench watch`; stdin is a pipe whose closing ends it."""
        argv = self.client_cpu + [str(self.client), "watch", "--socket", str(socket),
                                  "--time-limit-s", str(int(self.left(600)))]
        p = self.track(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=self.env))
        p.reader = LineReader(p.stdout)
        return p


def status_kib(pid):
    """VmRSS, VmHWM, RssAnon, RssFile (/proc/PID/status) and Pss (smaps_rollup), in KiB."""
    out = {}
    for name in ("status", "smaps_rollup"):
        for line in pathlib.Path(f"/proc/{pid}/{name}").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Pss", "Threads"):
                out[key] = int(value.split()[0])
    return out


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle_rss(pid, wait=0.3):
    time.sleep(wait)
    return status_kib(pid)


def emulator(r, name):
    import kubelet_emu as ke
    d = r.tmp / name
    d.mkdir()
    return ke.KubeletEmulator(str(d))


# ---- start -> registered ----

def resources_of(r, profile, args):
    """One untimed start: which resources the node has (registrations settle for 1 s)."""
    with emulator(r, f"discover-{pathlib.Path(str(profile)).stem}") as k:
        p, _ = r.plugin(k, profile, *args)
        try:
            k.wait_event("register", timeout=r.left(10))
            time.sleep(1.0)
            names = sorted({e.resource for e in k.events("register")})
            for n in names:
                k.wait_registered(n, timeout=r.left(10))
        finally:
            r.stop(p)
    return names


def one_start(r, profile, args, names, i):
    with emulator(r, f"start-{pathlib.Path(str(profile)).stem}-{i}") as k:
        p, t0 = r.plugin(k, profile, *args)
        try:
            for n in names:
                k.wait_registered(n, timeout=r.left(10))
            ms = {}
            for kind in ("register-request", "register"):
                ms[kind] = max((min(e.t for e in k.events(kind, n)) - t0) * 1e3 for n in names)
            reg = {n: min(e.t for e in k.events("register", n)) for n in names}
            ms["snapshot"] = max((min(e.t for e in k.events("update", n) if e.t >= reg[n]) - t0)
                                 * 1e3 for n in names)
        finally:
            r.stop(p)
        if p.returncode != 0:
            raise RuntimeError(f"plugin exited {p.returncode}: {p.log.read_text()[-2000:]}")
    return ms


def bench_start(r, args, results):
    cases = [("dgx-h100", "dgx-h100", []),
             ("a100-mig (mixed)", "a100-mig", ["--mig-strategy", "mixed"])]
    for label, profile, extra in cases:
        names = resources_of(r, profile, extra)
        runs = [one_start(r, profile, extra, names, i) for i in range(args.starts)]
        row = {"node": label, "resources": names, "starts": len(runs)}
        for kind in ("register-request", "register", "snapshot"):
            v = [x[kind] for x in runs]
            row[kind] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
        results["start"].append(row)
        print(f"  start {label}: {len(names)} resources, registered median "
              f"{row['register']['median']:.1f} ms (min {row['register']['min']:.1f}, max "
              f"{row['register']['max']:.1f}), first snapshot {row['snapshot']['median']:.1f} ms",
              file=sys.stderr)


# ---- Allocate, GetPreferredAllocation ----

def timed(r, pid, mode, sock, *a, calls, warmup):
    """One dp-bench run with the plugin's CPU time per call and the load average."""
    cpu0 = cpu_seconds(pid)
    res = r.go(mode, sock, *a, "--calls", calls, "--warmup", warmup)
    res["plugin_cpu_us_per_call"] = (cpu_seconds(pid) - cpu0) * 1e6 / (res["calls"] + warmup)
    res["load1"] = os.getloadavg()[0]
    return res


def repeat(args, what, fn):
    """Runs fn() args.repeat times; the run with the median calls/s, with the spread of p99."""
    runs = sorted((fn() for _ in range(args.repeat)), key=lambda x: x["calls_per_s"])
    med = dict(runs[len(runs) // 2])
    med["runs"] = runs
    med["spread_p99_us"] = sorted(round(x["p99_us"]) for x in runs)
    print(f"  {what}: p50 {med['p50_us']:.0f} us, p99 {med['p99_us']:.0f} us, max "
          f"{med['max_us']:.0f} us (p99 of the runs {med['spread_p99_us']})", file=sys.stderr)
    return med


def serving(r, name, profile, *extra, pin=True, events=None):
    """A plugin registered with a fresh emulator: (kubelet, Popen, device ids)."""
    k = emulator(r, name)
    try:
        p, _ = r.plugin(k, profile, *extra, pin=pin, events=events)
        k.wait_registered(GPU, timeout=r.left(10))
    except BaseException:
        k.close()
        raise
    return k, p, [d.id for d in k.devices(GPU)]


def bench_calls(r, args, results):
    k, p, ids = serving(r, "allocate", "dgx-h100")
    try:
        sock = k.endpoint(GPU)
        mem = {"registered": settle_rss(p.pid)}
        row = repeat(args, "GetDevicePluginOptions (floor)",
                     lambda: timed(r, p.pid, "options", sock, calls=args.calls,
                                   warmup=args.warmup))
        row.update(what="GetDevicePluginOptions", node="dgx-h100", n=len(ids), k=0)
        results["calls"].append(row)
        row = repeat(args, "Allocate 1 GPU (dgx-h100)",
                     lambda: timed(r, p.pid, "allocate", sock, "--ids", ids[0], calls=args.calls,
                                   warmup=args.warmup))
        row.update(what="Allocate", node="dgx-h100", n=len(ids), k=1)
        results["calls"].append(row)
        for size in (2, 4):
            row = repeat(args, f"GetPreferredAllocation {size} of 8",
                         lambda: timed(r, p.pid, "prefer", sock, "--available", ",".join(ids),
                                       "--size", size, calls=args.calls // 2,
                                       warmup=args.warmup // 2))
            row.update(what="GetPreferredAllocation", node="dgx-h100", n=len(ids), k=size,
                       answer_index=[ids.index(x) for x in row["answer"]])
            results["calls"].append(row)
        mem["after the call runs"] = settle_rss(p.pid)
        results["memory"]["dgx-h100, 8 devices"] = mem
    finally:
        r.stop(p)
        k.close()

    k, p, ids = serving(r, "prefer16", HGX16)
    try:
        sock = k.endpoint(GPU)
        for size in (4, 8):
            row = repeat(args, f"GetPreferredAllocation {size} of 16",
                         lambda: timed(r, p.pid, "prefer", sock, "--available", ",".join(ids),
                                       "--size", size, calls=args.calls // 2,
                                       warmup=args.warmup // 2))
            row.update(what="GetPreferredAllocation", node="hgx-16", n=len(ids), k=size,
                       answer_index=[ids.index(x) for x in row["answer"]])
            results["calls"].append(row)
    finally:
        r.stop(p)
        k.close()


# ---- health event -> ListAndWatch update ----

def json_log(path):
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def health_round(r, rnd, results):
    events = r.tmp / f"events-{rnd}.jsonl"
    events.write_text("")
    k, p, ids = serving(r, f"health-{rnd}", "dgx-h100", "-v=4", "--log-format=json",
                        events=events)
    w = None
    samples = []
    try:
        w = r.watch(k.endpoint(GPU))
        first = json.loads(w.reader.readline(r.left(10)))
        if first["healthy"] != len(ids):
            raise RuntimeError(f"watch: first snapshot {first}")
        order = list(range(len(ids)))
        random.shuffle(order)
        for i, gpu in enumerate(order):
            time.sleep(random.uniform(0.03, 0.08))  # a random phase against the mock's 20 ms poll
            line = json.dumps({"gpu": gpu, "type": "xid", "xid": 79}) + "\n"
            t_write = time.time_ns()
            with open(events, "a") as f:
                f.write(line)
            while True:
                snap = json.loads(w.reader.readline(r.left(5)))
                if snap["healthy"] == len(ids) - i - 1:
                    break
            samples.append({"write_ns": t_write, "go_ns": snap["t_ns"]})
    finally:
        if w:
            w.stdin.close()
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                r.stop(w, signal.SIGKILL)
        r.stop(p)
        k.close()
    # Pair each sample with the daemon's log: the first NVML receipt after the write, the first
    # queued update of nvidia.com/gpu after that receipt.
    log = json_log(p.log)
    recv = [e["ts"] for e in log if e.get("msg") == "NVML event received"]
    queued = [e["ts"] for e in log if e.get("msg") == "ListAndWatch update queued"
              and e.get("resource") == GPU]
    if len(recv) != len(samples) or len(queued) != len(samples):
        raise RuntimeError(f"health: {len(samples)} events, {len(recv)} receipts and "
                           f"{len(queued)} updates in {p.log}")
    for s, t_recv, t_q in zip(samples, recv, queued):
        s["recv_ns"] = round(t_recv * 1e9)
        s["queued_ns"] = round(t_q * 1e9)
        results["health"].append(s)


def bench_health(r, args, results):
    for rnd in range(args.health_rounds):
        health_round(r, rnd, results)
    h = results["health"]
    parts = {
        "end to end (write -> grpc-go client)": [(s["go_ns"] - s["write_ns"]) / 1e6 for s in h],
        "mock polling (write -> NVML event)": [(s["recv_ns"] - s["write_ns"]) / 1e6 for s in h],
        "in daemon (NVML event -> update queued)": [(s["queued_ns"] - s["recv_ns"]) / 1e6
                                                    for s in h],
        "delivery (queued -> grpc-go client)": [(s["go_ns"] - s["queued_ns"]) / 1e6 for s in h],
        "plugin total (NVML event -> grpc-go client)": [(s["go_ns"] - s["recv_ns"]) / 1e6
                                                        for s in h],
    }
    results["health_summary"] = {
        k: {"n": len(v), "p50": pct(v, 0.5), "p90": pct(v, 0.9), "max": max(v)}
        for k, v in parts.items()}
    for k, v in results["health_summary"].items():
        print(f"  health {k}: p50 {v['p50']:.3f} ms, max {v['max']:.3f} ms", file=sys.stderr)


# ---- RSS with 8 GPUs x 8 replicas ----

def bench_rss(r, args, results):
    cfg = r.tmp / "replicas-8.yaml"
    cfg.write_text(REPLICAS_CONFIG)
    k, p, ids = serving(r, "rss", "dgx-h100", "--config-file", cfg)
    try:
        if len(ids) != 64:
            raise RuntimeError(f"replicas: {len(ids)} devices")
        mem = {"registered": settle_rss(p.pid)}
        row = timed(r, p.pid, "allocate", k.endpoint(GPU), "--ids", ids[0], calls=1000, warmup=0)
        row.update(what="Allocate", node="dgx-h100 x8 replicas", n=len(ids), k=1,
                   spread_p99_us=[round(row["p99_us"])])
        results["calls"].append(row)
        mem["after 1000 Allocate"] = settle_rss(p.pid)
        results["memory"]["dgx-h100, 8 replicas (64 devices)"] = mem
        print(f"  RSS 8x8: registered {mem['registered']['VmRSS']} KiB, after 1000 Allocate "
              f"{mem['after 1000 Allocate']['VmRSS']} KiB (HWM "
              f"{mem['after 1000 Allocate']['VmHWM']} KiB)", file=sys.stderr)
    finally:
        r.stop(p)
        k.close()


# ---- side by side: gpuplane and a minimal grpc-go device plugin ----

SIDE_CALLS = (("Allocate", "allocate"), ("GetDevicePluginOptions", "options"))
SIDE_KEYS = ("p50_us", "p99_us", "calls_per_s", "plugin_cpu_us_per_call")
SIDE_SERVERS = (("gpuplane", "gpuplane device-plugin"), ("grpc-go", "grpc-go (dp-peer)"),
                ("floor", "floor (h2-floor, no work)"))


def bench_side(r, args, results):
    k, p, ids = serving(r, "side", "dgx-h100")
    go = floor = None
    try:
        go_sock, floor_sock = r.tmp / "dp-peer.sock", r.tmp / "h2-floor.sock"
        go = r.serve_ready("dp-peer", [r.peer_bin, "--socket", go_sock, "--devices", ",".join(ids)])
        floor = r.serve_ready("h2-floor", [r.floor_bin, floor_sock, ids[0]])
        servers = {"gpuplane": (p.pid, k.endpoint(GPU)), "grpc-go": (go.pid, go_sock),
                   "floor": (floor.pid, floor_sock)}
        rounds = []
        for rnd in range(args.rounds):
            one = {}
            for what, mode in SIDE_CALLS:
                extra = ("--ids", ids[0]) if mode == "allocate" else ()
                # The floor answers every stream with the Allocate answer: Allocate only.
                names = [n for n, _ in SIDE_SERVERS if mode == "allocate" or n != "floor"]
                # Rotate who goes first, so no server always runs on the warmer (or busier) side.
                names = names[rnd % len(names):] + names[:rnd % len(names)]
                for name in names:
                    pid, path = servers[name]
                    one[(what, name)] = timed(r, pid, mode, path, *extra,
                                              calls=args.side_calls, warmup=args.warmup)
            rounds.append(one)
            a, b, f = (one[("Allocate", n)] for n in ("gpuplane", "grpc-go", "floor"))
            print(f"  side by side round {rnd + 1}/{args.rounds}: Allocate p50 gpuplane "
                  f"{a['p50_us']:.0f}, grpc-go {b['p50_us']:.0f}, floor {f['p50_us']:.0f} us "
                  f"({a['p50_us'] / b['p50_us']:.2f}x); p99 {a['p99_us']:.0f}, "
                  f"{b['p99_us']:.0f}, {f['p99_us']:.0f} us ({a['p99_us'] / b['p99_us']:.2f}x); "
                  f"load {a['load1']:.1f}", file=sys.stderr)
    finally:
        for x in (floor, go, p):
            if x:
                r.stop(x)
        k.close()
    out = []
    for what, _ in SIDE_CALLS:
        row = {"what": what, "rounds": len(rounds), "calls": args.side_calls, "servers": {},
               "ratio": {}, "floor_ratio": {}}
        for name, _ in SIDE_SERVERS:
            runs = [x[(what, name)] for x in rounds if (what, name) in x]
            if not runs:
                continue
            row["servers"][name] = {key: statistics.median(x[key] for x in runs)
                                    for key in SIDE_KEYS}
            row["servers"][name]["runs"] = runs
        for key in SIDE_KEYS:
            for name, into in (("gpuplane", "ratio"), ("floor", "floor_ratio")):
                if name not in row["servers"]:
                    continue
                v = [x[(what, name)][key] / x[(what, "grpc-go")][key] for x in rounds]
                row[into][key] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
        row["load1"] = [x[(what, "gpuplane")]["load1"] for x in rounds]
        out.append(row)
    results["side"] = out


# ---- report ----


def rule(head):
    return "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"


def side_table(results):
    """gpuplane, grpc-go and the floor side by side: medians over the rounds, and the rounds'
    ratios to grpc-go."""
    out = []
    head = ("| call                   | server                           | rounds | calls/round | "
            "p50 µs | p99 µs | calls/s | server CPU µs/call |")
    out += [head, rule(head)]
    for row in results["side"]:
        for name, label in SIDE_SERVERS:
            x = row["servers"].get(name)
            if not x:
                continue
            out.append(f"| {row['what']:22} | {label:32} | {row['rounds']:6} | {row['calls']:11} | "
                       f"{x['p50_us']:6.0f} | {x['p99_us']:6.0f} | {x['calls_per_s']:7.0f} | "
                       f"{x['plugin_cpu_us_per_call']:18.1f} |")
        for into, label in (("ratio", "ratio gpuplane / grpc-go"),
                            ("floor_ratio", "ratio floor / grpc-go")):
            q = row[into]
            if not q:
                continue
            cells = [f"{q[k]['median']:.2f}x" for k in SIDE_KEYS]
            out.append(f"| {row['what']:22} | {label:32} | {row['rounds']:6} | {'':11} | "
                       f"{cells[0]:>6} | {cells[1]:>6} | {cells[2]:>7} | {cells[3]:>18} |")
    out.append("")
    head = ("| call                   | ratio to grpc-go, rounds min-median-max | load      | "
            "p50              | p99              | calls/s          |")
    out += [head, rule(head)]
    for row in results["side"]:
        loads = f"{min(row['load1']):.1f}-{max(row['load1']):.1f}"
        for into, label in (("ratio", "gpuplane"), ("floor_ratio", "floor")):
            q = row[into]
            if not q:
                continue
            cells = [f"{q[k]['min']:.2f}-{q[k]['median']:.2f}-{q[k]['max']:.2f}"
                     for k in SIDE_KEYS[:3]]
            out.append(f"| {row['what']:22} | {label:39} | {loads:9} | {cells[0]:16} | "
                       f"{cells[1]:16} | {cells[2]:16} |")
    return "\n".join(out)


def tables(results):
    out = []
    if results["start"]:
        out += start_table(results)
    if results["calls"]:
        out += calls_table(results)
    if results.get("health_summary"):
        out += health_table(results)
    if results["memory"]:
        out += memory_table(results)
    if results.get("side"):
        out += [side_table(results), ""]
    return "\n".join(out).rstrip("\n")


def start_table(results):
    out = []
    head = "| node             | resources | starts | Register received ms | registered ms | first snapshot ms |"
    out += [head, rule(head)]
    for row in results["start"]:
        cells = [f"{row[k]['median']:.1f} ({row[k]['min']:.1f}-{row[k]['max']:.1f})"
                 for k in ("register-request", "register", "snapshot")]
        out.append(f"| {row['node']:16} | {len(row['resources']):9} | {row['starts']:6} | "
                   f"{cells[0]:>20} | {cells[1]:>13} | {cells[2]:>17} |")
    out.append("")
    return out


def calls_table(results):
    out = []
    head = ("| call                   | node                 |  n |  k | calls | p50 µs | p99 µs | "
            "max µs | p99 of runs µs | plugin CPU µs/call | load | answer (GPU index) |")
    out += [head, rule(head)]
    for row in results["calls"]:
        ans = ",".join(map(str, row.get("answer_index", []))) or "-"
        spread = "/".join(map(str, row["spread_p99_us"]))
        out.append(f"| {row['what']:22} | {row['node']:20} | {row['n']:2} | {row['k']:2} | "
                   f"{row['calls']:5} | {row['p50_us']:6.0f} | {row['p99_us']:6.0f} | "
                   f"{row['max_us']:6.0f} | {spread:>14} | {row['plugin_cpu_us_per_call']:18.1f} | "
                   f"{row['load1']:4.1f} | {ans:18} |")
    out.append("")
    return out


def health_table(results):
    out = []
    head = "| health event -> ListAndWatch update         |  n | p50 ms | p90 ms | max ms |"
    out += [head, rule(head)]
    for k, v in results["health_summary"].items():
        out.append(f"| {k:43} | {v['n']:2} | {v['p50']:6.3f} | {v['p90']:6.3f} | "
                   f"{v['max']:6.3f} |")
    out.append("")
    return out


def memory_table(results):
    out = []
    head = "| plugin                             | state               | VmRSS KiB | VmHWM KiB | RssAnon KiB | Pss KiB | threads |"
    out += [head, rule(head)]
    for name, states in results["memory"].items():
        for state, x in states.items():
            out.append(f"| {name:34} | {state:19} | {x['VmRSS']:9} | {x['VmHWM']:9} | "
                       f"{x['RssAnon']:11} | {x['Pss']:7} | {x['Threads']:7} |")
    out.append("")
    return out


def verdict(results):
    out = []
    if results["calls"]:
        out += verdict_calls(results)
    if results["start"]:
        out += verdict_start(results)
    if results.get("health_summary"):
        out += verdict_health(results)
    if results["memory"].get("dgx-h100, 8 replicas (64 devices)"):
        out += verdict_rss(results)
    if results.get("side"):
        out += verdict_side(results)
    return "\n".join(out)


def verdict_side(results):
    row = next(x for x in results["side"] if x["what"] == "Allocate")
    q, f = row["ratio"], row["floor_ratio"]
    p50, p99 = q["p50_us"]["median"], q["p99_us"]["median"]
    return [f"Allocate, gpuplane / grpc-go (median of {row['rounds']} rounds): "
            f"p50 {p50:.2f}x (target <= 0.5x: {'met' if p50 <= 0.5 else 'MISSED'}), p99 "
            f"{p99:.2f}x (target <= 0.6x: {'met' if p99 <= 0.6 else 'MISSED'}); the floor "
            f"(a server doing no work) / grpc-go: p50 {f['p50_us']['median']:.2f}x, p99 "
            f"{f['p99_us']['median']:.2f}x"]


def verdict_calls(results):
    out = []
    alloc = next(x for x in results["calls"] if x["what"] == "Allocate")
    floor = next(x for x in results["calls"] if x["what"] == "GetDevicePluginOptions")
    out.append(f"Allocate p99 <= 200 us (grpc-go): {alloc['p99_us']:.0f} us "
               f"{'met' if alloc['p99_us'] <= 200 else 'MISSED'} (runs {alloc['spread_p99_us']}; "
               f"the GetDevicePluginOptions floor: p99 {floor['p99_us']:.0f} us)")
    return out


def verdict_start(results):
    out = []
    for row in results["start"]:
        v = row["register"]["median"]
        out.append(f"start -> registered <= 50 ms ({row['node']}): median {v:.1f} ms "
                   f"{'met' if v <= 50 else 'MISSED'}")
    return out


def verdict_health(results):
    out = []
    hs = results["health_summary"]
    e2e = hs["end to end (write -> grpc-go client)"]
    plug = hs["plugin total (NVML event -> grpc-go client)"]
    out.append(f"health event -> update <= 10 ms: from the NVML event to the grpc-go client p50 "
               f"{plug['p50']:.2f} ms, max {plug['max']:.2f} ms "
               f"{'met' if plug['max'] <= 10 else 'MISSED'}; from the events-file write "
               f"(includes the mock's 0-20 ms poll) p50 {e2e['p50']:.1f} ms "
               f"{'met' if e2e['p50'] <= 10 else 'MISSED'}, max {e2e['max']:.1f} ms "
               f"{'met' if e2e['max'] <= 10 else 'MISSED'}")
    return out


def verdict_rss(results):
    out = []
    m = results["memory"]["dgx-h100, 8 replicas (64 devices)"]["after 1000 Allocate"]
    out.append(f"RSS <= 4 MiB with 8 GPUs x 8 replicas: VmRSS {m['VmRSS']} KiB, VmHWM "
               f"{m['VmHWM']} KiB {'met' if max(m['VmRSS'], m['VmHWM']) <= 4096 else 'MISSED'}")
    return out


PARTS = {"start": bench_start, "calls": bench_calls, "health": bench_health, "rss": bench_rss,
         "side": bench_side}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default=str(ROOT / "build"))
    ap.add_argument("--starts", type=int, default=20, help="timed starts per node")
    ap.add_argument("--calls", type=int, default=10000, help="sequential Allocate calls per run "
                    "(GetPreferredAllocation: half)")
    ap.add_argument("--warmup", type=int, default=1000, help="untimed calls first")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--health-rounds", type=int, default=5, help="plugins started for the health "
                    "measurement, 8 XIDs each")
    ap.add_argument("--parts", default=",".join(PARTS), help="what to run, comma-separated: "
                    + ", ".join(PARTS))
    ap.add_argument("--rounds", type=int, default=10, help="side by side: rounds, each running "
                    "gpuplane and grpc-go once per call")
    ap.add_argument("--side-calls", type=int, default=5000, help="side by side: timed calls per "
                    "run (after --warmup)")
    ap.add_argument("--nice", type=int, help="run the plugin and the client at this niceness in "
                    "the latency parts")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    parts = [x for x in args.parts.split(",") if x]
    unknown = set(parts) - set(PARTS)
    if unknown or not parts:
        ap.error(f"--parts: unknown {sorted(unknown)}; choose from {', '.join(PARTS)}")

    build = pathlib.Path(args.build).resolve()
    os.environ["GPUPLANE_BUILD"] = str(build)
    subprocess.run(["cmake", "--build", str(build), "--target", "gpuplane", "nvidia-ml-mock"],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    built = subprocess.run([str(HERE / "build-go-client.sh"), str(build)], check=True,
                           capture_output=True, text=True, timeout=600)
    client, peer = (pathlib.Path(x) for x in built.stdout.strip().splitlines()[-2:])
    floor = build / "bench" / "dp-h2-floor"
    if "side" in parts:
        subprocess.run(["cc", "-O2", "-o", str(floor), str(HERE / "h2-floor.c")], check=True,
                       timeout=120)

    results = {"machine": dict(machine(), utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
               "args": vars(args), "start": [], "calls": [], "health": [],
               "memory": {}}
    with tempfile.TemporaryDirectory(prefix="bench-dp-") as tmp:
        r = Runner(build, pathlib.Path(tmp), client, time.monotonic() + TOTAL_LIMIT_S,
                   args.nice, peer, floor)
        results["pinning"] = bool(r.plugin_cpu)
        try:
            for name in parts:
                PARTS[name](r, args, results)
        finally:
            r.kill_all()
    m = results["machine"]
    print(f"\nmachine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['date']}, load "
          f"{m['load1']:.2f} at the start; server on CPU 0 and grpc-go client on CPU 1 for "
          f"calls, health and side by side: {results['pinning']}; nice: {args.nice or 0}; "
          f"parts: {','.join(parts)}; calls: the run with the median calls/s of {args.repeat}; "
          f"side by side: medians of {args.rounds} rounds\n", flush=True)
    print(tables(results))
    print()
    print(verdict(results))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
