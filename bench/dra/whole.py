#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/dra: the whole `gpuplane schedule` command on one file at 5,000 nodes (issue 15): reading
the input, scheduling, writing the output, freeing, as a user times it.

    bench/dra/whole.py [BUILD_DIR ...] [--repeat R] [--scenario NAME ...] [--keep DIR] [--json FILE|-]

Run on demand, never as a timed test; results go to docs/benchmarks.md ("Whole command at 5,000
nodes"). Several build directories (say, one of the commit before and one after) are measured on
the same inputs, alternating, so the machine's load weighs on each alike.

Scenarios: {json,yaml}-5000x{5000,40000}: bench/dra/gen.py --nodes 5000 (8 H100 each) --pods P
--what all, one file of every object (the 5,000 x 5,000 JSON file is 25 MB); --nodes N for others. Each run is
`gpuplane schedule --stats -o json -f all.<fmt>` (and once more with -o yaml for the YAML writer),
stdout to a file, under GNU time for the peak RSS. Per scenario and build, the median of --repeat
runs (default 5) of: wall time (measured here, exec to exit), pods/s = pods / wall, peak RSS and
RSS / input size, and, from the binary's --stats lines when it prints them (builds before issue 15
do not): load s and MB/s (reading, parsing, handing the objects to the scheduler), schedule s
(filter + score + commit, with their split), print s (writing the output), free s (builds that
free the cluster before exiting).

