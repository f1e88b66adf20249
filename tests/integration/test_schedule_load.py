# SPDX-License-Identifier: Apache-2.0
"""How gpuplane schedule and allocate read large inputs (src/base/base-doc-each.c,
src/dalloccmd/dalloccmd-input.c) and write large outputs (src/sched/sched-print.c): files are
streamed object by object with no positions kept, so these check that messages still point at the
exact file:line:col — a syntax error deep in a large JSON or YAML file, an object the allocator
refuses (found again with positions when the message is written), in pretty-printed and one-line
JSON and in kubectl's key order — that the output written pod by pod is the indented JSON of the
whole document, and that peak memory stays within ten times the input."""
import json
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

GEN = pathlib.Path(__file__).resolve().parents[2] / "bench" / "dra" / "gen.py"


def sanitized(gp):
    """Whether the binary is the ASan+UBSan build, whose memory use says nothing about the
    release build's."""
    cache = gp.binary.parent / "CMakeCache.txt"
    try:
        return "GP_SANITIZE:BOOL=ON" in cache.read_text()
    except OSError:
        return "asan" in gp.binary.parent.name

CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'a'"}}]}}


def classes(n):
    return [dict(CLASS, metadata={"name": f"class-{i:05d}"}) for i in range(n)]


def bad_claim():
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "bad", "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "r", "exactly": {"deviceClassName": "class-00000", "count": 0}}]}}}


def write(path, items, form):
    """items as a JSON List (pretty, one line, or with "items" before "kind" as kubectl writes
    it) or as multi-document YAML; returns the text."""
    if form == "pretty":
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2)
    elif form == "line":
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    elif form == "kubectl":
        text = json.dumps({"apiVersion": "v1", "items": items, "kind": "List",
                           "metadata": {"resourceVersion": ""}}, indent=4)
    else:
        text = "".join("---\n" + yaml.safe_dump(o, sort_keys=False) for o in items)
    path.write_text(text)
    return text


def line_col(text, offset):
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


FORMS = ["pretty", "line", "kubectl", "yaml"]


@pytest.mark.parametrize("form", FORMS)
def test_syntax_error_deep_in_a_large_file(gp, tmp_path, form):
    """A character no YAML or JSON value starts with, in the 2,500th of 3,000 objects: the message
    and its file:line:col are the YAML reader's, which reads the file again from the start when
    jansson stops (the position is where the character is)."""
    f = tmp_path / ("in.yaml" if form == "yaml" else "in.json")
    text = write(f, classes(3000), form)
    at = text.index("class-02500") - (1 if form != "yaml" else 0)
    end = text.index("class-02500") + len("class-02500") + (1 if form != "yaml" else 0)
    text = text[:at] + "@" + text[end:]
    f.write_text(text)
    line, col = line_col(text, at)
    for cmd in (["allocate", "--node", "n1"], ["schedule"]):
        p = gp.run(*cmd, "-f", f)
        assert p.returncode == 2, p.stderr
        assert p.stderr == f"gpuplane {cmd[0]}: {f}:{line}:{col}: plain scalar cannot start " \
                           f"with '@'\n"


@pytest.mark.parametrize("form", FORMS)
def test_refused_object_deep_in_a_large_file(gp, tmp_path, form):
    """A claim the API server would refuse (count 0) after 3,000 objects: allocate refuses it as
    it is read, schedule when a pod's claim is tried; both name the file, line and column of the
    0, found by reading that one object again with positions."""
    f = tmp_path / ("in.yaml" if form == "yaml" else "in.json")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "c", "resourceClaimName": "bad"}]}}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    text = write(f, classes(3000) + [node, bad_claim(), pod], form)
    count = re.search(r'"?count"?: (0)', text)
    line, col = line_col(text, count.start(1))
    msg = "ResourceClaim default/bad: spec.devices.requests[0].exactly.count: must be >= 1"
    for cmd in (["allocate", "--node", "n1"], ["schedule"]):
        p = gp.run(*cmd, "-f", f)
        assert p.returncode == 2, p.stderr
        assert p.stderr == f"gpuplane {cmd[0]}: {f}:{line}:{col}: {msg}\n"


