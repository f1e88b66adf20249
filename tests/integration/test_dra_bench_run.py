# SPDX-License-Identifier: Apache-2.0
"""bench/dra/run.py, the DRA scheduling benchmark runner, at its --quick size (16 nodes x 8 GPUs)
against the gpuplane under test: every scenario runs, the JSON results hold the measured numbers,
and the pods scheduled are the ones a cluster of that size can take (160 single-GPU pods onto 128
GPUs: 128; one 4-GPU pod per node: all; the issue 131730 pod: none). Also the parsing of the
`stats:` line and the per-scenario timeout."""
import importlib.util
import json
import subprocess

from conftest import BUILD, ROOT

RUN = ROOT / "bench" / "dra" / "run.py"
NODES, GPUS = 16, 8


def run(*args, timeout=120):
    p = subprocess.run(["/usr/bin/python3", str(RUN), str(BUILD), *args], capture_output=True,
                       text=True, timeout=timeout)
    return p


def runner_module():
    spec = importlib.util.spec_from_file_location("dra_bench_run", RUN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_json(gp):
    p = run("--quick", "--json", "-")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    rows = {r["scenario"]: r for r in res["rows"]}
    assert set(rows) == {f"single-{NODES}", f"nvlink4-{NODES}", f"pcie4-{NODES}", "worst-alloc",
                         f"worst-{NODES}"}
    assert "40-80 pods/s at 500 nodes" in res["reference"]
    # One progress line when a scenario starts and one when it ends.
    assert sum(line.startswith("[") for line in p.stderr.splitlines()) == 2 * len(rows)

    single = rows[f"single-{NODES}"]
    assert single["pods"] == 10 * NODES
    assert single["scheduled"] == NODES * GPUS  # the cluster is full, the rest is turned away
    assert single["unschedulable"] == 10 * NODES - NODES * GPUS
    for kind in ("nvlink4", "pcie4"):
        r = rows[f"{kind}-{NODES}"]
        assert r["pods"] == NODES and r["scheduled"] == NODES, r
    worst = rows[f"worst-{NODES}"]
    assert worst["pods"] == 1 and worst["scheduled"] == 0 and worst["unschedulable"] == 1

    for name in (f"single-{NODES}", f"nvlink4-{NODES}", f"pcie4-{NODES}", f"worst-{NODES}"):
        r = rows[name]
        assert r["status"] == "ok" and r["exit"] in (0, 1), r
        assert 0 < r["sched_s"] <= r["wall_s"]
        assert r["load_s"] >= 0
        assert abs(r["pods_per_s"] - r["pods"] / r["sched_s"]) < 1e-6 * r["pods_per_s"]
        assert r["attempts"] > 0 and r["us_per_filter"] > 0
        assert r["us_per_filter"] <= r["sched_s"] * 1e6
        assert r["peak_rss_kib"] > 0
        assert r["nodes"] == NODES and r["gen_argv"][0].endswith("gen.py")

    alloc = rows["worst-alloc"]
    assert alloc["status"] == "ok" and alloc["scheduled"] == 0 and alloc["nodes"] == 1
    assert len(alloc["runs"]) == 20
    assert all(r["exit"] == 1 for r in alloc["runs"])
    assert 0 < alloc["p50_s"] <= alloc["max_s"] < 10


def test_table_and_one_scenario(gp, tmp_path):
    p = run("--quick", "--scenario", f"pcie4-{NODES}", "--keep", str(tmp_path / "in"),
            "--json", str(tmp_path / "out.json"))
    assert p.returncode == 0, p.stderr
    assert "| scenario " in p.stdout and f"| pcie4-{NODES} " in p.stdout
    assert "40-80 pods/s" in p.stdout
    rows = json.loads((tmp_path / "out.json").read_text())["rows"]
    assert [r["scenario"] for r in rows] == [f"pcie4-{NODES}"]
    assert (tmp_path / "in" / f"pcie4-{NODES}" / "cluster.yaml").exists()
    bad = run("--quick", "--scenario", "single-5000")
    assert bad.returncode == 2 and "unknown scenario" in bad.stderr


def test_timeout_is_reported(gp):
    p = run("--quick", "--scenario", f"single-{NODES}", "--timeout", "0.01", "--json", "-")
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)["rows"]
    assert row["status"] == "timeout" and row["timeout"] and row["exit"] is None
    assert row["wall_s"] < 5


def test_parse_stats():
    mod = runner_module()
    line = ("stats: 4 pods in 0.003062 s (1306.3 pods/s); 12 node evaluations, 10 allocator runs "
            "(301.80 us each); filter 0.003018 s, score 0.000003 s, commit 0.000002 s")
    st = mod.parse_stats("some log line\n" + line + "\n")
    assert st == {"pods": 4, "total_s": 0.003062, "pods_per_s": 1306.3, "evaluations": 12,
                  "attempts": 10,
                  "filter_s": 0.003018, "score_s": 0.000003, "commit_s": 0.000002}
    assert mod.parse_stats("no stats here\n") == {}
    # Extra fields and exponents are kept.
    st = mod.parse_stats("stats: 1 pods in 2e-05 s (50000.0 pods/s); 3 node evaluations, 3 "
                         "allocator runs (5.00 us each); "
                         "filter 1.5e-05 s, index 0.25 s")
    assert st["total_s"] == 2e-05 and st["filter_s"] == 1.5e-05 and st["index_s"] == 0.25