Targets (issue 15): load >= 60 MB/s for JSON and >= 20 MB/s for YAML; peak RSS <= 10 x the input;
>= 3,000 pods/s for 5,000 x 5,000 and >= 8,000 pods/s for 5,000 x 40,000 (the whole command);
-o json and -o yaml of 40,000 pods written in < 0.5 s.
"""
import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from benchlib import describe, emit, machine  # noqa: E402

_spec = importlib.util.spec_from_file_location("dra_run", ROOT / "bench" / "dra" / "run.py")
dra_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dra_run)

GEN = ROOT / "bench" / "dra" / "gen.py"
PYTHON = "/usr/bin/python3"
NODES = 5000
# pods/s targets for one pod per node and for one per GPU (8 per node)
TARGETS = {"json_mb_per_s": 60.0, "yaml_mb_per_s": 20.0, "rss_ratio": 10.0,
           "pods_per_s": {1: 3000.0, 8: 8000.0}, "print_s": 0.5}


def scenarios(nodes=NODES):
    return [(f"{fmt}-{nodes}x{nodes * k}", fmt, nodes, nodes * k) for k in (1, 8)
            for fmt in ("json", "yaml")]


def generate(base, name, fmt, nodes, pods):
    d = base / name
    path = d / f"all.{fmt}"
    argv = [PYTHON, str(GEN), "--nodes", str(nodes), "--pods", str(pods), "--format", fmt,
            "--what", "all", "--out", str(d)]
    stamp = d / "gen.argv"
    if path.exists() and stamp.exists() and stamp.read_text() == json.dumps(argv):
        return path
    d.mkdir(parents=True, exist_ok=True)
    subprocess.run(argv, check=True, capture_output=True, timeout=600)
    stamp.write_text(json.dumps(argv))
    return path


def run_once(binary, path, out_fmt, work, timeout):
    out, err = work / f"out.{out_fmt}", work / "stderr"
    res = dra_run.run_child([str(binary), "schedule", "--stats", "-o", out_fmt, "-f", str(path)],
                            out, err, timeout)
    res["stats"] = dra_run.parse_stats(err.read_text(errors="replace"))
    res["out_bytes"] = out.stat().st_size if out.exists() else 0
    if res["exit"] not in (0, 1):
        res["error"] = dra_run.tail(err)
    return res


def median(rows, get):
    vals = [v for v in (get(r) for r in rows) if v is not None]
    return statistics.median(vals) if vals else None


def summarize(runs, yaml_runs, pods, size):
    s = lambda r, k: r["stats"].get(k)  # noqa: E731
    wall = median(runs, lambda r: r["wall_s"])
    rss = median(runs, lambda r: r["peak_rss_kib"])
    return {
        "runs": len(runs), "wall_s": wall, "wall_min_s": min(r["wall_s"] for r in runs),
        "wall_max_s": max(r["wall_s"] for r in runs), "pods_per_s": pods / wall if wall else None,
        "peak_rss_mib": rss / 1024 if rss else None,
        "rss_ratio": rss * 1024 / size if rss else None,
        "load_s": median(runs, lambda r: s(r, "load_s")),
        "load_mb_per_s": median(runs, lambda r: s(r, "load_mb_per_s")),
        "schedule_s": median(runs, lambda r: s(r, "total_s")),
        "filter_s": median(runs, lambda r: s(r, "filter_s")),
        "score_s": median(runs, lambda r: s(r, "score_s")),
        "commit_s": median(runs, lambda r: s(r, "commit_s")),
        "print_json_s": median(runs, lambda r: s(r, "print_s")),
        "print_yaml_s": median(yaml_runs, lambda r: s(r, "print_s")),
        "free_s": median(runs, lambda r: s(r, "free_s")),
        "cpu_s": median(runs, lambda r: r["cpu_s"]),
    }


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(rows):
    head = ("| scenario | build | wall s (min-max) | pods/s | load s | load MB/s | schedule s "
            "(filter/score/commit) | print json/yaml s | free s | peak RSS MiB | RSS / input |")
    lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
    for r in rows:
        m = r["median"]
        lines.append(
            f"| {r['scenario']} | {r['build']} | {fmt(m['wall_s'], '.2f')} "
            f"({fmt(m['wall_min_s'], '.2f')}-{fmt(m['wall_max_s'], '.2f')}) | "
            f"{fmt(m['pods_per_s'], '.0f')} | {fmt(m['load_s'], '.3f')} | "
            f"{fmt(m['load_mb_per_s'], '.1f')} | {fmt(m['schedule_s'], '.3f')} "
            f"({fmt(m['filter_s'], '.3f')}/{fmt(m['score_s'], '.3f')}/{fmt(m['commit_s'], '.3f')})"
            f" | {fmt(m['print_json_s'], '.3f')}/{fmt(m['print_yaml_s'], '.3f')} | "
            f"{fmt(m['free_s'], '.3f')} | {fmt(m['peak_rss_mib'], '.1f')} | "
            f"{fmt(m['rss_ratio'], '.1f')} |")
    return "\n".join(lines)


def verdicts(rows):
    out = []
    for r in rows:
        m, f, per_node = r["median"], r["format"], r["pods"] // r["nodes"]
        checks = []
        rate = TARGETS[f"{f}_mb_per_s"]
        if m["load_mb_per_s"] is not None:
            checks.append(f"load {m['load_mb_per_s']:.1f} MB/s >= {rate:g}: "
                          f"{'met' if m['load_mb_per_s'] >= rate else 'MISSED'}")
        if m["rss_ratio"] is not None:
            checks.append(f"RSS {m['rss_ratio']:.1f} x input <= 10: "
                          f"{'met' if m['rss_ratio'] <= TARGETS['rss_ratio'] else 'MISSED'}")
        if m["pods_per_s"] is not None:
            t = TARGETS["pods_per_s"][per_node]
            checks.append(f"{m['pods_per_s']:.0f} pods/s >= {t:g}: "
                          f"{'met' if m['pods_per_s'] >= t else 'MISSED'}")
        if per_node == 8:
            for k in ("print_json_s", "print_yaml_s"):
                if m[k] is not None:
                    checks.append(f"{k[6:10]} written in {m[k]:.3f} s < 0.5: "
                                  f"{'met' if m[k] < TARGETS['print_s'] else 'MISSED'}")
        out.append(f"{r['scenario']} {r['build']}: " + "; ".join(checks))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="*", default=[str(ROOT / "build")],
                    help="build directories holding gpuplane (default: build)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per scenario and build (median)")
    ap.add_argument("--scenario", action="append", default=[],
                    help="only this scenario (repeatable or comma-separated): "
                         + ", ".join(s[0] for s in scenarios()))
    ap.add_argument("--nodes", type=int, default=NODES,
                    help=f"nodes of 8 GPUs (default {NODES}); the pods: one per node, one per GPU")
    ap.add_argument("--keep", help="generate the inputs into DIR and keep them for the next run")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", help="also write every run to FILE ('-': stdout instead of the table)")
    args = ap.parse_args()

    selected = scenarios(args.nodes)
    wanted = [n for a in args.scenario for n in a.split(",") if n]
    if wanted:
        unknown = set(wanted) - {s[0] for s in selected}
        if unknown:
            ap.error(f"unknown scenario {', '.join(sorted(unknown))}")
        selected = [s for s in selected if s[0] in wanted]
    binaries = []
    for b in args.builds:
        binary = pathlib.Path(b).resolve() / "gpuplane"
        if not os.access(binary, os.X_OK):
            ap.error(f"{binary} not found: build it first (make build)")
        binaries.append((b, binary))

    results = {"machine": machine(), "args": vars(args), "targets": TARGETS, "rows": []}
    with tempfile.TemporaryDirectory(prefix="bench-dra-whole-") as tmp:
        base = pathlib.Path(args.keep).resolve() if args.keep else pathlib.Path(tmp)
        work = pathlib.Path(tmp)
        for name, f, nodes, pods in selected:
            print(f"{name}: generating ...", file=sys.stderr, flush=True)
            path = generate(base, name, f, nodes, pods)
            size = path.stat().st_size
            runs = {b: [] for b, _ in binaries}
            yaml_runs = {b: [] for b, _ in binaries}
            load = [os.getloadavg()[0]]
            # Alternate the builds so that a change in the machine's load weighs on each alike.
            for i in range(args.repeat):
                for b, binary in binaries:
                    runs[b].append(run_once(binary, path, "json", work, args.timeout))
                    if i == 0:
                        yaml_runs[b].append(run_once(binary, path, "yaml", work, args.timeout))
            load.append(os.getloadavg()[0])
            for b, _ in binaries:
                row = {"scenario": name, "format": f, "pods": pods, "nodes": nodes,
                       "input_bytes": size, "build": b, "load_avg": load, "runs": runs[b],
                       "yaml_runs": yaml_runs[b], "median": summarize(runs[b], yaml_runs[b],
                                                                       pods, size)}
                results["rows"].append(row)
                m = row["median"]
                print(f"{name} {b}: wall {fmt(m['wall_s'], '.2f')} s, "
                      f"{fmt(m['pods_per_s'], '.0f')} pods/s, load {fmt(m['load_mb_per_s'], '.1f')}"
                      f" MB/s, peak RSS {fmt(m['peak_rss_mib'], '.1f')} MiB (load average "
                      f"{load[0]:.2f} -> {load[1]:.2f})", file=sys.stderr, flush=True)
    report = (f"machine: {describe(results['machine'])}; {args.repeat} runs each, medians\n\n"
              f"{table(results['rows'])}\n\n{verdicts(results['rows'])}")
    emit(report, results, args.json)
    bad = [r for r in results["rows"] for x in r["runs"] if x.get("exit") not in (0, 1)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
