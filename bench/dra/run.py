#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/dra: DRA scheduling throughput of `gpuplane schedule` and the Kubernetes issue 131730 worst
case through `gpuplane allocate`, on inputs written by bench/dra/gen.py (issue 6).

    bench/dra/run.py [BUILD_DIR] [--quick] [--scenario NAME ...] [--timeout S] [--keep DIR]
                     [--nodes N] [--repeat R] [--json FILE|-]

Run on demand, never as a timed test; results go to docs/benchmarks.md ("DRA scheduling").

Scenarios (`--list` prints them with their gen.py arguments):

- single-500, single-5000: clusters of 500 / 5,000 nodes x 8 GPUs; 5,000 single-GPU pods onto 500
  nodes (4,000 fit, 1,000 are unschedulable and are tried on every node) and 40,000 onto 5,000
  nodes (exactly full);
- nvlink4-N, pcie4-N: 4-GPU pods with a matchAttribute constraint (NVLink domain; PCIe root with 4
  GPUs per root), one pod per node: half the GPUs;
- worst-alloc: issue 131730 on one node through `gpuplane allocate` (8 GPUs requested, 7 share the
  attribute), --repeat runs, each a whole process (exec, parse, search) timed; p50 and max;
- worst-500, worst-5000: the same pod through `gpuplane schedule` over every node.

--quick runs the same kinds at 16 nodes (seconds); --nodes N at N nodes.