def test_refused_object_in_a_second_file(gp, tmp_path):
    """After loading, the object a message names is looked up in every file: here the second."""
    a, b = tmp_path / "a.json", tmp_path / "b.yaml"
    write(a, classes(10) + [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}],
          "line")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "c", "resourceClaimName": "bad"}]}}
    text = write(b, [bad_claim(), pod], "yaml")
    line, col = line_col(text, re.search(r"count: (0)", text).start(1))
    p = gp.run("schedule", "-f", a, "-f", b)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith(f"gpuplane schedule: {b}:{line}:{col}: ResourceClaim default/bad")


def test_semantic_error_after_syntax_error(gp, tmp_path):
    """A refused object early in a file whose end is broken: the syntax error is reported, as when
    the whole file was read before any object was looked at."""
    f = tmp_path / "in.json"
    text = write(f, [bad_claim()] + classes(100), "pretty")
    f.write_text(text[:-3])
    p = gp.run("allocate", "--node", "n1", "-f", f)
    assert p.returncode == 2
    assert "ResourceClaim" not in p.stderr and re.match(
        rf"gpuplane allocate: {re.escape(str(f))}:\d+:\d+: ", p.stderr), p.stderr


def gen(tmp_path, nodes, fmt="json", pods=None):
    subprocess.run([sys.executable, str(GEN), "--nodes", str(nodes), "--format", fmt, "--out",
                    str(tmp_path)] + (["--pods", str(pods)] if pods else []), check=True,
                   capture_output=True)
    return [tmp_path / f"cluster.{fmt}", tmp_path / f"workload.{fmt}"]


def test_streamed_json_is_the_indented_document(gp, tmp_path):
    """-o json written pod by pod is the whole document as jansson indents it (what Python's
    json.dumps(indent=2) writes too), and -o yaml holds the same."""
    files = gen(tmp_path, 16, pods=160)
    args = [a for f in files for a in ("-f", f)]
    j = gp.run("schedule", "-o", "json", *args)
    y = gp.run("schedule", "-o", "yaml", *args)
    assert j.returncode == 1 and y.returncode == 1, j.stderr + y.stderr
    doc = json.loads(j.stdout)
    assert doc["summary"] == {"pods": 160, "scheduled": 128, "unschedulable": 32}
    assert j.stdout == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    assert yaml.safe_load(y.stdout) == doc


def test_peak_memory_within_ten_times_the_input(gp, tmp_path):
    """300 nodes x 8 GPUs and 2,400 pods (2.7 MB of JSON): the peak resident set --stats reports
    (the process's VmHWM, unaffected by other processes) stays within ten times the input plus
    what the binary takes before reading anything. Before the streaming loader it was 23 x."""
    if sanitized(gp):
        pytest.skip("the sanitizers' own memory")
    files = gen(tmp_path, 300)
    size = sum(f.stat().st_size for f in files)
    p = gp.run("schedule", "--stats", "-o", "json", *[a for f in files for a in ("-f", f)])
    assert p.returncode == 0, p.stderr
    m = re.search(r"peak RSS ([0-9.]+) MiB", p.stderr)
    assert m, p.stderr
    assert float(m.group(1)) * 2**20 <= 10 * size + 16 * 2**20, p.stderr


def test_stats_phases(gp, tmp_path):
    """--stats: the run's line, then the whole command's phases."""
    files = gen(tmp_path, 4, "yaml", pods=40)
    p = gp.run("schedule", "--stats", "-o", "json", *[a for f in files for a in ("-f", f)])
    assert p.returncode == 1, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("stats:")]
    assert len(lines) == 2
    assert re.search(r"40 pods in [0-9.]+ s", lines[0])
    assert re.search(r"load [0-9.]+ s \([0-9.]+ MB, [0-9.]+ MB/s; CPU [0-9.]+ s\), schedule "
                     r"[0-9.]+ s, print [0-9.]+ s; whole command [0-9.]+ s "
                     r"\([0-9.]+ pods/s; CPU [0-9.]+ s\), peak RSS [0-9.]+ MiB", lines[1]), lines[1]