For a schedule scenario the binary runs as `gpuplane schedule --stats -o json -f ...` (the inputs
split into files of at most 4 MB at document boundaries: the loader caps a file's size and node
count) with stdout and stderr to files. Measured: pods, scheduled, unschedulable (the JSON summary),
the schedule time and node attempts and filter time (the `stats:` line on stderr; loading the files
is not part of it), pods/s = pods / schedule time, µs per node filter = filter time / attempts,
load = wall - schedule time (parsing the files, building the state, printing the result), peak RSS
and CPU time of the child (os.wait4 on its pid). A child still running after --timeout seconds is
killed and reported as "timeout"; exit status 2 or a missing summary is "error"; a scheduled count
other than the expected one is "MISMATCH".
"""
import argparse
import json
import os
import pathlib
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from benchlib import emit, machine  # noqa: E402

GEN = ROOT / "bench" / "dra" / "gen.py"
PYTHON = "/usr/bin/python3"
GNU_TIME = "/usr/bin/time"
GPUS_PER_NODE = 8
QUICK_NODES = 16
CHUNK_BYTES = 4 << 20
THROUGHPUT_TARGET = 5000.0  # pods/s, single-5000
WORST_TARGET_S = 0.010
REFERENCE = ("Kubernetes' scheduler (kube-scheduler with the DynamicResources plugin): its DRA "
             "scheduler_perf throughput tests expect 40-80 pods/s at 500 nodes")


class Scenario:
    def __init__(self, name, tool, nodes, workload, pods, expected, gen=(), note=""):
        self.name = name
        self.tool = tool  # "schedule" or "allocate"
        self.nodes = nodes
        self.workload = workload
        self.pods = pods
        self.expected = expected  # pods that must be scheduled
        self.gen = list(gen)
        self.note = note

    def gen_argv(self, out):
        return [PYTHON, str(GEN), "--nodes", str(self.nodes), "--gpus-per-node",
                str(GPUS_PER_NODE), "--workload", self.workload, "--pods", str(self.pods)] + \
            self.gen + ["--out", str(out)]


def scenarios(sizes):
    out = []
    for n in sizes:
        gpus = n * GPUS_PER_NODE
        pods = 40000 if n == 5000 else 10 * n
        out.append(Scenario(f"single-{n}", "schedule", n, "single", pods, min(pods, gpus),
                            note="1 GPU per pod"))
    for n in sizes:
        out.append(Scenario(f"nvlink4-{n}", "schedule", n, "nvlink4", n, n,
                            note="4 GPUs, matchAttribute NVLink domain"))
        out.append(Scenario(f"pcie4-{n}", "schedule", n, "pcie4", n, n,
                            gen=["--gpus-per-root", "4"],
                            note="4 GPUs, matchAttribute pcieRoot (4 GPUs per root)"))
    out.append(Scenario("worst-alloc", "allocate", 1, "worst", 1, 0, gen=["--format", "json"],
                        note="issue 131730, gpuplane allocate on one node"))
    for n in sizes:
        out.append(Scenario(f"worst-{n}", "schedule", n, "worst", 1, 0,
                            note="issue 131730, 1 pod over every node"))
    return out


# ---- inputs -----------------------------------------------------------------------------------

def split_docs(path, limit=CHUNK_BYTES):
    """Splits a multi-document YAML file into files of at most about limit bytes, at document
    boundaries ("---" lines), in order; returns the paths (path itself when small enough)."""
    if path.stat().st_size <= limit:
        return [path]
    parts, buf, size = [], [], 0

    def flush():
        nonlocal buf, size
        p = path.with_name(f"{path.stem}-{len(parts):03d}{path.suffix}")
        with open(p, "w") as f:
            f.writelines(buf)
        parts.append(p)
        buf, size = [], 0

    with open(path) as f:
        for line in f:
            if line.startswith("---") and line.rstrip() == "---" and size >= limit:
                flush()
            buf.append(line)
            size += len(line)
    if buf:
        flush()
    path.unlink()
    return parts


def generate(sc, base):
    """Writes sc's inputs under base/<name> (reused when a previous run used the same gen.py
    arguments); returns the input files in order (cluster first)."""
    d = base / sc.name
    stamp = d / "gen.argv"
    argv = sc.gen_argv(d)
    if stamp.exists() and stamp.read_text() == json.dumps(argv) and (d / "files").exists():
        return [d / p for p in (d / "files").read_text().split()], 0.0
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"gen.py failed ({p.returncode}): {p.stderr.strip()}")
    ext = "json" if "json" in sc.gen else "yaml"
    if sc.tool == "allocate":
        # gpuplane allocate reads claims, not Pods: keep the cluster and the claims only.
        items = json.loads((d / "workload.json").read_text())["items"]
        claims = [o for o in items if o["kind"] == "ResourceClaim"]
        (d / "claims.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                   "items": claims}))
        files = [d / "cluster.json", d / "claims.json"]
    else:
        files = split_docs(d / f"cluster.{ext}") + split_docs(d / f"workload.{ext}")
    (d / "files").write_text(" ".join(str(f.relative_to(d)) for f in files))
    stamp.write_text(json.dumps(argv))
    return files, time.monotonic() - t0


# ---- running the binary -----------------------------------------------------------------------

def wait_deadline(pid, timeout):
    """Waits for child pid (a process group leader) for at most timeout seconds, then kills its
    group; returns (wait status, rusage, timed out)."""
    timed_out = False
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            timed_out = not poller.poll(timeout * 1000)
        finally:
            os.close(fd)
    else:
        end = time.monotonic() + timeout
        delay = 0.0005
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            if time.monotonic() >= end:
                timed_out = True
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
    if timed_out:
        os.killpg(pid, signal.SIGKILL)  # not reaped yet: the group still exists
    _, status, ru = os.wait4(pid, 0)
    return status, ru, timed_out


def run_child(argv, out, err, timeout, measure_rss=True):
    """Runs argv with stdout/stderr to the files out/err, in its own process group; returns exit
    code (None on timeout), wall seconds, CPU seconds and the peak RSS in KiB.

    A child's ru_maxrss (os.wait4) includes the RSS high-water mark of the process it was forked
    from, i.e. this script's (Linux keeps the old address space's peak across exec). So with
    measure_rss the child runs under GNU time (/usr/bin/time, a small process whose child starts
    from its small address space) and the peak is its %M; without GNU time, or when not
    measure_rss, the figure is ru_maxrss, and rss_upper_bound says whether it is no more than
    this script's own peak (then only an upper bound of the child's)."""
    rss_file = out.with_suffix(".rss")
    wrap = measure_rss and os.access(GNU_TIME, os.X_OK)
    full = [GNU_TIME, "-f", "%M", "-o", str(rss_file), "--"] + argv if wrap else argv
    with open(out, "wb") as fo, open(err, "wb") as fe:
        t0 = time.monotonic()
        p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                             start_new_session=True)
        try:
            status, ru, timed_out = wait_deadline(p.pid, timeout)
        except BaseException:
            if p.returncode is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            raise
        wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, not by Popen
    res = {"exit": None if timed_out else p.returncode, "wall_s": wall,
           "cpu_s": ru.ru_utime + ru.ru_stime, "timeout": timed_out,
           "peak_rss_kib": ru.ru_maxrss, "rss_upper_bound": False, "rss_by": "wait4"}
    if wrap:
        try:
            res["peak_rss_kib"] = int(rss_file.read_text().split()[-1])
            res["rss_by"] = "time"
        except (OSError, ValueError, IndexError):
            pass
    if res["rss_by"] == "wait4":
        res["rss_upper_bound"] = ru.ru_maxrss <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return res


NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"


def parse_stats(text):
    """The numbers of gpuplane schedule's `stats:` lines on stderr: from the run's line pods,
    total_s, pods_per_s, evaluations (pod x node pairs), attempts (allocator runs) and <phase>_s for
    every "<phase> N s" (filter, score, commit, ...); from the whole command's line (if any) load_s,
    load_mb, load_mb_per_s, load_cpu_s, schedule_s, print_s, free_s, command_s, command_cpu_s,
    command_pods_per_s and peak_rss_mib. Fields that are missing are left out; unknown ones are kept."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("stats:"):
            continue
        if m := re.search(r"(\d+) pods in " + NUM + r" s\b", line):
            out["pods"], out["total_s"] = int(m.group(1)), float(m.group(2))
            if m := re.search(NUM + r" pods/s", line):
                out["pods_per_s"] = float(m.group(1))
        elif m := re.search(NUM + r" pods/s", line):
            out["command_pods_per_s"] = float(m.group(1))
        if m := re.search(r"(\d+) node evaluations, (\d+) allocator runs", line):
            out["evaluations"], out["attempts"] = int(m.group(1)), int(m.group(2))
        if m := re.search(r"\(" + NUM + r" MB, " + NUM + r" MB/s; CPU " + NUM + r" s\)", line):
            out["load_mb"], out["load_mb_per_s"] = float(m.group(1)), float(m.group(2))
            out["load_cpu_s"] = float(m.group(3))
        if m := re.search(r"pods/s; CPU " + NUM + r" s\)", line):
            out["command_cpu_s"] = float(m.group(1))
        if m := re.search(r"peak RSS " + NUM + r" MiB", line):
            out["peak_rss_mib"] = float(m.group(1))
        for m in re.finditer(r"([A-Za-z_]+):? " + NUM + r" s\b", line):
            if m.group(1) not in ("in", "CPU"):
                out[f"{m.group(1)}_s"] = float(m.group(2))
    return out


def read_summary(path):
    """The "summary" object of `-o json` output, read from the end of the file (the output of 40,000
    pods is large; loading it all would also raise this script's RSS); None when absent."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - 4096, 0))
            end = f.read().decode(errors="replace")
        m = re.search(r'"summary"\s*:\s*(\{[^{}]*\})', end)
        if m:
            return json.loads(m.group(1))
        return json.loads(path.read_text()).get("summary")
    except (OSError, ValueError, AttributeError):
        return None


def tail(path, n=3):
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-n:])
    except OSError:
        return ""


def run_schedule(binary, sc, files, work, timeout):
    argv = [str(binary), "schedule", "--stats", "-o", "json"] + \
        [a for f in files for a in ("-f", str(f))]
    out, err = work / f"{sc.name}.out.json", work / f"{sc.name}.stderr"
    res = run_child(argv, out, err, timeout)
    row = {"pods": sc.pods, "scheduled": None, "unschedulable": None}
    row.update(res)
    if res["timeout"]:
        row["status"] = "timeout"
        return row
    stats = parse_stats(err.read_text(errors="replace"))
    row["stats"] = stats
    summary = read_summary(out)
    if res["exit"] not in (0, 1) or not summary:
        row["status"] = "error"
        row["error"] = tail(err)
        return row
    row.update(pods=summary.get("pods"), scheduled=summary.get("scheduled"),
               unschedulable=summary.get("unschedulable"))
    sched = stats.get("total_s")
    if sched is not None:
        row["sched_s"] = sched
        row["load_s"] = max(res["wall_s"] - sched, 0.0)
        if sched > 0:
            row["pods_per_s"] = row["pods"] / sched
    if stats.get("attempts") and "filter_s" in stats:
        row["attempts"] = stats["attempts"]
        row["us_per_filter"] = stats["filter_s"] * 1e6 / stats["attempts"]
    if stats.get("evaluations") and sched:
        row["evaluations"] = stats["evaluations"]
        row["ns_per_node"] = sched * 1e9 / stats["evaluations"]
    row["status"] = "ok" if row["scheduled"] == sc.expected else "MISMATCH"
    return row


def pct(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    i = min(max(int(p * len(s) + 0.999999) - 1, 0), len(s) - 1)
    return s[i]


def run_allocate(binary, sc, files, work, timeout, repeat):
    """One untimed run under GNU time for the peak RSS (and a warm page cache), then repeat timed
    runs of the bare process; each must say "no solution" (exit 1)."""
    argv = [str(binary), "allocate", "--node", "node-00000", "-o", "json"] + \
        [a for f in files for a in ("-f", str(f))]
    runs = []
    row = {"pods": 1, "scheduled": None, "unschedulable": None, "runs": runs}
    first = None
    for i in range(repeat + 1):
        out, err = work / f"{sc.name}.out.json", work / f"{sc.name}.stderr"
        res = run_child(argv, out, err, timeout, measure_rss=(i == 0))
        if res["timeout"]:
            row["status"] = "timeout"
            return row
        # Exit 1: no solution, the expected answer; 0 would be a wrong allocation, 2 an error.
        if res["exit"] != 1:
            row["status"] = "error" if res["exit"] != 0 else "MISMATCH"
            row["error"] = tail(err)
            return row
        if i == 0:
            first = res
        else:
            runs.append(res)
    walls = [r["wall_s"] for r in runs]
    row.update(scheduled=0, unschedulable=1, status="ok", p50_s=pct(walls, 0.5),
               max_s=max(walls), sched_s=pct(walls, 0.5), peak_rss_kib=first["peak_rss_kib"],
               rss_by=first["rss_by"], rss_upper_bound=first["rss_upper_bound"],
               wall_s=sum(walls), cpu_s=sum(r["cpu_s"] for r in runs))
    return row


# ---- report -----------------------------------------------------------------------------------


def fmt(v, spec, missing="-"):
    return missing if v is None else format(v, spec)


def col(v, spec, width):
    """v formatted with spec, right-aligned to width; "-" when None."""
    return f"{fmt(v, spec):>{width}}"


def rate_spec(v):
    """One decimal, or three significant digits below 1 (1 pod in 40 s is 0.0246 pods/s)."""
    return ".3g" if v is not None and v < 1 else ".1f"


def rss_col(r):
    rss = r.get("peak_rss_kib")
    if rss is None:
        return f"{'-':>12}"
    return f"{('<= ' if r.get('rss_upper_bound') else '') + format(rss / 1024, '.1f'):>12}"


def table(rows):
    head = ("| scenario     | nodes |  pods | scheduled |    pods/s | ns per pod x node | "
            "µs per allocator run | sched s | load s | peak RSS MiB |")
    lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
    for r in rows:
        if r["status"] == "timeout":
            scheduled, sched = "timeout", f"> {r['timeout_s']:g}"
        else:
            scheduled = fmt(r.get("scheduled"), "d", r["status"])
            if r["status"] != "ok" and r.get("scheduled") is not None:
                scheduled += f" {r['status']}"
            sched = fmt(r.get("sched_s"), ".3f")
        lines.append(f"| {r['scenario']:12} | {r['nodes']:5} | {col(r.get('pods'), 'd', 5)} | "
                     f"{scheduled:>9} | {col(r.get('pods_per_s'), rate_spec(r.get('pods_per_s')), 9)} | "
                     f"{col(r.get('ns_per_node'), '.1f', 16)} | "
                     f"{col(r.get('us_per_filter'), '.1f', 20)} | {sched:>7} | "
                     f"{col(r.get('load_s'), '.2f', 6)} | "
                     f"{rss_col(r)} |")
    return "\n".join(lines)


def verdicts(rows):
    by = {r["scenario"]: r for r in rows}
    out = []
    r = by.get("single-5000")
    if r and r.get("pods_per_s"):
        ok = r["pods_per_s"] >= THROUGHPUT_TARGET and r["status"] == "ok"
        out.append(f"single-5000 >= {THROUGHPUT_TARGET:.0f} pods/s: {r['pods_per_s']:.0f} "
                   f"{'met' if ok else 'MISSED'}")
    r = by.get("worst-alloc")
    if r and r.get("p50_s") is not None:
        ok = r["p50_s"] <= WORST_TARGET_S
        out.append(f"worst-alloc <= 10 ms per run (p50 of {len(r['runs'])} runs of the whole "
                   f"process: exec, parse, search): p50 {r['p50_s'] * 1e3:.2f} ms "
                   f"{'met' if ok else 'MISSED'}, max {r['max_s'] * 1e3:.2f} ms")
    for name, r in by.items():
        if name.startswith("worst-") and name != "worst-alloc":
            if r["status"] == "timeout":
                out.append(f"{name} <= 10 ms to conclude unschedulable: timeout MISSED")
            elif r.get("sched_s") is not None:
                # Kubernetes issue 131730 is one node's Filter: the target is per node; the pod's
                # time over the whole cluster is shown beside it.
                per_node = r["sched_s"] / r["nodes"]
                ok = per_node <= WORST_TARGET_S and r["status"] == "ok"
                out.append(f"{name} <= 10 ms per node to conclude unschedulable: "
                           f"{per_node * 1e3:.3f} ms per node {'met' if ok else 'MISSED'} "
                           f"({r['sched_s'] * 1e3:.1f} ms for the pod over {r['nodes']} nodes, "
                           f"building each node's allocator included)")
    out.append(f"reference: {REFERENCE}.")
    return "\n".join(out)


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Scenarios: " + ", ".join(
                                     s.name for s in scenarios([500, 5000])))
    ap.add_argument("build", nargs="?", default=str(ROOT / "build"),
                    help="the build directory holding gpuplane (default: build)")
    ap.add_argument("--quick", action="store_true",
                    help=f"every kind at {QUICK_NODES} nodes (seconds)")
    ap.add_argument("--nodes", type=int, help="every kind at N nodes instead of 500 and 5000")
    ap.add_argument("--scenario", action="append", default=[],
                    help="run only this scenario (repeatable, or comma-separated)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds per scenario run before the child is killed (default 600)")
    ap.add_argument("--repeat", type=int, default=20, help="runs of worst-alloc (default 20)")
    ap.add_argument("--keep", help="generate the inputs into DIR and keep them (reused when the "
                    "gen.py arguments match); default: a temporary directory")
    ap.add_argument("--json", help="also write the raw results to FILE ('-': stdout, instead of "
                    "the table)")
    ap.add_argument("--list", action="store_true", help="print the scenarios and exit")
    args = ap.parse_args()

    sizes = [QUICK_NODES] if args.quick else [args.nodes] if args.nodes else [500, 5000]
    todo = scenarios(sizes)
    if args.list:
        for s in todo:
            print(f"{s.name:14} {s.tool:8} expect {s.expected:6} scheduled  gen.py "
                  + " ".join(s.gen_argv("DIR")[2:]))
        return 0
    wanted = [n for a in args.scenario for n in a.split(",") if n]
    if wanted:
        names = {s.name for s in todo}
        unknown = [n for n in wanted if n not in names]
        if unknown:
            ap.error(f"unknown scenario {', '.join(unknown)} (here: {', '.join(sorted(names))}; "
                     "--quick and --nodes change the sizes)")
        todo = [s for s in todo if s.name in wanted]
    binary = pathlib.Path(args.build).resolve() / "gpuplane"
    if not os.access(binary, os.X_OK):
        ap.error(f"{binary} not found: build it first (make build)")

    results = {"machine": machine(), "binary": str(binary), "reference": REFERENCE,
               "targets": {"single_5000_pods_per_s": THROUGHPUT_TARGET,
                           "worst_s": WORST_TARGET_S},
               "args": vars(args), "rows": []}
    with tempfile.TemporaryDirectory(prefix="bench-dra-") as tmp:
        base = pathlib.Path(args.keep).resolve() if args.keep else pathlib.Path(tmp)
        work = pathlib.Path(tmp)
        for i, sc in enumerate(todo, 1):
            tag = f"[{i}/{len(todo)}] {sc.name}"
            progress(f"{tag}: {sc.nodes} nodes, {sc.pods} pods ({sc.note}) ...")
            files, gen_s = generate(sc, base)
            if sc.tool == "allocate":
                row = run_allocate(binary, sc, files, work, args.timeout, args.repeat)
            else:
                row = run_schedule(binary, sc, files, work, args.timeout)
            row.update(scenario=sc.name, tool=sc.tool, nodes=sc.nodes, workload=sc.workload,
                       expected_scheduled=sc.expected, timeout_s=args.timeout, gen_s=gen_s,
                       gen_argv=sc.gen_argv(base / sc.name)[1:], note=sc.note)
            results["rows"].append(row)
            if row["status"] == "timeout":
                msg = f"timeout after {args.timeout:g} s"
            elif row["status"] == "error":
                msg = f"error (exit {row.get('exit')}): {row.get('error', '')}"
            elif sc.tool == "allocate":
                msg = (f"unschedulable as expected, p50 {row['p50_s'] * 1e3:.2f} ms, max "
                       f"{row['max_s'] * 1e3:.2f} ms over {len(row['runs'])} runs")
            else:
                msg = (f"{row['scheduled']}/{row['pods']} scheduled (expected {sc.expected}"
                       f"{'' if row['status'] == 'ok' else ': MISMATCH'}), sched "
                       f"{fmt(row.get('sched_s'), '.3f')} s, "
                       f"{fmt(row.get('pods_per_s'), rate_spec(row.get('pods_per_s')))} "
                       f"pods/s, load {fmt(row.get('load_s'), '.2f')} s, peak RSS "
                       f"{row['peak_rss_kib'] / 1024:.1f} MiB")
            progress(f"{tag}: {msg}")

    m = results["machine"]
    report = (f"machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['date']}, load "
              f"{fmt(m['load1'], '.2f')} at the start\n\n{table(results['rows'])}\n\n"
              f"{verdicts(results['rows'])}")
    emit(report, results, args.json)
    bad = [r for r in results["rows"] if r["status"] in ("error", "MISMATCH")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
